// The PostgreSQL log (engine/pg-log/pg-log.ts) with transactions in flight, next to a lease
// renewal on the same pool, on a real PostgreSQL 15: every append and the renewal settle.
//
// The cycle this holds the log to avoiding, built step by step. The client (`postgres`) sends a
// query to a busy connection, behind what it runs, when the pool has no idle one. A renewal's
// UPDATE of the partition row waits on a lock (here another session's share lock), on pool
// connection 1; a short query keeps connection 2 busy. Two appends start two transactions: the
// first is queued behind the renewal on connection 1, the second behind the short query on
// connection 2, and runs. Once the other session lets go, the renewal waits for whatever lock
// the second transaction holds on the row; the first waits (in the client) for the renewal. A
// second transaction holding the row's share lock while it waits (in the client) for the first
// to commit closes the cycle, which PostgreSQL cannot see: nothing moves again.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import postgres, { type Sql } from 'postgres';
import { initCluster } from '../../cluster/cluster-init.ts';
import { openPgLog } from '../../engine/pg-log/pg-log.ts';
import { type PostgresServer, startPostgres } from '../helpers/postgres.ts';
import { skipUnlessTool } from '../helpers/tools.ts';

const noPostgres = skipUnlessTool('initdb');
const settleMs = 5000;

describe('PostgreSQL log next to a lease renewal', { skip: noPostgres, timeout: 120_000 }, () => {
  let server: PostgresServer;
  let url: string;
  let admin: Sql;
  before(async () => {
    server = await startPostgres();
    url = await server.createDatabase('renewal');
    admin = postgres(url, { max: 4, onnotice: () => {} });
    await initCluster(admin, 4);
  });
  after(async () => {
    await admin?.end({ timeout: 5 });
    await server?.stop();
  });

  /** Polls pg_stat_activity (other sessions of the database) until `count` rows match `where`. */
  async function until(what: string, where: (row: { pid: number; state: string | null; wait: string | null; query: string }) => boolean, count = 1): Promise<void> {
    for (let i = 0; i < 500; i++) {
      const rows = await admin<{ pid: number; state: string | null; wait: string | null; query: string }[]>`
        SELECT pid, state, wait_event_type AS wait, query FROM pg_stat_activity
        WHERE datname = current_database() AND pid <> pg_backend_pid()`;
      if (rows.filter(where).length >= count) return;
      await sleep(10);
    }
    assert.fail(`never saw ${what}`);
  }

  test('two transactions in flight and a renewal queued on the row between them all settle', async () => {
    const partition = 1;
    const [taken] = await admin<{ epoch: string }[]>`UPDATE fermata_partitions SET epoch = epoch + 1, owner = 'test' WHERE partition = ${partition} RETURNING epoch`;
    const epoch = Number(taken?.epoch);
    const pool = postgres(url, { max: 2, onnotice: () => {} });
    const holder = await admin.reserve();
    const log = await openPgLog({ sql: pool, partition, epoch, limits: { transactionsInFlightMax: 2 } }, { coveredSeq: 0, replay: { expectBytes() {}, record() {} }, onPoisoned: undefined });
    try {
      // Both connections open, so that each query below lands on a connection of its own.
      await Promise.all([pool`SELECT 1`, pool`SELECT 1`]);
      const [{ pid: holderPid } = { pid: -1 }] = await holder<{ pid: number }[]>`SELECT pg_backend_pid() AS pid`;
      await holder`BEGIN`;
      await holder`SELECT epoch FROM fermata_partitions WHERE partition = ${partition} FOR SHARE`;
      // Without parameters, so that the client sends it at once (a query with parameters of types
      // it does not know yet is described first, and its connection takes nothing behind it).
      const renewal = pool.unsafe(`UPDATE fermata_partitions SET lease_until = now() + interval '10 seconds' WHERE partition = ${partition}`).then(() => 'renewed');
      await until('the renewal waiting for the row', (row) => row.wait === 'Lock' && row.query.startsWith('UPDATE fermata_partitions'));
      // The client sends a query once it is awaited (or then'd): this one goes now.
      const busy = pool`SELECT pg_sleep(0.2)`.then(() => undefined);
      const first = log.append(1, new Uint8Array([1]), { startNow: true });
      const second = log.append(1, new Uint8Array([2]));
      await busy;
      // The second transaction has written its rows and waits, in the client, for the first.
      await until('the second transaction waiting in the client', (row) => row.pid !== holderPid && row.state === 'idle in transaction' && !/^begin/i.test(row.query));
      await holder`ROLLBACK`;
      const settled = Promise.all([first, second, renewal]);
      const outcome = await Promise.race([settled, sleep(settleMs).then(() => undefined)]);
      if (outcome === undefined) {
        // Break the cycle so that the test can end: every session of the pool goes.
        await admin`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid() AND pid <> ${holderPid}`;
        await settled.catch(() => undefined);
      }
      assert.deepEqual(outcome, [1, 2, 'renewed'], `the appends and the renewal settle within ${settleMs} ms`);
      assert.equal(log.lastSeq, 2);
    } finally {
      holder.release();
      await log.close();
      await pool.end({ timeout: 5 });
    }
  });
});
