// The PostgreSQL the cluster tests stand on (test/helpers/postgres.ts): a server starts as the
// postgres user with fsync and synchronous_commit on, and a synchronous standby promoted after
// its primary is killed holds a row the primary acknowledged. Skips without postgresql-15
// (fails under CI).
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { describe, test } from 'node:test';
import postgres from 'postgres';
import { openClusterPool } from '../../cluster/connection.ts';
import { multiHostUrl, startPostgres, startStandby } from '../helpers/postgres.ts';
import { skipUnlessTool } from '../helpers/tools.ts';

const noPostgres = skipUnlessTool('initdb');

describe('PostgreSQL test harness', { skip: noPostgres, timeout: 120_000 }, () => {
  test('a server runs with fsync and synchronous_commit on, and stop removes it', async (t) => {
    const server = await startPostgres();
    t.after(() => server.stop());
    const sql = postgres(await server.createDatabase('harness'), { max: 1 });
    try {
      const [settings] = await sql`SELECT current_setting('fsync') AS fsync, current_setting('synchronous_commit') AS sync, current_user AS who`;
      assert.deepEqual({ ...settings }, { fsync: 'on', sync: 'on', who: 'fermata' });
    } finally {
      await sql.end();
    }
    await server.stop();
    assert.equal(existsSync(server.dir), false);
  });

  test('a row the primary acknowledged is on the standby promoted after the primary died', async (t) => {
    const primary = await startPostgres();
    t.after(() => primary.stop());
    const standby = await startStandby(primary);
    t.after(() => standby.stop());
    const onPrimary = postgres(primary.url, { max: 1 });
    await onPrimary`CREATE TABLE acknowledged (id int PRIMARY KEY)`;
    await onPrimary`INSERT INTO acknowledged SELECT generate_series(1, 1000)`;
    await onPrimary.end();
    await primary.stop();

    await standby.promote();
    // The multi-host URL finds the promoted standby as the one that takes writes (through the
    // node's pool, which opens its sockets itself).
    const onStandby = openClusterPool(multiHostUrl([primary, standby]), { max: 1, connectTimeoutSeconds: 5 });
    try {
      const [count] = await onStandby`SELECT count(*)::int AS n FROM acknowledged`;
      assert.equal(count?.n, 1000);
      await onStandby`INSERT INTO acknowledged VALUES (1001)`;
    } finally {
      await onStandby.end();
    }
  });
});
