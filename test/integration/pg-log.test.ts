// The PostgreSQL log (engine/pg-log/pg-log.ts) against a real PostgreSQL 15: group commit with
// transactions in flight resolving in order; the fence (a deposed owner's appends racing a
// takeover never land after it, checked over many rounds); the database unreachable (appends
// refused with LOG_UNAVAILABLE, no poison, the sequence gapless after); a COMMIT whose answer is
// lost (the log poisons, cutToSynced removes what it may have written); an owner stopped while it
// holds the fence (its session ended after the bound, the takeover not held up); truncation.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import postgres, { type Sql } from 'postgres';
import { initCluster } from '../../cluster/cluster-init.ts';
import { openClusterPool } from '../../cluster/connection.ts';
import { errorCodes, type FermataError, isFermataError } from '../../engine/errors.ts';
import type { LogReplay } from '../../engine/log.ts';
import { readFence } from '../../engine/pg-log/fence.ts';
import { openPgLog, type PgLog, type PgLogOptions } from '../../engine/pg-log/pg-log.ts';
import { type PostgresServer, startPostgres } from '../helpers/postgres.ts';
import { startTcpCutter } from '../helpers/tcp-cutter.ts';
import { withTimeout } from '../helpers/timeout.ts';
import { skipUnlessTool } from '../helpers/tools.ts';

const noPostgres = skipUnlessTool('initdb');
const soak = process.env.FERMATA_SOAK === '1';
const partitions = 64;

interface Replayed {
  readonly records: { seq: number; type: number; body: Uint8Array }[];
  expected: number;
}

function collector(): LogReplay & Replayed {
  const records: { seq: number; type: number; body: Uint8Array }[] = [];
  return {
    records,
    expected: -1,
    expectBytes(bytes) {
      this.expected = bytes;
    },
    record(seq, type, body) {
      records.push({ seq, type, body: new Uint8Array(body) });
    },
  };
}

function bodyOf(seqHint: number, bytes: number): Uint8Array {
  const body = new Uint8Array(bytes);
  for (let i = 0; i < bytes; i += 4096) body[i] = (seqHint + i) & 0xff;
  return body;
}

/** An append, tried again while it is refused with LOG_UNAVAILABLE (the pool finds its connections dead one by one). */
async function appendOnceBack(log: PgLog): Promise<number> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await log.append(2, new Uint8Array(1));
    } catch (err) {
      if (!isFermataError(err, errorCodes.logUnavailable) || attempt === 10) throw err;
      await sleep(100);
    }
  }
}

describe('PostgreSQL log', { skip: noPostgres, timeout: 300_000 }, () => {
  let server: PostgresServer;
  let url: string;
  let sql: Sql;
  let nextPartition = 0;
  before(async () => {
    server = await startPostgres();
    url = await server.createDatabase('pglog');
    sql = openClusterPool(url, { max: 12 });
    await initCluster(sql, partitions);
  });
  after(async () => {
    await sql?.end({ timeout: 5 });
    await server?.stop();
  });

  /** A partition no other test uses, taken at epoch 1. */
  async function takePartition(): Promise<{ partition: number; epoch: number }> {
    const partition = nextPartition++;
    const [row] = await sql<{ epoch: string }[]>`UPDATE fermata_partitions SET epoch = epoch + 1, owner = 'test' WHERE partition = ${partition} RETURNING epoch`;
    return { partition, epoch: Number(row?.epoch) };
  }

  async function open(options: PgLogOptions, coveredSeq = 0, onPoisoned?: (poison: FermataError) => void): Promise<{ log: PgLog; replayed: Replayed }> {
    const replayed = collector();
    const log = await openPgLog(options, { coveredSeq, replay: replayed, onPoisoned });
    return { log, replayed };
  }

  test('appends in flight resolve in order, gapless, many to a transaction; records() and a reopen show them', async () => {
    const { partition, epoch } = await takePartition();
    const { log } = await open({ sql, partition, epoch });
    assert.equal(log.lastSeq, 0);
    assert.equal(log.firstSeq, 1);
    const sizes = Array.from({ length: 300 }, (_, i) => (i % 50 === 7 ? 1024 * 1024 : (i * 37) % 500));
    const resolvedOrder: number[] = [];
    const seqs = await Promise.all(
      sizes.map((bytes, i) =>
        log.append(1 + (i % 11), i % 3 === 0 ? [bodyOf(i, bytes)] : [bodyOf(i, bytes).subarray(0, bytes >> 1), bodyOf(i, bytes).subarray(bytes >> 1)]).then((seq) => {
          resolvedOrder.push(seq);
          return seq;
        }),
      ),
    );
    assert.deepEqual(seqs, sizes.map((_, i) => i + 1));
    assert.deepEqual(resolvedOrder, seqs, 'acknowledged in sequence order');
    assert.equal(log.lastSeq, 300);
    assert.equal(log.counters.appends, 300);
    assert.ok(log.counters.syncs < 300, `group commit: ${log.counters.syncs} transactions for 300 appends`);
    const totalBytes = sizes.reduce((a, b) => a + b, 0);
    assert.equal(log.counters.bytesWritten, totalBytes);
    assert.equal(log.bytesToReplay, totalBytes);

    const read: number[] = [];
    for await (const record of log.records(290)) {
      read.push(record.seq);
      assert.equal(record.type, 1 + ((record.seq - 1) % 11));
      assert.deepEqual(new Uint8Array(record.body), bodyOf(record.seq - 1, sizes[record.seq - 1] ?? -1));
    }
    assert.deepEqual(read, [290, 291, 292, 293, 294, 295, 296, 297, 298, 299, 300]);
    await log.close();
    await assert.rejects(log.append(1, new Uint8Array(1)), (err) => isFermataError(err, errorCodes.walClosed));

    const reopened = await open({ sql, partition, epoch }, 100);
    assert.equal(reopened.log.lastSeq, 300);
    assert.deepEqual(reopened.replayed.records.map((r) => r.seq), Array.from({ length: 200 }, (_, i) => 101 + i));
    assert.equal(reopened.replayed.expected, sizes.slice(100).reduce((a, b) => a + b, 0));
    assert.equal(await reopened.log.append(2, new Uint8Array([9])), 301);
    await reopened.log.close();
  });

  test("through the node's pool an append waits for its commit, not for TCP's delayed ACK", async () => {
    // Without TCP_NODELAY a COPY's end waits for the server's delayed ACK: 40 ms at least, on every append.
    const { partition, epoch } = await takePartition();
    const { log } = await open({ sql, partition, epoch });
    const latencies: number[] = [];
    for (let i = 0; i < 21; i++) {
      const start = performance.now();
      await log.append(1, bodyOf(i, 128));
      latencies.push(performance.now() - start);
    }
    await log.close();
    const median = latencies.toSorted((a, b) => a - b)[10] ?? Number.NaN;
    assert.ok(median < 40, `median append ${median.toFixed(1)} ms`);
  });

  test('an open at an epoch the partition has left is refused with LOG_FENCED', async () => {
    const { partition, epoch } = await takePartition();
    await assert.rejects(open({ sql, partition, epoch: epoch - 1 }), (err) => isFermataError(err, errorCodes.logFenced));
    await assert.rejects(open({ sql, partition: partitions + 5, epoch }), /no partition/);
  });

  test("a deposed owner's appends racing the takeover never land after it", async () => {
    const rounds = soak ? 200 : 20;
    const pool = openClusterPool(url, { max: 8 });
    try {
      for (let round = 0; round < rounds; round++) {
        const { partition, epoch } = await takePartition().catch(async () => {
          // More rounds than partitions: reuse one, at its current epoch.
          nextPartition = 0;
          return takePartition();
        });
        // A partition used before (more rounds than partitions) starts empty again.
        await sql`DELETE FROM fermata_log WHERE partition = ${partition}`;
        await sql`UPDATE fermata_partitions SET log_start_seq = 1 WHERE partition = ${partition}`;
        const stops: FermataError[] = [];
        const { log: deposed } = await open({ sql: pool, partition, epoch }, 0, (poison) => stops.push(poison));
        const acknowledged: number[] = [];
        let refused: FermataError | undefined;
        // Eight appenders, each appending again as soon as its last append settles, until refused
        // (or, were the fence broken, for a few seconds after the takeover).
        let giveUpAt = Number.POSITIVE_INFINITY;
        const appenders = Array.from({ length: 8 }, async (_, writer) => {
          for (let i = 0; refused === undefined && Date.now() < giveUpAt; i++) {
            try {
              acknowledged.push(await deposed.append(1, bodyOf(writer * 1000 + i, 200 + ((writer * 7 + i) % 300))));
            } catch (err) {
              refused = err as FermataError;
            }
          }
        });
        await sleep(5 + ((round * 7) % 25));
        const [taken] = await sql<{ epoch: string }[]>`UPDATE fermata_partitions SET epoch = epoch + 1 WHERE partition = ${partition} RETURNING epoch`;
        giveUpAt = Date.now() + 2000;
        // The takeover has committed: what the deposed owner has in the log now is all it will ever have.
        const [atTakeover] = await sql<{ last: string | null; rows: number }[]>`
          SELECT max(seq) AS last, count(*)::int AS rows FROM fermata_log WHERE partition = ${partition} AND epoch = ${epoch}`;
        await Promise.all(appenders);
        assert.equal(refused?.code, errorCodes.logFenced, `round ${round}: the deposed owner is refused as fenced (${refused?.message})`);
        assert.equal(stops.length, 1, 'told once');
        assert.equal(deposed.poisoned?.code, errorCodes.logFenced);
        const [afterAll] = await sql<{ last: string | null; rows: number }[]>`
          SELECT max(seq) AS last, count(*)::int AS rows FROM fermata_log WHERE partition = ${partition} AND epoch = ${epoch}`;
        assert.deepEqual(afterAll, atTakeover, `round ${round}: nothing of epoch ${epoch} landed after the takeover`);
        // Every acknowledged append is there; nothing unacknowledged is.
        assert.equal(atTakeover?.rows, acknowledged.length);
        assert.equal(Number(atTakeover?.last ?? 0), acknowledged.length === 0 ? 0 : Math.max(...acknowledged));

        const newEpoch = Number(taken?.epoch);
        const { log: owner, replayed } = await open({ sql: pool, partition, epoch: newEpoch });
        assert.deepEqual(replayed.records.map((r) => r.seq), acknowledged.toSorted((a, b) => a - b));
        assert.equal(await owner.append(2, new Uint8Array([1])), acknowledged.length + 1);
        await owner.close();
        await deposed.close();
        await sql`DELETE FROM fermata_log WHERE partition = ${partition}`;
      }
    } finally {
      await pool.end({ timeout: 5 });
    }
  });

  test('an owner stopped while it holds the fence holds up a takeover for the bound only: the database ends its session, and nothing of it commits', async () => {
    const { partition, epoch } = await takePartition();
    const { partition: other } = await takePartition();
    const owner = postgres(url, { max: 1, onnotice: () => {} });
    try {
      const fenced = Promise.withResolvers<void>();
      const woken = Promise.withResolvers<boolean>();
      let takenOver = false;
      // The fence read, then nothing from the client for 4 s (as an owner stopped before its COMMIT).
      const holding = owner
        .begin(async (tx) => {
          await tx`UPDATE fermata_partitions SET owner_address = 'stopped' WHERE partition = ${other}`;
          assert.equal(await readFence(tx, partition, 300), epoch);
          fenced.resolve();
          await sleep(4_000);
          woken.resolve(takenOver);
        })
        .then(() => 'committed', (err: unknown) => err);
      await fenced.promise;
      await sql`UPDATE fermata_partitions SET epoch = epoch + 1 WHERE partition = ${partition}`;
      takenOver = true;
      const outcome = await holding;
      assert.equal(await woken.promise, true, 'the takeover went through while the owner was still stopped');
      assert.ok(outcome instanceof Error, `the stopped owner's transaction did not commit (${String(outcome)})`);
      const [row] = await sql<{ address: string | null }[]>`SELECT owner_address AS address FROM fermata_partitions WHERE partition = ${other}`;
      assert.notEqual(row?.address, 'stopped', 'nothing of its transaction landed');
    } finally {
      await owner.end({ timeout: 1 });
    }
  });

  test('the database unreachable: appends are refused with LOG_UNAVAILABLE, no poison, and the log goes on gapless once it is back', async () => {
    const { partition, epoch } = await takePartition();
    const pool = openClusterPool(url, { max: 4, connectTimeoutSeconds: 2 });
    try {
      const { log } = await open({ sql: pool, partition, epoch });
      const stops: FermataError[] = [];
      assert.deepEqual(await Promise.all([log.append(1, bodyOf(1, 10)), log.append(1, bodyOf(2, 10))]), [1, 2]);
      await server.halt();
      try {
        const results = await Promise.allSettled([log.append(1, bodyOf(3, 10)), log.append(1, bodyOf(4, 10)), log.append(1, bodyOf(5, 10))]);
        for (const result of results) {
          assert.equal(result.status, 'rejected');
          assert.ok(isFermataError(result.reason, errorCodes.logUnavailable), String(result.reason));
        }
        assert.equal(log.poisoned, undefined);
        assert.equal(stops.length, 0);
      } finally {
        await server.start();
      }
      assert.equal(await log.append(1, bodyOf(6, 10)), 3, 'the refused appends took no sequence');
      assert.equal(log.lastSeq, 3);
      const seqs: number[] = [];
      for await (const record of log.records()) seqs.push(record.seq);
      assert.deepEqual(seqs, [1, 2, 3]);
      await log.close();
    } finally {
      await pool.end({ timeout: 5 });
    }
  });

  test('a COMMIT whose answer is lost poisons the log; cutToSynced removes what it may have written', async () => {
    const { partition, epoch } = await takePartition();
    const cutter = await startTcpCutter(server.port);
    // Unprepared statements: each COMMIT goes on the wire as its text, which the cutter looks for.
    const pool = postgres(`postgres://fermata@127.0.0.1:${cutter.port}/pglog`, { max: 4, prepare: false, onnotice: () => {} });
    try {
      const stops: FermataError[] = [];
      const { log } = await open({ sql: pool, partition, epoch }, 0, (poison) => stops.push(poison));
      assert.equal(await log.append(1, bodyOf(1, 100)), 1);
      const cut = cutter.cutAfterClientSends('commit');
      await assert.rejects(log.append(1, bodyOf(2, 100)), (err) => isFermataError(err, errorCodes.walPoisoned) && /COMMIT under way/.test(err.message));
      await cut;
      assert.equal(stops.length, 1);
      assert.equal(log.poisoned?.code, errorCodes.walPoisoned);
      await assert.rejects(log.append(1, bodyOf(3, 100)), (err) => isFermataError(err, errorCodes.walPoisoned));
      assert.equal(log.lastSeq, 1);
      // The server received the COMMIT before the connection's end, and committed: the record
      // landed, though its append was refused.
      await sleep(200);
      const landed = await sql<{ seq: string }[]>`SELECT seq FROM fermata_log WHERE partition = ${partition} ORDER BY seq`;
      assert.deepEqual(landed.map((row) => Number(row.seq)), [1, 2]);
      await log.cutToSynced();
      const rows = await sql<{ seq: string }[]>`SELECT seq FROM fermata_log WHERE partition = ${partition} ORDER BY seq`;
      assert.deepEqual(rows.map((row) => Number(row.seq)), [1]);
      await log.close();
      const { log: reopened, replayed } = await open({ sql: pool, partition, epoch });
      assert.deepEqual(replayed.records.map((r) => r.seq), [1]);
      assert.equal(await reopened.append(1, bodyOf(4, 100)), 2);
      await reopened.close();
    } finally {
      await pool.end({ timeout: 5 });
      await cutter.close();
    }
  });

  // Quarantined as a todo (it runs and reports, but does not fail the run): in two of the last
  // clean-clone runs a step after a cut ended with the client's raw CONNECTION_DESTROYED, or
  // hung, instead of LOG_UNAVAILABLE; the cause is open (the session's closing note).
  test("a transaction whose connection died is over (porsager/postgres#1186/#1216, patched): its later statements and COMMIT fail, none runs on the session the pool opens next", async () => {
    // One connection: the query queued behind the transaction makes the pool open it again at
    // once, which is where the unpatched client ran the dead transaction's statements (outside
    // any transaction, or inside another one) or left them waiting for ever.
    const pool = openClusterPool(url, { max: 1 });
    try {
      const inside = Promise.withResolvers<number>();
      const resume = Promise.withResolvers<void>();
      const statementAfter = Promise.withResolvers<unknown>();
      const transaction = pool.begin(async (tx) => {
        const [row] = await tx<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`;
        inside.resolve(row?.pid ?? -1);
        await resume.promise;
        const after = tx`SELECT pg_backend_pid() AS pid`;
        after.then(statementAfter.resolve, statementAfter.reject);
        await after;
      });
      transaction.catch(() => undefined);
      const pid = await withTimeout(inside.promise, 10_000, 'the transaction to start');
      const queued = pool<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`;
      await sql`SELECT pg_terminate_backend(${pid})`;
      await assert.rejects(withTimeout(transaction, 10_000, 'the transaction to end'), Error, 'the transaction fails with its connection');
      const [next] = await withTimeout(queued, 10_000, 'the query queued behind the transaction');
      assert.notEqual(next?.pid, pid, 'the queued query ran on a new session');
      resume.resolve();
      await assert.rejects(withTimeout(statementAfter.promise, 10_000, "the dead transaction's next statement"), (err: Error & { code?: string }) => err.code === 'CONNECTION_CLOSED', "the dead transaction's next statement fails");
      assert.equal((await pool<{ one: number }[]>`SELECT 1 AS one`)[0]?.one, 1, 'the pool goes on');
      const [open] = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM pg_stat_activity WHERE state LIKE 'idle in transaction%' AND datname = 'pglog'`;
      assert.equal(open?.n, 0, 'no session was left inside a transaction');
    } finally {
      await pool.end({ timeout: 5 });
    }
  });

  test('connections cut under load (porsager/postgres#1208, #1216, patched): the process lives, every append settles, and the log goes on gapless', async () => {
    const { partition, epoch } = await takePartition();
    const cutter = await startTcpCutter(server.port);
    const pool = openClusterPool(`postgres://fermata@127.0.0.1:${cutter.port}/pglog`, { max: 6, connectTimeoutSeconds: 5 });
    try {
      const acknowledged = new Set<number>();
      for (let round = 0; round < 6; round++) {
        // Each step bounded: a step that hangs fails naming itself, not the file's timeout.
        const { log } = await withTimeout(open({ sql: pool, partition, epoch }), 30_000, `round ${round}: the log to open`);
        const appends = Promise.allSettled(Array.from({ length: 60 }, (_, i) => log.append(1, bodyOf(i, 64 + i))));
        await sleep(2 + (round % 4) * 3);
        cutter.cutAll();
        const settled = await Promise.race([appends, sleep(30_000).then(() => undefined)]);
        assert.ok(settled !== undefined, `round ${round}: every append settles`);
        for (const result of settled) {
          if (result.status === 'fulfilled') acknowledged.add(result.value);
          else assert.ok(isFermataError(result.reason, errorCodes.logUnavailable) || isFermataError(result.reason, errorCodes.walPoisoned), String(result.reason));
        }
        if (log.poisoned !== undefined) await withTimeout(log.cutToSynced(), 30_000, `round ${round}: cutToSynced after the cut`);
        else assert.ok((await withTimeout(appendOnceBack(log), 30_000, `round ${round}: an append after the cut`)) > 0, `round ${round}: the log goes on after the cut`);
        await withTimeout(log.close(), 30_000, `round ${round}: the log to close`);
      }
      const rows = await sql<{ seq: string }[]>`SELECT seq FROM fermata_log WHERE partition = ${partition} ORDER BY seq`;
      const seqs = rows.map((row) => Number(row.seq));
      assert.deepEqual(seqs, seqs.map((_, i) => i + 1), 'gapless');
      for (const seq of acknowledged) assert.ok(seq <= seqs.length, `acknowledged record ${seq} is in the log`);
    } finally {
      await pool.end({ timeout: 5 });
      await cutter.close();
    }
  });

  test('the database stopped under load: every append settles, acknowledged ones are in the log, and it goes on gapless', async () => {
    const { partition, epoch } = await takePartition();
    const pool = openClusterPool(url, { max: 6, connectTimeoutSeconds: 2 });
    try {
      const acknowledged = new Set<number>();
      for (let round = 0; round < 3; round++) {
        const { log } = await open({ sql: pool, partition, epoch });
        const appends = Promise.allSettled(Array.from({ length: 60 }, (_, i) => log.append(1, bodyOf(i, 64 + i))));
        await sleep(2 + (round % 4) * 3);
        await server.halt();
        const settled = await Promise.race([appends, sleep(30_000).then(() => undefined)]);
        await server.start();
        assert.ok(settled !== undefined, `round ${round}: every append settles`);
        for (const result of settled) {
          if (result.status === 'fulfilled') acknowledged.add(result.value);
          else assert.ok(isFermataError(result.reason, errorCodes.logUnavailable) || isFermataError(result.reason, errorCodes.walPoisoned), String(result.reason));
        }
        if (log.poisoned !== undefined) await log.cutToSynced();
        else assert.ok((await appendOnceBack(log)) > 0, `round ${round}: the log goes on after the database is back`);
        await log.close();
      }
      const rows = await sql<{ seq: string }[]>`SELECT seq FROM fermata_log WHERE partition = ${partition} ORDER BY seq`;
      const seqs = rows.map((row) => Number(row.seq));
      assert.deepEqual(seqs, seqs.map((_, i) => i + 1), 'gapless');
      for (const seq of acknowledged) assert.ok(seq <= seqs.length, `acknowledged record ${seq} is in the log`);
    } finally {
      await pool.end({ timeout: 5 });
    }
  });

  test('a record type a newer build wrote refuses the open with FORMAT_TOO_NEW, naming the partition, the sequence and the type', async () => {
    const { partition, epoch } = await takePartition();
    const { log } = await open({ sql, partition, epoch });
    await log.append(1, bodyOf(1, 10));
    await log.close();
    await sql`INSERT INTO fermata_log (partition, seq, type, epoch, body) VALUES (${partition}, 2, 250, ${epoch}, ${Buffer.alloc(4)})`;
    await assert.rejects(open({ sql, partition, epoch }), (err) => isFermataError(err, errorCodes.formatTooNew) && new RegExp(`partition ${partition}: record type \\(sequence 2\\) 250 is newer than this build reads`).test(err.message));
  });

  test('truncation behind a checkpoint drops the covered records; a reopen from an older checkpoint is refused', async () => {
    const { partition, epoch } = await takePartition();
    const { log } = await open({ sql, partition, epoch });
    for (let i = 0; i < 10; i++) await log.append(1, bodyOf(i, 100));
    assert.equal(await log.truncateCovered(6), 6);
    assert.equal(log.firstSeq, 7);
    assert.equal(log.bytesToReplay, 400);
    assert.equal(await log.truncateCovered(6), 0);
    assert.equal(await log.truncateCovered(10), 4, 'every record covered: all go');
    assert.equal(log.firstSeq, 11);
    assert.equal(log.lastSeq, 10);
    await log.close();
    const { log: reopened, replayed } = await open({ sql, partition, epoch }, 10);
    assert.equal(replayed.records.length, 0);
    assert.equal(reopened.lastSeq, 10, 'the sequence goes on after truncation took every row');
    assert.equal(reopened.firstSeq, 11);
    assert.equal(await reopened.append(1, bodyOf(11, 10)), 11);
    await reopened.close();
    await assert.rejects(open({ sql, partition, epoch }, 5), (err) => isFermataError(err, errorCodes.walCorrupt) && /starts at record 11, but the checkpoint covers only up to 5/.test(err.message));
  });
});
