// The fence of a cluster partition's writes (pg-log.ts, pg-file-system.ts): inside the writing
// transaction, just before COMMIT, the partition's row read in share mode. A takeover's UPDATE
// (epoch + 1) cannot pass it, so a write either commits before the takeover or reads the new
// epoch and rolls back.
//
// The same statement bounds how long the session may then sit idle in its transaction holding
// that lock (idle_in_transaction_session_timeout, set for this transaction only). The client
// sends COMMIT as soon as it has the answer; an owner stopped in between (SIGSTOP, a frozen VM,
// a network cut that leaves its connection open) would otherwise hold the row, and with it every
// takeover of the partition, until it ran again. Past the bound the database ends the session
// and the lock with it; nothing of the transaction commits. The bound is the lease TTL: an owner
// silent for that long is being taken over anyway, and the takeover may start only after it.
import type { TransactionSql } from 'postgres';

/** The bound when none is given: the default lease TTL (cluster/leases.ts). */
export const fenceIdleMsDefault = 5_000;

/**
 * The partition's epoch, its row now held in share mode to the end of the transaction (the
 * session ended if it sits idle past `idleMsMax` meanwhile); undefined when there is no such
 * partition.
 */
export async function readFence(tx: TransactionSql, partition: number, idleMsMax: number): Promise<number | undefined> {
  const [row] = await tx<{ epoch: string }[]>`
    SELECT epoch, set_config('idle_in_transaction_session_timeout', ${String(idleMsMax)}, true) AS bound
      FROM fermata_partitions WHERE partition = ${partition} FOR SHARE`;
  return row === undefined ? undefined : Number(row.epoch);
}
