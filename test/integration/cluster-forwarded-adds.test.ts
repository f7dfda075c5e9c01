// Forwarded one-timer adds batched a turn at a time (ingest/http/cluster/forwarded-adds.ts), over
// two in-process cluster nodes (real HTTP servers with real engines, P = 4: node A owns
// partitions 0 and 1, node B 2 and 3): keyed adds sent to A at once for B's partitions reach B
// in fewer requests than adds, and each is answered byte for byte as the same add sent alone
// (new timers, duplicates of earlier ones and of one in the same burst), over HTTP/2's raw path
// and over HTTP/1.1 through fastify's route; an owner that fails mid-batch answers 503 with
// Retry-After to its own adds only; a client may not send the batch's media type.
import assert from 'node:assert/strict';
import http2 from 'node:http2';
import { after, before, test } from 'node:test';
import { clusterIdParts, partitionOfKey } from '../../cluster/partitioning.ts';
import { type H2Answer, H2Client } from '../helpers/h2-client.ts';
import { closeFixtureNodes, type FixtureNode, fixtureKeyIn, fixturePartitions, fixtureSecret, startFixtureNodes } from '../helpers/fixture-nodes.ts';

const partitions = fixturePartitions;
const secret = fixtureSecret;
const later = new Date(Date.now() + 3_600_000).toISOString();
/** Requests each node's fastify answered: forwarded adds reach the owner's route. */
const nodes: FixtureNode[] = [];
let client: H2Client;

/** A key whose partition is `partition`, the n-th such with this prefix. */
const keyIn = (partition: number, n: number, prefix: string): string => fixtureKeyIn(partition, n, prefix);

before(async () => {
  nodes.push(...(await startFixtureNodes()));
  client = await H2Client.connect((nodes[0] as (typeof nodes)[number]).url, 10_000);
});

after(async () => {
  client.close();
  await closeFixtureNodes(nodes);
});

const [a, b] = [() => nodes[0] as (typeof nodes)[number], () => nodes[1] as (typeof nodes)[number]];

/** A one-timer JSON add to node A over HTTP/2 (the raw single-add path). */
const add = (fields: Record<string, unknown>): Promise<H2Answer> =>
  client.request({ method: 'POST', path: '/v1/timers', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ fire_at: later, target: 'https://example.com/hook', ...fields }) });

/** An answer as the client sees it, without its date. */
function seen(answer: H2Answer): { status: number; headers: Record<string, string>; body: string } {
  const { date: _date, ...headers } = answer.headers;
  return { status: answer.status, headers, body: answer.body.toString() };
}

/** The same answer with the timer's id taken out (two new timers differ only by it). */
function withoutId(answer: H2Answer): { status: number; headers: Record<string, string>; body: unknown } {
  const { id: _id, ...body } = JSON.parse(answer.body.toString()) as Record<string, unknown>;
  return { ...seen(answer), body };
}

test('keyed adds for another node sent at once reach it in fewer requests, each answered byte for byte as alone', async () => {
  const known = [0, 1, 2].map((n) => keyIn(2 + (n % 2), n, 'known'));
  for (const key of known) assert.equal((await add({ key, payload: 'first' })).status, 201);
  const fresh = [0, 1, 2, 3, 4, 5].map((n) => keyIn(2 + (n % 2), n, 'fresh'));
  const here = keyIn(0, 0, 'fresh');
  const burst: Record<string, unknown>[] = [
    ...fresh.map((key) => ({ key, payload: 'new' })),
    ...known.map((key) => ({ key, payload: 'changed' })),
    // The same key as the first of the burst: a duplicate of a timer of the same request.
    { key: fresh[0], payload: 'again', delay_ms: 60_000, fire_at: undefined },
    { key: here, payload: 'local' },
  ];
  const forwardedCount = burst.length - 1;
  const bBefore = b().fastify;
  const answers = await Promise.all(burst.map(add));
  const requests = b().fastify - bBefore;
  assert.ok(requests >= 1 && requests < forwardedCount, `${forwardedCount} forwarded adds reached node B in ${requests} requests`);

  for (let i = 0; i < fresh.length; i++) {
    const answer = answers[i] as H2Answer;
    assert.equal(answer.status, 201, answer.body.toString());
    const parts = clusterIdParts((JSON.parse(answer.body.toString()) as { id: string }).id, partitions);
    assert.equal(parts?.partition, partitionOfKey(fresh[i] as string, partitions), 'the id names the key\'s partition');
    assert.ok(b().directory.engineOf(parts.partition)?.get(parts.engineId) !== undefined, "the timer is in its owner's engine");
    // A new key in the same partition, sent alone: the same answer but for the id.
    const alone = await add({ key: keyIn(parts.partition, i, 'alone'), payload: 'new' });
    assert.deepEqual(withoutId(answer), withoutId(alone), `new timer ${i}`);
  }
  // Duplicates (of earlier timers, and of one in the same burst): sent alone again, the very same bytes.
  for (let i = fresh.length; i < burst.length - 1; i++) {
    const before = b().fastify;
    const alone = await add(burst[i] as Record<string, unknown>);
    assert.equal(b().fastify, before + 1, 'sent alone: one request of its own');
    assert.equal((answers[i] as H2Answer).status, 200, (answers[i] as H2Answer).body.toString());
    assert.deepEqual(seen(answers[i] as H2Answer), seen(alone), `duplicate ${JSON.stringify(burst[i])}`);
  }
  assert.equal(JSON.parse((answers.at(-2) as H2Answer).body.toString()).id, JSON.parse((answers[0] as H2Answer).body.toString()).id, 'the duplicate in the burst names the burst\'s first timer');
  assert.equal((answers.at(-1) as H2Answer).status, 201, 'the add for a partition owned here');
});

test('an owner that fails mid-batch: its adds answer 503 with Retry-After, as each alone would; the other owner\'s are accepted', async () => {
  // Partition 3's owner takes the request and drops its connection before answering.
  const failing = http2.createServer();
  failing.on('stream', (stream) => stream.session?.destroy());
  await new Promise<void>((resolve) => failing.listen(0, '127.0.0.1', resolve));
  a().directory.setAddress(3, `127.0.0.1:${(failing.address() as { port: number }).port}`);
  try {
    const burst = [0, 1, 2, 3, 4, 5].map((n) => ({ key: keyIn(2 + (n % 2), n, 'mid'), payload: 'x' }));
    const answers = await Promise.all(burst.map(add));
    for (let i = 0; i < burst.length; i++) {
      const answer = answers[i] as H2Answer;
      if (partitionOfKey(burst[i]?.key as string, partitions) === 2) {
        assert.equal(answer.status, 201, `partition 2's owner is up: ${answer.body.toString()}`);
        continue;
      }
      assert.equal(answer.status, 503, answer.body.toString());
      assert.equal(answer.headers['retry-after'], '1');
      assert.equal((JSON.parse(answer.body.toString()) as { error: { code: string } }).error.code, 'PARTITION_MOVING');
      const alone = await add(burst[i] as Record<string, unknown>);
      assert.deepEqual(seen(answer), seen(alone), 'the answer the add gets alone');
    }
  } finally {
    a().directory.setAddress(3, b().address);
    await new Promise<void>((resolve) => failing.close(() => resolve()));
  }
  // The owner back: the same adds land.
  const again = await Promise.all([1, 3, 5].map((n) => add({ key: keyIn(3, n, 'mid-back'), payload: 'x' })));
  assert.deepEqual(again.map((answer) => answer.status), [201, 201, 201]);
});

test("keyed adds over HTTP/1.1 (fastify's route) for another node, sent at once: fewer requests, each relayed as the owner answers it alone", async () => {
  const post = async (fields: Record<string, unknown>): Promise<{ status: number; contentType: string | null; retryAfter: string | null; body: string }> => {
    const response = await fetch(`${a().url}/v1/timers`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ fire_at: later, target: 'https://example.com/hook', ...fields }) });
    return { status: response.status, contentType: response.headers.get('content-type'), retryAfter: response.headers.get('retry-after'), body: await response.text() };
  };
  const known = Array.from({ length: 24 }, (_, n) => keyIn(2 + (n % 2), n, 'h1'));
  // Added at once, which also opens the connections the burst then finds open.
  for (const added of await Promise.all(known.map((key) => post({ key, payload: 'first' })))) assert.equal(added.status, 201, added.body);
  const burst = known.map((key, n) => ({ key, payload: n % 2 === 0 ? 'changed' : 'first', delay_ms: 3_600_000, fire_at: undefined }));
  const bBefore = b().fastify;
  const answers = await Promise.all(burst.map(post));
  const requests = b().fastify - bBefore;
  assert.ok(requests >= 1 && requests < burst.length, `${burst.length} adds reached node B in ${requests} requests`);
  for (let i = 0; i < burst.length; i++) {
    assert.equal(answers[i]?.status, 200, answers[i]?.body);
    assert.deepEqual(answers[i], await post(burst[i] as Record<string, unknown>), `duplicate ${i}: the same answer alone`);
  }
});

test('several adds in one request are taken only from another node, with the cluster secret', async () => {
  const body = [0, 1].map((n) => JSON.stringify({ fire_at: Date.now() + 3_600_000, target: 'https://example.com/hook', key: keyIn(2, n, 'direct') })).join('\n');
  const headers = { 'content-type': 'application/vnd.fermata.forwarded-adds+x-ndjson' };
  const direct = await fetch(`${b().url}/v1/timers`, { method: 'POST', headers, body });
  assert.equal(direct.status, 415, 'a client may not send them');
  await direct.arrayBuffer();
  const withoutSecret = await fetch(`${b().url}/v1/timers`, { method: 'POST', headers: { ...headers, 'fermata-forwarded': '1' }, body });
  assert.equal(withoutSecret.status, 401);
  await withoutSecret.arrayBuffer();
  const forwarded = await fetch(`${b().url}/v1/timers`, { method: 'POST', headers: { ...headers, 'fermata-forwarded': '1', 'fermata-cluster-secret': secret }, body });
  assert.equal(forwarded.status, 200);
  const { answers } = (await forwarded.json()) as { answers: { status: number; body: { id: string } }[] };
  assert.deepEqual(answers.map((answer) => answer.status), [201, 201]);
  assert.equal(clusterIdParts(answers[0]?.body.id ?? '', partitions)?.partition, 2);
});
