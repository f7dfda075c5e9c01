// Arrow Flight on a cluster node (`fermata serve --cluster … --grpc`), as pyarrow.flight speaks it
// (test/fixtures/pyarrow_cluster_flight.py, in the cached venv of test/helpers/python-venv.ts):
// two real nodes over one PostgreSQL (P = 2, one partition each once settled), both with a bearer
// token, node A with the gRPC port. Through node A:
//
//   - a DoPut of 200 keyed rows and 50 unkeyed ones: one PutResult a batch, each id a cluster id
//     in its key's partition (both nodes' partitions), the unkeyed rows in node A's; node B holds
//     its rows; the list through node A counts them all; sent again, the counts form says 200
//     duplicates and the first row's id
//   - a DoPut to ["timers", "flightq"] puts its rows in that queue
//   - a batch with one bad row spanning both partitions is refused whole (ArrowInvalid naming the
//     row), none of its rows stored
//   - ListFlights, GetFlightInfo and GetSchema answer from the cluster's queue table (the queue's
//     config as configured through node B); an unknown queue is NOT_FOUND; DoGet UNIMPLEMENTED
//     saying why; no token or a wrong one UNAUTHENTICATED
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import postgres from 'postgres';
import { initCluster } from '../../cluster/cluster-init.ts';
import { clusterIdParts, partitionOfKey } from '../../cluster/partitioning.ts';
import { waitFor } from '../helpers/chromium.ts';
import { curlRequest, json } from '../helpers/curl.ts';
import { type PostgresServer, startPostgres } from '../helpers/postgres.ts';
import { pyarrowFlightPython, run } from '../helpers/python-venv.ts';
import { flightUrl, type Service, startService } from '../helpers/service.ts';
import { skipOrFail, skipUnlessTool } from '../helpers/tools.ts';

const script = fileURLToPath(new URL('../fixtures/pyarrow_cluster_flight.py', import.meta.url));
const partitions = 2;
const secret = 'the-flight-nodes-secret';
const token = 'cluster-flight-token-0123456789';
const installTimeoutMs = 10 * 60_000;

type Outcome = { raised: string | null; message?: string };
interface Summary {
  readonly pyarrow: string;
  readonly put: { ids: string[]; duplicates: boolean[] }[];
  readonly counts: { accepted: number; duplicates: number; first_id: string }[];
  readonly queued: { ids: string[] };
  readonly bad: Outcome;
  readonly flights: { path: string[]; schema: string[]; tickets: number }[];
  readonly flight_info: { path: string[]; metadata: { queue: string; config: { max_attempts: number; delivery: string } } };
  readonly unknown_queue: Outcome;
  readonly schema: string[];
  readonly do_get: Outcome;
  readonly no_token: Outcome;
  readonly wrong_token: Outcome;
}

interface ClusterView {
  readonly owned: { partition: number }[];
  readonly owners: { partition: number; address: string | null }[];
}

const children = new Set<ChildProcess>();
const dir = mkdtempSync(join(tmpdir(), 'fermata-cluster-flight-'));
let server: PostgresServer | undefined;
after(async () => {
  for (const child of children) child.kill('SIGKILL');
  await server?.stop();
  rmSync(dir, { recursive: true, force: true });
});

async function startNode(name: string, url: string, args: readonly string[] = []): Promise<Service> {
  const dataDir = mkdtempSync(join(dir, `${name}-`));
  const config = join(dataDir, 'config.json');
  writeFileSync(config, JSON.stringify({ tokens: [token], cluster: { node_id: name, lease_ttl_ms: 1_000, renew_ms: 200 }, dispatch: { threads: 1 } }));
  return startService(dataDir, (child) => children.add(child), { args: ['--cluster', url, '--config', config, ...args], env: { FERMATA_CLUSTER_SECRET: secret } });
}

const headers = { authorization: `Bearer ${token}` };

async function view(node: Service): Promise<ClusterView> {
  const answer = await curlRequest({ url: `${node.url}/v1/cluster`, headers, timeoutMs: 2_000 });
  return answer.status === 200 ? json<ClusterView>(answer) : { owned: [], owners: [] };
}

test('pyarrow.flight on a cluster node: rows to their partitions on both nodes, cluster ids, a bad batch refused whole, the cluster\'s queues, tokens', { skip: skipUnlessTool('initdb') || skipUnlessTool('curl'), timeout: installTimeoutMs + 2 * 60_000 }, async (t) => {
  const venv = await pyarrowFlightPython(installTimeoutMs);
  if ('skip' in venv) return skipOrFail(t, venv.skip);
  server = await startPostgres();
  const url = await server.createDatabase('flight');
  const admin = postgres(url, { max: 1, onnotice: () => {} });
  await initCluster(admin, partitions);
  await admin.end();

  const a = await startNode('node-a', url, ['--grpc', '127.0.0.1:0']);
  const b = await startNode('node-b', url);
  let ownedByB = new Set<number>();
  await waitFor('each node owning one partition, every owner\'s address known', async () => {
    const views = await Promise.all([view(a), view(b)]);
    ownedByB = new Set(views[1]?.owned.map((entry) => entry.partition));
    return views.every((one) => one.owned.length === 1 && one.owners.every((owner) => owner.address !== null));
  });
  const configured = await curlRequest({ url: `${b.url}/v1/queues/flightq`, method: 'PUT', headers: { ...headers, 'content-type': 'application/json' }, body: JSON.stringify({ max_attempts: 3 }) });
  assert.equal(configured.status, 200, configured.body.toString());

  const ran = await run(venv.python, [script, await flightUrl(a), token], 2 * 60_000, 'pyarrow_cluster_flight.py');
  assert.equal(ran.code, 0, ran.stderr);
  const summary = JSON.parse(ran.stdout.trim().split('\n').at(-1) ?? '') as Summary;
  t.diagnostic(`pyarrow ${summary.pyarrow}`);

  // One PutResult a batch; every keyed row in its key's partition, both nodes' partitions among them.
  const [keyed, unkeyed] = summary.put as [Summary['put'][number], Summary['put'][number]];
  assert.equal(summary.put.length, 2);
  assert.equal(keyed.ids.length, 200);
  assert.equal(new Set(keyed.ids).size, 200);
  assert.ok(keyed.duplicates.every((duplicate) => !duplicate));
  const partitionOfRow = keyed.ids.map((id) => clusterIdParts(id, partitions)?.partition);
  assert.deepEqual(partitionOfRow, keyed.ids.map((_, row) => partitionOfKey(`pa-${row}`, partitions)), "each id names its key's partition");
  assert.equal(new Set(partitionOfRow).size, 2, 'rows in both partitions');
  assert.equal(unkeyed.ids.length, 50);
  assert.ok(unkeyed.ids.every((id) => !ownedByB.has(clusterIdParts(id, partitions)?.partition ?? -1)), 'an unkeyed batch lands in a partition of the node asked');

  // Node B holds the rows of its partition (a forwarded request is served there or not at all).
  const rowInB = keyed.ids.find((id) => ownedByB.has(clusterIdParts(id, partitions)?.partition ?? -1));
  assert.ok(rowInB !== undefined);
  const atB = await curlRequest({ url: `${b.url}/v1/timers/${rowInB}`, headers: { ...headers, 'fermata-forwarded': '1', 'fermata-cluster-secret': secret } });
  assert.equal(atB.status, 200, atB.body.toString());
  assert.equal(json<{ key: string; payload_base64: string }>(atB).key, `pa-${keyed.ids.indexOf(rowInB)}`);
  const listed = json<{ timers: { id: string }[] }>(await curlRequest({ url: `${a.url}/v1/timers?key_prefix=pa-&limit=1000`, headers }));
  assert.deepEqual(listed.timers.map((timer) => timer.id).sort(), [...keyed.ids].sort(), 'the list through node A holds every keyed row');

  // Sent again without the ids header: every row a duplicate, the first row's cluster id.
  assert.deepEqual(summary.counts, [{ accepted: 200, duplicates: 200, first_id: keyed.ids[0] }]);

  // The descriptor's queue.
  assert.equal(summary.queued.ids.length, 3);
  const queued = json<{ queue: string }>(await curlRequest({ url: `${a.url}/v1/timers/${summary.queued.ids[2]}`, headers }));
  assert.equal(queued.queue, 'flightq');

  // A bad row refuses the batch whole, across both partitions.
  assert.equal(summary.bad.raised, 'ArrowInvalid', JSON.stringify(summary.bad));
  assert.match(summary.bad.message ?? '', /BATCH_INVALID: .*target.*\(record batch 0 of the stream\)/);
  const bad = json<{ timers: unknown[] }>(await curlRequest({ url: `${a.url}/v1/timers?key_prefix=bad-`, headers }));
  assert.deepEqual(bad.timers, [], 'no row of the refused batch was stored');

  // The cluster's queues as flights, with the DoPut schema; no pull tickets on a cluster node.
  const paths = summary.flights.map((flight) => flight.path.join('/'));
  assert.ok(paths.includes('timers/default') && paths.includes('timers/flightq'), JSON.stringify(paths));
  for (const flight of summary.flights) assert.deepEqual([flight.schema, flight.tickets], [['fire_at', 'target', 'payload', 'headers', 'key', 'queue'], 0]);
  assert.deepEqual(summary.flight_info.path, ['timers', 'flightq']);
  assert.deepEqual([summary.flight_info.metadata.queue, summary.flight_info.metadata.config.max_attempts, summary.flight_info.metadata.config.delivery], ['flightq', 3, 'request'], 'the config node B set, read through node A');
  assert.equal(summary.unknown_queue.raised, 'ArrowKeyError', JSON.stringify(summary.unknown_queue));
  assert.deepEqual(summary.schema, ['fire_at', 'target', 'payload', 'headers', 'key', 'queue']);
  assert.equal(summary.do_get.raised, 'ArrowNotImplementedError', JSON.stringify(summary.do_get));
  assert.match(summary.do_get.message ?? '', /not served on a cluster node/);
  assert.equal(summary.no_token.raised, 'FlightUnauthenticatedError', JSON.stringify(summary.no_token));
  assert.equal(summary.wrong_token.raised, 'FlightUnauthenticatedError', JSON.stringify(summary.wrong_token));
});
