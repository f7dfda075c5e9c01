// The cluster schema on a real PostgreSQL: migrations apply in order, in one transaction (a
// failing one leaves nothing behind), once even when two run at once, and a node refuses a
// database older or newer than it knows, naming what to run; `initCluster` fixes P once.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import postgres, { type Sql } from 'postgres';
import { initCluster } from '../../cluster/cluster-init.ts';
import type { Migration } from '../../cluster/schema/migration.ts';
import { migrations, schemaVersion } from '../../cluster/schema/migrations.ts';
import { migrate, readSchemaVersion, requireCurrentSchema } from '../../cluster/schema/migrate.ts';
import { isFermataError } from '../../engine/errors.ts';
import { type PostgresServer, startPostgres } from '../helpers/postgres.ts';
import { skipUnlessTool } from '../helpers/tools.ts';

const noPostgres = skipUnlessTool('initdb');

describe('cluster schema', { skip: noPostgres, timeout: 120_000 }, () => {
  let server: PostgresServer;
  let databases = 0;
  before(async () => {
    server = await startPostgres();
  });
  after(() => server.stop());

  /** A client on a new empty database, ended after the test. */
  async function freshDatabase(t: { after(fn: () => Promise<void>): void }): Promise<Sql> {
    databases += 1;
    const sql = postgres(await server.createDatabase(`schema_${databases}`), { max: 4, onnotice: () => {} });
    t.after(() => sql.end());
    return sql;
  }

  const laterMigration: Migration = { version: schemaVersion + 1, name: 'later', sql: 'CREATE TABLE fermata_later (x int)' };

  test('an empty database migrates to the newest version, and again is a no-op', async (t) => {
    const sql = await freshDatabase(t);
    assert.equal(await readSchemaVersion(sql), 0);
    assert.deepEqual(await migrate(sql), { from: 0, to: schemaVersion });
    assert.deepEqual(await migrate(sql), { from: schemaVersion, to: schemaVersion });
    const rows = await sql<{ version: number; name: string }[]>`SELECT version, name FROM fermata_schema_version ORDER BY version`;
    assert.deepEqual(rows.map((row) => [row.version, row.name]), migrations.map((m) => [m.version, m.name]));
    const tables = await sql<{ name: string }[]>`SELECT tablename AS name FROM pg_tables WHERE tablename LIKE 'fermata_%' ORDER BY 1`;
    assert.deepEqual(tables.map((row) => row.name), ['fermata_checkpoint_files', 'fermata_checkpoints', 'fermata_cluster', 'fermata_log', 'fermata_nodes', 'fermata_partitions', 'fermata_queues', 'fermata_schema_version']);
    await requireCurrentSchema(sql);
  });

  test('two migrations at once apply each step once', async (t) => {
    const sql = await freshDatabase(t);
    const results = await Promise.all([migrate(sql), migrate(sql), migrate(sql)]);
    assert.deepEqual(results.map((r) => r.from).sort(), [0, schemaVersion, schemaVersion]);
    const [count] = await sql<{ n: number }[]>`SELECT count(*)::int AS n FROM fermata_schema_version`;
    assert.equal(count?.n, schemaVersion);
  });

  test('a migration that fails leaves the database as it was', async (t) => {
    const sql = await freshDatabase(t);
    const broken: Migration = { version: schemaVersion + 1, name: 'broken', sql: 'CREATE TABLE fermata_broken (x int); SELECT no_such_function()' };
    await assert.rejects(migrate(sql, [...migrations, broken]), /no_such_function/);
    assert.equal(await readSchemaVersion(sql), 0);
    const [table] = await sql`SELECT to_regclass('fermata_log') AS t`;
    assert.equal(table?.t, null);
  });

  test('a node refuses an empty, an older and a newer database, naming the fix', async (t) => {
    const sql = await freshDatabase(t);
    const refusal = (pattern: RegExp) => (err: unknown) => isFermataError(err, 'CLUSTER_SCHEMA_MISMATCH') && pattern.test(err.message);
    await assert.rejects(requireCurrentSchema(sql), refusal(/fermata cluster init --partitions/));
    await migrate(sql);
    // This build against a database a newer build migrated:
    await migrate(sql, [...migrations, laterMigration]);
    await assert.rejects(requireCurrentSchema(sql), refusal(new RegExp(`newer than this fermata knows \\(${schemaVersion}\\): run a newer fermata`)));
    await assert.rejects(migrate(sql), refusal(/newer than this fermata knows/));
    // A newer build against this database:
    const other = await freshDatabase(t);
    await migrate(other);
    await assert.rejects(requireCurrentSchema(other, [...migrations, laterMigration]), refusal(new RegExp(`older than this fermata's ${schemaVersion + 1}: run \`fermata cluster migrate\``)));
    assert.deepEqual(await migrate(other, [...migrations, laterMigration]), { from: schemaVersion, to: schemaVersion + 1 });
  });

  test('init creates P partitions at epoch 0 once, and refuses another P', async (t) => {
    const sql = await freshDatabase(t);
    assert.deepEqual(await initCluster(sql, 8), { kind: 'created', partitions: 8, schemaFrom: 0, schemaTo: schemaVersion });
    assert.deepEqual(await initCluster(sql, 8), { kind: 'exists', partitions: 8, schemaFrom: schemaVersion, schemaTo: schemaVersion });
    assert.deepEqual(await initCluster(sql, 16), { kind: 'partitions-differ', partitions: 8, asked: 16 });
    const rows = await sql<{ partition: number; epoch: string; owner: string | null }[]>`SELECT partition, epoch, owner FROM fermata_partitions ORDER BY partition`;
    assert.deepEqual(rows.map((row) => [row.partition, row.epoch, row.owner]), Array.from({ length: 8 }, (_, i) => [i, '0', null]));
    await assert.rejects(sql`INSERT INTO fermata_cluster (singleton, partitions) VALUES (true, 4)`, /duplicate key/);
  });
});
