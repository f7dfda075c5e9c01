// The cluster's queue configs and pauses: their truth is the fermata_queues table (migration 3,
// docs/format/cluster-schema.md), and each partition's engine is brought to it with its own
// QUEUE records, so its dispatch, retries and caps follow it as on one node.
//
//   a change (PUT, DELETE, pause, resume through any node's HTTP routes)
//       → validated as on one node → committed to the table (revision + 1) → applyHere()
//   every node, every `everyMs` (follow())  → the table's highest revision; each owned engine
//       that has not been reconciled at that revision is reconciled
//   a partition opening on this node (the node runner, before its dispatcher starts)
//       → reconcile(partition, engine)
//
// Reconciling an engine: for each row, a live queue gets its config (with the partition's share
// of rate_per_s and max_concurrent, shareOf) and its pause, each logged only where the engine
// differs; a deleted one is deleted in the engine (or, while timers still wait in it there, put
// back to the defaults and resumed). Queues no row names are left as their engine holds them.
//
// Sharing the flow limits: every partition's dispatcher keeps its own token bucket and in-flight
// count (dispatch/flow-control.ts), so partition p enforces shareOf(limit, P, p): the limit
// divided among the P partitions, the remainder one each to the lowest partitions, at least 1.
// The cluster as a whole delivers at most max(limit, P) a second (and in flight): exactly the
// limit once it is P or more; it reaches it when the queue's due timers are spread over all the
// partitions (keyed timers are, by their keys' hash), and a queue whose timers sit in k
// partitions gets about k/P of it. docs/cluster.md, "Queues", says the same for operators.
//
// Reconciliations run one at a time (a chain), each reading the table afresh, so two changes
// applied out of order still leave an engine at the newest. Main thread.
import type { Logger } from 'pino';
import type { Sql } from 'postgres';
import { defaultQueue } from '../engine/batch/timer-batch.ts';
import { validateQueueName } from '../engine/batch/validate.ts';
import type { Engine } from '../engine/engine.ts';
import { errorCodes, FermataError } from '../engine/errors.ts';
import { defaultQueueConfig, parseQueueConfig, type QueueConfig, storedConfig } from '../engine/queues.ts';

/** A queue as the table holds it. */
export interface QueueRow {
  readonly name: string;
  /** Its config as last PUT; null: never PUT (the defaults). */
  readonly config: QueueConfig | null;
  readonly paused: boolean;
  /** A tombstone: DELETE'd, kept so that every node applies the delete. */
  readonly deleted: boolean;
  readonly revision: bigint;
}

/** The partitions this node owns now and their engines (the node runner). */
export interface LocalPartitions {
  owned(): readonly number[];
  engineOf(partition: number): Engine | undefined;
}

export interface ClusterQueuesOptions {
  readonly sql: Sql;
  /** P, the cluster's partition count. */
  readonly partitions: number;
  readonly logger: Logger;
  /** Refuses a sink the node would refuse as a target (as a single node's engine does). */
  readonly checkTarget?: ((target: string) => string | undefined) | undefined;
}

/** A partition's share of a queue's limit (rate_per_s or max_concurrent) among P partitions. */
export function shareOf(limit: number, partitions: number, partition: number): number {
  return Math.max(1, Math.floor(limit / partitions) + (partition < limit % partitions ? 1 : 0));
}

/** The config partition p's engine enforces for the cluster's `config`. */
export function partitionConfig(config: QueueConfig, partitions: number, partition: number): QueueConfig {
  return {
    ...config,
    rate_per_s: config.rate_per_s === null ? null : shareOf(config.rate_per_s, partitions, partition),
    max_concurrent: config.max_concurrent === null ? null : shareOf(config.max_concurrent, partitions, partition),
  };
}

const highestRevision = (rows: readonly QueueRow[]): bigint => rows.reduce((top, row) => (row.revision > top ? row.revision : top), 0n);

const sameConfig = (a: QueueConfig, b: QueueConfig): boolean => JSON.stringify(storedConfig(a)) === JSON.stringify(storedConfig(b));

interface RowRecord {
  name: string;
  config: Record<string, unknown> | null;
  paused: boolean;
  deleted: boolean;
  revision: string;
}

function rowOf(record: RowRecord): QueueRow {
  return {
    name: record.name,
    config: record.config === null ? null : parseQueueConfig(record.config),
    paused: record.paused,
    deleted: record.deleted,
    revision: BigInt(record.revision),
  };
}

export class ClusterQueues {
  readonly partitions: number;
  readonly #sql: Sql;
  readonly #logger: Logger;
  readonly #checkTarget: ((target: string) => string | undefined) | undefined;
  /** The revision each engine was last brought to (an engine not in it: never). */
  readonly #appliedAt = new WeakMap<Engine, bigint>();
  #chain: Promise<unknown> = Promise.resolve();
  #local: LocalPartitions | undefined;
  #timer: NodeJS.Timeout | undefined;
  #stopped = false;

  constructor(options: ClusterQueuesOptions) {
    this.partitions = options.partitions;
    this.#sql = options.sql;
    this.#logger = options.logger;
    this.#checkTarget = options.checkTarget;
  }

  /** Every row, tombstones included, by name. */
  async rows(): Promise<QueueRow[]> {
    const records = await this.#sql<RowRecord[]>`SELECT name, config, paused, deleted, revision::text AS revision FROM fermata_queues ORDER BY name`;
    return records.map(rowOf);
  }

  /** Validates a config as one node does (QUEUE_INVALID, TARGET_REFUSED naming the field) and commits it; the pause stays as it was. */
  async put(name: string, input: unknown): Promise<QueueRow> {
    validateQueueName(name);
    const config = parseQueueConfig(input);
    const refusal = config.sink === null ? undefined : this.#checkTarget?.(config.sink);
    if (refusal !== undefined) throw new FermataError(errorCodes.targetRefused, `sink: ${refusal}`, { field: 'sink' });
    const stored = storedConfig(config) as Record<string, never>;
    const [record] = await this.#sql<RowRecord[]>`
      INSERT INTO fermata_queues (name, config) VALUES (${name}, ${this.#sql.json(stored)})
      ON CONFLICT (name) DO UPDATE SET config = EXCLUDED.config, deleted = false, revision = nextval('fermata_queue_revision'), updated_at = now()
      RETURNING name, config, paused, deleted, revision::text AS revision`;
    return rowOf(record as RowRecord);
  }

  /** Commits a pause (true) or resume (false) of a queue the caller found known; a tombstone comes back to life with the defaults. */
  async setPaused(name: string, paused: boolean): Promise<QueueRow> {
    const [record] = await this.#sql<RowRecord[]>`
      INSERT INTO fermata_queues (name, paused) VALUES (${name}, ${paused})
      ON CONFLICT (name) DO UPDATE SET paused = EXCLUDED.paused, deleted = false, revision = nextval('fermata_queue_revision'), updated_at = now()
      RETURNING name, config, paused, deleted, revision::text AS revision`;
    return rowOf(record as RowRecord);
  }

  /** Commits a queue's delete (a tombstone); the default queue is QUEUE_PROTECTED. */
  async delete(name: string): Promise<void> {
    if (name === defaultQueue) throw new FermataError(errorCodes.queueProtected, `the ${defaultQueue} queue cannot be deleted (PUT sets its config)`, { queue: name });
    await this.#sql`
      INSERT INTO fermata_queues (name, deleted) VALUES (${name}, true)
      ON CONFLICT (name) DO UPDATE SET config = NULL, paused = false, deleted = true, revision = nextval('fermata_queue_revision'), updated_at = now()`;
  }

  /** Brings a partition's engine to the table (a partition opening here, before it serves). */
  reconcile(partition: number, engine: Engine): Promise<void> {
    return this.#serially(async () => {
      const rows = await this.rows();
      await this.#bring(partition, engine, rows);
    });
  }

  /**
   * Brings every engine this node owns to the table now (after a change committed here); a
   * failure is logged and left to the next poll, which tries that engine again.
   */
  applyHere(): Promise<void> {
    return this.#serially(() => this.#applyAll()).catch((err: unknown) => this.#logger.warn({ err }, 'applying the cluster\'s queue configs to this node\'s partitions failed; the next poll tries again'));
  }

  /** Follows the table: every `everyMs`, the engines of `local` not yet at its highest revision are brought to it. */
  follow(local: LocalPartitions, everyMs: number): void {
    this.#local = local;
    const poll = (): void => {
      this.#timer = setTimeout(() => {
        void this.#serially(async () => {
          const [top] = await this.#sql<{ revision: string }[]>`SELECT coalesce(max(revision), 0)::text AS revision FROM fermata_queues`;
          const revision = BigInt(top?.revision ?? '0');
          if (this.#lagging(revision).length > 0) await this.#applyAll();
        })
          .catch((err: unknown) => this.#logger.warn({ err }, 'following the cluster\'s queue configs failed; the next poll tries again'))
          .finally(() => {
            if (!this.#stopped) poll();
          });
      }, everyMs);
    };
    poll();
  }

  /** Stops following (the node stops). */
  async stop(): Promise<void> {
    this.#stopped = true;
    clearTimeout(this.#timer);
    await this.#chain.catch(() => undefined);
  }

  /** Owned partitions whose engine is not at `revision`. */
  #lagging(revision: bigint): number[] {
    const local = this.#local;
    if (local === undefined) return [];
    return local.owned().filter((partition) => {
      const engine = local.engineOf(partition);
      return engine !== undefined && this.#appliedAt.get(engine) !== revision;
    });
  }

  /** Brings every lagging engine to the table; one that fails (its log down, its partition being lost) is logged and left to the next poll. */
  async #applyAll(): Promise<void> {
    const rows = await this.rows();
    for (const partition of this.#lagging(highestRevision(rows))) {
      const engine = this.#local?.engineOf(partition);
      if (engine === undefined) continue;
      try {
        await this.#bring(partition, engine, rows);
      } catch (err) {
        this.#logger.warn({ err, partition }, 'bringing a partition to the cluster\'s queue configs failed; the next poll tries again');
      }
    }
  }

  async #bring(partition: number, engine: Engine, rows: readonly QueueRow[]): Promise<void> {
    for (const row of rows) {
      try {
        if (row.deleted) await this.#bringDeleted(engine, row.name);
        else await this.#bringLive(engine, row, partitionConfig(row.config ?? defaultQueueConfig, this.partitions, partition));
      } catch (err) {
        // A config this node's engine refuses (a sink outside this node's allow-list) leaves that
        // queue as the partition had it; it must not keep the partition from opening here.
        if (!(err instanceof FermataError && (err.code === errorCodes.targetRefused || err.code === errorCodes.queueInvalid))) throw err;
        this.#logger.error({ err, partition, queue: row.name }, 'this node refuses a queue config of the cluster\'s; the partition keeps the one it had');
      }
    }
    this.#appliedAt.set(engine, highestRevision(rows));
  }

  async #bringLive(engine: Engine, row: QueueRow, config: QueueConfig): Promise<void> {
    const view = engine.findQueueView(row.name);
    if (view === undefined || !sameConfig(view.config, config)) await engine.setQueue(row.name, storedConfig(config));
    if ((engine.findQueueView(row.name)?.paused ?? false) !== row.paused) await engine.setQueuePaused(row.name, row.paused);
  }

  async #bringDeleted(engine: Engine, name: string): Promise<void> {
    if (engine.findQueueView(name) === undefined) return;
    try {
      await engine.deleteQueue(name);
    } catch (err) {
      if (!(err instanceof FermataError && err.code === errorCodes.queueNotEmpty)) throw err;
      // Timers were added to it here after the cluster's count: they go out under the defaults.
      const view = engine.findQueueView(name);
      if (view !== undefined && !sameConfig(view.config, defaultQueueConfig)) await engine.setQueue(name, {});
      if (engine.findQueueView(name)?.paused === true) await engine.setQueuePaused(name, false);
    }
  }

  #serially<T>(work: () => Promise<T>): Promise<T> {
    const next = this.#chain.then(work);
    this.#chain = next.catch(() => undefined);
    return next;
  }
}
