// The `pg-log` suite: how the PostgreSQL log of cluster mode writes, on a PostgreSQL 15 this
// suite starts on this machine (test/helpers/postgres.ts: fsync and synchronous_commit on).
//
//   copy vs insert   the same transactions (BEGIN; rows; SELECT epoch … FOR SHARE; COMMIT), one
//                    at a time, with the rows sent by binary COPY (what PgLog does) or by one
//                    multi-row INSERT (bytea parameters, which the client sends as hex text):
//                    8 bodies of 1 MiB a transaction (an Arrow batch a record), and 1,000
//                    bodies of 128 bytes a transaction ([decision 0016](../docs/decisions/0016-pg-log-copy.md))
//   PgLog            256 appenders of 128-byte records, and 8 appenders of 1 MiB records, as
//                    the wal suite drives the local WAL; and 4 appenders of 2 KiB records, a
//                    cluster node's single adds in miniature (a record a turn's timers, a few
//                    records a transaction). For each, what a transaction costs the client:
//                    its socket writes (calls of the pool's sockets' write(), each one system
//                    call: nothing corks them) and this process's CPU (process.cpuUsage(), user
//                    and system, over the measured span), a transaction and an append. Counts,
//                    unlike rates, hold still on a busy machine.
//
// The pool is a node's (cluster/connection.ts: its sockets with TCP_NODELAY). Each measurement warms up, then counts only the work that completes inside its span; the log
// table is emptied between measurements. MB here is 1,048,576 bytes.
import net from 'node:net';
import { cpus } from 'node:os';
import { performance } from 'node:perf_hooks';
import type postgres from 'postgres';
import type { Sql } from 'postgres';
import { initCluster } from '../cluster/cluster-init.ts';
import { openClusterPool } from '../cluster/connection.ts';
import { encodeCopyRows } from '../engine/pg-log/copy-rows.ts';
import { openPgLog } from '../engine/pg-log/pg-log.ts';
import { startPostgres } from '../test/helpers/postgres.ts';
import { type Figure, inSpan, metaLine, roundTo, startSpan, type SuiteOptions } from './report.ts';

const suite = 'pg-log';
const MiB = 1024 * 1024;

interface Timing {
  readonly warmupMs: number;
  readonly measureMs: number;
}

const quickTiming: Timing = { warmupMs: 500, measureMs: 2500 };
const fullTiming: Timing = { warmupMs: 1000, measureMs: 8000 };

interface Shape {
  readonly bodyBytes: number;
  readonly perTransaction: number;
}

const large: Shape = { bodyBytes: MiB, perTransaction: 8 };
const small: Shape = { bodyBytes: 128, perTransaction: 1000 };

type Method = (sql: Sql, partition: number, baseSeq: number, bodies: readonly Uint8Array[]) => Promise<void>;

async function fence(tx: postgres.TransactionSql, partition: number): Promise<void> {
  await tx`SELECT epoch FROM fermata_partitions WHERE partition = ${partition} FOR SHARE`;
}

const byCopy: Method = (sql, partition, baseSeq, bodies) =>
  sql.begin(async (tx) => {
    const copy = await tx`COPY fermata_log (partition, seq, type, epoch, body) FROM STDIN WITH (FORMAT binary)`.writable();
    const rows = bodies.map((body) => ({ type: 1, parts: [body], bodyBytes: body.length }));
    const chunks = encodeCopyRows(partition, 0, baseSeq, rows);
    for (let i = 0; i < chunks.length - 1; i++) copy.write(chunks[i]);
    await new Promise<void>((resolve, reject) => copy.write(chunks.at(-1), (err) => (err === undefined || err === null ? resolve() : reject(err))));
    copy.end();
    await new Promise((resolve) => setImmediate(resolve));
    await fence(tx, partition);
  });

const byInsert: Method = (sql, partition, baseSeq, bodies) =>
  sql.begin(async (tx) => {
    const rows = bodies.map((body, i) => ({ partition, seq: baseSeq + i, type: 1, epoch: 0, body: Buffer.from(body.buffer, body.byteOffset, body.length) }));
    await tx`INSERT INTO fermata_log ${tx(rows, 'partition', 'seq', 'type', 'epoch', 'body')}`;
    await fence(tx, partition);
  });

/** Bodies/s through `method`, transactions one at a time. */
async function measureMethod(sql: Sql, method: Method, shape: Shape, timing: Timing, partition: number): Promise<number> {
  const bodies = Array.from({ length: shape.perTransaction }, (_, i) => new Uint8Array(shape.bodyBytes).fill(i & 0xff));
  const span = startSpan(timing);
  let seq = 1;
  let counted = 0;
  while (performance.now() < span.end) {
    await method(sql, partition, seq, bodies);
    seq += bodies.length;
    if (inSpan(span, performance.now())) counted += bodies.length;
  }
  await sql`TRUNCATE fermata_log`;
  return counted / span.seconds;
}

/** What a PgLog measurement counted over its span. */
interface PgLogRun {
  readonly perSecond: number;
  readonly transactions: number;
  readonly appends: number;
  readonly writes: number;
  readonly cpuUs: number;
}

/**
 * Counts the calls of write() on sockets connected to `port` (the pool's) while `counting` is
 * set. The client writes each message batch with one call, and a socket's write() is one system
 * call while the kernel takes it whole (loopback, small transactions).
 */
function socketWriteCounter(port: number): { count: number; counting: boolean; restore(): void } {
  const prototype = net.Socket.prototype;
  const write = prototype.write;
  const counter = {
    count: 0,
    counting: false,
    restore: () => {
      prototype.write = write;
    },
  };
  prototype.write = function (this: net.Socket, ...args: unknown[]): boolean {
    if (counter.counting && this.remotePort === port) counter.count++;
    return (write as (...a: unknown[]) => boolean).apply(this, args);
  } as typeof write;
  return counter;
}

/** Appends/s through PgLog with `appenders` each appending again once its last append is durable, and what its transactions cost over the span. */
async function measurePgLog(sql: Sql, port: number, appenders: number, bodyBytes: number, timing: Timing, partition: number): Promise<PgLogRun> {
  const log = await openPgLog({ sql, partition, epoch: 0 }, { coveredSeq: 0, replay: { expectBytes: () => undefined, record: () => undefined } });
  const body = new Uint8Array(bodyBytes).fill(7);
  const span = startSpan(timing);
  const writes = socketWriteCounter(port);
  let counted = 0;
  const snapshot = () => ({ syncs: log.counters.syncs, appends: counted, cpu: process.cpuUsage() });
  let atStart = snapshot();
  let atEnd: typeof atStart | undefined;
  const stop = () => {
    writes.counting = false;
    atEnd ??= snapshot();
  };
  const startTimer = setTimeout(() => {
    writes.counting = true;
    atStart = snapshot();
  }, span.start - performance.now());
  const endTimer = setTimeout(stop, span.end - performance.now());
  try {
    await Promise.all(
      Array.from({ length: appenders }, async () => {
        while (performance.now() < span.end) {
          await log.append(1, body);
          if (inSpan(span, performance.now())) counted++;
        }
      }),
    );
    // The appenders stop at the span's end, which the timer may not have met yet.
    stop();
  } finally {
    clearTimeout(startTimer);
    clearTimeout(endTimer);
    writes.restore();
  }
  await log.close();
  await sql`TRUNCATE fermata_log`;
  const end = atEnd ?? snapshot();
  return {
    perSecond: counted / span.seconds,
    transactions: end.syncs - atStart.syncs,
    appends: end.appends - atStart.appends,
    writes: writes.count,
    cpuUs: end.cpu.user - atStart.cpu.user + (end.cpu.system - atStart.cpu.system),
  };
}

export async function pgLogSuite(options: SuiteOptions): Promise<Figure[]> {
  const timing = options.quick ? quickTiming : fullTiming;
  const server = await startPostgres({ settings: { max_wal_size: '2GB' } });
  const sql = openClusterPool(await server.createDatabase('bench'), { max: 8 });
  try {
    await initCluster(sql, 8);
    const seconds = (timing.warmupMs + timing.measureMs) / 1000;
    options.progress(`pg-log: 1 MiB bodies, COPY then INSERT (2 × ${seconds} s)`);
    const copyLarge = await measureMethod(sql, byCopy, large, timing, 0);
    const insertLarge = await measureMethod(sql, byInsert, large, timing, 1);
    options.progress(`pg-log: 128-byte bodies, COPY then INSERT (2 × ${seconds} s)`);
    const copySmall = await measureMethod(sql, byCopy, small, timing, 2);
    const insertSmall = await measureMethod(sql, byInsert, small, timing, 3);
    options.progress(`pg-log: PgLog, 256 appenders of 128 bytes, 8 of 1 MiB, 4 of 2 KiB (3 × ${seconds} s)`);
    const append128 = await measurePgLog(sql, server.port, 256, 128, timing, 4);
    const append1m = await measurePgLog(sql, server.port, 8, MiB, timing, 5);
    const appendTurn = await measurePgLog(sql, server.port, 4, 2 * 1024, timing, 6);
    const figure = (name: string, value: number, unit: string): Figure => ({ suite, name, value, unit });
    const costs = (prefix: string, run: PgLogRun): Figure[] => [
      figure(`${prefix}.records_per_transaction`, roundTo(run.appends / run.transactions, 1), 'records'),
      figure(`${prefix}.writes_per_transaction`, roundTo(run.writes / run.transactions, 2), 'writes'),
      figure(`${prefix}.cpu_us_per_transaction`, Math.round(run.cpuUs / run.transactions), 'µs'),
      figure(`${prefix}.cpu_us_per_append`, roundTo(run.cpuUs / run.appends, 2), 'µs'),
    ];
    return [
      metaLine(suite, { node: process.version, cpus: cpus().length, quick: options.quick, postgres: 15 }),
      figure('pg_log.copy_1m.mb_per_s', roundTo(copyLarge, 1), 'MB/s'),
      figure('pg_log.insert_1m.mb_per_s', roundTo(insertLarge, 1), 'MB/s'),
      figure('pg_log.copy_over_insert_1m.ratio', roundTo(copyLarge / insertLarge, 2), 'ratio'),
      figure('pg_log.copy_128.per_s', Math.round(copySmall), '1/s'),
      figure('pg_log.insert_128.per_s', Math.round(insertSmall), '1/s'),
      figure('pg_log.copy_over_insert_128.ratio', roundTo(copySmall / insertSmall, 2), 'ratio'),
      figure('pg_log.append128.per_s', Math.round(append128.perSecond), '1/s'),
      ...costs('pg_log.append128', append128),
      figure('pg_log.append1m.mb_per_s', roundTo(append1m.perSecond, 1), 'MB/s'),
      ...costs('pg_log.append1m', append1m),
      figure('pg_log.append_turn.per_s', Math.round(appendTurn.perSecond), '1/s'),
      ...costs('pg_log.append_turn', appendTurn),
    ];
  } finally {
    await sql.end({ timeout: 5 });
    await server.stop();
  }
}
