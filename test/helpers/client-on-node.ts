// Run by test/integration/client-node22.test.ts under another Node release (22): the client's
// built JavaScript against a real service whose URL and token are the arguments. Plain
// erasable TypeScript and node builtins only, so Node 22's type stripping runs it as it is.
// Prints one JSON line of what it saw; exits 1 on any error.
import assert from 'node:assert/strict';
import { FermataClient, FermataError } from '@fermata/client';

const [url, token] = process.argv.slice(2) as [string, string];
const target = 'http://127.0.0.1:9/hook';
const seen: Record<string, unknown> = { node: process.version };
for (const protocol of ['auto', 'http/1.1'] as const) {
  const client = new FermataClient({ url, token, protocol });
  seen[protocol] = await client.protocol();
  const added = await Promise.all(Array.from({ length: 20 }, (_, i) => client.add({ delay_ms: 3_600_000, target, key: `node-${protocol}-${i}` })));
  const batch = await client.addMany(Array.from({ length: 5 }, (_, i) => ({ fire_at: new Date(Date.now() + 3_600_000), target, key: `node-batch-${protocol}-${i}` })));
  assert.equal((await client.get(batch.ids[3] as string)).key, `node-batch-${protocol}-3`);
  const moved = await client.reschedule((added[0] as { id: string }).id, { delay_ms: 7_200_000 }, { revision: 1 });
  assert.equal(moved.revision, 2);
  await assert.rejects(client.cancel(moved.id, { revision: 1 }), (err: unknown) => err instanceof FermataError && err.code === 'REVISION_MISMATCH');
  let listed = 0;
  for await (const _ of client.list({ key_prefix: `node-${protocol}-` }, { pageSize: 7 })) listed++;
  assert.equal(listed, 20);
  await client.close();
}
process.stdout.write(`${JSON.stringify(seen)}\n`);
