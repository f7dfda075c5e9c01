// What a cluster node tells the HTTP side (the router) about partitions: which ones this node
// owns now and their engines, and where every other partition's owner serves. The node runner
// (cluster/node.ts) implements it; the router reads it per request and caches what it derives,
// dropping the cache on onChange. Main thread: every method answers from memory, none waits.
import type { Engine } from '../engine/engine.ts';

export interface PartitionDirectory {
  /** P: the cluster's partition count, fixed at `fermata cluster init`. */
  readonly partitions: number;
  readonly nodeId: string;
  /** The engine of a partition this node owns now, or undefined. */
  engineOf(partition: number): Engine | undefined;
  /** Partitions this node owns now, ascending. */
  owned(): readonly number[];
  /** Where the partition's owner serves (its advertise address, from the lease row), or undefined while it moves. */
  ownerAddress(partition: number): string | undefined;
  /** Told when this node gains or loses a partition (the router's caches). Returns the unsubscribe. */
  onChange(listener: () => void): () => void;
}
