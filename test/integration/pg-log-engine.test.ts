// The engine over the PostgreSQL log (engine/pg-log/), through the contract tests every
// DurableLog runs (test/helpers/durable-log-contract.ts), on a real PostgreSQL 15: each test a
// partition of its own, taken at a new epoch; a fence is another owner's takeover.
import { after } from 'node:test';
import postgres, { type Sql } from 'postgres';
import { initCluster } from '../../cluster/cluster-init.ts';
import { pgLog } from '../../engine/pg-log/pg-log.ts';
import { durableLogContract } from '../helpers/durable-log-contract.ts';
import { type PostgresServer, startPostgres } from '../helpers/postgres.ts';
import { skipUnlessTool } from '../helpers/tools.ts';

const noPostgres = skipUnlessTool('initdb');

let server: PostgresServer | undefined;
let sql: Sql | undefined;
let started: Promise<Sql> | undefined;
let nextPartition = 0;

/** The server and a cluster of 16 partitions, started by the first test that needs them. */
function cluster(): Promise<Sql> {
  started ??= (async () => {
    server = await startPostgres();
    sql = postgres(await server.createDatabase('contract'), { max: 8, onnotice: () => {} });
    await initCluster(sql, 16);
    return sql;
  })();
  return started;
}

after(async () => {
  await sql?.end({ timeout: 5 });
  await server?.stop();
});

durableLogContract({
  name: 'PostgreSQL log',
  skip: noPostgres,
  async newLog() {
    const db = await cluster();
    const partition = nextPartition++;
    const takeOver = async (): Promise<number> => {
      const [row] = await db<{ epoch: string }[]>`UPDATE fermata_partitions SET epoch = epoch + 1 WHERE partition = ${partition} RETURNING epoch`;
      return Number(row?.epoch);
    };
    const epoch = await takeOver();
    return {
      opener: pgLog({ sql: db, partition, epoch }),
      async recordTypes() {
        const rows = await db<{ type: number }[]>`SELECT type FROM fermata_log WHERE partition = ${partition} ORDER BY seq`;
        return rows.map((row) => row.type);
      },
      async truncatedThrough() {
        const [row] = await db<{ start: string }[]>`SELECT log_start_seq AS start FROM fermata_partitions WHERE partition = ${partition}`;
        return Number(row?.start) - 1;
      },
      async fence() {
        await takeOver();
      },
    };
  },
});
