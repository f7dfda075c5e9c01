// What `fermata cluster status` shows: the cluster row, the schema version, the nodes (when a
// migration has made their table), and per partition its owner, epoch, lease and log size (rows
// and body bytes still in fermata_log) and checkpoint size (bytes of its stored files). Read in one REPEATABLE READ transaction, so the figures
// are of one moment. Runs in the command's process.
import type { Sql } from 'postgres';
import { readSchemaVersion } from './schema/migrate.ts';
import { schemaVersion } from './schema/migrations.ts';

export interface PartitionStatus {
  readonly partition: number;
  readonly epoch: number;
  readonly owner: string | null;
  readonly ownerAddress: string | null;
  /** ISO 8601, or null: no lease. */
  readonly leaseUntil: string | null;
  readonly logRows: number;
  readonly logBytes: number;
  /** The oldest and newest sequences in fermata_log (null: no row). */
  readonly firstSeq: number | null;
  readonly lastSeq: number | null;
  /** Bytes of the partition's stored files (fermata_checkpoint_files): its checkpoint, and leftovers of one under way. */
  readonly checkpointBytes: number;
}

export interface ClusterStatus {
  readonly schemaVersion: number;
  /** The version this build runs on. */
  readonly knownSchemaVersion: number;
  readonly partitionCount: number;
  readonly createdAt: string;
  /** fermata_nodes' rows as they are, or null while no migration has made that table. */
  readonly nodes: readonly Readonly<Record<string, unknown>>[] | null;
  readonly partitions: readonly PartitionStatus[];
}

interface PartitionRow {
  partition: number;
  epoch: string;
  owner: string | null;
  owner_address: string | null;
  lease_until: Date | null;
  log_rows: string;
  log_bytes: string;
  first_seq: string | null;
  last_seq: string | null;
  checkpoint_bytes: string;
}

function plain(row: Readonly<Record<string, unknown>>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(row).map(([name, value]) => [name, value instanceof Date ? value.toISOString() : value]));
}

/** The cluster's status, or undefined when the database holds no cluster (no schema or no cluster row). */
export async function readClusterStatus(sql: Sql): Promise<ClusterStatus | undefined> {
  const version = await readSchemaVersion(sql);
  if (version === 0) return undefined;
  return sql.begin('ISOLATION LEVEL REPEATABLE READ READ ONLY', async (tx) => {
    const [cluster] = await tx<{ partitions: number; created_at: Date }[]>`SELECT partitions, created_at FROM fermata_cluster`;
    if (cluster === undefined) return undefined;
    const [nodesTable] = await tx<{ present: boolean }[]>`SELECT to_regclass('fermata_nodes') IS NOT NULL AS present`;
    const nodes = nodesTable?.present === true ? (await tx<Record<string, unknown>[]>`SELECT * FROM fermata_nodes ORDER BY 1`).map(plain) : null;
    const rows = await tx<PartitionRow[]>`
      SELECT p.partition, p.epoch, p.owner, p.owner_address, p.lease_until,
             coalesce(l.log_rows, 0) AS log_rows, coalesce(l.log_bytes, 0) AS log_bytes, l.first_seq, l.last_seq,
             coalesce(c.checkpoint_bytes, 0) AS checkpoint_bytes
      FROM fermata_partitions p
      LEFT JOIN (
        SELECT partition, count(*) AS log_rows, sum(octet_length(body)) AS log_bytes, min(seq) AS first_seq, max(seq) AS last_seq
        FROM fermata_log GROUP BY partition
      ) l USING (partition)
      LEFT JOIN (
        SELECT partition, sum(octet_length(body)) AS checkpoint_bytes FROM fermata_checkpoint_files GROUP BY partition
      ) c USING (partition)
      ORDER BY p.partition`;
    const status: ClusterStatus = {
      schemaVersion: version,
      knownSchemaVersion: schemaVersion,
      partitionCount: cluster.partitions,
      createdAt: cluster.created_at.toISOString(),
      nodes,
      partitions: rows.map((row) => ({
        partition: row.partition,
        epoch: Number(row.epoch),
        owner: row.owner,
        ownerAddress: row.owner_address,
        leaseUntil: row.lease_until?.toISOString() ?? null,
        logRows: Number(row.log_rows),
        logBytes: Number(row.log_bytes),
        firstSeq: row.first_seq === null ? null : Number(row.first_seq),
        lastSeq: row.last_seq === null ? null : Number(row.last_seq),
        checkpointBytes: Number(row.checkpoint_bytes),
      })),
    };
    return status;
  });
}
