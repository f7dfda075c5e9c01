// Creating a cluster in a database: the schema (every migration), the one fermata_cluster row
// with its partition count P, and P fencing rows at epoch 0 with no owner. P is fixed for the
// cluster's life: an init on a cluster that exists changes nothing, and one asking for another
// P is refused. Runs in the command's process (`fermata cluster init`), one transaction after
// the migrations' own, under the same advisory lock as theirs.
import type { Sql } from 'postgres';
import { migrate } from './schema/migrate.ts';

/** The partition count a cluster gets when init is not told one. */
export const defaultPartitions = 32;
/** The most partitions a cluster may have (the schema's CHECK holds the same bound). */
export const maxPartitions = 4096;

export type ClusterInitResult =
  | { readonly kind: 'created'; readonly partitions: number; readonly schemaFrom: number; readonly schemaTo: number }
  | { readonly kind: 'exists'; readonly partitions: number; readonly schemaFrom: number; readonly schemaTo: number }
  | { readonly kind: 'partitions-differ'; readonly partitions: number; readonly asked: number };

/** pg_advisory_xact_lock's key for creating the cluster row: "fermata" + 1. */
const initLockKey = '28821989760267362';

export async function initCluster(sql: Sql, partitions: number): Promise<ClusterInitResult> {
  if (!Number.isInteger(partitions) || partitions < 1 || partitions > maxPartitions) {
    throw new RangeError(`partitions must be an integer from 1 to ${maxPartitions}, not ${partitions}`);
  }
  const schema = await migrate(sql);
  return sql.begin(async (tx): Promise<ClusterInitResult> => {
    await tx`SELECT pg_advisory_xact_lock(${initLockKey}::bigint)`;
    const [existing] = await tx<{ partitions: number }[]>`SELECT partitions FROM fermata_cluster`;
    if (existing !== undefined) {
      if (existing.partitions !== partitions) return { kind: 'partitions-differ', partitions: existing.partitions, asked: partitions };
      return { kind: 'exists', partitions, schemaFrom: schema.from, schemaTo: schema.to };
    }
    await tx`INSERT INTO fermata_cluster (partitions) VALUES (${partitions})`;
    await tx`INSERT INTO fermata_partitions (partition) SELECT generate_series(0, ${partitions - 1}::int)`;
    return { kind: 'created', partitions, schemaFrom: schema.from, schemaTo: schema.to };
  });
}
