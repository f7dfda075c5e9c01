// A child process for test/integration/pg-log-kill9.test.ts: an engine over the PostgreSQL log
// of one partition (FERMATA_TEST_PG_URL, _PARTITION, _EPOCH; its spill data under
// FERMATA_TEST_DATA_DIR) adding one-timer batches from 16 concurrent admitters until it is
// killed. Each acknowledged timer's id is written to stdout, one a line, only once its admit
// resolved (the record is committed): the parent's ledger of what was acknowledged.
import { writeSync } from 'node:fs';
import { openClusterPool } from '../../cluster/connection.ts';
import { batchFromSpecs } from '../../engine/batch/timer-batch.ts';
import { Engine } from '../../engine/engine.ts';
import { pgLog } from '../../engine/pg-log/pg-log.ts';

const env = (name: string): string => {
  const value = process.env[name];
  if (value === undefined) throw new Error(`${name} is not set`);
  return value;
};

const sql = openClusterPool(env('FERMATA_TEST_PG_URL'), { max: 6 });
const engine = await Engine.open({
  dataDir: env('FERMATA_TEST_DATA_DIR'),
  openLog: pgLog({ sql, partition: Number(env('FERMATA_TEST_PG_PARTITION')), epoch: Number(env('FERMATA_TEST_PG_EPOCH')) }),
});
const dayMs = 24 * 3600_000;
writeSync(1, 'open\n');
await Promise.all(
  Array.from({ length: 16 }, async (_, admitter) => {
    for (let i = 0; ; i++) {
      const admitted = await engine.admit(batchFromSpecs([{ fireAtMs: Date.now() + dayMs, target: 'https://a.example/hook', payload: `${admitter}-${i}` }]));
      // Synchronous: a line is out before the next admit, so a kill cuts no acknowledged id.
      writeSync(1, `${admitted.idOf(0)}\n`);
    }
  }),
);
