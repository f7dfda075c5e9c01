// The cluster front over two in-process nodes (each a real HTTP server with real engines, P = 4:
// node A owns partitions 0 and 1, node B 2 and 3): adds land on their partition from either node,
// any id is found from any node, forwarding needs the cluster secret and takes one hop, and a
// batch with a part that cannot land answers 503 listing what did, which a resend completes.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import http2 from 'node:http2';
import { after, before, test } from 'node:test';
import { promisify } from 'node:util';
import pino from 'pino';
import { clusterIdParts, partitionOfKey } from '../../cluster/partitioning.ts';
import { batchFromSpecs } from '../../engine/batch/timer-batch.ts';
import { systemClock } from '../../engine/engine.ts';
import { createHttpServer } from '../../ingest/http/server.ts';
import { curl, curlWithoutHttp2 } from '../helpers/curl.ts';
import { type H2Answer, H2Client } from '../helpers/h2-client.ts';
import { batchToArrow } from '../helpers/arrow.ts';
import { closeFixtureNodes, type FixtureNode, fixtureKeyIn, fixturePartitions, fixtureSecret, startFixtureNodes } from '../helpers/fixture-nodes.ts';
import { FixtureDirectory } from '../helpers/partition-fixture.ts';
import { outcomesFor } from '../helpers/outcomes.ts';
import { toolPath } from '../helpers/tools.ts';
import { outcomeKind } from '../../engine/records.ts';

const partitions = fixturePartitions;
const secret = fixtureSecret;
const nodes: FixtureNode[] = [];
const later = new Date(Date.now() + 3_600_000).toISOString();

/** A key whose partition is `partition`, the n-th such. */
const keyIn = (partition: number, n: number, prefix = 'k'): string => fixtureKeyIn(partition, n, prefix);

before(async () => {
  nodes.push(...(await startFixtureNodes()));
});

after(async () => {
  await closeFixtureNodes(nodes);
});

const [a, b] = [() => nodes[0] as (typeof nodes)[number], () => nodes[1] as (typeof nodes)[number]];

async function call(url: string, method: string, path: string, body?: string, headers: Record<string, string> = {}): Promise<{ status: number; headers: Headers; json: Record<string, unknown> }> {
  const response = await fetch(url + path, { method, headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers }, ...(body === undefined ? {} : { body }) });
  return { status: response.status, headers: response.headers, json: (await response.json()) as Record<string, unknown> };
}

test('a keyed add through either node lands on the partition of its key, and either node finds it', async () => {
  for (const partition of [0, 1, 2, 3]) {
    for (const node of [a(), b()]) {
      const key = keyIn(partition, node === a() ? 0 : 1);
      const added = await call(node.url, 'POST', '/v1/timers', JSON.stringify({ fire_at: later, target: 'https://example.com/hook', key }));
      assert.equal(added.status, 201, JSON.stringify(added.json));
      const id = added.json.id as string;
      const parts = clusterIdParts(id, partitions);
      assert.equal(parts?.partition, partition, `key ${key} through node ${node.directory.nodeId}`);
      const owner = partition < 2 ? a() : b();
      assert.equal(owner.directory.engineOf(partition)?.get(parts.engineId)?.state, 'pending', "in the partition's own engine");
      for (const reader of [a(), b()]) {
        const got = await call(reader.url, 'GET', `/v1/timers/${id}`);
        assert.equal(got.status, 200);
        assert.equal(got.json.id, id);
        assert.equal(got.json.key, key);
        assert.equal(got.headers.get('etag'), '"1"');
      }
      const again = await call(b().url, 'POST', '/v1/timers', JSON.stringify({ fire_at: later, target: 'https://example.com/hook', key }));
      assert.equal(again.status, 200);
      assert.equal(again.json.duplicate, true);
      assert.equal(again.json.id, id);
    }
  }
});

test('an unkeyed add goes to a partition of the node asked, spread over them', async () => {
  for (const [node, owned] of [[a(), [0, 1]], [b(), [2, 3]]] as const) {
    const seen = new Set<number>();
    for (let i = 0; i < 4; i++) {
      const added = await call(node.url, 'POST', '/v1/timers', JSON.stringify({ fire_at: later, target: 'https://example.com/hook' }));
      assert.equal(added.status, 201);
      seen.add(clusterIdParts(added.json.id as string, partitions)?.partition ?? -1);
    }
    assert.deepEqual([...seen].sort(), [...owned]);
  }
});

test('unkeyed adds sent at once: each id names the partition, of the node asked, that holds its timer', async () => {
  const added = await Promise.all(Array.from({ length: 32 }, () => call(a().url, 'POST', '/v1/timers', JSON.stringify({ fire_at: later, target: 'https://example.com/burst' }))));
  for (const one of added) {
    assert.equal(one.status, 201, JSON.stringify(one.json));
    const parts = clusterIdParts(one.json.id as string, partitions);
    assert.ok(parts !== undefined && [0, 1].includes(parts.partition), `${String(one.json.id)} names a partition of the node asked`);
    assert.equal(a().directory.engineOf(parts.partition)?.get(parts.engineId)?.state, 'pending', 'the timer is in the partition its id names');
  }
  const got = await call(b().url, 'GET', `/v1/timers/${String(added[0]?.json.id)}`);
  assert.equal(got.status, 200, 'found from the other node by its id');
});

test('DELETE of another node\'s timer is forwarded to its owner; an unknown or malformed id is 404', async () => {
  const added = await call(a().url, 'POST', '/v1/timers', JSON.stringify({ fire_at: later, target: 'https://example.com/hook', key: keyIn(3, 5) }));
  const id = added.json.id as string;
  const cancelled = await call(a().url, 'DELETE', `/v1/timers/${id}`);
  assert.equal(cancelled.status, 200);
  assert.deepEqual(cancelled.json, { id, state: 'cancelled', revision: 1 });
  assert.equal((await call(b().url, 'GET', `/v1/timers/${id}`)).json.state, 'cancelled');
  assert.equal((await call(a().url, 'GET', `/v1/timers/03${'0'.repeat(25)}`)).status, 404, 'a partition past P');
  assert.equal((await call(a().url, 'GET', `/v1/timers/${id.slice(0, 26)}`)).status, 404, 'a malformed id');
});

test('PATCH through a node that does not own the timer changes it at its owner, If-Match and all', async () => {
  const added = await call(b().url, 'POST', '/v1/timers', JSON.stringify({ fire_at: later, target: 'https://example.com/hook', key: keyIn(0, 11) }));
  const id = added.json.id as string;
  const patched = await call(b().url, 'PATCH', `/v1/timers/${id}`, JSON.stringify({ payload: 'changed' }), { 'if-match': '"1"' });
  assert.equal(patched.status, 200, JSON.stringify(patched.json));
  assert.equal(patched.json.id, id);
  assert.equal(patched.json.revision, 2);
  assert.equal(patched.headers.get('etag'), '"2"');
  const stale = await call(b().url, 'PATCH', `/v1/timers/${id}`, JSON.stringify({ payload: 'again' }), { 'if-match': '"1"' });
  assert.equal(stale.status, 412);
  assert.equal((await call(a().url, 'GET', `/v1/timers/${id}`)).json.payload, 'changed');
});

test('a forwarded request without the cluster secret is 401; with it, one hop only: 503 where the node does not own the partition', async (t) => {
  const added = await call(b().url, 'POST', '/v1/timers', JSON.stringify({ fire_at: later, target: 'https://example.com/hook', key: keyIn(2, 7) }));
  const id = added.json.id as string;
  for (const headers of [{ 'fermata-forwarded': '1' }, { 'fermata-forwarded': '1', 'fermata-cluster-secret': 'wrong' }]) {
    const refused = await call(b().url, 'GET', `/v1/timers/${id}`, undefined, headers);
    assert.equal(refused.status, 401);
    assert.equal((refused.json.error as { code: string }).code, 'UNAUTHORIZED');
  }
  const oneHop = await call(a().url, 'GET', `/v1/timers/${id}`, undefined, { 'fermata-forwarded': '1', 'fermata-cluster-secret': secret });
  assert.equal(oneHop.status, 503);
  assert.equal((oneHop.json.error as { code: string }).code, 'PARTITION_MOVING');
  assert.equal(oneHop.headers.get('retry-after'), '1');
  const owner = await call(b().url, 'GET', `/v1/timers/${id}`, undefined, { 'fermata-forwarded': '1', 'fermata-cluster-secret': secret });
  assert.equal(owner.status, 200, 'the owner serves a forwarded request with the secret');

  // The same refusal through curl, over HTTP/2 and HTTP/1.1.
  if (!curl.present || !curl.http2) return t.skip(curlWithoutHttp2);
  for (const protocol of ['--http2-prior-knowledge', '--http1.1']) {
    const { stdout } = await promisify(execFile)(toolPath('curl') as string, ['-s', '-m', '10', protocol, '-o', '/dev/null', '-w', '%{http_code}', '-H', 'fermata-forwarded: 1', `${b().url}/v1/timers/${id}`]);
    assert.equal(stdout, '401', protocol);
  }
});

test('a partition with no owner address answers 503 PARTITION_MOVING with Retry-After', async () => {
  const added = await call(b().url, 'POST', '/v1/timers', JSON.stringify({ fire_at: later, target: 'https://example.com/hook', key: keyIn(3, 9) }));
  a().directory.setAddress(3, undefined);
  try {
    const got = await call(a().url, 'GET', `/v1/timers/${added.json.id as string}`);
    assert.equal(got.status, 503);
    assert.equal(got.headers.get('retry-after'), '1');
    assert.equal((got.json.error as { code: string }).code, 'PARTITION_MOVING');
  } finally {
    a().directory.setAddress(3, b().address);
  }
});

test('a batch spanning partitions with one owner gone: 503 listing the accepted rows; the resend completes it with duplicates', async () => {
  // Rows 0-3 keyed one per partition, rows 4-5 unkeyed (they get derived keys).
  const lines = [0, 1, 2, 3].map((p) => ({ fire_at: later, target: 'https://example.com/hook', key: keyIn(p, 20, 'batch') }));
  lines.push({ fire_at: later, target: 'https://example.com/hook' } as (typeof lines)[number], { fire_at: later, target: 'https://example.com/other' } as (typeof lines)[number]);
  const body = lines.map((line) => JSON.stringify(line)).join('\n');
  const post = (): Promise<{ status: number; headers: Headers; json: Record<string, unknown> }> => call(a().url, 'POST', '/v1/timers', body, { 'content-type': 'application/x-ndjson' });

  // Node B out of reach for partition 2 (an address where nothing listens): its part fails.
  const closed = createHttpServer({ logger: pino({ level: 'silent' }), engine: a().directory.engineOf(0) as NonNullable<ReturnType<FixtureDirectory['engineOf']>> });
  const dead = new URL(await closed.listen({ host: '127.0.0.1', port: 0 })).host;
  await closed.close();
  a().directory.setAddress(2, dead);
  let first;
  try {
    first = await post();
  } finally {
    a().directory.setAddress(2, b().address);
  }
  assert.equal(first.status, 503, JSON.stringify(first.json));
  assert.equal(first.headers.get('retry-after'), '1');
  const error = first.json.error as { code: string; accepted: number; accepted_rows: number[]; ids: (string | null)[] };
  assert.equal(error.code, 'PARTITION_MOVING');
  assert.ok(!error.accepted_rows.includes(2), 'the row of partition 2 was not accepted');
  assert.equal(error.accepted, error.accepted_rows.length);
  assert.ok(error.accepted >= 3, 'the other partitions took their rows');
  for (let row = 0; row < lines.length; row++) assert.equal(error.ids[row] === null, !error.accepted_rows.includes(row), `row ${row}`);

  const resent = await post();
  assert.equal(resent.status, 201, JSON.stringify(resent.json));
  assert.equal(resent.json.accepted, lines.length);
  assert.equal(resent.json.duplicates, error.accepted, 'every row accepted before is a duplicate now');
  const ids = resent.json.ids as string[];
  for (const row of error.accepted_rows) assert.equal(ids[row], error.ids[row], `row ${row} keeps its id`);
  for (let row = 0; row < 4; row++) assert.equal(clusterIdParts(ids[row] as string, partitions)?.partition, row);
  const derived = await call(b().url, 'GET', `/v1/timers/${ids[4] as string}`);
  assert.match(derived.json.key as string, /^fermata-batch:[0-9a-f]{32}:4$/);
});

test('a bad row refuses the whole batch before any part is appended', async () => {
  const key = keyIn(2, 30, 'bad');
  const body = [JSON.stringify({ fire_at: later, target: 'https://example.com/hook', key }), JSON.stringify({ fire_at: later, target: 'not a url', key: keyIn(0, 30, 'bad') })].join('\n');
  const refused = await call(a().url, 'POST', '/v1/timers', body, { 'content-type': 'application/x-ndjson' });
  assert.equal(refused.status, 400);
  assert.equal((refused.json.error as { code: string; line: number }).line, 2);
  const retried = await call(b().url, 'POST', '/v1/timers', JSON.stringify({ fire_at: later, target: 'https://example.com/hook', key }));
  assert.equal(retried.status, 201, 'the good row was not appended');
});

test('an Arrow batch spanning partitions lands each keyed row on its partition, payloads and headers intact', async () => {
  const fireAtMs = Date.parse(later);
  const specs = [0, 1, 2, 3].map((p) => ({ fireAtMs, target: 'https://example.com/hook', key: keyIn(p, 40, 'arrow'), payload: new Uint8Array([0xff, p]), headers: { 'x-row': String(p) } }));
  const response = await fetch(`${b().url}/v1/timers`, { method: 'POST', headers: { 'content-type': 'application/vnd.apache.arrow.stream' }, body: batchToArrow(batchFromSpecs(specs)) });
  const json = (await response.json()) as { accepted: number; ids: string[] };
  assert.equal(response.status, 201, JSON.stringify(json));
  assert.equal(json.accepted, 4);
  for (let p = 0; p < 4; p++) {
    assert.equal(clusterIdParts(json.ids[p] as string, partitions)?.partition, p);
    const got = await call(a().url, 'GET', `/v1/timers/${json.ids[p] as string}`);
    assert.equal(got.json.payload_base64, Buffer.from([0xff, p]).toString('base64'));
    assert.deepEqual(got.json.headers, { 'x-row': String(p) });
  }
});

test('GET /v1/timers from any node lists every partition merged by fire time, a page at a time, and bulk cancels sum over partitions', async () => {
  const base = Date.now() + 7_200_000;
  const keys: string[] = [];
  // Ten timers over the four partitions, fire times interleaved across them.
  for (let i = 0; i < 10; i++) {
    const key = keyIn(i % 4, Math.floor(i / 4), 'list');
    keys.push(key);
    const added = await call(i % 2 === 0 ? a().url : b().url, 'POST', '/v1/timers', JSON.stringify({ fire_at: new Date(base + (9 - i) * 1000).toISOString(), target: 'https://example.com/hook', key }));
    assert.equal(added.status, 201);
  }
  for (const node of [a(), b()]) {
    const listed: Record<string, unknown>[] = [];
    let cursor: string | null = null;
    let pages = 0;
    do {
      const page = await call(node.url, 'GET', `/v1/timers?key_prefix=list-&limit=3${cursor === null ? '' : `&cursor=${cursor}`}`);
      assert.equal(page.status, 200, JSON.stringify(page.json));
      listed.push(...(page.json.timers as Record<string, unknown>[]));
      cursor = page.json.next_cursor as string | null;
      pages++;
    } while (cursor !== null && pages < 10);
    assert.equal(listed.length, 10, `node ${node.directory.nodeId}`);
    assert.deepEqual(
      listed.map((timer) => timer.key),
      [...keys].reverse(),
      'in fire-time order across partitions, each once',
    );
    for (const timer of listed) assert.equal(clusterIdParts(timer.id as string, partitions)?.partition, partitionOfKey(timer.key as string, partitions));
  }
  const bogus = await call(a().url, 'GET', '/v1/timers?cursor=bm90LWEtY3Vyc29y');
  assert.equal(bogus.status, 400);

  const ids = (await call(a().url, 'GET', '/v1/timers?key_prefix=list-&limit=4')).json.timers as { id: string }[];
  const byIds = await call(b().url, 'POST', '/v1/timers/cancel', JSON.stringify({ ids: ids.map((timer) => timer.id) }));
  assert.deepEqual(byIds.json, { cancelled: 4, in_flight: 0 });
  const byFilter = await call(a().url, 'POST', '/v1/timers/cancel', JSON.stringify({ key_prefix: 'list-' }));
  assert.deepEqual(byFilter.json, { cancelled: 6, in_flight: 0 });

  // A partition with no owner: the fan-out answers 503, not a page with a partition missing.
  a().directory.setAddress(2, undefined);
  try {
    const page = await call(a().url, 'GET', '/v1/timers?limit=3');
    assert.equal(page.status, 503);
    assert.equal((page.json.error as { code: string }).code, 'PARTITION_MOVING');
  } finally {
    a().directory.setAddress(2, b().address);
  }
});

test('GET /v1/dead from any node merges every partition oldest first, a page at a time; redrive and discard reach the owner', async () => {
  // Two dead timers in each partition, made dead as a delivery round would (a 503, no retry left).
  for (const [node, owned] of [[a(), [0, 1]], [b(), [2, 3]]] as const) {
    for (const partition of owned) {
      const engine = node.directory.engineOf(partition);
      assert.ok(engine !== undefined);
      const now = Date.now();
      await engine.admit(batchFromSpecs([0, 1].map(() => ({ fireAtMs: now, target: 'https://example.com/down', queue: 'dying' }))));
      const slice = engine.takeDue(now, 10);
      const outcomes = outcomesFor(slice, outcomeKind.dead, 0, 503);
      outcomes.reasons.fill(1);
      outcomes.errorTexts.push('HTTP 503');
      outcomes.errors.fill(1);
      outcomes.attemptedAtMs.fill(now + 1);
      await engine.settle(outcomes);
    }
  }
  const listed: { id: string; created_at: string }[] = [];
  let cursor: string | null = null;
  for (let pages = 0; pages < 10; pages++) {
    const page = await call(b().url, 'GET', `/v1/dead?queue=dying&limit=3${cursor === null ? '' : `&cursor=${cursor}`}`);
    assert.equal(page.status, 200, JSON.stringify(page.json));
    listed.push(...(page.json.dead as { id: string; created_at: string }[]));
    cursor = page.json.next_cursor as string | null;
    if (cursor === null) break;
  }
  assert.equal(listed.length, 8);
  assert.equal(new Set(listed.map((timer) => timer.id)).size, 8, 'each once');
  assert.deepEqual(new Set(listed.map((timer) => clusterIdParts(timer.id, partitions)?.partition)), new Set([0, 1, 2, 3]));
  for (let i = 1; i < listed.length; i++) assert.ok((listed[i - 1] as { created_at: string }).created_at <= (listed[i] as { created_at: string }).created_at, 'oldest first');

  const inB = listed.find((timer) => clusterIdParts(timer.id, partitions)?.partition === 3) as { id: string };
  const redriven = await call(a().url, 'POST', `/v1/dead/${inB.id}/retry`);
  assert.deepEqual(redriven.json, { id: inB.id, state: 'pending' });
  const inA = listed.find((timer) => clusterIdParts(timer.id, partitions)?.partition === 0) as { id: string };
  const discarded = await call(b().url, 'DELETE', `/v1/dead/${inA.id}`);
  assert.deepEqual(discarded.json, { id: inA.id, state: 'discarded' });
  assert.equal((await call(b().url, 'GET', `/v1/timers/${inA.id}`)).status, 404);
});

test('/v1/stats counts this node\'s partitions and the cluster\'s; /v1/cluster shows every partition\'s owner', async () => {
  const stats = await call(a().url, 'GET', '/v1/stats');
  assert.equal(stats.status, 200, JSON.stringify(stats.json));
  const node = stats.json.node as { node_id: string; partitions: { partition: number; pending: number }[]; totals: { pending: number } };
  const cluster = stats.json.cluster as { nodes: number; totals: { pending: number }; unreachable: string[]; moving: number[] };
  assert.equal(node.node_id, 'a');
  assert.deepEqual(node.partitions.map((partition) => partition.partition), [0, 1]);
  const pendingIn = (partition: number): number => {
    const owner = partition < 2 ? a() : b();
    return owner.directory.engineOf(partition)?.stats().pending ?? -1;
  };
  assert.equal(node.totals.pending, pendingIn(0) + pendingIn(1));
  assert.equal(cluster.nodes, 2);
  assert.deepEqual(cluster.unreachable, []);
  assert.equal(cluster.totals.pending, pendingIn(0) + pendingIn(1) + pendingIn(2) + pendingIn(3));
  const view = await call(b().url, 'GET', '/v1/cluster');
  assert.equal(view.json.node_id, 'b');
  const engineOfB = (partition: number) => b().directory.engineOf(partition);
  assert.deepEqual(
    view.json.owned,
    [2, 3].map((partition) => {
      const lastSeq = engineOfB(partition)?.log.lastSeq as number;
      const checkpointSeq = engineOfB(partition)?.stats().spill.checkpointSeq as number;
      return { partition, epoch: null, last_seq: lastSeq, checkpoint_seq: checkpointSeq, replay_records: lastSeq - checkpointSeq };
    }),
  );
  assert.ok((view.json.owned as { replay_records: number }[]).some((owned) => owned.replay_records > 0), 'records added since the partitions opened wait for a checkpoint');
  assert.deepEqual(
    (view.json.owners as { partition: number; here: boolean; address: string }[]).map((owner) => [owner.partition, owner.here, owner.address]),
    [0, 1, 2, 3].map((partition) => [partition, partition >= 2, (partition < 2 ? a() : b()).address]),
  );
});

test('a batch wholly in one partition owned here is appended whole: an unkeyed Arrow batch, and a keyed one sent twice', async () => {
  const fireAtMs = Date.parse(later);
  const arrow = (specs: Parameters<typeof batchFromSpecs>[0]): Promise<Response> =>
    fetch(`${a().url}/v1/timers`, { method: 'POST', headers: { 'content-type': 'application/vnd.apache.arrow.stream' }, body: batchToArrow(batchFromSpecs(specs)) });
  const unkeyed = await arrow(Array.from({ length: 5 }, () => ({ fireAtMs, target: 'https://example.com/whole' })));
  const json = (await unkeyed.json()) as { accepted: number; ids: string[] };
  assert.equal(unkeyed.status, 201);
  const inPartitions = new Set(json.ids.map((id) => clusterIdParts(id, partitions)?.partition));
  assert.equal(inPartitions.size, 1, 'one append, one partition');
  assert.ok([0, 1].includes([...inPartitions][0] as number), "a partition of the node asked");
  const keyed = [0, 1, 2].map((n) => ({ fireAtMs, target: 'https://example.com/whole', key: keyIn(1, n, 'whole') }));
  const once = (await (await arrow(keyed)).json()) as { ids: string[]; duplicates: number };
  const twice = (await (await arrow(keyed)).json()) as { ids: string[]; duplicates: number; duplicate_rows: { row: number }[] };
  assert.equal(once.duplicates, 0);
  assert.equal(twice.duplicates, 3);
  assert.deepEqual(twice.ids, once.ids);
  assert.deepEqual(twice.duplicate_rows.map((row) => row.row), [0, 1, 2]);
});

test('an owner that takes the request and never answers: 503 PARTITION_MOVING once the forwarding timeout has passed', async () => {
  const added = await call(b().url, 'POST', '/v1/timers', JSON.stringify({ fire_at: later, target: 'https://example.com/hook', key: keyIn(2, 50) }));
  // An HTTP/2 server that reads requests and answers none.
  const silent = http2.createServer();
  silent.on('stream', () => undefined);
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  a().directory.setAddress(2, `127.0.0.1:${(silent.address() as { port: number }).port}`);
  try {
    const started = performance.now();
    const got = await call(a().url, 'GET', `/v1/timers/${added.json.id as string}`);
    const tookMs = performance.now() - started;
    assert.equal(got.status, 503);
    assert.equal((got.json.error as { code: string }).code, 'PARTITION_MOVING');
    assert.ok(tookMs >= 1900 && tookMs < 5000, `answered after ${Math.round(tookMs)} ms, the timeout being 2000`);
  } finally {
    a().directory.setAddress(2, b().address);
    await new Promise<void>((resolve) => silent.close(() => resolve()));
  }
});

test('a schedule lives in the partition of its name from whichever node is asked: PUT, GET, pause, DELETE forwarded to its owner; the list merges every partition by name, a page at a time', async () => {
  const inB = keyIn(2, 0, 'sched');
  const inA = keyIn(0, 0, 'sched');
  const rule = JSON.stringify({ every_ms: 3_600_000, target: 'https://example.com/hook', payload: 'tick' });
  const put = await call(a().url, 'PUT', `/v1/schedules/${inB}`, rule);
  assert.equal(put.status, 200, JSON.stringify(put.json));
  assert.equal(put.json.name, inB);
  assert.ok(b().directory.engineOf(2)?.schedule(inB) !== undefined, 'held by the engine of its partition, on its owner');
  for (const partition of a().directory.owned()) assert.equal(a().directory.engineOf(partition)?.schedule(inB), undefined, 'not on the node asked');
  assert.equal((await call(b().url, 'PUT', `/v1/schedules/${inA}`, rule)).status, 200);
  for (const node of [a(), b()]) {
    const got = await call(node.url, 'GET', `/v1/schedules/${inB}`);
    assert.equal(got.status, 200);
    assert.deepEqual(got.json, put.json, 'the same schedule from either node');
  }
  const bad = await call(a().url, 'PUT', `/v1/schedules/${inB}`, JSON.stringify({ every_ms: 10, target: 'https://example.com/hook' }));
  assert.equal(bad.status, 400, 'the owner\'s refusal, relayed');
  assert.equal((bad.json.error as { code: string; field: string }).code, 'SCHEDULE_INVALID');

  const names = [inA, inB].sort();
  const first = await call(b().url, 'GET', '/v1/schedules?limit=1');
  assert.deepEqual((first.json.schedules as { name: string }[]).map((s) => s.name), [names[0]]);
  assert.equal(typeof first.json.next_cursor, 'string');
  const second = await call(a().url, 'GET', `/v1/schedules?limit=1&cursor=${encodeURIComponent(String(first.json.next_cursor))}`);
  assert.deepEqual((second.json.schedules as { name: string }[]).map((s) => s.name), [names[1]]);
  assert.equal(second.json.next_cursor, null, 'the last page says so');
  const whole = await call(a().url, 'GET', '/v1/schedules');
  assert.deepEqual((whole.json.schedules as { name: string }[]).map((s) => s.name), names);
  assert.equal(whole.json.next_cursor, null);

  const paused = await call(a().url, 'POST', `/v1/schedules/${inB}/pause`);
  assert.equal(paused.json.paused, true);
  assert.equal(b().directory.engineOf(2)?.schedule(inB)?.paused, true);
  assert.equal((await call(a().url, 'POST', `/v1/schedules/${inB}/resume`)).json.paused, false);
  for (const name of names) assert.deepEqual((await call(a().url, 'DELETE', `/v1/schedules/${name}`)).json, { name, deleted: true });
  assert.equal((await call(b().url, 'GET', `/v1/schedules/${inB}`)).status, 404);
  assert.equal((await call(a().url, 'POST', `/v1/schedules/${inB}/pause`)).status, 404);
});

test('a cluster node serves health, /metrics, has no /v1/clock (no single engine is needed), and without the cluster database refuses queues 501', async () => {
  const readyz = await call(a().url, 'GET', '/readyz');
  assert.equal(readyz.status, 200);
  assert.deepEqual(readyz.json, { status: 'ready' });
  for (const [method, path] of [['GET', '/v1/queues'], ['PUT', '/v1/queues/q'], ['POST', '/v1/queues/q/pause']] as const) {
    const answer = await call(a().url, method, path, method === 'PUT' ? '{}' : undefined);
    assert.equal(answer.status, 501, `${method} ${path}`);
    assert.equal((answer.json.error as { code: string }).code, 'CLUSTER_UNSUPPORTED');
    assert.match((answer.json.error as { message: string }).message, /cluster-wide and this node has no cluster database/);
  }
  const clock = await call(a().url, 'GET', '/v1/clock');
  assert.equal(clock.status, 404);
  const metrics = await (await fetch(`${a().url}/metrics`)).text();
  assert.match(metrics, /^fermata_cluster_partitions_owned 2$/m);
  assert.match(metrics, /^fermata_cluster_sends_refused_total 0$/m);
  assert.match(metrics, /^fermata_timers\{partition="0",state="pending"\} \d+$/m);
});

test('/readyz is red with the reason the node gives (not joined, its database out of reach)', async () => {
  const directory = a().directory;
  const app = createHttpServer({ logger: pino({ level: 'silent' }), cluster: { directory, secret, clock: systemClock, notReady: async () => 'the cluster database cannot be reached' } });
  try {
    const url = await app.listen({ host: '127.0.0.1', port: 0 });
    const readyz = await call(url, 'GET', '/readyz');
    assert.equal(readyz.status, 503);
    assert.deepEqual(readyz.json, { status: 'not-ready', reason: 'the cluster database cannot be reached' });
  } finally {
    await app.close();
  }
});

test('POST /v1/timers/stream through either node: each line lands where its one-timer add would, answered in order; a line for another node is forwarded with its answer', async () => {
  const inA = keyIn(0, 3, 'stream');
  const inB = keyIn(2, 3, 'stream');
  const line = (fields: Record<string, unknown>): string => JSON.stringify({ fire_at: later, target: 'https://example.com/hook', ...fields });
  const body = [line({ key: inA, payload: 'a' }), line({ key: inB, payload: 'b' }), line({ payload: 'unkeyed' }), '{"target": 7}', line({ key: inB, payload: 'b again' }), line({ key: inB, payload: 'b', queue: 'other' })].join('\n');
  const response = await fetch(`${a().url}/v1/timers/stream`, { method: 'POST', headers: { 'content-type': 'application/x-ndjson' }, body });
  assert.equal(response.status, 200);
  const answers = (await response.text()).trim().split('\n').map((text) => JSON.parse(text) as { line: number; status: number; id?: string; duplicate?: boolean; differs?: string[]; error?: { code: string } });
  assert.deepEqual(answers.map((answer) => [answer.line, answer.status]), [[1, 201], [2, 201], [3, 201], [4, 400], [5, 200], [6, 200]], JSON.stringify(answers));
  const partitionOf = (id: string | undefined): number | undefined => clusterIdParts(id ?? '', partitions)?.partition;
  assert.equal(partitionOf(answers[0]?.id), 0, "a line keyed for a partition of the node asked lands there");
  assert.equal(partitionOf(answers[1]?.id), 2, "a line keyed for the other node's partition lands at its owner");
  assert.ok([0, 1].includes(partitionOf(answers[2]?.id) as number), 'an unkeyed line goes to a partition of the node asked');
  assert.equal(answers[3]?.error?.code, 'BATCH_INVALID');
  assert.equal(answers[4]?.id, answers[1]?.id, "the owner's duplicate answer names the original");
  assert.deepEqual([answers[4]?.duplicate, answers[4]?.differs], [true, ['payload']]);
  assert.deepEqual(answers[5]?.differs, ['queue']);
  assert.ok(b().directory.engineOf(2)?.get(clusterIdParts(answers[1]?.id ?? '', partitions)?.engineId ?? '') !== undefined, "in the owner's engine");
  const got = await call(b().url, 'GET', `/v1/timers/${answers[0]?.id}`);
  assert.equal(got.status, 200);
});

test("one-timer JSON adds over HTTP/2 take the raw stream path on a cluster node, routed as the front routes them, answered byte for byte as the front's route answers", async () => {
  const client = await H2Client.connect(a().url, 10_000);
  try {
    const post = (body: Record<string, unknown>, path = '/v1/timers', headers: Record<string, string> = {}): Promise<H2Answer> =>
      client.request({ method: 'POST', path, headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify({ fire_at: later, target: 'https://example.com/hook', ...body }) });
    const withoutDate = (answer: H2Answer): Record<string, string> => {
      const { date: _date, ...rest } = answer.headers;
      return rest;
    };
    const [aBefore, bBefore] = [a().fastify, b().fastify];
    const here = await post({ key: keyIn(1, 7, 'fast'), payload: 'here' });
    const there = await post({ key: keyIn(3, 7, 'fast'), payload: 'there' });
    const unkeyed = await post({ payload: 'unkeyed' });
    assert.deepEqual([here.status, there.status, unkeyed.status], [201, 201, 201], there.body.toString());
    assert.equal(a().fastify, aBefore, "node A's fastify answered none of them: the raw path took them");
    assert.equal(b().fastify, bBefore + 1, "the one for node B's partition reached B's route, forwarded once");
    const idOf = (answer: H2Answer): string => (JSON.parse(answer.body.toString()) as { id: string }).id;
    assert.deepEqual([clusterIdParts(idOf(here), partitions)?.partition, clusterIdParts(idOf(there), partitions)?.partition], [1, 3]);
    assert.ok([0, 1].includes(clusterIdParts(idOf(unkeyed), partitions)?.partition as number));
    // The same requests through the front's route (a query string keeps them from the raw path): the same answers.
    for (const [body, what] of [
      [{ key: keyIn(3, 7, 'fast'), payload: 'changed' }, "a known key at another node's partition"],
      [{ key: keyIn(1, 7, 'fast'), payload: 'changed', delay_ms: 5_000, fire_at: undefined }, 'a known key here, given by delay_ms'],
      [{ target: 7 }, 'a refused body'],
      [{ key: 'x'.repeat(5_000) }, 'a key over the limit'],
    ] as const) {
      const before = a().fastify;
      const fast = await post(body);
      assert.equal(a().fastify, before, `${what}: taken by the raw path`);
      const viaFront = await post(body, '/v1/timers?via=fastify');
      assert.equal(a().fastify, before + 1, `${what}: the query string goes to the route`);
      assert.equal(fast.status, viaFront.status, `${what}: ${fast.body.toString()} / ${viaFront.body.toString()}`);
      assert.deepEqual(withoutDate(fast), withoutDate(viaFront), what);
      assert.equal(fast.body.toString(), viaFront.body.toString(), what);
    }
    // A request another node forwarded is the route's: it checks the cluster's secret.
    const before = a().fastify;
    const forwarded = await post({ key: keyIn(0, 8, 'fast') }, '/v1/timers', { 'fermata-forwarded': '1' });
    assert.equal(forwarded.status, 401);
    assert.equal(a().fastify, before + 1, 'left to the route');
  } finally {
    client.close();
  }
});
