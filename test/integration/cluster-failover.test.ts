// Three `fermata serve --cluster` processes on loopback over one real PostgreSQL 15, under load
// (NDJSON adds to every node, landing in the partitions each owns; a sink counting deliveries),
// with short leases (TTL 1 s, renewal every 200 ms). Checked against the client's ledger of
// what was acknowledged (test/helpers/kill9-ledger.ts):
//
//   - kill -9 of a node: the survivors own every partition within the takeover bound (10 s), and
//     every acknowledged timer is delivered; a timer delivered twice was in flight at the kill
//   - SIGSTOP of a node past its lease, then SIGCONT: the survivor owns its partitions within the
//     bound; the woken node appends no record after the takeover (none of an older epoch above
//     the log's end at the takeover) and starts no delivery (no duplicate later than the sends
//     that had passed their lease check before the stop); it then takes its share back
//   - SIGTERM of a node: it exits 0 after handing its partitions over, the last node owns them
//     all at once, and no timer is delivered twice across the handover
//   - a schedule in a partition of the killed node: found, and its occurrences going on, after
//     each takeover and the handover
//
// FERMATA_SOAK=1 runs 500 kill cycles (a node killed, started again, killed …).
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import postgres from 'postgres';
import { initCluster } from '../../cluster/cluster-init.ts';
import { clusterIdLength, clusterIdParts, partitionOfKey } from '../../cluster/partitioning.ts';
import { deliveriesByUid, Kill9Ledger } from '../helpers/kill9-ledger.ts';
import { type PostgresServer, startPostgres } from '../helpers/postgres.ts';
import { type Service, startService } from '../helpers/service.ts';
import { type SinkRequest, startH2Sink, type Sink } from '../helpers/sinks.ts';
import { soak } from '../helpers/soak.ts';
import { skipUnlessTool } from '../helpers/tools.ts';

const partitions = 12;
const takeoverBoundMs = 10_000;
// The soak: 500 kill cycles (hours; FERMATA_SOAK=1), one in the default run.
const killCycles = soak ? 500 : 1;

/**
 * The id a delivery of this timer carries in fermata-timer-id: the 27-character cluster id the
 * API answered (docs/api.md, "Cluster mode"), so the ledger matches on that.
 */
function deliveredIdOf(clusterId: string): string {
  assert.ok(clusterId.length === clusterIdLength && clusterIdParts(clusterId, partitions) !== undefined, `${clusterId} is a cluster id`);
  return clusterId;
}

interface ClusterView {
  readonly owned: { partition: number }[];
  readonly owners: { partition: number; here: boolean; address: string | null }[];
}

interface Node {
  readonly name: string;
  readonly dataDir: string;
  service: Service | undefined;
}

describe('cluster failover: fermata serve --cluster', { skip: skipUnlessTool('initdb'), timeout: soak ? 6 * 3_600_000 : 300_000 }, () => {
  const children = new Set<ChildProcess>();
  const dirs: string[] = [];
  /** Ends each load still running: a failed assertion leaves its loop going, which would keep this file's process alive. */
  const loadsRunning = new Set<() => void>();
  let server: PostgresServer | undefined;
  let sink: Sink | undefined;
  after(async () => {
    for (const stopLoad of loadsRunning) stopLoad();
    for (const child of children) child.kill('SIGKILL');
    await sink?.close();
    await server?.stop();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  async function startNode(node: Node, url: string): Promise<void> {
    const config = join(node.dataDir, 'config.json');
    writeFileSync(config, JSON.stringify({ cluster: { node_id: node.name, lease_ttl_ms: 1_000, renew_ms: 200, secret: 'failover-secret' }, dispatch: { threads: 1 } }));
    node.service = await startService(node.dataDir, (child) => children.add(child), { args: ['--cluster', url, '--config', config] });
  }

  async function clusterView(node: Node): Promise<ClusterView | undefined> {
    try {
      const response = await fetch(`${node.service?.url}/v1/cluster`, { signal: AbortSignal.timeout(2_000) });
      return response.ok ? ((await response.json()) as ClusterView) : undefined;
    } catch {
      return undefined;
    }
  }

  /** Resolves with the ms it took once the live nodes own every partition between them. */
  async function ownedByAll(live: readonly Node[], timeoutMs: number): Promise<number> {
    const started = performance.now();
    for (;;) {
      const views = await Promise.all(live.map(clusterView));
      const owned = views.flatMap((view) => view?.owned.map((entry) => entry.partition) ?? []);
      if (owned.length === partitions && new Set(owned).size === partitions) return performance.now() - started;
      assert.ok(performance.now() - started < timeoutMs, `the live nodes own ${owned.length} of ${partitions} partitions after ${timeoutMs} ms`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  /** Adds batches to the live nodes round robin until `stop` resolves, each timer due within two seconds; the ledger records what was acknowledged. */
  async function load(ledger: Kill9Ledger, live: () => readonly Node[], stop: Promise<void>, prefix: string): Promise<void> {
    let stopped = false;
    const stopNow = (): void => {
      stopped = true;
    };
    loadsRunning.add(stopNow);
    void stop.then(stopNow);
    for (let round = 0; !stopped; round++) {
      const nodes = live();
      const node = nodes[round % nodes.length] as Node;
      const now = Date.now();
      const rows = Array.from({ length: 10 }, (_, i) => ({ uid: `${prefix}-${round}-${i}`, fireAtMs: now + 200 + ((round * 37 + i * 101) % 1_800) }));
      const body = rows.map((row) => JSON.stringify({ fire_at: row.fireAtMs, target: `${sink?.url}/t`, payload: row.uid })).join('\n');
      for (const row of rows) ledger.sent.add(row.uid);
      try {
        const response = await fetch(`${node.service?.url}/v1/timers`, { method: 'POST', headers: { 'content-type': 'application/x-ndjson' }, body, signal: AbortSignal.timeout(5_000) });
        const answer = (await response.json()) as { ids?: string[] };
        if (response.status === 201 && answer.ids !== undefined) {
          for (const [i, row] of rows.entries()) ledger.adds.set(row.uid, { uid: row.uid, id: deliveredIdOf(answer.ids[i] as string), fireAtMs: row.fireAtMs, key: undefined, far: false });
        } else if (response.status >= 400 && response.status < 500) {
          for (const row of rows) ledger.refused.add(row.uid);
        }
      } catch {
        // The node died or is stopping: not acknowledged, so the ledger asks nothing of these.
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    loadsRunning.delete(stopNow);
  }

  /** What the sink got for the load's timers (a schedule's occurrences go to /sched). */
  function timerDeliveries(): SinkRequest[] {
    return (sink?.requests ?? []).filter((request) => request.path !== '/sched');
  }

  /** The schedule's occurrences the sink got after `atMs`. */
  function occurrencesAfter(atMs: number): number {
    return (sink?.requests ?? []).filter((request) => request.path === '/sched' && request.atMs > atMs).length;
  }

  /** The nodes' warnings and errors (log lines of level 40 and up), for a failure's message. */
  function complaints(nodes: readonly Node[]): string {
    return nodes.map((node) => `${node.name}:\n${(node.service?.output() ?? '').split('\n').filter((line) => /"level":[4-6]0/.test(line)).slice(-8).join('\n')}`).join('\n');
  }

  async function allDelivered(ledger: Kill9Ledger, nodes: readonly Node[], timeoutMs: number): Promise<void> {
    const started = performance.now();
    for (;;) {
      const missing = ledger.undelivered(deliveriesByUid(timerDeliveries()));
      if (missing.length === 0) return;
      if (performance.now() - started > timeoutMs) {
        const statsOf = async (node: Node): Promise<unknown> => (await fetch(`${node.service?.url}/v1/stats`).catch(() => undefined))?.json();
        const where = await Promise.all(nodes.map(async (node) => `${node.name}: ${JSON.stringify(await clusterView(node).then((view) => view?.owned))} ${JSON.stringify(await statsOf(node).catch(() => undefined))}`));
        assert.fail(`${missing.length} acknowledged timers not delivered after ${timeoutMs} ms (such as ${missing.slice(0, 3).join(', ')})\n${where.join('\n')}\n${complaints(nodes)}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  test('kill -9 of a node: the others take its partitions within the bound and lose no acknowledged timer; SIGTERM of a node: a clean handover with no duplicate', async () => {
    server = await startPostgres();
    const url = await server.createDatabase('failover');
    const admin = postgres(url, { max: 1, onnotice: () => {} });
    await initCluster(admin, partitions);
    await admin.end();
    sink = await startH2Sink();
    const nodes: Node[] = ['node-1', 'node-2', 'node-3'].map((name) => {
      const dataDir = mkdtempSync(join(tmpdir(), `fermata-cluster-${name}-`));
      dirs.push(dataDir);
      return { name, dataDir, service: undefined };
    });
    await Promise.all(nodes.map((node) => startNode(node, url)));
    await ownedByAll(nodes, 20_000);

    const ledger = new Kill9Ledger();
    const [victim, leaver, last] = nodes as [Node, Node, Node];
    // A schedule in a partition the victim owns, put through another node: its occurrences go
    // on from whichever node owns the partition after each takeover and handover.
    // The victim's share may come by handover a moment after the others own every partition.
    let victimOwns = new Set<number>();
    for (const deadline = performance.now() + 20_000; victimOwns.size === 0; await new Promise((resolve) => setTimeout(resolve, 100))) {
      assert.ok(performance.now() < deadline, `${victim.name} owns no partition 20 s after the cluster settled`);
      victimOwns = new Set((await clusterView(victim))?.owned.map((entry) => entry.partition));
    }
    let schedule = '';
    for (let i = 0; schedule === ''; i++) if (victimOwns.has(partitionOfKey(`every-second-${i}`, partitions))) schedule = `every-second-${i}`;
    // Through another node, which forwards it once it knows the owner's address (503 PARTITION_MOVING until then).
    for (const deadline = performance.now() + 10_000; ; await new Promise((resolve) => setTimeout(resolve, 100))) {
      const put = await fetch(`${last.service?.url}/v1/schedules/${schedule}`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ every_ms: 1_000, target: `${sink.url}/sched`, payload: 'tick' }) });
      if (put.status === 200) break;
      const answer = await put.text();
      assert.ok(put.status === 503 && performance.now() < deadline, `the schedule's PUT: ${put.status} ${answer}`);
    }
    let live: Node[] = [...nodes];
    const takeovers: number[] = [];
    for (let cycle = 0; cycle < killCycles; cycle++) {
      const loadStop = Promise.withResolvers<void>();
      const loading = load(ledger, () => live, loadStop.promise, `k${cycle}`);
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      live = live.filter((node) => node !== victim);
      const killedAt = Date.now();
      ledger.killed(killedAt);
      victim.service?.child.kill('SIGKILL');
      await victim.service?.exited;
      takeovers.push(await ownedByAll(live, takeoverBoundMs));
      const takenAt = Date.now();
      // Deliveries the victim had sent are told apart from duplicates up to here; the taker's
      // first deliveries start after its engine replayed, which is inside this span.
      ledger.restarted(Date.now() + 2_000);
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      loadStop.resolve();
      await loading;
      await allDelivered(ledger, nodes, 30_000);
      const held = await fetch(`${live[0]?.service?.url}/v1/schedules/${schedule}`);
      assert.equal(held.status, 200, `the schedule is found after the takeover: ${await held.text()}`);
      assert.ok(occurrencesAfter(takenAt) > 0, "the schedule's occurrences go on from its partition's new owner");
      if (cycle + 1 < killCycles) {
        await startNode(victim, url);
        live = [...nodes];
        await ownedByAll(live, 20_000);
      }
    }

    // SIGSTOP of an owner past its lease, then SIGCONT: the other node takes its partitions;
    // the stopped one, woken, appends nothing after the takeover and starts no delivery. Only
    // sends that had passed their lease check before the stop may still arrive (the half
    // second after SIGCONT); a duplicate after that fails the ledger.
    {
      const loadStop = Promise.withResolvers<void>();
      const loading = load(ledger, () => live, loadStop.promise, 'stop');
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      live = live.filter((node) => node !== leaver);
      ledger.killed(Date.now());
      leaver.service?.child.kill('SIGSTOP');
      await ownedByAll(live, takeoverBoundMs);
      const sql = postgres(url, { max: 1, onnotice: () => {} });
      try {
        const takeover = await sql<{ partition: number; epoch: string; last_seq: string | null }[]>`
          SELECT p.partition, p.epoch, (SELECT max(seq) FROM fermata_log l WHERE l.partition = p.partition) AS last_seq FROM fermata_partitions p`;
        await new Promise((resolve) => setTimeout(resolve, 1_000));
        const continuedAt = Date.now();
        leaver.service?.child.kill('SIGCONT');
        ledger.restarted(continuedAt + 500);
        await new Promise((resolve) => setTimeout(resolve, 2_000)); // it wakes, renews, finds its partitions lost
        for (const { partition, epoch, last_seq: lastSeq } of takeover) {
          const [late] = await sql<{ rows: string }[]>`SELECT count(*) AS rows FROM fermata_log WHERE partition = ${partition} AND epoch < ${epoch} AND seq > ${lastSeq ?? 0}`;
          assert.equal(Number(late?.rows), 0, `partition ${partition}: a deposed owner's record landed after the takeover at epoch ${epoch}`);
        }
      } finally {
        await sql.end({ timeout: 1 });
      }
      live = [leaver, last];
      // It takes its share back by handover (the balance holds each share within one of P/N).
      const shareTakenBy = performance.now() + 20_000;
      while (((await clusterView(leaver))?.owned.length ?? 0) < partitions / live.length - 1) {
        assert.ok(performance.now() < shareTakenBy, `${leaver.name} took its share back after SIGCONT`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
      await ownedByAll(live, 20_000);
      loadStop.resolve();
      await loading;
      await allDelivered(ledger, nodes, 30_000);
    }

    // SIGTERM: a clean handover, deliveries under way on both sides of it.
    const loadStop = Promise.withResolvers<void>();
    const loading = load(ledger, () => live, loadStop.promise, 'term');
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    const requestsBefore = sink.requests.length;
    live = live.filter((node) => node !== leaver);
    leaver.service?.child.kill('SIGTERM');
    const exitCode = await new Promise<number | null>((resolve) => leaver.service?.child.once('exit', (code) => resolve(code)));
    assert.equal(exitCode, 0, `the node stopped by SIGTERM exits 0:\n${leaver.service?.output().slice(-2_000)}`);
    const handoverMs = await ownedByAll(live, 5_000);
    const handedAt = Date.now();
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    loadStop.resolve();
    await loading;
    await allDelivered(ledger, nodes, 30_000);
    await new Promise((resolve) => setTimeout(resolve, 500)); // room for a late duplicate to show

    ledger.checkDeliveries(deliveriesByUid(timerDeliveries()));
    assert.deepEqual(ledger.problems, [], 'every delivery accounted for');
    assert.ok(ledger.adds.size > 100, `the load was acknowledged (${ledger.adds.size} timers)`);
    assert.ok(sink.requests.length > requestsBefore, 'deliveries went on across the handover');
    assert.ok(occurrencesAfter(handedAt) > 0, "the schedule's occurrences go on after the handover");
    const listed = (await (await fetch(`${last.service?.url}/v1/schedules`)).json()) as { schedules: { name: string }[] };
    assert.deepEqual(listed.schedules.map((entry) => entry.name), [schedule]);
    const view = await clusterView(last);
    assert.ok(view !== undefined && view.owners.every((owner) => owner.here), 'one node owns every partition');
    const metrics = await (await fetch(`${last.service?.url}/metrics`)).text();
    assert.match(metrics, /^fermata_cluster_sends_refused_total \d+$/m);
    assert.match(metrics, new RegExp(`^fermata_cluster_partitions_owned ${partitions}$`, 'm'));
    const stats = (await (await fetch(`${last.service?.url}/v1/stats`)).json()) as { node: { partitions: unknown[]; sends_refused_total: number }; cluster: { sends_refused_total: number } };
    assert.equal(stats.node.partitions.length, partitions);
    assert.equal(stats.cluster.sends_refused_total, stats.node.sends_refused_total, 'one node: its refusals are the cluster\'s');
    process.stdout.write(`# takeover after kill -9: ${takeovers.map((ms) => Math.round(ms)).join(', ')} ms; after SIGTERM: ${Math.round(handoverMs)} ms; ${ledger.adds.size} timers acknowledged, ${sink.requests.length} deliveries\n`);
  });
});
