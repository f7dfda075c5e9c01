// The `cluster` suite: cluster mode end to end, `fermata serve --cluster` processes on loopback
// over one PostgreSQL 15 this suite starts on this machine (test/helpers/postgres.ts: fsync and
// synchronous_commit on), against the same adds through the embedded WAL in the same run.
//
//   arrow        Arrow batches of 1,000 timers (64-byte payloads, due in one to two hours),
//                8 in flight a node, through 1 and 3 nodes, and through one `fermata serve --data`
//   single add   one-timer JSON adds, 256 in flight over all nodes, the same three ways; and
//                in the cluster, the timers a PostgreSQL transaction of the log carried (the
//                log rows' xmin)
//   keyed add    the same with an idempotency key each (distinct keys), through 1 and 3 nodes:
//                a key's partition may be another node's, so with 3 nodes about two thirds are
//                forwarded (a turn's for one owner in one request: ingest/http/cluster/forwarded-adds.ts)
//   deliveries   timers all due at one instant through 3 nodes: timers a second from that
//                instant to the last arrival at an HTTP/2 sink
//   kill -9      3 nodes with the default leases (TTL 5 s, renewal every second) under keyed single
//                adds due within seconds; one node killed: the time until the live nodes own
//                every partition, then every acknowledged key looked for at the sink
//                (acked_lost) and deliveries beyond one a key counted (duplicates); the node
//                is started again before the next cycle
//   SIGTERM      the same with a clean stop: the time until its partitions are owned again
//
// Partitions: 12 (the cluster tests' count; each owned partition runs an engine, so 32 on two
// cores shared by PostgreSQL, three nodes, the load and the sink would measure scheduling).
// Every node runs one delivery thread. The figures are of this one machine: docs/cluster.md
// ("Sizing") says what limits each and what it would be on separate machines.
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import postgres, { type Sql } from 'postgres';
import { initCluster } from '../cluster/cluster-init.ts';
import { type LoadResult, runLoad } from '../loadgen/load-generator.ts';
import { awaitTimers, type BenchSink, startSinkProcess } from '../loadgen/sink.ts';
import { buildBodies, payloadText, type RequestBody } from '../loadgen/timer-bodies.ts';
import { startPostgres } from '../test/helpers/postgres.ts';
import { fermataBin, startFermata, stopChild } from './fermata-child.ts';
import { type Figure, metaLine, roundTo, type SuiteOptions } from './report.ts';

const suite = 'cluster';
const partitions = 12;
const hourMs = 3_600_000;

interface Timing {
  readonly warmupMs: number;
  readonly measureMs: number;
  readonly deliveryTimers: number;
  readonly kill9Cycles: number;
}

const quickTiming: Timing = { warmupMs: 1_000, measureMs: 4_000, deliveryTimers: 20_000, kill9Cycles: 1 };
const fullTiming: Timing = { warmupMs: 2_000, measureMs: 10_000, deliveryTimers: 100_000, kill9Cycles: 5 };

/** One `fermata serve --cluster` process. */
interface Node {
  readonly name: string;
  readonly dir: string;
  child: ChildProcess | undefined;
  url: string;
}

function listeningUrl(child: ChildProcess): Promise<string> {
  return new Promise((resolve, reject) => {
    const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error('a cluster node did not listen within 60 s'));
    }, 60_000);
    lines.on('line', (text) => {
      try {
        const line = JSON.parse(text) as { msg?: unknown; url?: unknown };
        if (line.msg === 'listening' && typeof line.url === 'string') {
          clearTimeout(timer);
          resolve(line.url);
        }
      } catch {
        // not a log line
      }
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`a cluster node exited before listening (${code ?? signal})`));
    });
  });
}

async function startNode(node: Node, clusterUrl: string, lease: { ttlMs: number; renewMs: number }): Promise<void> {
  const config = join(node.dir, 'config.json');
  writeFileSync(config, JSON.stringify({ cluster: { node_id: node.name, lease_ttl_ms: lease.ttlMs, renew_ms: lease.renewMs, secret: 'bench-cluster-secret' }, dispatch: { threads: 1 } }));
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('FERMATA_')));
  const child = spawn(process.execPath, [fermataBin, 'serve', '--data', join(node.dir, 'data'), '--listen', '127.0.0.1:0', '--cluster', clusterUrl, '--config', config], { env, stdio: ['ignore', 'pipe', 'inherit'] });
  node.child = child;
  node.url = await listeningUrl(child);
  child.stdout?.resume();
}

async function killNode(node: Node): Promise<void> {
  const child = node.child;
  if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGKILL');
  await exited;
}

/** Resolves with the ms until every partition is owned, by a lease still running, by one of `owners`. */
async function ownedBy(sql: Sql, owners: readonly string[], timeoutMs: number): Promise<number> {
  const started = performance.now();
  for (;;) {
    const [row] = await sql<{ owned: string }[]>`SELECT count(*) AS owned FROM fermata_partitions WHERE owner = ANY(${owners as string[]}) AND lease_until > now()`;
    if (Number(row?.owned) === partitions) return performance.now() - started;
    if (performance.now() - started > timeoutMs) throw new Error(`the partitions were not all owned by ${owners.join(', ')} within ${timeoutMs} ms`);
    await sleep(20);
  }
}

/** Waits until node `name` owns at least `count` partitions (a restarted node takes its share by handover). */
async function owns(sql: Sql, name: string, count: number, timeoutMs: number): Promise<void> {
  const started = performance.now();
  for (;;) {
    const [row] = await sql<{ owned: string }[]>`SELECT count(*) AS owned FROM fermata_partitions WHERE owner = ${name} AND lease_until > now()`;
    if (Number(row?.owned) >= count) return;
    if (performance.now() - started > timeoutMs) throw new Error(`${name} did not own ${count} partitions within ${timeoutMs} ms`);
    await sleep(20);
  }
}

/** Waits until the node at `url` acknowledges an add: its partitions' engines are open, not only their leases taken. */
async function takesAdds(url: string, timeoutMs: number): Promise<void> {
  const started = performance.now();
  for (;;) {
    const answer = await fetch(`${url}/v1/timers`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ delay_ms: hourMs, target: 'http://127.0.0.1:9/ready' }) }).catch(() => undefined);
    await answer?.arrayBuffer();
    if (answer?.ok === true) return;
    if (performance.now() - started > timeoutMs) throw new Error(`${url} took no add within ${timeoutMs} ms (last answer ${answer?.status ?? 'none'})`);
    await sleep(100);
  }
}

/** Runs one load per URL at once (concurrency split between them); their sums. */
async function loadAll(urls: readonly string[], make: (url: string) => Promise<LoadResult>): Promise<{ timersPerS: number; okTimers: number; errors: number; firstError: string | undefined }> {
  const results = await Promise.all(urls.map(make));
  let timersPerS = 0;
  let okTimers = 0;
  let errors = 0;
  for (const result of results) {
    timersPerS += result.spanOkTimers / result.spanSeconds;
    okTimers += result.okTimers;
    for (const count of result.errors.values()) errors += count;
  }
  return { timersPerS, okTimers, errors, firstError: results.find((result) => result.firstError !== undefined)?.firstError };
}

/** Each partition's last log sequence now (the log may be empty behind a checkpoint). */
async function logMarks(sql: Sql): Promise<{ partitions: number[]; lastSeqs: string[] }> {
  const rows = await sql<{ partition: number; last: string }[]>`
    SELECT p.partition, greatest(coalesce(max(l.seq), 0), p.log_start_seq - 1)::text AS last
    FROM fermata_partitions p LEFT JOIN fermata_log l USING (partition) GROUP BY p.partition, p.log_start_seq`;
  return { partitions: rows.map((row) => row.partition), lastSeqs: rows.map((row) => row.last) };
}

/**
 * The log records written since `marks` and the PostgreSQL transactions that wrote them (the
 * rows' xmin): how many timers a commit carried. Rows a checkpoint truncated meanwhile are not
 * counted.
 */
async function logWritesSince(sql: Sql, marks: { partitions: number[]; lastSeqs: string[] }): Promise<{ records: number; transactions: number }> {
  const [row] = await sql<{ records: string; transactions: string }[]>`
    SELECT count(*) AS records, count(DISTINCT (l.partition, l.xmin::text)) AS transactions
    FROM fermata_log l JOIN unnest(${marks.partitions}::int[], ${marks.lastSeqs}::bigint[]) AS m(partition, last)
      ON l.partition = m.partition AND l.seq > m.last`;
  return { records: Number(row?.records ?? 0), transactions: Number(row?.transactions ?? 0) };
}

/**
 * `count` one-timer JSON bodies, each with a key of its own (this run's prefix, so that no add of
 * the load is a duplicate while the pool lasts), due in one to two hours, 64-byte payloads.
 */
function keyedJsonBodies(count: number, target: string): RequestBody[] {
  const run = Date.now().toString(36);
  const payload = payloadText(64);
  const bodies: RequestBody[] = [];
  for (let i = 0; i < count; i++) {
    const text = JSON.stringify({ delay_ms: hourMs + ((i * 7_919) % hourMs), target, payload, key: `${run}-${i}` });
    bodies.push({ bytes: Buffer.from(text), rows: 1, contentType: 'application/json' });
  }
  return bodies;
}

/** A sink that counts deliveries by idempotency key (the add's key), for the kill -9 ledger. */
async function keySink(): Promise<{ url: string; byKey: Map<string, number>; close(): Promise<void> }> {
  const byKey = new Map<string, number>();
  const server = http2.createServer();
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on('session', (session) => {
    sessions.add(session);
    session.once('close', () => sessions.delete(session));
  });
  server.on('stream', (stream: http2.ServerHttp2Stream, headers) => {
    stream.resume();
    stream.once('end', () => {
      const key = String(headers['idempotency-key']);
      byKey.set(key, (byKey.get(key) ?? 0) + 1);
      stream.respond({ ':status': 200 });
      stream.end();
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    byKey,
    close: () => {
      for (const session of sessions) session.destroy();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

interface Kill9Tally {
  acked: Set<string>;
  sent: number;
  /** The first refusal's status and body, for the progress line. */
  firstRefusal: string | undefined;
}

/** Keyed single adds round robin over the live nodes, 64 in flight, each due 1–3 s after it is sent, until `stop`. */
async function keyedLoad(live: () => readonly Node[], target: string, tally: Kill9Tally, stop: { stopped: boolean }, prefix: string): Promise<void> {
  let n = 0;
  const one = async (): Promise<void> => {
    while (!stop.stopped) {
      const nodes = live();
      const node = nodes[n % nodes.length] as Node;
      const key = `${prefix}-${n++}`;
      tally.sent++;
      try {
        const answer = await fetch(`${node.url}/v1/timers`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ delay_ms: 1_000 + (n % 2_000), target, key }),
          signal: AbortSignal.timeout(5_000),
        });
        const text = await answer.text();
        if (answer.ok) tally.acked.add(key);
        else {
          tally.firstRefusal ??= `${answer.status} ${text}`;
          await sleep(20);
        }
      } catch {
        await sleep(20); // the node died or is stopping: not acknowledged, nothing asked of it
      }
    }
  };
  await Promise.all(Array.from({ length: 64 }, one));
}

export async function clusterSuite(options: SuiteOptions): Promise<Figure[]> {
  const timing = options.quick ? quickTiming : fullTiming;
  const figure = (name: string, value: number, unit: string): Figure => ({ suite, name, value, unit });
  const figures: Figure[] = [metaLine(suite, { node: process.version, cpus: cpus().length, quick: options.quick, postgres: 15, partitions, delivery_threads_per_node: 1 })];
  const baseDir = mkdtempSync(join(options.baseDir, 'fermata-bench-cluster-'));
  const server = await startPostgres();
  const pools: Sql[] = [];
  const nodes: Node[] = [];
  const sink: BenchSink = await startSinkProcess();
  const newCluster = async (name: string): Promise<{ url: string; sql: Sql }> => {
    const url = await server.createDatabase(name);
    const sql = postgres(url, { max: 2, onnotice: () => {} });
    pools.push(sql);
    await initCluster(sql, partitions);
    return { url, sql };
  };
  const startNodes = async (count: number, clusterUrl: string, label: string, lease: { ttlMs: number; renewMs: number }): Promise<Node[]> => {
    const started: Node[] = [];
    for (let i = 0; i < count; i++) {
      const node: Node = { name: `${label}-${i}`, dir: mkdtempSync(join(baseDir, `${label}-${i}-`)), child: undefined, url: '' };
      nodes.push(node);
      started.push(node);
    }
    await Promise.all(started.map((node) => startNode(node, clusterUrl, lease)));
    return started;
  };
  const stopNodes = async (stopping: readonly Node[]): Promise<void> => {
    await Promise.all(stopping.map((node) => (node.child === undefined ? undefined : stopChild(node.child))));
  };
  const arrowBodies = buildBodies({ mode: 'arrow', rows: 1_000, payloadBytes: 64, target: `${sink.url}/arrow`, fire: { kind: 'delay', minMs: hourMs, maxMs: 2 * hourMs } });
  const jsonBodies = buildBodies({ mode: 'json', rows: 1, payloadBytes: 64, target: `${sink.url}/single`, fire: { kind: 'delay', minMs: hourMs, maxMs: 2 * hourMs } });
  const keyedBodies = keyedJsonBodies(options.quick ? 1 << 17 : 1 << 18, `${sink.url}/keyed`);
  /** `sql`: the cluster's database, whose log tells how many timers a transaction carried (none for the embedded WAL). */
  const measure = async (urls: readonly string[], sql?: Sql): Promise<{ arrow: number; single: number; keyed: number; refused: number; singleTimersPerTransaction: number; keyedTimersPerTransaction: number }> => {
    const common = { token: undefined, ratePerS: undefined, warmupMs: timing.warmupMs, durationMs: timing.measureMs, drainTimeoutMs: 30_000 };
    for (const url of urls) await takesAdds(url, 60_000);
    const arrow = await loadAll(urls, (url) => runLoad({ ...common, url, bodies: arrowBodies, concurrency: 8, connections: 1 }));
    const perNode = Math.ceil(256 / urls.length);
    const marks = sql === undefined ? undefined : await logMarks(sql);
    const single = await loadAll(urls, (url) => runLoad({ ...common, url, bodies: jsonBodies, concurrency: perNode, connections: Math.max(1, Math.round(8 / urls.length)) }));
    const writes = sql === undefined || marks === undefined ? undefined : await logWritesSince(sql, marks);
    const keyedMarks = sql === undefined ? undefined : await logMarks(sql);
    const keyed = sql === undefined ? undefined : await loadAll(urls, (url) => runLoad({ ...common, url, bodies: keyedBodies, concurrency: perNode, connections: Math.max(1, Math.round(8 / urls.length)) }));
    const keyedWrites = sql === undefined || keyedMarks === undefined ? undefined : await logWritesSince(sql, keyedMarks);
    for (const [what, result] of [['Arrow', arrow], ['single', single], ['keyed', keyed]] as const) {
      if (result === undefined) continue;
      if (result.errors > 0) options.progress(`${what} adds: ${result.errors} refused, the first: ${result.firstError}`);
    }
    if (writes !== undefined) options.progress(`single adds: ${single.okTimers} timers in ${writes.records} log records, ${writes.transactions} transactions`);
    if (keyed !== undefined && keyedWrites !== undefined) options.progress(`keyed adds: ${keyed.okTimers} timers in ${keyedWrites.records} log records, ${keyedWrites.transactions} transactions`);
    const singleTimersPerTransaction = writes === undefined || writes.transactions === 0 ? 0 : single.okTimers / writes.transactions;
    const keyedTimersPerTransaction = keyed === undefined || keyedWrites === undefined || keyedWrites.transactions === 0 ? 0 : keyed.okTimers / keyedWrites.transactions;
    return { arrow: arrow.timersPerS, single: single.timersPerS, keyed: keyed?.timersPerS ?? 0, refused: arrow.errors + single.errors + (keyed?.errors ?? 0), singleTimersPerTransaction, keyedTimersPerTransaction };
  };
  try {
    options.progress('embedded WAL baseline');
    const embeddedConfig = join(baseDir, 'embedded.json');
    writeFileSync(embeddedConfig, JSON.stringify({ dispatch: { threads: 1 } }));
    const embedded = await startFermata(baseDir, 'embedded', { args: ['--config', embeddedConfig] });
    const wal = await measure([embedded.url]);
    await embedded.stop();
    figures.push(figure('cluster.embedded.arrow.timers_per_s', Math.round(wal.arrow), '1/s'), figure('cluster.embedded.single_add.per_s', Math.round(wal.single), '1/s'));

    for (const count of [1, 3]) {
      options.progress(`${count} node${count === 1 ? '' : 's'}: adds`);
      const { url, sql } = await newCluster(`adds_${count}`);
      const group = await startNodes(count, url, `adds${count}`, { ttlMs: 5_000, renewMs: 1_000 });
      await ownedBy(sql, group.map((node) => node.name), 60_000);
      // Balanced first: the first node up takes every partition and hands the others theirs
      // over the next rounds; measured meanwhile, a node still owning none forwards every add.
      for (const node of group) await owns(sql, node.name, Math.floor(partitions / group.length), 60_000);
      const figuresOf = await measure(group.map((node) => node.url), sql);
      const prefix = count === 1 ? 'cluster.one_node' : 'cluster';
      figures.push(
        figure(`${prefix}.adds_refused`, figuresOf.refused, 'requests'),
        figure(`${prefix}.arrow.timers_per_s`, Math.round(figuresOf.arrow), '1/s'),
        figure(`${prefix}.arrow.ratio`, roundTo(figuresOf.arrow / wal.arrow, 3), 'ratio'),
        figure(`${prefix}.single_add.per_s`, Math.round(figuresOf.single), '1/s'),
        figure(`${prefix}.single_add.ratio`, roundTo(figuresOf.single / wal.single, 3), 'ratio'),
        figure(`${prefix}.single_add.timers_per_transaction`, roundTo(figuresOf.singleTimersPerTransaction, 1), 'timers'),
        figure(`${prefix}.single_add_keyed.per_s`, Math.round(figuresOf.keyed), '1/s'),
        figure(`${prefix}.single_add_keyed.ratio`, roundTo(figuresOf.keyed / wal.single, 3), 'ratio'),
        figure(`${prefix}.single_add_keyed.timers_per_transaction`, roundTo(figuresOf.keyedTimersPerTransaction, 1), 'timers'),
      );
      if (count === 3) {
        options.progress('3 nodes: deliveries');
        await sink.reset();
        const fireAtMs = Date.now() + 8_000;
        const rowsPerBody = 1_000;
        const bodies = buildBodies({ mode: 'arrow', rows: rowsPerBody, payloadBytes: 64, target: `${sink.url}/due`, fire: { kind: 'at', atMs: fireAtMs } });
        let added = 0;
        for (let i = 0; added < timing.deliveryTimers; i++) {
          const node = group[i % group.length] as Node;
          const body = bodies[0]?.bytes as Uint8Array;
          const answer = await fetch(`${node.url}/v1/timers`, { method: 'POST', headers: { 'content-type': 'application/vnd.apache.arrow.stream' }, body });
          await answer.arrayBuffer();
          if (answer.ok) added += rowsPerBody;
        }
        if (Date.now() > fireAtMs) throw new Error('the deliveries were added after their fire time: fewer timers or a later fire time');
        const { snapshot } = await awaitTimers(sink, added, fireAtMs - Date.now() + 120_000);
        const spanMs = snapshot.lastArrivalMs - fireAtMs;
        figures.push(figure('cluster.deliveries.per_s', Math.round(snapshot.timers / (spanMs / 1000)), '1/s'), figure('cluster.deliveries.delivered', snapshot.timers, 'timers'));
      }
      await stopNodes(group);
    }

    options.progress('3 nodes: kill -9 and SIGTERM');
    const keys = await keySink();
    try {
      const { url, sql } = await newCluster('failover');
      const lease = { ttlMs: 5_000, renewMs: 1_000 }; // the defaults: what a user runs
      const group = await startNodes(3, url, 'fail', lease);
      await ownedBy(sql, group.map((node) => node.name), 60_000);
      const tally: Kill9Tally = { acked: new Set(), sent: 0, firstRefusal: undefined };
      const takeovers: number[] = [];
      let alive: readonly Node[] = group;
      for (let cycle = 0; cycle < timing.kill9Cycles; cycle++) {
        const stop = { stopped: false };
        const loading = keyedLoad(() => alive, keys.url, tally, stop, `c${cycle}`);
        await sleep(1_500);
        const victim = group[cycle % group.length] as Node;
        await owns(sql, victim.name, Math.floor(partitions / group.length), 30_000);
        alive = group.filter((node) => node !== victim);
        await killNode(victim);
        takeovers.push(await ownedBy(sql, alive.map((node) => node.name), 30_000));
        await sleep(1_000);
        stop.stopped = true;
        await loading;
        await startNode(victim, url, lease);
        alive = group;
        await ownedBy(sql, group.map((node) => node.name), 30_000);
      }
      // Every acknowledged key is due within about 3 s of its add: wait for them all (bounded).
      const deadline = performance.now() + 60_000;
      while ([...tally.acked].some((key) => !keys.byKey.has(key)) && performance.now() < deadline) await sleep(100);
      if (tally.firstRefusal !== undefined) options.progress(`keyed adds: the first refusal: ${tally.firstRefusal}`);
      const lost = [...tally.acked].filter((key) => !keys.byKey.has(key)).length;
      let duplicates = 0;
      for (const count of keys.byKey.values()) duplicates += count - 1;
      const victim = group[0] as Node;
      await owns(sql, victim.name, Math.floor(partitions / group.length), 30_000);
      const leaving = victim.child as ChildProcess;
      const startedStop = performance.now();
      const stopped = stopChild(leaving);
      const handoverMs = await ownedBy(sql, group.slice(1).map((node) => node.name), 30_000);
      await stopped;
      figures.push(
        figure('cluster.takeover_ms.max', Math.round(Math.max(...takeovers)), 'ms'),
        figure('cluster.takeover_sigterm_ms', Math.round(handoverMs), 'ms'),
        figure('cluster.sigterm_exit_ms', Math.round(performance.now() - startedStop), 'ms'),
        figure('cluster.kill9.acked', tally.acked.size, 'timers'),
        figure('cluster.kill9.acked_lost', lost, 'timers'),
        figure('cluster.kill9.duplicates', duplicates, 'deliveries'),
      );
      await stopNodes(group);
    } finally {
      await keys.close();
    }
  } finally {
    await Promise.all(nodes.map((node) => killNode(node)));
    await Promise.all(pools.map((sql) => sql.end({ timeout: 1 })));
    await sink.close();
    await server.stop();
    rmSync(baseDir, { recursive: true, force: true });
  }
  return figures;
}
