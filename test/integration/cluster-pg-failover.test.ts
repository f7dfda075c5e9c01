// Two `fermata serve --cluster` processes on loopback over a PostgreSQL primary and its
// synchronous standby (test/helpers/postgres.ts), both given the multi-host URL
// postgres://…@primary,standby/db?target_session_attrs=read-write. Under a load of keyed NDJSON
// adds through both nodes, the primary's postmaster is killed with SIGKILL and the standby is
// promoted, as a managed database's failover does. Checked against the client's ledger
// (test/helpers/kill9-ledger.ts):
//
//   - while no primary answers, an add is refused with 503 and Retry-After (LOG_UNAVAILABLE,
//     PARTITION_MOVING, LOG_FENCED, or WAL_POISONED for a COMMIT the kill cut), never another
//     5xx; the rows such an answer lists as accepted are acknowledged
//   - after the promotion the nodes reconnect through the multi-host URL, own every partition
//     again and acknowledge adds again
//   - every acknowledged timer is delivered: 0 acknowledged lost
//
// Short leases (TTL 1 s, renewal 200 ms) keep the outage and the recovery to seconds.
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import { deliveriesByUid, Kill9Ledger } from '../helpers/kill9-ledger.ts';
import { multiHostUrl, type PostgresServer, type PostgresStandby, startPostgres, startStandby } from '../helpers/postgres.ts';
import { binPath, type Service, serviceEnv, startService } from '../helpers/service.ts';
import { startH2Sink, type Sink } from '../helpers/sinks.ts';
import { skipUnlessTool } from '../helpers/tools.ts';

const partitions = 4;
const secret = 'pg-failover-secret';
/**
 * What an add may be refused with while no primary answers: the log cannot reach the database,
 * the partition's lease lapsed or is being taken again, the other node took it over meanwhile
 * (the append is fenced), or a COMMIT was cut by the kill (the log is poisoned until the node
 * reopens it at the same epoch).
 */
const unavailableCodes = new Set(['LOG_UNAVAILABLE', 'PARTITION_MOVING', 'WAL_POISONED', 'LOG_FENCED']);

interface ClusterView {
  readonly owned: { partition: number }[];
}

interface Node {
  readonly name: string;
  readonly dataDir: string;
  service: Service | undefined;
}

/** Answers seen by the load, by status class, and the 503s' shapes. */
interface Answers {
  acknowledged: number;
  acknowledgedAfterPromotion: number;
  unavailable: number;
  readonly otherServerErrors: string[];
  readonly badUnavailable: string[];
}

function fermataClusterInit(url: string): Promise<string> {
  return new Promise((resolve, reject) => {
    execFile(process.execPath, [binPath, 'cluster', 'init', '--partitions', String(partitions), '--cluster', url], { encoding: 'utf8', env: serviceEnv(), timeout: 30_000, killSignal: 'SIGKILL' }, (err, stdout, stderr) => {
      if (err !== null) reject(new Error(`fermata cluster init failed: ${err.message}\n${stderr}`));
      else resolve(stdout);
    });
  });
}

describe('cluster over a failing-over PostgreSQL: kill -9 of the primary, promotion of the standby', { skip: skipUnlessTool('initdb'), timeout: 120_000 }, () => {
  const children = new Set<ChildProcess>();
  const dirs: string[] = [];
  let primary: PostgresServer | undefined;
  let standby: PostgresStandby | undefined;
  let sink: Sink | undefined;
  after(async () => {
    for (const child of children) child.kill('SIGKILL');
    await sink?.close();
    await standby?.stop();
    await primary?.stop();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  async function startNode(node: Node, url: string): Promise<void> {
    const config = join(node.dataDir, 'config.json');
    writeFileSync(config, JSON.stringify({ cluster: { node_id: node.name, lease_ttl_ms: 1_000, renew_ms: 200 }, dispatch: { threads: 1 } }));
    node.service = await startService(node.dataDir, (child) => children.add(child), { args: ['--cluster', url, '--config', config], env: { FERMATA_CLUSTER_SECRET: secret } });
  }

  async function clusterView(node: Node): Promise<ClusterView | undefined> {
    try {
      const response = await fetch(`${node.service?.url}/v1/cluster`, { signal: AbortSignal.timeout(2_000) });
      return response.ok ? ((await response.json()) as ClusterView) : undefined;
    } catch {
      return undefined;
    }
  }

  async function ownedByAll(nodes: readonly Node[], timeoutMs: number): Promise<number> {
    const started = performance.now();
    for (;;) {
      const views = await Promise.all(nodes.map(clusterView));
      const owned = views.flatMap((view) => view?.owned.map((entry) => entry.partition) ?? []);
      if (owned.length === partitions && new Set(owned).size === partitions) return performance.now() - started;
      assert.ok(performance.now() - started < timeoutMs, `the nodes own ${owned.length} of ${partitions} partitions after ${timeoutMs} ms\n${complaints(nodes)}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  /** Keyed batches to the nodes round robin until `stop` resolves, each due within two seconds. */
  async function load(ledger: Kill9Ledger, nodes: readonly Node[], answers: Answers, promoted: () => boolean, stop: Promise<void>): Promise<void> {
    let stopped = false;
    void stop.then(() => (stopped = true));
    for (let round = 0; !stopped; round++) {
      const node = nodes[round % nodes.length] as Node;
      const now = Date.now();
      const rows = Array.from({ length: 10 }, (_, i) => ({ uid: `r${round}-${i}`, fireAtMs: now + 200 + ((round * 37 + i * 101) % 1_800) }));
      const body = rows.map((row) => JSON.stringify({ fire_at: row.fireAtMs, target: `${sink?.url}/t`, key: row.uid, payload: row.uid })).join('\n');
      for (const row of rows) ledger.sent.add(row.uid);
      const promotedBefore = promoted();
      try {
        const response = await fetch(`${node.service?.url}/v1/timers`, { method: 'POST', headers: { 'content-type': 'application/x-ndjson' }, body, signal: AbortSignal.timeout(10_000) });
        const text = await response.text();
        if (response.status === 201) {
          const { ids } = JSON.parse(text) as { ids: string[] };
          for (const [i, row] of rows.entries()) ledger.adds.set(row.uid, { uid: row.uid, id: ids[i] as string, fireAtMs: row.fireAtMs, key: row.uid, far: false });
          answers.acknowledged++;
          if (promotedBefore) answers.acknowledgedAfterPromotion++;
        } else if (response.status === 503) {
          answers.unavailable++;
          const { error } = JSON.parse(text) as { error?: { code?: string; ids?: (string | null)[] } };
          const code = error?.code;
          // The rows of the batch's other partitions that landed are acknowledged (docs/api.md, "Cluster mode").
          for (const [i, row] of rows.entries()) {
            const id = error?.ids?.[i];
            if (typeof id === 'string') ledger.adds.set(row.uid, { uid: row.uid, id, fireAtMs: row.fireAtMs, key: row.uid, far: false });
          }
          const retryAfter = Number(response.headers.get('retry-after'));
          if (!(retryAfter > 0) || !unavailableCodes.has(code ?? '')) answers.badUnavailable.push(`${code} retry-after ${response.headers.get('retry-after')}: ${text.slice(0, 200)}`);
        } else if (response.status >= 500) {
          answers.otherServerErrors.push(`${response.status}: ${text.slice(0, 200)}`);
        } else if (response.status >= 400) {
          for (const row of rows) ledger.refused.add(row.uid);
        }
      } catch {
        // Not answered within the bound: not acknowledged, so the ledger asks nothing of these.
      }
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  function complaints(nodes: readonly Node[]): string {
    return nodes.map((node) => `${node.name}:\n${(node.service?.output() ?? '').split('\n').filter((line) => /"level":[4-6]0/.test(line)).slice(-8).join('\n')}`).join('\n');
  }

  async function allDelivered(ledger: Kill9Ledger, nodes: readonly Node[], timeoutMs: number): Promise<void> {
    const started = performance.now();
    for (;;) {
      const missing = ledger.undelivered(deliveriesByUid(sink?.requests ?? []));
      if (missing.length === 0) return;
      if (performance.now() - started > timeoutMs) assert.fail(`${missing.length} acknowledged timers not delivered after ${timeoutMs} ms (such as ${missing.slice(0, 3).join(', ')})\n${complaints(nodes)}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  test('adds answer 503 with Retry-After while no primary answers, the nodes recover on the promoted standby, and no acknowledged timer is lost', async () => {
    primary = await startPostgres();
    await primary.createDatabase('failover');
    standby = await startStandby(primary);
    const url = multiHostUrl([primary, standby], 'failover');
    assert.match(await fermataClusterInit(url), /./);
    sink = await startH2Sink();
    const nodes: Node[] = ['node-1', 'node-2'].map((name) => {
      const dataDir = mkdtempSync(join(tmpdir(), `fermata-pgfo-${name}-`));
      dirs.push(dataDir);
      return { name, dataDir, service: undefined };
    });
    await Promise.all(nodes.map((node) => startNode(node, url)));
    await ownedByAll(nodes, 20_000);

    const ledger = new Kill9Ledger();
    const answers: Answers = { acknowledged: 0, acknowledgedAfterPromotion: 0, unavailable: 0, otherServerErrors: [], badUnavailable: [] };
    let promoted = false;
    const loadStop = Promise.withResolvers<void>();
    let acknowledgedBefore = 0;
    let recoveryMs = 0;
    const loading = load(ledger, nodes, answers, () => promoted, loadStop.promise);
    try {
      // Load for a moment, and until some adds are acknowledged (on a loaded machine the first
      // synchronously replicated commits can take longer).
      await new Promise((resolve) => setTimeout(resolve, 1_500));
      for (const deadline = performance.now() + 20_000; answers.acknowledged < 10; await new Promise((resolve) => setTimeout(resolve, 100))) {
        assert.ok(performance.now() < deadline, `no adds acknowledged 20 s into the load\n${complaints(nodes)}`);
      }
      acknowledgedBefore = answers.acknowledged;

      // kill -9 of the primary's postmaster: its backends notice and exit, no shutdown checkpoint.
      const postmaster = Number(readFileSync(join(primary.dir, 'data', 'postmaster.pid'), 'utf8').split('\n')[0]);
      ledger.killed(Date.now());
      process.kill(postmaster, 'SIGKILL');
      await new Promise((resolve) => setTimeout(resolve, 2_000));
      await standby.promote();
      promoted = true;
      recoveryMs = await ownedByAll(nodes, 30_000);
      // Deliveries sent before the outage may be sent again by the partition's next engine.
      ledger.restarted(Date.now() + 2_000);
      const deadline = performance.now() + 20_000;
      while (answers.acknowledgedAfterPromotion < 5) {
        assert.ok(performance.now() < deadline, `adds are not acknowledged again 20 s after the nodes own their partitions\n${complaints(nodes)}`);
        await new Promise((resolve) => setTimeout(resolve, 100));
      }
    } finally {
      loadStop.resolve();
      await loading;
    }
    await allDelivered(ledger, nodes, 30_000);
    await new Promise((resolve) => setTimeout(resolve, 500));

    assert.deepEqual(answers.otherServerErrors, [], 'no 5xx but 503');
    assert.deepEqual(answers.badUnavailable, [], `every 503 carries Retry-After and one of ${[...unavailableCodes].join(', ')}\n${complaints(nodes)}`);
    ledger.checkDeliveries(deliveriesByUid(sink.requests));
    assert.deepEqual(ledger.problems, [], 'every delivery accounted for');
    assert.ok(acknowledgedBefore > 0, 'adds were acknowledged before the kill');
    process.stdout.write(`# ${ledger.adds.size} timers acknowledged (${answers.acknowledgedAfterPromotion} batches after the promotion), ${answers.unavailable} batches answered 503, ${sink.requests.length} deliveries; every partition owned again ${Math.round(recoveryMs)} ms after the promotion\n`);
  });
});
