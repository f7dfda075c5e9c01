// Where a request goes in cluster mode: which partition a timer belongs to and who serves that
// partition now (this node's engine, another node's address, or nobody while it moves). The
// HTTP front (ingest/http/cluster/) asks this per request and does the sending; this module
// knows nothing of HTTP. Main thread; it reads the node's PartitionDirectory, which answers
// from memory.
//
//   keyed timer     → partitionOfKey(key, P), wherever its owner is
//   unkeyed timer   → a partition this node owns: the same one for every unkeyed single add
//                     read in one event-loop turn, the next owned one the next turn (sticky, as
//                     Kafka's producer partitioner); a node that owns none sends it to a node
//                     that does
//   unkeyed batch   → the next partition this node owns, a batch at a time: a batch is a record
//                     of its own, so sticking gains it nothing, and spread they commit in parallel
//   an id           → the partition its first three characters name (partitioning.ts)
//
// A batch whose rows span partitions gives each unkeyed row a derived key, so that sending the
// same body again after a partial failure finds the rows that landed (docs/api.md, "Cluster
// mode"): `fermata-batch:<first 32 hex digits of the SHA-256 of the body>:<row>`, row 0-based.
//
// Why sticky: each owned partition has an admit coalescer and a log of its own, and the
// coalescer makes one record of the adds it gets in a turn, each record one PostgreSQL
// transaction (at most a few in flight a partition). Adds spread one by one over the partitions
// made a record of one or two timers in each, and as many transactions a turn as partitions
// owned, queued for the node's pool; the turn's adds in one partition make one record and one
// transaction. Turns move on over the owned partitions, so their logs still commit in parallel
// (decision 0031).
import { hash } from 'node:crypto';
import { AdmitCoalescer } from '../engine/admit-coalescer.ts';
import type { Engine } from '../engine/engine.ts';
import type { PartitionDirectory } from './partition-directory.ts';
import { partitionOfKey } from './partitioning.ts';

/** Who serves a partition now, as this node sees it. */
export type PartitionRoute =
  | { readonly kind: 'local'; readonly partition: number; readonly engine: Engine }
  | { readonly kind: 'remote'; readonly partition: number; readonly address: string }
  | { readonly kind: 'moving'; readonly partition: number };

export class ClusterRouter {
  readonly #directory: PartitionDirectory;
  /** One admit coalescer per owned engine, so single adds read in one turn share a record there too; dropped on any change of ownership. */
  readonly #coalescers = new Map<number, { readonly engine: Engine; readonly coalescer: AdmitCoalescer }>();
  #nextOwned = 0;
  #nextBatch = 0;
  #nextRemote = 0;
  /** The partition this turn's unkeyed adds go to; undefined until the turn's first one, and again after the turn (#unstick). */
  #sticky: number | undefined;
  readonly #unstick = (): void => {
    this.#sticky = undefined;
  };
  readonly #unsubscribe: () => void;

  constructor(directory: PartitionDirectory) {
    this.#directory = directory;
    this.#unsubscribe = directory.onChange(() => {
      this.#coalescers.clear();
      this.#sticky = undefined;
    });
  }

  get partitions(): number {
    return this.#directory.partitions;
  }

  get nodeId(): string {
    return this.#directory.nodeId;
  }

  /** Who serves `partition`: this node's engine, else its owner's address, else nobody now. */
  route(partition: number): PartitionRoute {
    const engine = this.#directory.engineOf(partition);
    if (engine !== undefined) return { kind: 'local', partition, engine };
    const address = this.#directory.ownerAddress(partition);
    return address === undefined ? { kind: 'moving', partition } : { kind: 'remote', partition, address };
  }

  /**
   * The partition of a timer with this key, or for an unkeyed one this turn's partition among
   * those this node owns (undefined when it owns none). The turn ends with the check phase
   * (setImmediate), where the admit coalescers flush the turn's adds, so a turn's unkeyed adds
   * make one record; the next turn takes the next owned partition.
   */
  partitionForAdd(key: string | Uint8Array | undefined): number | undefined {
    if (key !== undefined && key.length > 0) return partitionOfKey(key, this.#directory.partitions);
    if (this.#sticky !== undefined) return this.#sticky;
    const owned = this.#directory.owned();
    if (owned.length === 0) return undefined;
    this.#nextOwned = (this.#nextOwned + 1) % owned.length;
    this.#sticky = owned[this.#nextOwned];
    setImmediate(this.#unstick);
    return this.#sticky;
  }

  /** The partition of a batch whose rows are all unkeyed: the next one this node owns, a batch at a time (undefined when it owns none). */
  partitionForBatch(): number | undefined {
    const owned = this.#directory.owned();
    if (owned.length === 0) return undefined;
    this.#nextBatch = (this.#nextBatch + 1) % owned.length;
    return owned[this.#nextBatch];
  }

  /** Some other node's address that owns a partition (round-robin), for an unkeyed add on a node that owns none; undefined when no partition has an owner. */
  anyOwnerAddress(): string | undefined {
    const partitions = this.#directory.partitions;
    for (let i = 0; i < partitions; i++) {
      this.#nextRemote = (this.#nextRemote + 1) % partitions;
      const address = this.#directory.ownerAddress(this.#nextRemote);
      if (address !== undefined && this.#directory.engineOf(this.#nextRemote) === undefined) return address;
    }
    return undefined;
  }

  /** The admit coalescer of an owned partition's engine. */
  coalescerOf(partition: number, engine: Engine): AdmitCoalescer {
    const known = this.#coalescers.get(partition);
    if (known !== undefined && known.engine === engine) return known.coalescer;
    const coalescer = new AdmitCoalescer(engine);
    this.#coalescers.set(partition, { engine, coalescer });
    return coalescer;
  }

  /** Partitions this node owns now, ascending. */
  owned(): readonly number[] {
    return this.#directory.owned();
  }

  /** Every partition with its route, for fan-out reads. */
  routes(): PartitionRoute[] {
    const routes: PartitionRoute[] = [];
    for (let partition = 0; partition < this.#directory.partitions; partition++) routes.push(this.route(partition));
    return routes;
  }

  close(): void {
    this.#unsubscribe();
    this.#coalescers.clear();
  }
}

/**
 * The partition of each row of a batch, given each row's key (empty = none): keyed rows by their
 * key; when every row is unkeyed, all of them in `unkeyedPartition` (one append, all or none);
 * otherwise each unkeyed row by its derived key, which `derivedKeys` holds (undefined for keyed
 * rows and for a batch that needed none).
 */
export interface BatchSplit {
  readonly partitionOfRow: Int32Array;
  readonly derivedKeys: readonly (string | undefined)[] | undefined;
}

export function splitBatch(keys: readonly (string | undefined)[], partitions: number, unkeyedPartition: number | undefined, body: Uint8Array): BatchSplit {
  const rows = keys.length;
  const partitionOfRow = new Int32Array(rows);
  const keyed = keys.some((key) => key !== undefined && key !== '');
  if (!keyed) {
    partitionOfRow.fill(unkeyedPartition ?? -1);
    return { partitionOfRow, derivedKeys: undefined };
  }
  let derivedKeys: (string | undefined)[] | undefined;
  let prefix: string | undefined;
  for (let row = 0; row < rows; row++) {
    const key = keys[row];
    if (key !== undefined && key !== '') {
      partitionOfRow[row] = partitionOfKey(key, partitions);
      continue;
    }
    derivedKeys ??= new Array<string | undefined>(rows).fill(undefined);
    prefix ??= derivedKeyPrefix(body);
    const derived = `${prefix}${row}`;
    derivedKeys[row] = derived;
    partitionOfRow[row] = partitionOfKey(derived, partitions);
  }
  return { partitionOfRow, derivedKeys };
}

/** What the derived key of each unkeyed row of a batch spanning partitions starts with, before its row: the same for the same body on every node. */
export function derivedKeyPrefix(body: Uint8Array): string {
  return `fermata-batch:${hash('sha256', body, 'hex').slice(0, 32)}:`;
}
