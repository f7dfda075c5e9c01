// fermata.v1.Timers on a cluster node (`fermata serve --cluster … --grpc`): two real nodes over
// one PostgreSQL (P = 2, one partition each once settled), both with a bearer token, node A with
// a gRPC port; a grpc-js client made from the service's own .proto (as
// test/integration/grpc-shared-coalescer.test.ts makes it) calls node A:
//
//   - AddTimer with a key whose partition node B owns lands in B (the id names that partition,
//     and B holds it), and again is a duplicate; an unkeyed AddTimer lands in A's partition
//   - GetTimer of B's timer through A is answered from B (forwarded), with its fields and payload
//   - ListTimers fans out: both timers, in fire_at order; ExportTimers streams the same
//   - CancelTimer through A cancels B's timer (GetTimer then says CANCELLED), a wrong revision is
//     FAILED_PRECONDITION, an unknown id NOT_FOUND
//   - AddTimers splits its rows by partition, and a bad row refuses the batch naming the row
//   - StreamAddTimers answers each add in order, in either node's partition
//   - SetQueue, PauseQueue and GetQueue act on the cluster's queue table; ListDeadTimers fans out
//   - a call without the token is UNAUTHENTICATED; gRPC health is SERVING
//
// and, on the same two nodes, the Arrow export of GET /v1/timers through node A over curl: one
// Arrow stream of every partition's timers, partition after partition, with cluster ids (node B's
// partition asked of node B), the same timers the JSON list gives.
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { type Client, type ClientDuplexStream, type ClientReadableStream, credentials, makeClientConstructor, Metadata, type ServiceDefinition, type ServiceError, status } from '@grpc/grpc-js';
import { tableFromIPC } from 'apache-arrow';
import { service as healthService } from 'grpc-health-check';
import postgres from 'postgres';
import { initCluster } from '../../cluster/cluster-init.ts';
import { clusterIdParts, partitionOfKey } from '../../cluster/partitioning.ts';
import { timersPackage } from '../../ingest/grpc/proto-files.ts';
import { timersServiceName } from '../../ingest/grpc/timers-service.ts';
import { waitFor } from '../helpers/chromium.ts';
import { curlRequest, json } from '../helpers/curl.ts';
import { type PostgresServer, startPostgres } from '../helpers/postgres.ts';
import { flightUrl, type Service, startService } from '../helpers/service.ts';
import { skipUnlessTool } from '../helpers/tools.ts';

const partitions = 2;
const secret = 'the-grpc-nodes-secret';
const token = 'cluster-grpc-token-0123456789';
const hourMs = 3_600_000;

interface TimerMessage {
  readonly id: string;
  readonly state: string;
  readonly revision: number;
  readonly key: string | null;
  readonly target: string;
  readonly payload: Buffer;
  readonly fire_at: { seconds: number; nanos: number };
}
interface Added {
  readonly id: string;
  readonly duplicate: boolean;
  readonly state: string;
  readonly revision: number;
}
type Callback<T> = (err: ServiceError | null, response?: T) => void;
type TimersClient = Client & {
  AddTimer(request: object, metadata: Metadata, callback: Callback<Added>): void;
  GetTimer(request: object, metadata: Metadata, callback: Callback<{ timer: TimerMessage }>): void;
  CancelTimer(request: object, metadata: Metadata, callback: Callback<{ id: string; state: string; revision: number }>): void;
  ListTimers(request: object, metadata: Metadata, callback: Callback<{ timers: TimerMessage[]; next_cursor: string }>): void;
  ExportTimers(request: object, metadata: Metadata): ClientReadableStream<{ timers: TimerMessage[] }>;
  AddTimers(request: object, metadata: Metadata, callback: Callback<{ accepted: number; ids: string[] }>): void;
  SetQueue(request: object, metadata: Metadata, callback: Callback<{ queue: QueueMessage }>): void;
  PauseQueue(request: object, metadata: Metadata, callback: Callback<{ queue: QueueMessage }>): void;
  GetQueue(request: object, metadata: Metadata, callback: Callback<{ queue: QueueMessage }>): void;
  ListDeadTimers(request: object, metadata: Metadata, callback: Callback<{ dead: unknown[]; next_cursor: string }>): void;
  StreamAddTimers(metadata: Metadata): ClientDuplexStream<object, { result: 'added' | 'error'; added?: Added; error?: { code: number; message: string } }>;
};
interface QueueMessage {
  readonly name: string;
  readonly config: { readonly rate_per_s?: number; readonly max_attempts?: number };
  readonly paused: boolean;
}
type HealthClient = Client & { check(request: { service: string }, callback: Callback<{ status: string }>): void };

interface ClusterView {
  readonly owned: { partition: number }[];
  readonly owners: { partition: number; address: string | null }[];
}

describe('fermata.v1.Timers on a cluster node, routed by the cluster front', { skip: skipUnlessTool('initdb') || skipUnlessTool('curl'), timeout: 90_000 }, () => {
  const children = new Set<ChildProcess>();
  const dir = mkdtempSync(join(tmpdir(), 'fermata-cluster-grpc-'));
  let server: PostgresServer | undefined;
  let client: TimersClient | undefined;
  let health: HealthClient | undefined;
  /** Node A (with the gRPC port) and the keys the streamed adds took, for the export's test. */
  let nodeA: Service | undefined;
  const streamedIds: string[] = [];
  after(async () => {
    client?.close();
    health?.close();
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

  async function view(node: Service): Promise<ClusterView> {
    const answer = await curlRequest({ url: `${node.url}/v1/cluster`, headers: { authorization: `Bearer ${token}` }, timeoutMs: 2_000 });
    return answer.status === 200 ? json<ClusterView>(answer) : { owned: [], owners: [] };
  }

  const withToken = (): Metadata => {
    const metadata = new Metadata();
    metadata.set('authorization', `Bearer ${token}`);
    return metadata;
  };
  const call = <T,>(method: (request: object, metadata: Metadata, callback: Callback<T>) => void, request: object, metadata = withToken()): Promise<T> =>
    new Promise((resolve, reject) => method.call(client, request, metadata, (err, response) => (err === null ? resolve(response as T) : reject(err))));
  const refusal = async (promise: Promise<unknown>): Promise<ServiceError> => {
    try {
      await promise;
    } catch (err) {
      return err as ServiceError;
    }
    return assert.fail('the call was answered');
  };
  const newTimer = (key: string, delayMs: number): object => ({ delay: { seconds: Math.floor(delayMs / 1000), nanos: 0 }, target: 'http://127.0.0.1:9/hook', payload: Buffer.from([0, 255, 7]), key });

  test('adds, reads, lists, exports and cancels across the two nodes through one node\'s gRPC port', async () => {
    server = await startPostgres();
    const url = await server.createDatabase('grpc');
    const admin = postgres(url, { max: 1, onnotice: () => {} });
    await initCluster(admin, partitions);
    await admin.end();

    const a = await startNode('node-a', url, ['--grpc', '127.0.0.1:0']);
    nodeA = a;
    const b = await startNode('node-b', url);
    let ownedByB = new Set<number>();
    await waitFor('each node owning one partition, every owner\'s address known', async () => {
      const views = await Promise.all([view(a), view(b)]);
      ownedByB = new Set(views[1]?.owned.map((entry) => entry.partition));
      return views.every((one) => one.owned.length === 1 && one.owners.every((owner) => owner.address !== null));
    });
    const address = (await flightUrl(a)).replace('grpc+tcp://', '');
    const Timers = makeClientConstructor(timersPackage()[timersServiceName] as ServiceDefinition, 'Timers') as unknown as new (address: string, creds: ReturnType<typeof credentials.createInsecure>) => TimersClient;
    client = new Timers(address, credentials.createInsecure());
    const timers = client;

    let keyInB = 'grpc-0';
    for (let i = 1; !ownedByB.has(partitionOfKey(keyInB, partitions)); i++) keyInB = `grpc-${i}`;
    const added = await call(timers.AddTimer, { timer: newTimer(keyInB, 2 * hourMs) });
    assert.equal(added.duplicate, false);
    assert.equal(clusterIdParts(added.id, partitions)?.partition, partitionOfKey(keyInB, partitions), "the id names the key's partition");
    const atB = await curlRequest({ url: `${b.url}/v1/timers/${added.id}`, headers: { authorization: `Bearer ${token}`, 'fermata-forwarded': '1', 'fermata-cluster-secret': secret } });
    assert.equal(atB.status, 200, 'node B holds it');
    const again = await call(timers.AddTimer, { timer: newTimer(keyInB, 2 * hourMs) });
    assert.deepEqual([again.id, again.duplicate, again.state], [added.id, true, 'TIMER_STATE_PENDING']);
    const unkeyed = await call(timers.AddTimer, { timer: newTimer('', hourMs) });
    assert.ok(!ownedByB.has(clusterIdParts(unkeyed.id, partitions)?.partition ?? -1), 'an unkeyed add lands in a partition node A owns');

    const { timer } = await call(timers.GetTimer, { id: added.id });
    assert.deepEqual([timer.id, timer.key, timer.state, timer.target, [...timer.payload]], [added.id, keyInB, 'TIMER_STATE_PENDING', 'http://127.0.0.1:9/hook', [0, 255, 7]]);

    const page = await call(timers.ListTimers, { limit: 10 });
    assert.deepEqual(page.timers.map((one) => one.id), [unkeyed.id, added.id], 'both nodes\' timers, in fire_at order');
    const exported: string[] = [];
    await new Promise<void>((resolve, reject) => {
      const stream = timers.ExportTimers({}, withToken());
      stream.on('data', (message: { timers: TimerMessage[] }) => exported.push(...message.timers.map((one) => one.id)));
      stream.on('end', resolve);
      stream.on('error', reject);
    });
    assert.deepEqual(exported, [unkeyed.id, added.id]);

    const wrongRevision = await refusal(call(timers.CancelTimer, { id: added.id, revision: 7 }));
    assert.equal(wrongRevision.code, status.FAILED_PRECONDITION, wrongRevision.details);
    const cancelled = await call(timers.CancelTimer, { id: added.id });
    assert.deepEqual([cancelled.id, cancelled.state], [added.id, 'TIMER_STATE_CANCELLED']);
    assert.equal((await call(timers.GetTimer, { id: added.id })).timer.state, 'TIMER_STATE_CANCELLED');
    const unknown = await refusal(call(timers.GetTimer, { id: `${added.id.slice(0, -1)}${added.id.endsWith('0') ? '1' : '0'}` }));
    assert.equal(unknown.code, status.NOT_FOUND, unknown.details);

    const streamed: Added[] = [];
    await new Promise<void>((resolve, reject) => {
      const stream = timers.StreamAddTimers(withToken());
      stream.on('data', (answer: { added?: Added; error?: { message: string } }) => (answer.added === undefined ? reject(new Error(answer.error?.message)) : streamed.push(answer.added)));
      stream.on('end', resolve);
      stream.on('error', reject);
      for (let i = 0; i < 4; i++) stream.write({ timer: newTimer(`stream-${i}`, hourMs + i) });
      stream.end();
    });
    assert.equal(streamed.length, 4);
    streamedIds.push(...streamed.map((one) => one.id));
    for (let i = 0; i < 4; i++) assert.equal(clusterIdParts(streamed[i]?.id ?? '', partitions)?.partition, partitionOfKey(`stream-${i}`, partitions), `stream answer ${i} in request order`);

    const batch = await call(timers.AddTimers, { timers: { timers: [newTimer('batch-0', hourMs), newTimer('batch-1', hourMs), newTimer('batch-2', hourMs)] } });
    assert.equal(batch.accepted, 3);
    batch.ids.forEach((id, row) => assert.equal(clusterIdParts(id, partitions)?.partition, partitionOfKey(`batch-${row}`, partitions), `batch row ${row} in its key's partition`));
    const badRow = await refusal(call(timers.AddTimers, { timers: { timers: [newTimer('batch-3', hourMs), { target: 'http://127.0.0.1:9/hook' }] } }));
    assert.equal(badRow.code, status.INVALID_ARGUMENT, badRow.details);
    assert.match(badRow.details, /^BATCH_INVALID: one of fire_at and delay is required \(row 1\)/);

    const set = await call(timers.SetQueue, { name: 'mail', config: { rate_per_s: 40, max_attempts: 3 } });
    assert.deepEqual([set.queue.name, set.queue.config.rate_per_s, set.queue.config.max_attempts, set.queue.paused], ['mail', 40, 3, false]);
    await call(timers.PauseQueue, { name: 'mail' });
    const mail = await call(timers.GetQueue, { name: 'mail' });
    assert.deepEqual([mail.queue.config.rate_per_s, mail.queue.paused], [40, true], 'the cluster\'s queue config, as the HTTP API gives it');
    assert.deepEqual(await call(timers.ListDeadTimers, {}), { dead: [], next_cursor: '' });

    const anonymous = await refusal(call(timers.GetTimer, { id: added.id }, new Metadata()));
    assert.equal(anonymous.code, status.UNAUTHENTICATED, anonymous.details);
    const Health = makeClientConstructor(healthService, 'Health') as unknown as new (address: string, creds: ReturnType<typeof credentials.createInsecure>) => HealthClient;
    health = new Health(address, credentials.createInsecure());
    const checked = await new Promise<{ status: string }>((resolve, reject) => health?.check({ service: timersServiceName }, (err, response) => (err === null ? resolve(response as { status: string }) : reject(err))));
    assert.equal(checked.status, 'SERVING');
  });

  test('the Arrow export of GET /v1/timers through one node holds every partition\'s timers, partition after partition, with cluster ids', async () => {
    assert.ok(nodeA !== undefined && streamedIds.length === 4, 'the test before added the timers');
    const headers = { authorization: `Bearer ${token}` };
    const exported = await curlRequest({ url: `${nodeA.url}/v1/timers?key_prefix=stream-`, headers: { ...headers, accept: 'application/vnd.apache.arrow.stream' } });
    assert.equal(exported.status, 200, exported.body.toString());
    assert.equal(exported.headers['content-type'], 'application/vnd.apache.arrow.stream');
    const ids = [...(tableFromIPC(exported.body).getChild('id')?.toArray() as string[])];
    assert.deepEqual([...ids].sort(), [...streamedIds].sort(), 'every streamed timer, from both nodes');
    const partitionsInOrder = ids.map((id) => clusterIdParts(id, partitions)?.partition ?? -1);
    assert.deepEqual(partitionsInOrder, [...partitionsInOrder].sort(), 'partition after partition');
    assert.equal(new Set(partitionsInOrder).size, 2, 'both partitions, one of them node B\'s');
    const listed = json<{ timers: { id: string }[] }>(await curlRequest({ url: `${nodeA.url}/v1/timers?key_prefix=stream-`, headers }));
    assert.deepEqual(listed.timers.map((timer) => timer.id).sort(), [...ids].sort(), 'the JSON list gives the same timers');
  });
});
