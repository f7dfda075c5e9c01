// Queue configs and pauses in cluster mode on a real PostgreSQL 15: two in-process nodes, each
// with its HTTP front (P = 4, two partitions each once balanced). A change through either node
// is in the fermata_queues table when it answers, in that node's partitions' engines at once and
// in the other's within a poll; the answers and refusals are a single node's; GET sums the
// partitions' counts; DELETE counts the whole cluster's timers; a node taking partitions over
// keeps a queue paused, and one opening a partition brings it to the table before delivering
// anything; a rate-limited queue's deliveries stay within its rate over the whole cluster.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import pino from 'pino';
import { ClusterQueues, shareOf } from '../../cluster/cluster-queues.ts';
import { ClusterNode } from '../../cluster/node.ts';
import { partitionOfKey } from '../../cluster/partitioning.ts';
import { JoiningDirectory } from '../../cli/serve/cluster-joining.ts';
import { systemClock } from '../../engine/engine.ts';
import { defaultQueueConfig } from '../../engine/queues.ts';
import { createHttpServer, type HttpServer } from '../../ingest/http/server.ts';
import { clusterTestbed, fastLeaseSettings, waitUntil } from '../helpers/cluster-testbed.ts';
import { startH2Sink } from '../helpers/sinks.ts';
import { skipUnlessTool } from '../helpers/tools.ts';

const partitions = 4;
const secret = 'queues-secret';
const logger = pino({ level: process.env.FERMATA_TEST_LOG ?? 'silent' });

interface RunningNode {
  readonly node: ClusterNode;
  readonly app: HttpServer;
  readonly url: string;
}

async function call(url: string, method: string, path: string, body?: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  const response = await fetch(url + path, {
    method,
    ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
  });
  return { status: response.status, json: (await response.json()) as Record<string, unknown> };
}

/** The n-th key (of a prefix) whose partition is `partition`. */
function keyIn(partition: number, n: number, prefix: string): string {
  for (let i = 0, found = 0; ; i++) {
    const key = `${prefix}-${i}`;
    if (partitionOfKey(key, partitions) === partition && found++ === n) return key;
  }
}

describe('cluster queue configs', { skip: skipUnlessTool('initdb'), timeout: 120_000 }, () => {
  const { pool, newCluster, onEnd } = clusterTestbed('queues');
  const dirs: string[] = [];
  const apps: HttpServer[] = [];
  const nodes: ClusterNode[] = [];
  onEnd(() => {
    for (const node of nodes) void node.stop();
    for (const app of apps) void app.close();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  /** A node as `fermata serve --cluster` runs one: its front listening first, then the node joining through it. */
  async function startNode(url: string, nodeId: string): Promise<RunningNode> {
    const sql = pool(url);
    const dataDir = mkdtempSync(join(tmpdir(), `fermata-queues-${nodeId}-`));
    dirs.push(dataDir);
    const directory = new JoiningDirectory(partitions, nodeId);
    const queues = new ClusterQueues({ sql, partitions, logger });
    const app = createHttpServer({ logger, cluster: { directory, secret, clock: systemClock, queues, forwardTimeoutMs: 2000 } });
    apps.push(app);
    const listening = await app.listen({ host: '127.0.0.1', port: 0 });
    const node = await ClusterNode.start({
      sql,
      nodeId,
      advertise: new URL(listening).host,
      dataDir,
      logger,
      clock: systemClock,
      leaseSettings: fastLeaseSettings,
      queues,
      dispatch: { threads: 1, allow: [], allowLoopback: true, signingSecrets: [], ca: undefined },
    });
    nodes.push(node);
    directory.attach(node);
    return { node, app, url: listening };
  }

  /** Two nodes, balanced (two partitions each) and each knowing the other's address. */
  async function twoNodes(url: string): Promise<[RunningNode, RunningNode]> {
    const a = await startNode(url, 'node-a');
    await waitUntil('node-a to own every partition', 10_000, () => a.node.owned().length === partitions);
    const b = await startNode(url, 'node-b');
    await waitUntil('the balance', 10_000, () => a.node.owned().length === 2 && b.node.owned().length === 2);
    await waitUntil('each node to know every owner', 5_000, () =>
      Array.from({ length: partitions }, (_, p) => p).every((p) => a.node.ownerAddress(p) !== undefined && b.node.ownerAddress(p) !== undefined),
    );
    return [a, b];
  }

  /** Hands the node's partitions over, then closes its front. */
  async function stopNode({ node, app }: RunningNode): Promise<void> {
    await node.stop();
    await app.close();
  }

  const engines = (...running: RunningNode[]) =>
    running.flatMap(({ node }) => node.owned().map((partition) => ({ partition, engine: node.engineOf(partition) }))).filter((one) => one.engine !== undefined);

  test('PUT, pause, GET and DELETE through either node: committed, applied here at once and there within a poll, counted over the cluster', async () => {
    const url = await newCluster(partitions);
    const [a, b] = await twoNodes(url);
    const sink = await startH2Sink();
    try {
      const put = await call(a.url, 'PUT', '/v1/queues/mail', { rate_per_s: 10, max_concurrent: 6, max_attempts: 3 });
      assert.equal(put.status, 200, JSON.stringify(put.json));
      assert.deepEqual(put.json, { name: 'mail', ...defaultQueueConfig, rate_per_s: 10, max_concurrent: 6, max_attempts: 3, paused: false });
      // Node a's partitions have it as the answer comes; node b's within a poll.
      for (const { partition, engine } of engines(a)) {
        assert.equal(engine?.queueConfig('mail').rate_per_s, shareOf(10, partitions, partition));
        assert.equal(engine?.queueConfig('mail').max_concurrent, shareOf(6, partitions, partition));
        assert.equal(engine?.queueConfig('mail').max_attempts, 3);
      }
      await waitUntil("node-b's partitions to follow the PUT", 5_000, () => engines(b).every(({ partition, engine }) => engine?.queueConfig('mail').rate_per_s === shareOf(10, partitions, partition)));
      assert.deepEqual((await call(b.url, 'GET', '/v1/queues/mail')).json, put.json);

      // Refused as on one node, and nothing committed.
      const bad = await call(b.url, 'PUT', '/v1/queues/mail', { rate_per_s: 0 });
      assert.equal(bad.status, 400);
      assert.deepEqual([(bad.json.error as { code: string }).code, (bad.json.error as { field: string }).field], ['QUEUE_INVALID', 'rate_per_s']);
      assert.equal((await call(a.url, 'GET', '/v1/queues/mail')).json.rate_per_s, 10);
      const badName = await call(a.url, 'PUT', `/v1/queues/${encodeURIComponent('no spaces')}`, {});
      assert.deepEqual([badName.status, (badName.json.error as { code: string }).code, (badName.json.error as { field: string }).field], [400, 'QUEUE_INVALID', 'name']);
      const protectedDefault = await call(a.url, 'DELETE', '/v1/queues/default');
      assert.equal(protectedDefault.status, 409);
      assert.equal((protectedDefault.json.error as { code: string }).code, 'QUEUE_PROTECTED');
      assert.equal((await call(a.url, 'GET', '/v1/queues/nothing')).status, 404);
      assert.equal((await call(a.url, 'POST', '/v1/queues/nothing/pause')).status, 404);
      assert.equal((await call(a.url, 'DELETE', '/v1/queues/nothing')).status, 404);

      // A pause through node b: its partitions at once, node a's within a poll.
      const paused = await call(b.url, 'POST', '/v1/queues/mail/pause');
      assert.equal(paused.status, 200);
      assert.equal(paused.json.paused, true);
      assert.equal(paused.json.rate_per_s, 10, 'a pause keeps the config');
      for (const { engine } of engines(b)) assert.equal(engine?.findQueueView('mail')?.paused, true);
      await waitUntil("node-a's partitions to follow the pause", 5_000, () => engines(a).every(({ engine }) => engine?.findQueueView('mail')?.paused === true));

      // Timers in every partition, through either node: held by the pause, counted from both.
      const fireAt = new Date(Date.now() - 1000).toISOString();
      for (let partition = 0; partition < partitions; partition++) {
        for (const [n, via] of [a, b].entries()) {
          const added = await call(via.url, 'POST', '/v1/timers', { fire_at: fireAt, target: `${sink.url}/mail/${partition}/${n}`, key: keyIn(partition, n, 'mail'), queue: 'mail' });
          assert.equal(added.status, 201, JSON.stringify(added.json));
        }
      }
      for (const via of [a, b]) {
        const listed = (await call(via.url, 'GET', '/v1/queues')).json.queues as Record<string, unknown>[];
        assert.deepEqual(listed.map((queue) => queue.name), ['mail']);
        const mail = listed.find((queue) => queue.name === 'mail');
        assert.deepEqual([mail?.pending, mail?.in_flight, mail?.paused, mail?.rate_per_s], [8, 0, true, 10]);
      }
      assert.equal(sink.requests.length, 0, 'a paused queue delivers nothing, on any node');

      // DELETE counts the cluster's timers; once they are cancelled it is deleted everywhere.
      const full = await call(b.url, 'DELETE', '/v1/queues/mail');
      assert.equal(full.status, 409);
      assert.deepEqual([(full.json.error as { code: string }).code, (full.json.error as { pending: number }).pending], ['QUEUE_NOT_EMPTY', 8]);
      const cancelled = await call(a.url, 'DELETE', '/v1/queues/mail/timers');
      assert.equal(cancelled.json.cancelled, 8, JSON.stringify(cancelled));
      assert.deepEqual((await call(a.url, 'DELETE', '/v1/queues/mail')).json, { name: 'mail', deleted: true });
      for (const { engine } of engines(a)) assert.equal(engine?.findQueueView('mail'), undefined);
      await waitUntil("node-b's partitions to follow the delete", 5_000, () => engines(b).every(({ engine }) => engine?.findQueueView('mail') === undefined));
      assert.equal((await call(b.url, 'GET', '/v1/queues/mail')).status, 404);
      assert.deepEqual(((await call(b.url, 'GET', '/v1/queues')).json.queues as { name: string }[]).map((queue) => queue.name), []);
      assert.deepEqual((await call(b.url, 'GET', '/v1/queues/default')).json, { name: 'default', ...defaultQueueConfig, paused: false });
    } finally {
      await sink.close();
      for (const running of [a, b]) await stopNode(running);
    }
  });

  test('a paused queue stays paused through a handover; a partition opening is brought to the table before it delivers', async () => {
    const url = await newCluster(partitions);
    const [a, b] = await twoNodes(url);
    const sink = await startH2Sink();
    try {
      assert.equal((await call(a.url, 'POST', '/v1/queues/default/pause')).status, 200);
      const fireAt = new Date(Date.now() - 1000).toISOString();
      for (let partition = 0; partition < partitions; partition++) {
        assert.equal((await call(b.url, 'POST', '/v1/timers', { fire_at: fireAt, target: `${sink.url}/held/${partition}`, key: keyIn(partition, 0, 'held') })).status, 201);
      }
      await stopNode(b);
      await waitUntil('node-a to own every partition again', 10_000, () => a.node.owned().length === partitions);
      for (const { engine } of engines(a)) assert.equal(engine?.findQueueView('default')?.paused, true);
      await stopNode(a);
      assert.equal(sink.requests.length, 0, 'nothing delivered while paused, across the handover');

      // Resumed in the table while no node runs (a node that committed and died before applying):
      // a node opening the partitions delivers the held timers.
      const committer = new ClusterQueues({ sql: pool(url), partitions, logger });
      await committer.setPaused('default', false);
      const c = await startNode(url, 'node-c');
      await waitUntil('the held timers to be delivered once the table resumed them', 10_000, () => sink.requests.length === partitions);
      // Timers due soon, left unpaused in the partitions' logs; paused in the table only once no
      // node runs, and due by the time the next node opens the partitions: were the pause applied
      // by the poll after the dispatcher started, they would go out at once.
      const dueAtMs = Date.now() + 1500;
      for (let partition = 0; partition < partitions; partition++) {
        const added = await call(c.url, 'POST', '/v1/timers', { fire_at: new Date(dueAtMs).toISOString(), target: `${sink.url}/due/${partition}`, key: keyIn(partition, 0, 'due') });
        assert.equal(added.status, 201);
      }
      await stopNode(c);
      await committer.setPaused('default', true);
      await new Promise((resolve) => setTimeout(resolve, Math.max(0, dueAtMs + 200 - Date.now())));
      const d = await startNode(url, 'node-d');
      await waitUntil('node-d to own every partition', 10_000, () => d.node.owned().length === partitions);
      for (const { engine } of engines(d)) assert.equal(engine?.findQueueView('default')?.paused, true, 'paused as the partition opened');
      await new Promise((resolve) => setTimeout(resolve, 500));
      assert.equal(sink.requests.length, partitions, 'nothing due was delivered by the node that opened the partitions paused');
      await stopNode(d);
    } finally {
      await sink.close();
    }
  });

  test("a rate-limited queue's deliveries over the whole cluster stay within its rate", async (t) => {
    const url = await newCluster(partitions);
    const [a, b] = await twoNodes(url);
    const sink = await startH2Sink();
    const ratePerS = 8;
    try {
      assert.equal((await call(a.url, 'PUT', '/v1/queues/slow', { rate_per_s: ratePerS })).status, 200);
      await waitUntil("node-b's partitions to follow the PUT", 5_000, () => engines(b).every(({ partition, engine }) => engine?.queueConfig('slow').rate_per_s === shareOf(ratePerS, partitions, partition)));
      // 15 timers a partition, due now: far more than 3 s of the rate.
      const fireAt = new Date(Date.now() - 1000).toISOString();
      const lines: string[] = [];
      for (let partition = 0; partition < partitions; partition++) {
        for (let n = 0; n < 15; n++) lines.push(JSON.stringify({ fire_at: fireAt, target: `${sink.url}/slow`, key: keyIn(partition, n, 'slow'), queue: 'slow' }));
      }
      const added = await fetch(`${b.url}/v1/timers`, { method: 'POST', headers: { 'content-type': 'application/x-ndjson' }, body: `${lines.join('\n')}\n` });
      assert.equal(added.status, 201, await added.text());
      await waitUntil('the first delivery', 10_000, () => sink.requests.length > 0);
      const startedMs = performance.now();
      await new Promise((resolve) => setTimeout(resolve, 3000));
      const delivered = sink.requests.length;
      const seconds = (performance.now() - startedMs) / 1000;
      t.diagnostic(`${delivered} deliveries in ${seconds.toFixed(2)} s after the first, at a rate of ${ratePerS}/s over ${partitions} partitions on 2 nodes`);
      // Each partition's bucket starts with one second's worth: the cluster's burst is the rate.
      const most = ratePerS * (seconds + 1) + 2;
      assert.ok(delivered <= most, `${delivered} deliveries in ${seconds.toFixed(1)} s at a rate of ${ratePerS}/s (at most ${most})`);
      assert.ok(delivered >= ratePerS * seconds * 0.5, `${delivered} deliveries in ${seconds.toFixed(1)} s at a rate of ${ratePerS}/s (at least half of it)`);
    } finally {
      await sink.close();
      for (const running of [a, b]) await stopNode(running);
    }
  });
});
