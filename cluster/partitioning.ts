// Which partition a timer belongs to, in cluster mode: by its idempotency key when it has one
// (so a retry of a keyed add reaches the partition that holds the key, from any node), and
// by its id once it exists (the id carries its partition). docs/format/ids.md, "Cluster ids".
//
//   cluster id = 3 characters of the partition (0…32767, base32 as ids are) + the 24-character
//                id the partition's engine gave the timer
//
// A plain 24-character id is still a valid cluster id and names partition 0: a single-node
// data directory imported as partition 0 keeps the ids its clients hold. Pure functions on the
// main thread; no state.
import { hash } from 'node:crypto';
import { decodeTimerId, idAlphabet, idLength } from '../engine/ids.ts';

/** Characters of the partition prefix: 15 bits, more than cluster-init's 4096 partitions at most. */
export const partitionPrefixLength = 3;
export const clusterIdLength = partitionPrefixLength + idLength;
const partitionMax = 32 ** partitionPrefixLength - 1;

/**
 * The partition of an idempotency key among `partitions`: the first four bytes of the SHA-256
 * of the key's UTF-8, big-endian, modulo P. SHA-256 because every node, process and version
 * must compute the same answer from the key alone (no seed, nothing of the process) and its
 * bits are uniform, so the modulo spreads keys evenly (2^32 / P leaves a bias under 1e-6).
 */
export function partitionOfKey(key: string | Uint8Array, partitions: number): number {
  const digest = hash('sha256', key, 'buffer');
  return digest.readUInt32BE(0) % partitions;
}

/** The cluster id of the timer a partition's engine calls `engineId` (24 characters). */
export function clusterIdOf(partition: number, engineId: string): string {
  if (!(Number.isInteger(partition) && partition >= 0 && partition <= partitionMax)) throw new RangeError(`partition ${partition} out of id range`);
  return idAlphabet[partition >>> 10] + (idAlphabet[(partition >>> 5) & 31] as string) + (idAlphabet[partition & 31] as string) + engineId;
}

/** Where a cluster id points: its partition and the id within that partition's engine. */
export interface ClusterIdParts {
  readonly partition: number;
  readonly engineId: string;
}

/**
 * The partition and engine id of a well-formed cluster id (27 characters, or 24 naming
 * partition 0), else undefined: anything else is not an id (the API answers 404, as for one it
 * does not know). A partition at or past the cluster's P is undefined too.
 */
export function clusterIdParts(id: string, partitions: number): ClusterIdParts | undefined {
  if (id.length === idLength) return decodeTimerId(id) === undefined ? undefined : { partition: 0, engineId: id };
  if (id.length !== clusterIdLength) return undefined;
  let partition = 0;
  for (let i = 0; i < partitionPrefixLength; i++) {
    const value = idAlphabet.indexOf(id.charAt(i));
    if (value < 0) return undefined;
    partition = partition * 32 + value;
  }
  const engineId = id.slice(partitionPrefixLength);
  if (partition >= partitions || decodeTimerId(engineId) === undefined) return undefined;
  return { partition, engineId };
}

/** The partition a cluster id names, or undefined when it is not one (see clusterIdParts). */
export function partitionOfId(id: string, partitions: number): number | undefined {
  return clusterIdParts(id, partitions)?.partition;
}
