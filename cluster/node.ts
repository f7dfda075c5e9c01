// The node runner: one `fermata serve --cluster` process's partitions. It registers the node
// and runs the ownership loop (ownership.ts); for each partition the loop gives it, it opens an
// Engine over that partition's PostgreSQL log at the epoch it was acquired at, and a Dispatcher
// that delivers its timers through the node's one pool of delivery workers; for each partition
// taken away (a lapse) or handed over (the balance, a stop) it stops that dispatcher and closes
// that engine. It is the PartitionDirectory the HTTP side (the router) reads.
//
//   Ownership ─onAcquire(p, epoch)─► Engine(PgLog p@epoch, files in PostgreSQL p@epoch) + Dispatcher(p)
//             ─onLose(p)──────────► dispatcher stops taking timers, engine closes (appends fenced)
//             ─beforeRelease(p)───► the same, awaited: the row is freed once the engine is closed
//
// Delivery workers are per process: every partition's dispatcher shares them (SharedDelivery),
// and they ask the partition's local lease deadline (lease-deadline.ts) before each send.
//
// The engine's files (its spill directory: checkpoints) are the partition's in PostgreSQL
// (engine/pg-log/pg-file-system.ts), fenced by the same epoch as its log; the local
// <data>/partitions/<p> is their cache, emptied at each acquisition. A taker needs no other
// node's disk: it reads the last owner's checkpoint, if any, and replays the log after it.
//
// Each owned partition's engine runs a memory loader (engine/spill/memory-loader.ts), as a
// single node's does: it spills past its budget, spills the far future and checkpoints, and each
// checkpoint truncates the partition's log in PostgreSQL behind it, so a taker replays only the
// tail after the last checkpoint. The node's budget is shared equally among the partitions it
// owns, read again at each loader step: a partition taken or handed over changes every share at
// the next step. A partition's loader stops before its engine closes.
//
// One partition's transitions run one after another (the ownership loop chains them, and a
// closing engine is awaited before the same partition opens again). Main thread.
import { join } from 'node:path';
import type { Logger } from 'pino';
import type { Sql } from 'postgres';
import { type Clock, Engine } from '../engine/engine.ts';
import { errorCodes, type FermataError } from '../engine/errors.ts';
import { dispatchLimits, type MemoryLimits } from '../engine/limits.ts';
import { type MemoryBudget, memoryBudget } from '../engine/memory-budget.ts';
import { openPartitionFileSystem } from '../engine/pg-log/pg-file-system.ts';
import { pgLog } from '../engine/pg-log/pg-log.ts';
import { TransactionGate } from '../engine/pg-log/transaction-gate.ts';
import { MemoryLoader } from '../engine/spill/memory-loader.ts';
import type { ResidentStoreOptions } from '../engine/store/resident-store.ts';
import { DeliveryPool } from '../dispatch/delivery-pool.ts';
import type { DeliveryAccess } from '../dispatch/signing-config.ts';
import { Dispatcher, newBufferPool, type SharedDelivery } from '../dispatch/dispatcher.ts';
import type { ClusterQueues } from './cluster-queues.ts';
import { monotonicNs } from './lease-deadline.ts';
import { type LeaseSettings, defaultLeaseSettings } from './leases.ts';
import { Ownership } from './ownership.ts';
import type { PartitionDirectory } from './partition-directory.ts';
import { clusterIdOf } from './partitioning.ts';
import { requireCurrentSchema } from './schema/migrate.ts';

export interface ClusterNodeDispatchOptions {
  /** Delivery worker threads, shared by every partition's dispatcher. */
  readonly threads: number;
  readonly allow: readonly string[];
  readonly allowLoopback: boolean;
  readonly signingSecrets: readonly string[];
  /** A queue's own signing secrets, which sign its deliveries instead of signingSecrets. */
  readonly queueSigningSecrets?: Readonly<Record<string, readonly string[]>> | undefined;
  readonly ca: string | undefined;
}

export interface ClusterNodeMemoryOptions {
  /** The node's budget (every partition's together), read at each loader step; the machine's and cgroup's limits when absent. */
  readonly budget?: () => MemoryBudget;
  /** The loaders' limits (the far horizon, the checkpoint threshold), memoryLimits' where absent. */
  readonly limits?: Partial<MemoryLimits>;
}

export interface ClusterNodeOptions {
  /** The node's pool on the cluster database (its owner ends it after stop()). */
  readonly sql: Sql;
  readonly nodeId: string;
  /** Where this node serves (host:port), written into the lease rows of the partitions it owns. */
  readonly advertise: string;
  /** The local cache: partition p's engine runs in <dataDir>/partitions/<p>. */
  readonly dataDir: string;
  readonly logger: Logger;
  readonly clock: Clock;
  readonly leaseSettings?: LeaseSettings;
  readonly store?: ResidentStoreOptions;
  readonly checkTarget?: (target: string) => string | undefined;
  readonly admitGate?: () => FermataError | undefined;
  readonly dispatch: ClusterNodeDispatchOptions;
  readonly memory?: ClusterNodeMemoryOptions;
  /** The cluster's queue configs: each partition's engine is brought to them before it serves, and follows them (cluster-queues.ts). */
  readonly queues?: ClusterQueues;
}

/** A partition this node owns: its engine and its dispatcher (none before the workers exist, in start()'s first round). */
interface OwnedPartition {
  readonly epoch: bigint;
  readonly engine: Engine;
  readonly loader: MemoryLoader;
  readonly dispatcher: Dispatcher | undefined;
}

export class ClusterNode implements PartitionDirectory {
  readonly nodeId: string;
  readonly partitions: number;
  readonly #options: ClusterNodeOptions;
  readonly #leaseSettings: LeaseSettings;
  readonly #logger: Logger;
  readonly #owned = new Map<number, OwnedPartition>();
  /** Engines being closed (lost or handed over): the same partition opens again only after. */
  readonly #closing = new Map<number, Promise<void>>();
  /** Every owned partition's log transactions at once: the pool's connections but two, left for the node's other statements (transaction-gate.ts). */
  readonly #logGate: TransactionGate;
  readonly #listeners = new Set<() => void>();
  /** partition → its owner's advertise address, from the lease rows (refreshed every renewal interval). */
  #addresses: (string | undefined)[];
  #addressTimer: NodeJS.Timeout | undefined;
  #shared: SharedDelivery | undefined;
  /** The queues' own signing secrets the workers have (a reload replaces them): a dispatcher tells its timers' signer by them. */
  #queueSigningSecrets: Readonly<Record<string, readonly string[]>>;
  #ownership: Ownership | undefined;
  #stopped = false;

  private constructor(options: ClusterNodeOptions, partitions: number) {
    this.#options = options;
    this.#leaseSettings = options.leaseSettings ?? defaultLeaseSettings;
    this.#logger = options.logger;
    this.#logGate = new TransactionGate(Math.max(1, options.sql.options.max - 2));
    this.nodeId = options.nodeId;
    this.partitions = partitions;
    this.#addresses = new Array<string | undefined>(partitions).fill(undefined);
    this.#queueSigningSecrets = options.dispatch.queueSigningSecrets ?? {};
  }

  /**
   * Checks the schema, joins the cluster and runs the first ownership round before it resolves;
   * the partitions taken open as their logs replay (owned() grows meanwhile), and rounds go on
   * until stop().
   */
  static async start(options: ClusterNodeOptions): Promise<ClusterNode> {
    await requireCurrentSchema(options.sql);
    const [cluster] = await options.sql<{ partitions: number }[]>`SELECT partitions FROM fermata_cluster`;
    if (cluster === undefined) throw new Error('the database holds no fermata cluster: run `fermata cluster init` first');
    const node = new ClusterNode(options, cluster.partitions);
    const settings = node.#leaseSettings;
    const ownership = await Ownership.start({
      sql: options.sql,
      nodeId: options.nodeId,
      advertise: options.advertise,
      settings,
      callbacks: {
        onAcquire: (partition, epoch) => node.#open(partition, epoch),
        onLose: (partition) => node.#lose(partition),
        beforeRelease: (partition) => node.#drop(partition),
        onError: (error) => options.logger.error({ err: error }, 'cluster ownership'),
      },
    });
    node.#ownership = ownership;
    // The workers need the deadlines' memory, which the loop makes: engines opened in its first
    // round start delivering now.
    const buffers = newBufferPool(dispatchLimits);
    const { dispatch } = options;
    node.#shared = {
      workers: new DeliveryPool({ ...dispatch, limits: dispatchLimits, spareBuffers: buffers, leaseDeadlines: ownership.deadlines.shared }),
      buffers,
    };
    for (const [partition, owned] of node.#owned) {
      if (owned.dispatcher === undefined) node.#owned.set(partition, { ...owned, dispatcher: node.#startDispatcher(partition, owned.engine, node.#shared) });
    }
    await node.#refreshAddresses().catch((err: unknown) => options.logger.warn({ err }, 'reading the partitions\' owners failed'));
    node.#armAddressRefresh(settings.renewIntervalMs);
    options.queues?.follow(node, settings.renewIntervalMs);
    return node;
  }

  engineOf(partition: number): Engine | undefined {
    return this.#owned.get(partition)?.engine;
  }

  owned(): readonly number[] {
    return [...this.#owned.keys()].sort((a, b) => a - b);
  }

  ownerAddress(partition: number): string | undefined {
    if (this.#owned.has(partition)) return this.#options.advertise;
    return this.#addresses[partition];
  }

  onChange(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  /** Puts a reload's allow-list and signing secrets in force in the node's delivery workers, then in each partition's dispatcher; resolves once they all have them. */
  async reconfigureDelivery(access: DeliveryAccess): Promise<void> {
    await this.#shared?.workers.reconfigure(access);
    this.#queueSigningSecrets = access.queueSigningSecrets;
    for (const owned of this.#owned.values()) owned.dispatcher?.useSigners(access);
  }

  /** The dispatcher of a partition this node owns now (its delivery figures, for the dashboard's series), or undefined. */
  dispatcherOf(partition: number): Dispatcher | undefined {
    return this.#owned.get(partition)?.dispatcher;
  }

  /** The partitions' epochs as this node holds them (for /v1/stats). */
  epochOf(partition: number): bigint | undefined {
    return this.#owned.get(partition)?.epoch;
  }

  /** Sends the delivery workers refused past a lease deadline since the node started (cluster_sends_refused_total). */
  get sendsRefused(): number {
    return this.#ownership?.deadlines.refusedSends() ?? 0;
  }

  /** Delivery worker threads (shared by every partition). */
  get threads(): number {
    return this.#shared?.workers.threads ?? 0;
  }

  /** Leaves the cluster: every partition handed over cleanly (dispatcher stopped, engine closed, lease released), then the workers stop. */
  async stop(): Promise<void> {
    if (this.#stopped) return;
    this.#stopped = true;
    clearTimeout(this.#addressTimer);
    await this.#options.queues?.stop();
    await this.#ownership?.stop();
    await Promise.all(this.#closing.values());
    await this.#shared?.workers.destroy();
    this.#shared?.buffers.clear();
  }

  async #open(partition: number, epoch: bigint): Promise<void> {
    await this.#closing.get(partition);
    const { dataDir, logger, clock } = this.#options;
    const partitionDir = join(dataDir, 'partitions', String(partition));
    // A session holding the partition's row may sit idle for a lease at most (engine/pg-log/fence.ts).
    const fenceIdleMsMax = this.#leaseSettings.leaseTtlMs;
    const fs = await openPartitionFileSystem({ sql: this.#options.sql, partition, epoch: Number(epoch), cacheDir: partitionDir, fenceIdleMsMax });
    // Told to the poison handler, which may be called only once the engine is open.
    const opened: { engine?: Engine } = {};
    const engine = await Engine.open({
      dataDir: partitionDir,
      fs,
      clock,
      idPrefix: clusterIdOf(partition, ''),
      openLog: pgLog({ sql: this.#options.sql, partition, epoch: Number(epoch), logger: logger.child({ component: 'pg-log', partition }), gate: this.#logGate, fenceIdleMsMax }),
      logger: logger.child({ component: 'engine', partition }),
      ...(this.#options.store === undefined ? {} : { store: this.#options.store }),
      ...(this.#options.checkTarget === undefined ? {} : { checkTarget: this.#options.checkTarget }),
      ...(this.#options.admitGate === undefined ? {} : { admitGate: this.#options.admitGate }),
      onLogPoisoned: (poison) => this.#poisoned(partition, opened.engine, poison),
    });
    opened.engine = engine;
    try {
      await this.#options.queues?.reconcile(partition, engine);
    } catch (err) {
      await engine.close().catch(() => undefined);
      throw err;
    }
    const loader = this.#startLoader(partition, engine);
    const dispatcher = this.#shared === undefined ? undefined : this.#startDispatcher(partition, engine, this.#shared);
    this.#owned.set(partition, { epoch, engine, loader, dispatcher });
    logger.info({ partition, epoch: Number(epoch), lastSeq: engine.log.lastSeq, pending: engine.stats().pending }, 'partition open');
    this.#changed();
  }

  /** The partition's memory loader, started, on its equal share of the node's budget among the partitions owned at each step. */
  #startLoader(partition: number, engine: Engine): MemoryLoader {
    const memory = this.#options.memory;
    const readBudget = memory?.budget ?? (() => memoryBudget());
    const loader = new MemoryLoader(engine, {
      budget: () => {
        const node = readBudget();
        return { ...node, bytes: Math.floor(node.bytes / Math.max(1, this.#owned.size)) };
      },
      clock: this.#options.clock,
      ...(memory?.limits === undefined ? {} : { limits: memory.limits }),
      logger: this.#logger.child({ component: 'loader', partition }),
    });
    loader.start();
    return loader;
  }

  /** The partition's dispatcher over the shared workers, started; it takes no timer while the local lease deadline has passed. */
  #startDispatcher(partition: number, engine: Engine, shared: SharedDelivery): Dispatcher {
    const deadlines = this.#ownership?.deadlines;
    const dispatcher = new Dispatcher({
      engine,
      clock: this.#options.clock,
      logger: this.#logger.child({ component: 'dispatch', partition }),
      shared,
      queueSigningSecrets: this.#queueSigningSecrets,
      partition,
      leaseHeld: () => deadlines !== undefined && monotonicNs() < deadlines.deadlineNs(partition),
    });
    dispatcher.start();
    return dispatcher;
  }

  #lose(partition: number): void {
    this.#logger.warn({ partition }, 'partition lost: its lease lapsed and another node may own it');
    void this.#drop(partition);
  }

  /** Stops the partition's deliveries (the deadline is revoked already), closes its engine and forgets it. */
  #drop(partition: number): Promise<void> {
    const owned = this.#owned.get(partition);
    if (owned === undefined) return this.#closing.get(partition) ?? Promise.resolve();
    this.#owned.delete(partition);
    // The owner read last was this node: until the next read names the new one, nobody (a
    // request is PARTITION_MOVING, never forwarded back to this node).
    this.#addresses[partition] = undefined;
    this.#changed();
    const closing = (async () => {
      // A checkpoint under way finishes (or fails fenced) before the engine closes under it.
      await owned.loader.stop();
      await owned.dispatcher?.close();
      // Appends after a takeover fail fenced; the engine closes all the same.
      await owned.engine.close().catch((err: unknown) => this.#logger.warn({ err, partition }, 'closing a partition\'s engine failed'));
      this.#logger.info({ partition, epoch: Number(owned.epoch) }, 'partition closed');
    })();
    this.#closing.set(partition, closing);
    void closing.finally(() => {
      if (this.#closing.get(partition) === closing) this.#closing.delete(partition);
    });
    return closing;
  }

  /**
   * The partition's log stopped. Fenced: another node took it; the next renewal reports it lost.
   * Poisoned (a COMMIT whose answer was lost): this node still owns it, and the log is cut back
   * to its acknowledged records and opened again at the same epoch, as a restart would.
   */
  #poisoned(partition: number, engine: Engine | undefined, poison: FermataError): void {
    this.#logger.error({ partition, code: poison.code, poison: poison.message }, 'a partition\'s log stopped');
    const owned = this.#owned.get(partition);
    if (engine === undefined || owned === undefined || owned.engine !== engine || poison.code === errorCodes.logFenced) return;
    // The database that cut the COMMIT is often still failing over: the cut and the open are
    // tried again every renewal interval for as long as this node owns the partition at this
    // epoch (a lapse or a takeover ends it, and the next acquisition opens the partition).
    const retryMs = this.#leaseSettings.renewIntervalMs;
    void (async () => {
      await this.#drop(partition);
      for (let attempt = 1; !this.#stopped && !this.#owned.has(partition) && this.#ownership?.owned().get(partition) === owned.epoch; attempt++) {
        try {
          await engine.log.cutToSynced();
          await this.#open(partition, owned.epoch);
          return;
        } catch (err) {
          this.#logger.warn({ err, partition, attempt }, 'reopening a poisoned partition failed; it is tried again while this node owns it');
          await new Promise((resolve) => setTimeout(resolve, retryMs));
        }
      }
    })();
  }

  async #refreshAddresses(): Promise<void> {
    const rows = await this.#options.sql<{ partition: number; address: string | null }[]>`
      SELECT partition, CASE WHEN lease_until > now() THEN owner_address END AS address FROM fermata_partitions ORDER BY partition`;
    const next = new Array<string | undefined>(this.partitions).fill(undefined);
    for (const row of rows) if (row.partition < this.partitions) next[row.partition] = row.address ?? undefined;
    const moved = next.some((address, partition) => address !== this.#addresses[partition]);
    this.#addresses = next;
    if (moved) this.#changed();
  }

  #armAddressRefresh(everyMs: number): void {
    this.#addressTimer = setTimeout(() => {
      void this.#refreshAddresses()
        .catch((err: unknown) => this.#logger.warn({ err }, 'reading the partitions\' owners failed'))
        .finally(() => {
          if (!this.#stopped) this.#armAddressRefresh(everyMs);
        });
    }, everyMs);
  }

  #changed(): void {
    for (const listener of this.#listeners) listener();
  }
}
