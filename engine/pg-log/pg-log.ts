// The PostgreSQL log: one partition's DurableLog (engine/log.ts) in cluster mode, its records
// rows of fermata_log (docs/format/cluster-schema.md), written as the owner of one epoch. Driven
// from the main thread's event loop, like the local WAL; the pool (`sql`) is the node's.
//
// Group commit: `append` queues a record; the queue is taken as a group (up to groupBytesMax)
// after the current task, numbered, and written by one transaction on a connection of its own:
//
//   BEGIN; COPY fermata_log FROM STDIN (FORMAT binary); SELECT epoch … FOR SHARE; COMMIT
//
// (the client's sql.begin, which sends COMMIT once the callback is done, and ROLLBACK if it throws)
//
// Appends made while transactions are under way ride the next group. Up to
// transactionsInFlightMax transactions run at once (and, with the node's TransactionGate, only
// while the node's logs together run fewer than its bound: transaction-gate.ts), their
// sequences given when they start; their
// COPYs overlap, but each reads the fence only once the one ahead of it has committed, so commits
// (and acknowledgements) land in sequence order and no transaction commits past one that did not.
//
// Fencing: the SELECT … FOR SHARE of the partition's row is in every transaction. Another owner's
// takeover (UPDATE … SET epoch = epoch + 1) waits for it to end, and a transaction after the
// takeover reads the new epoch: then it rolls back, and the log stops for good (LOG_FENCED).
// The row is read after the COPY because it also tells whether the COPY went through (postgres
// answers nothing to a failed COPY's stream; the next statement of its transaction fails).
// A transaction holding the row's lock waits for nothing in the client: it sends COMMIT next,
// and the database ends a session that sits idle holding it past the lease TTL (fence.ts).
// Were it to wait there for the one ahead, an UPDATE of the row (a lease renewal) would wait for
// it, the client may have queued the one ahead behind that UPDATE on a pooled connection, and
// nothing would move again (test/integration/pg-log-renewal-deadlock.test.ts; decision 0016).
//
// Failures:
//   - anything before COMMIT was sent (the database unreachable, a connection lost, the
//     database out of room): nothing was committed. The group and those behind it reject with
//     LOG_UNAVAILABLE, the sequence goes back to the last committed record, and the next
//     appends try again: no poison.
//   - a connection lost after COMMIT was sent: whether it committed is unknown. The log stops
//     (WAL_POISONED); the owner runs cutToSynced (which deletes what this epoch wrote past the
//     last acknowledged record) and opens the log again.
//   - an error the database should never give here (a duplicate sequence, a missing table):
//     WAL_POISONED too.
import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import postgres, { type Sql, type TransactionSql } from 'postgres';
import { errorCodes, FermataError } from '../errors.ts';
import { formatTooNew, isKnownRecordType, recordSetVersion, recordTypeKnownMax } from '../format-version.ts';
import { assertPgLogLimits, pgLogLimits, type PgLogLimits } from '../limits.ts';
import type { AppendOptions, DurableLog, LogCounters, LogOpener, LogOpenRequest, LogRecord } from '../log.ts';
import { encodeCopyRows } from './copy-rows.ts';
import { fenceIdleMsDefault, readFence } from './fence.ts';
import type { TransactionGate } from './transaction-gate.ts';

export interface PgLogLogger {
  warn(details: object, message: string): void;
}

export interface PgLogOptions {
  /** The node's pool on the cluster database. Each transaction reserves one of its connections. */
  readonly sql: Sql;
  readonly partition: number;
  /** The epoch this node owns the partition at (fermata_partitions.epoch when it took it). */
  readonly epoch: number;
  readonly limits?: Partial<PgLogLimits> | undefined;
  readonly logger?: PgLogLogger | undefined;
  /** The node's bound on its logs' transactions at once, over every partition (transaction-gate.ts); none: only transactionsInFlightMax a log. */
  readonly gate?: TransactionGate | undefined;
  /** How long a transaction's session may sit idle holding the partition's row (fence.ts): the lease TTL; fenceIdleMsDefault if not given. */
  readonly fenceIdleMsMax?: number | undefined;
}

interface PendingAppend {
  readonly type: number;
  readonly parts: readonly Uint8Array[];
  readonly bodyBytes: number;
  readonly resolve: (seq: number) => void;
  readonly reject: (err: unknown) => void;
}

/** A transaction under way: its records, their first sequence, and whether it committed (for the one behind it). */
interface Transaction {
  readonly group: PendingAppend[];
  readonly baseSeq: number;
  readonly bytes: number;
  readonly ahead: Promise<boolean>;
  readonly committed: PromiseWithResolvers<boolean>;
}

/** The database's answer that the epoch moved on: not an error of the database, a decision. */
class Fenced extends Error {}

/** Rows already at the sequences a transaction was to write: the log is not what this owner believes. */
class SequencesTaken extends Error {}

/**
 * SQLSTATE classes of conditions that pass (the transaction rolled back, nothing committed):
 * 08 connection exception, 40 transaction rollback, 53 insufficient resources, 57 operator
 * intervention (shutdown, recovery), 25P02 (the COPY before failed).
 */
function transientSqlState(code: string): boolean {
  return code === copyFailedState || ['08', '40', '53', '57'].includes(code.slice(0, 2));
}

/** What the statement after a failed COPY meets: "current transaction is aborted". */
const copyFailedState = '25P02';

function serverError(err: unknown): err is postgres.PostgresError {
  return err instanceof postgres.PostgresError;
}

function reasonOf(err: unknown): string {
  if (serverError(err)) return `${err.code} ${err.message}`;
  if (err instanceof Error) return 'code' in err && typeof err.code === 'string' ? `${err.code} ${err.message}` : err.message;
  return String(err);
}

function unavailable(err: unknown): FermataError {
  return new FermataError(errorCodes.logUnavailable, `the cluster database is unavailable (${reasonOf(err)}): nothing was appended`, {}, err);
}

export class PgLog implements DurableLog {
  readonly #sql: Sql;
  readonly #partition: number;
  readonly #epoch: number;
  readonly #limits: PgLogLimits;
  readonly #logger: PgLogLogger | undefined;
  readonly #onPoisoned: ((poison: FermataError) => void) | undefined;
  readonly #counters: { appends: number; syncs: number; bytesWritten: number; slowSyncs: number; lastSyncAtMs?: number } = { appends: 0, syncs: 0, bytesWritten: 0, slowSyncs: 0 };
  #queue: PendingAppend[] = [];
  #queuedBytes = 0;
  #inFlight: Transaction[] = [];
  /** A transaction failed without committing: no new one starts until those under way end, then the sequence goes back to #lastSeq + 1. */
  #rewinding = false;
  #pumpScheduled = false;
  #nextSeq: number;
  #lastSeq: number;
  #firstSeq: number;
  #bytesToReplay: number;
  #poison: FermataError | undefined;
  #closed = false;
  #idle: (() => void)[] = [];
  readonly #gate: TransactionGate | undefined;
  readonly #fenceIdleMs: number;
  /** What the gate calls when a slot comes back: this log may start what it queued. */
  readonly #wake = (): void => this.#pump();

  constructor(options: PgLogOptions, state: { lastSeq: number; firstSeq: number; bytes: number }, onPoisoned: ((poison: FermataError) => void) | undefined) {
    this.#sql = options.sql;
    this.#partition = options.partition;
    this.#epoch = options.epoch;
    this.#limits = { ...pgLogLimits, ...options.limits };
    assertPgLogLimits(this.#limits);
    this.#logger = options.logger;
    this.#gate = options.gate;
    this.#fenceIdleMs = options.fenceIdleMsMax ?? fenceIdleMsDefault;
    this.#onPoisoned = onPoisoned;
    this.#lastSeq = state.lastSeq;
    this.#nextSeq = state.lastSeq + 1;
    this.#firstSeq = state.firstSeq;
    this.#bytesToReplay = state.bytes;
  }

  get lastSeq(): number {
    return this.#lastSeq;
  }

  get firstSeq(): number {
    return this.#firstSeq;
  }

  get poisoned(): FermataError | undefined {
    return this.#poison;
  }

  get counters(): LogCounters {
    return this.#counters;
  }

  get bytesToReplay(): number {
    return this.#bytesToReplay;
  }

  append(type: number, body: Uint8Array | readonly Uint8Array[], options: AppendOptions = {}): Promise<number> {
    const parts = body instanceof Uint8Array ? [body] : body;
    let bodyBytes = 0;
    for (const part of parts) bodyBytes += part.length;
    assert.ok(Number.isInteger(type) && type >= 1 && type <= 255, `record type ${type} out of range`);
    if (this.#poison !== undefined) return Promise.reject(this.#poison);
    if (this.#closed) return Promise.reject(new FermataError(errorCodes.walClosed, 'the log is closed'));
    if (bodyBytes > this.#limits.recordBodyBytesMax) {
      return Promise.reject(
        new FermataError(errorCodes.walRecordTooLarge, `record of ${bodyBytes} bytes exceeds recordBodyBytesMax (${this.#limits.recordBodyBytesMax})`, { bytes: bodyBytes }),
      );
    }
    if (options.pastQueueLimit !== true && this.#queuedBytes + bodyBytes > this.#limits.queueBytesMax) {
      return Promise.reject(new FermataError(errorCodes.walQueueFull, `log queue full (${this.#queuedBytes} bytes waiting)`, { queuedBytes: this.#queuedBytes }));
    }
    const { promise, resolve, reject } = Promise.withResolvers<number>();
    this.#queue.push({ type, parts, bodyBytes, resolve, reject });
    this.#queuedBytes += bodyBytes;
    this.#counters.appends++;
    if (options.startNow === true && this.#inFlight.length === 0) this.#pump();
    else this.#schedulePump();
    return promise;
  }

  /** Durable records with sequence ≥ fromSeq, in order, read with a cursor (readRowsPerFetch rows a round trip). */
  async *records(fromSeq = 1): AsyncGenerator<LogRecord> {
    yield* readRecords(this.#sql, this.#partition, Math.max(fromSeq, this.#firstSeq), this.#lastSeq, this.#limits.readRowsPerFetch);
  }

  /**
   * Raises log_start_seq past what the checkpoint covers (conditional on this epoch: a deposed
   * owner changes nothing), then deletes the rows below it. Returns the rows deleted.
   */
  async truncateCovered(coveredSeq: number): Promise<number> {
    const through = Math.min(coveredSeq, this.#lastSeq);
    if (through < this.#firstSeq) return 0;
    const raised = await this.#sql<{ start: string }[]>`
      UPDATE fermata_partitions SET log_start_seq = greatest(log_start_seq, ${through + 1})
      WHERE partition = ${this.#partition} AND epoch = ${this.#epoch} RETURNING log_start_seq AS start`;
    if (raised.length === 0) {
      this.#poisonWith(this.#fenced(), []);
      return 0;
    }
    this.#firstSeq = Math.max(this.#firstSeq, through + 1);
    const [deleted] = await this.#sql<{ rows: number; bytes: string }[]>`
      WITH gone AS (DELETE FROM fermata_log WHERE partition = ${this.#partition} AND seq <= ${through} RETURNING octet_length(body) AS bytes)
      SELECT count(*)::int AS rows, coalesce(sum(bytes), 0)::bigint AS bytes FROM gone`;
    this.#bytesToReplay -= Number(deleted?.bytes ?? 0);
    return deleted?.rows ?? 0;
  }

  /**
   * After the log stopped: once every transaction under way has ended, deletes the rows this
   * epoch wrote past the last acknowledged record (a commit whose answer was lost may have
   * landed). Done only while the partition is still at this epoch: after a takeover the new
   * owner has the log as it found it, and nothing of it is touched. Rejects while the
   * database cannot be reached.
   */
  async cutToSynced(): Promise<void> {
    assert.ok(this.#poison !== undefined, 'only a stopped log is cut back');
    await this.#whenIdle();
    await this.#sql.begin(async (tx) => {
      if ((await readFence(tx, this.#partition, this.#fenceIdleMs)) !== this.#epoch) return;
      await tx`DELETE FROM fermata_log WHERE partition = ${this.#partition} AND seq > ${this.#lastSeq} AND epoch = ${this.#epoch}`;
    });
  }

  describe(): Readonly<Record<string, string | number>> {
    return { log: 'postgresql', partition: this.#partition, epoch: this.#epoch, firstSeq: this.#firstSeq, lastSeq: this.#lastSeq };
  }

  /** Waits for the appends made so far to commit or fail, refuses later ones. The pool stays the node's. */
  async close(): Promise<void> {
    this.#closed = true;
    await this.#whenIdle();
  }

  #whenIdle(): Promise<void> {
    if (this.#queue.length === 0 && this.#inFlight.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  #schedulePump(): void {
    if (this.#pumpScheduled) return;
    this.#pumpScheduled = true;
    queueMicrotask(() => {
      this.#pumpScheduled = false;
      this.#pump();
    });
  }

  /** Starts transactions for what is queued while fewer than transactionsInFlightMax are under way. */
  #pump(): void {
    // After a failure, once every transaction under way has ended (committed or not), the next
    // sequence is the one after the last committed record.
    if (this.#rewinding && this.#inFlight.length === 0) {
      this.#rewinding = false;
      this.#nextSeq = this.#lastSeq + 1;
    }
    // The gate is asked last: a slot is taken only by a transaction that starts now.
    while (this.#queue.length > 0 && this.#inFlight.length < this.#limits.transactionsInFlightMax && this.#poison === undefined && !this.#rewinding && (this.#gate?.tryTake(this.#wake) ?? true)) {
      let count = 0;
      let bytes = 0;
      for (const pending of this.#queue) {
        if (count > 0 && bytes + pending.bodyBytes > this.#limits.groupBytesMax) break;
        bytes += pending.bodyBytes;
        count++;
      }
      const group = count === this.#queue.length ? this.#queue : this.#queue.slice(0, count);
      this.#queue = count === this.#queue.length ? [] : this.#queue.slice(count);
      this.#queuedBytes -= bytes;
      const ahead = this.#inFlight.at(-1)?.committed.promise ?? Promise.resolve(true);
      const transaction: Transaction = { group, baseSeq: this.#nextSeq, bytes, ahead, committed: Promise.withResolvers<boolean>() };
      this.#nextSeq += group.length;
      this.#inFlight.push(transaction);
      void this.#run(transaction);
    }
    if (this.#queue.length === 0 && this.#inFlight.length === 0) this.#wakeIdle();
  }

  #wakeIdle(): void {
    const waiting = this.#idle;
    this.#idle = [];
    for (const wake of waiting) wake();
  }

  async #run(transaction: Transaction): Promise<void> {
    const startedMs = performance.now();
    // Set when the transaction's work is done and the client sends COMMIT: from then on a lost
    // connection leaves the outcome unknown.
    let commitSent = false;
    try {
      await this.#sql.begin(async (tx) => {
        await this.#write(tx, transaction);
        if (!(await transaction.ahead)) throw new Error('a transaction ahead did not commit');
        const epoch = await readFence(tx, this.#partition, this.#fenceIdleMs);
        if (epoch !== this.#epoch) throw new Fenced(epoch === undefined ? 'no such partition' : `epoch ${epoch}`);
        commitSent = true;
      });
    } catch (err) {
      const failure = !commitSent && serverError(err) && err.code === copyFailedState ? await this.#whyCopyFailed(transaction, err) : err;
      this.#failed(transaction, failure, commitSent);
      return;
    }
    this.#committed(transaction, performance.now() - startedMs);
  }

  /**
   * A COPY refused: by a deposed owner's rows colliding with the new owner's (the fence comes
   * after the COPY), by rows already at these sequences (a bug, or a lost answer not cut), or by
   * a passing condition of the database. Read after the rollback, outside the transaction.
   */
  async #whyCopyFailed(transaction: Transaction, err: unknown): Promise<unknown> {
    try {
      const [row] = await this.#sql<{ epoch: string }[]>`SELECT epoch FROM fermata_partitions WHERE partition = ${this.#partition}`;
      if (row === undefined || Number(row.epoch) !== this.#epoch) return new Fenced(row === undefined ? 'no such partition' : `epoch ${row.epoch}`);
      const lastSeq = transaction.baseSeq + transaction.group.length - 1;
      const [taken] = await this.#sql<{ n: number }[]>`
        SELECT count(*)::int AS n FROM fermata_log WHERE partition = ${this.#partition} AND seq BETWEEN ${transaction.baseSeq} AND ${lastSeq}`;
      if ((taken?.n ?? 0) > 0) return new SequencesTaken(`the log already holds records among sequences ${transaction.baseSeq}..${lastSeq}`);
    } catch {
      // The database cannot be asked: the COPY's own failure stands.
    }
    return err;
  }

  /** The group's COPY; the statement after it tells whether it went through (the server answers a refused COPY's stream with nothing). */
  async #write(tx: TransactionSql, transaction: Transaction): Promise<void> {
    const copy = await tx`COPY fermata_log (partition, seq, type, epoch, body) FROM STDIN WITH (FORMAT binary)`.writable();
    // A stream error is the connection's, and the next statement meets it.
    copy.on('error', () => undefined);
    const chunks = encodeCopyRows(this.#partition, this.#epoch, transaction.baseSeq, transaction.group);
    for (let i = 0; i < chunks.length - 1; i++) copy.write(chunks[i]);
    await new Promise<void>((resolve, reject) => copy.write(chunks.at(-1), (err) => (err === undefined || err === null ? resolve() : reject(err))));
    // The client takes no statement until the stream's end is handed to it (its final step, a
    // tick after end() once nothing is left to write); its finish waits for the server's
    // answer, which never comes for a COPY the server refused.
    copy.end();
    await new Promise((resolve) => setImmediate(resolve));
  }

  #committed(transaction: Transaction, elapsedMs: number): void {
    assert.equal(this.#inFlight[0], transaction, 'transactions commit in the order they started');
    this.#inFlight.shift();
    const { group, baseSeq, bytes } = transaction;
    this.#lastSeq = baseSeq + group.length - 1;
    this.#bytesToReplay += bytes;
    this.#counters.syncs++;
    this.#counters.lastSyncAtMs = Date.now();
    this.#counters.bytesWritten += bytes;
    if (elapsedMs > this.#limits.slowCommitMs) {
      this.#counters.slowSyncs++;
      this.#logger?.warn({ elapsedMs, bytes, records: group.length, partition: this.#partition }, 'slow PostgreSQL log commit');
    }
    for (let i = 0; i < group.length; i++) (group[i] as PendingAppend).resolve(baseSeq + i);
    transaction.committed.resolve(true);
    this.#gate?.release();
    this.#pump();
  }

  #failed(transaction: Transaction, err: unknown, commitSent: boolean): void {
    this.#inFlight.splice(this.#inFlight.indexOf(transaction), 1);
    const failure = this.#poison ?? this.#classify(err, commitSent);
    if (failure.code === errorCodes.logUnavailable) {
      this.#rewinding = true;
      for (const pending of transaction.group) pending.reject(failure);
    } else if (this.#poison === undefined) {
      this.#poisonWith(failure, transaction.group);
    } else {
      for (const pending of transaction.group) pending.reject(failure);
    }
    transaction.committed.resolve(false);
    this.#gate?.release();
    this.#pump();
  }

  #classify(err: unknown, commitSent: boolean): FermataError {
    if (err instanceof Fenced) return this.#fenced();
    if (err instanceof SequencesTaken) return this.#poisonError(err.message, err);
    if (serverError(err)) {
      if (commitSent || transientSqlState(err.code)) return unavailable(err);
      return this.#poisonError(`the database refused the log's write (${reasonOf(err)})`, err);
    }
    if (commitSent) return this.#poisonError(`the connection was lost with a COMMIT under way, which may or may not have landed (${reasonOf(err)})`, err);
    return unavailable(err);
  }

  #fenced(): FermataError {
    return new FermataError(errorCodes.logFenced, `partition ${this.#partition} was taken over: its epoch is no longer ${this.#epoch}`, { partition: this.#partition, epoch: this.#epoch });
  }

  #poisonError(reason: string, cause: unknown): FermataError {
    return new FermataError(errorCodes.walPoisoned, `PostgreSQL log of partition ${this.#partition} poisoned: ${reason}; no more appends until it is opened again`, { partition: this.#partition }, cause);
  }

  #poisonWith(poison: FermataError, group: readonly PendingAppend[]): void {
    this.#poison = poison;
    this.#logger?.warn({ err: poison.cause ?? poison, partition: this.#partition }, poison.message);
    for (const pending of group) pending.reject(poison);
    for (const pending of this.#queue) pending.reject(poison);
    this.#queue = [];
    this.#queuedBytes = 0;
    try {
      this.#onPoisoned?.(poison);
    } catch (err) {
      this.#logger?.warn({ err }, 'onPoisoned threw');
    }
  }
}

/** Rows seq fromSeq … toSeq of a partition's log, in order, checked gapless. */
async function* readRecords(sql: Sql, partition: number, fromSeq: number, toSeq: number, rowsPerFetch: number): AsyncGenerator<LogRecord> {
  if (fromSeq > toSeq) return;
  let expected = fromSeq;
  const cursor = sql<{ seq: string; type: number; body: Buffer }[]>`
    SELECT seq, type, body FROM fermata_log WHERE partition = ${partition} AND seq >= ${fromSeq} AND seq <= ${toSeq} ORDER BY seq`.cursor(rowsPerFetch);
  for await (const rows of cursor) {
    for (const row of rows) {
      const seq = Number(row.seq);
      if (seq !== expected) throw gap(partition, expected, seq);
      expected++;
      // A plain Uint8Array over the client's Buffer: the engine's readers rely on Uint8Array's
      // slice() (a copy), which a Buffer's slice() is not.
      yield { seq, type: row.type, body: new Uint8Array(row.body.buffer, row.body.byteOffset, row.body.byteLength) };
    }
  }
  if (expected !== toSeq + 1) throw gap(partition, expected, undefined);
}

function gap(partition: number, expected: number, found: number | undefined): FermataError {
  return new FermataError(
    errorCodes.walCorrupt,
    `the PostgreSQL log of partition ${partition} has no record ${expected}${found === undefined ? ' (it ends early)' : ` (the next is ${found})`}; refusing to start`,
    { partition, seq: expected },
  );
}

/** An opener of partition `options.partition`'s log, as the owner at `options.epoch`. */
export function pgLog(options: PgLogOptions): LogOpener {
  return (request) => openPgLog(options, request);
}

/**
 * Checks the partition is at this epoch (LOG_FENCED otherwise) and that the log holds every
 * record past the checkpoint (WAL_CORRUPT otherwise), replays them in order (a record type a
 * newer build wrote: FORMAT_TOO_NEW), and returns the log.
 */
export async function openPgLog(options: PgLogOptions, { coveredSeq, replay, onPoisoned }: LogOpenRequest): Promise<PgLog> {
  const { sql, partition, epoch } = options;
  const [row] = await sql<{ epoch: string; start: string }[]>`SELECT epoch, log_start_seq AS start FROM fermata_partitions WHERE partition = ${partition}`;
  if (row === undefined) throw new FermataError(errorCodes.walCorrupt, `the cluster has no partition ${partition}`, { partition });
  if (Number(row.epoch) !== epoch) {
    throw new FermataError(errorCodes.logFenced, `partition ${partition} is at epoch ${row.epoch}, not this owner's ${epoch}`, { partition, epoch });
  }
  const firstSeq = Number(row.start);
  if (firstSeq > coveredSeq + 1) {
    throw new FermataError(
      errorCodes.walCorrupt,
      `the PostgreSQL log of partition ${partition} starts at record ${firstSeq}, but the checkpoint covers only up to ${coveredSeq}; refusing to start`,
      { partition, seq: coveredSeq + 1 },
    );
  }
  const [size] = await sql<{ last: string | null; bytes: string; replay: string }[]>`
    SELECT max(seq) AS last, coalesce(sum(octet_length(body)), 0) AS bytes,
           coalesce(sum(octet_length(body)) FILTER (WHERE seq > ${coveredSeq}), 0) AS replay
    FROM fermata_log WHERE partition = ${partition} AND seq >= ${firstSeq}`;
  const lastSeq = Math.max(Number(size?.last ?? 0), firstSeq - 1);
  replay.expectBytes(Number(size?.replay ?? 0));
  const limits = { ...pgLogLimits, ...options.limits };
  for await (const record of readRecords(sql, partition, coveredSeq + 1, lastSeq, limits.readRowsPerFetch)) {
    // A record a newer build wrote is refused as the local WAL refuses one, not replayed as corrupt.
    if (!isKnownRecordType(record.type)) {
      throw formatTooNew(`the PostgreSQL log of partition ${partition}`, `record type (sequence ${record.seq})`, record.type, `record types 1–${recordTypeKnownMax}, record-type set ${recordSetVersion}`, { partition, seq: record.seq });
    }
    await replay.record(record.seq, record.type, record.body, record.body.length);
  }
  return new PgLog(options, { lastSeq, firstSeq, bytes: Number(size?.bytes ?? 0) }, onPoisoned);
}
