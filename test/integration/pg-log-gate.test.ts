// The node's transaction gate (engine/pg-log/transaction-gate.ts) over PostgreSQL logs of
// several partitions on a real PostgreSQL 15: the logs together never run more transactions than
// the gate allows, every append still resolves in order and gapless in its partition, the
// records held back join larger transactions (fewer than without the gate for the same appends),
// and a database that goes away gives every slot back, so the logs go on once it is back.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Sql } from 'postgres';
import { initCluster } from '../../cluster/cluster-init.ts';
import { openClusterPool } from '../../cluster/connection.ts';
import { errorCodes, isFermataError } from '../../engine/errors.ts';
import { openPgLog, type PgLog } from '../../engine/pg-log/pg-log.ts';
import { TransactionGate } from '../../engine/pg-log/transaction-gate.ts';
import { type PostgresServer, startPostgres } from '../helpers/postgres.ts';
import { skipUnlessTool } from '../helpers/tools.ts';

const noPostgres = skipUnlessTool('initdb');
const partitions = 16;
const logsAtOnce = 6;

/** A gate that remembers the most slots ever taken at once. */
class WatchedGate extends TransactionGate {
  most = 0;
  override tryTake(wake: () => void): boolean {
    const took = super.tryTake(wake);
    this.most = Math.max(this.most, this.taken);
    return took;
  }
}

const noReplay = { expectBytes: () => undefined, record: () => undefined };

describe('PostgreSQL logs sharing a transaction gate', { skip: noPostgres, timeout: 120_000 }, () => {
  let server: PostgresServer;
  let url: string;
  let sql: Sql;
  let nextPartition = 0;
  before(async () => {
    server = await startPostgres();
    url = await server.createDatabase('pggate');
    sql = openClusterPool(url, { max: 12 });
    await initCluster(sql, partitions);
  });
  after(async () => {
    await sql?.end({ timeout: 5 });
    await server?.stop();
  });

  /** `count` partitions no other test uses, each taken at its next epoch and its log opened through `pool`. */
  async function openLogs(pool: Sql, count: number, gate: TransactionGate | undefined): Promise<PgLog[]> {
    const logs: PgLog[] = [];
    for (let i = 0; i < count; i++) {
      const partition = nextPartition++;
      const [row] = await sql<{ epoch: string }[]>`UPDATE fermata_partitions SET epoch = epoch + 1, owner = 'test' WHERE partition = ${partition} RETURNING epoch`;
      logs.push(await openPgLog({ sql: pool, partition, epoch: Number(row?.epoch), gate }, { coveredSeq: 0, replay: noReplay, onPoisoned: undefined }));
    }
    return logs;
  }

  /** `rounds` rounds of one append in each log, a round a task (as a turn's keyed adds spread over the partitions): each log's sequences. */
  async function appendRounds(logs: readonly PgLog[], rounds: number): Promise<number[][]> {
    const pending: Promise<number>[][] = logs.map(() => []);
    for (let round = 0; round < rounds; round++) {
      for (let i = 0; i < logs.length; i++) (pending[i] as Promise<number>[]).push((logs[i] as PgLog).append(1, new Uint8Array([round & 0xff, i])));
      await new Promise((resolve) => setImmediate(resolve));
    }
    return Promise.all(pending.map((seqs) => Promise.all(seqs)));
  }

  test('the logs together run at most the gate\'s transactions, in order and gapless each, in fewer transactions than without it', async () => {
    const rounds = 60;
    const gate = new WatchedGate(2);
    const gated = await openLogs(sql, logsAtOnce, gate);
    const gatedSeqs = await appendRounds(gated, rounds);
    for (const seqs of gatedSeqs) assert.deepEqual(seqs, Array.from({ length: rounds }, (_, i) => i + 1), 'each log in order, gapless');
    assert.ok(gate.most <= 2 && gate.most >= 1, `at most 2 transactions at once (${gate.most})`);
    assert.equal(gate.taken, 0, 'every slot given back');
    const free = await openLogs(sql, logsAtOnce, undefined);
    await appendRounds(free, rounds);
    const transactions = (logs: readonly PgLog[]): number => logs.reduce((sum, log) => sum + log.counters.syncs, 0);
    assert.ok(transactions(gated) < transactions(free), `gated: ${transactions(gated)} transactions, ungated: ${transactions(free)}, for ${rounds * logsAtOnce} appends each`);
    for (const log of [...gated, ...free]) {
      const seqs: number[] = [];
      for await (const record of log.records()) seqs.push(record.seq);
      assert.equal(seqs.length, rounds, 'every record in the database');
      await log.close();
    }
  });

  test('the database unreachable: appends refused with LOG_UNAVAILABLE give their slots back, and the logs go on once it is back', async () => {
    const pool = openClusterPool(url, { max: 4, connectTimeoutSeconds: 2 });
    try {
      const gate = new TransactionGate(2);
      const logs = await openLogs(pool, 3, gate);
      await appendRounds(logs, 3);
      await server.halt();
      try {
        const refused = await Promise.allSettled(logs.flatMap((log) => [log.append(1, new Uint8Array(1)), log.append(1, new Uint8Array(1))]));
        for (const result of refused) assert.ok(result.status === 'rejected' && isFermataError(result.reason, errorCodes.logUnavailable), String(result.status === 'rejected' ? result.reason : 'accepted'));
        assert.equal(gate.taken, 0, 'no slot kept by a failed transaction');
      } finally {
        await server.start();
      }
      for (const log of logs) {
        let seq: number | undefined;
        for (let attempt = 0; seq === undefined; attempt++) {
          try {
            seq = await log.append(1, new Uint8Array(1));
          } catch (err) {
            // The pool finds its dead connections one by one.
            if (!isFermataError(err, errorCodes.logUnavailable) || attempt === 10) throw err;
            await new Promise((resolve) => setTimeout(resolve, 100));
          }
        }
        assert.equal(seq, 4, 'gapless after the refused appends');
      }
      for (const log of logs) await log.close();
      assert.equal(gate.taken, 0);
    } finally {
      await pool.end({ timeout: 5 });
    }
  });
});
