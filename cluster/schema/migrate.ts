// Bringing a cluster database to this build's schema, and refusing to run on any other.
//
// The version a database is at is the newest row of fermata_schema_version (no table: 0, an
// empty database). migrate() applies the missing migrations in one transaction under an advisory
// lock, so two nodes or operators migrating at once apply each step once and nobody sees half of
// one. Migrating is explicit (`fermata cluster init`, `fermata cluster migrate`); a node only
// checks (requireCurrentSchema) and refuses to start on a database older or newer than it knows.
// Runs on whichever thread holds the connection pool; it keeps nothing between calls.
import type { Sql, TransactionSql } from 'postgres';
import { errorCodes, FermataError } from '../../engine/errors.ts';
import type { Migration } from './migration.ts';
import { migrations } from './migrations.ts';

/** pg_advisory_xact_lock's key for schema changes: "fermata" in ASCII, as a bigint. */
const schemaLockKey = '28821989760267361';

export interface MigrationResult {
  /** The version before. */
  readonly from: number;
  /** The version now: the newest migration known. */
  readonly to: number;
}

async function versionIn(sql: Sql | TransactionSql): Promise<number> {
  const [row] = await sql<{ version: number | null }[]>`
    SELECT CASE WHEN to_regclass('fermata_schema_version') IS NULL THEN 0 END AS version`;
  if (row?.version === 0) return 0;
  const [newest] = await sql<{ version: number }[]>`SELECT coalesce(max(version), 0)::int AS version FROM fermata_schema_version`;
  return newest?.version ?? 0;
}

/** The schema version the database is at (0: none). */
export function readSchemaVersion(sql: Sql): Promise<number> {
  return versionIn(sql);
}

function newerThanKnown(version: number, known: number): FermataError {
  return new FermataError(
    errorCodes.clusterSchemaMismatch,
    `the cluster database is at schema version ${version}, newer than this fermata knows (${known}): run a newer fermata`,
    { version, known },
  );
}

/**
 * Applies every migration the database lacks, all in one transaction; a database already
 * current is left as it is. `known` is this build's list (tests pass others).
 */
export async function migrate(sql: Sql, known: readonly Migration[] = migrations): Promise<MigrationResult> {
  return sql.begin(async (tx) => {
    await tx`SELECT pg_advisory_xact_lock(${schemaLockKey}::bigint)`;
    // The version table is what versions are read from, so it is made before any migration runs.
    await tx.unsafe(`CREATE TABLE IF NOT EXISTS fermata_schema_version (
      version integer PRIMARY KEY,
      name text NOT NULL,
      applied_at timestamptz NOT NULL DEFAULT now()
    )`);
    const from = await versionIn(tx);
    if (from > known.length) throw newerThanKnown(from, known.length);
    for (const migration of known.slice(from)) {
      await tx.unsafe(migration.sql);
      await tx`INSERT INTO fermata_schema_version (version, name) VALUES (${migration.version}, ${migration.name})`;
    }
    return { from, to: known.length };
  });
}

/** Throws CLUSTER_SCHEMA_MISMATCH, naming what to run, unless the database is at the newest known schema version. */
export async function requireCurrentSchema(sql: Sql, known: readonly Migration[] = migrations): Promise<void> {
  const version = await readSchemaVersion(sql);
  if (version === known.length) return;
  if (version > known.length) throw newerThanKnown(version, known.length);
  throw new FermataError(
    errorCodes.clusterSchemaMismatch,
    version === 0
      ? 'the database holds no fermata cluster: create one with `fermata cluster init --partitions P`'
      : `the cluster database is at schema version ${version}, older than this fermata's ${known.length}: run \`fermata cluster migrate\``,
    { version, known: known.length },
  );
}
