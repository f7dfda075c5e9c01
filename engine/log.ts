// DurableLog: the only thing the engine, ingest and dispatch know of the log. The engine owns
// one, on the main thread: every change to timer state is a record appended here first, and
// the state in memory is what replaying the records in order gives.
//
// Two implementations are meant: the local segmented WAL (engine/wal/, opened by localLog),
// and a PostgreSQL log for cluster mode, where a node runs one engine per partition it owns,
// each over its own DurableLog. Nothing in this interface may assume a local file.
//
// The contract:
// - Order. One gapless sequence per log: 1, 2, 3, … An append's promise resolves with its
//   record's sequence; several appends may be in flight at once, and they resolve in the order
//   they were made, each with a sequence above every one resolved before it.
// - Durability. An append resolves only once its record survives a crash (a power loss, a
//   failover); an append that rejects may or may not be in the log (a write that failed
//   halfway), and the engine treats it as not done: a restart replays what the log holds.
//   `lastSeq` is the newest durable record; records beyond it are never seen by `records`.
// - Stopping. After a failed write or sync (WAL_POISONED), or once another owner has taken the
//   log over (LOG_FENCED: a PostgreSQL log whose partition moved to another node), the log
//   refuses every later append with that error for good, says so in `poisoned`, and calls the
//   opener's onPoisoned once. The engine over it stops acknowledging; its owner recovers by
//   opening the log again (which, fenced, fails until the partition is owned again).
// - Truncation. A durable checkpoint holds the effect of every record up to its covered
//   sequence: the engine then calls truncateCovered(coveredSeq) and the log may drop those
//   records. Records after it are kept. A later open may still show covered records (the
//   engine skips them) and never starts after coveredSeq + 1.
// - Open. An opener (LogOpener) opens or creates the log and shows every durable record after
//   the checkpoint's covered sequence to the engine's replay, in order, before it resolves.

import type { FermataError } from './errors.ts';

export interface LogRecord {
  /** Position in the log: 1, 2, 3, … with no gaps. */
  readonly seq: number;
  /** Record type, 1..255, defined by the engine; the log treats it as opaque. */
  readonly type: number;
  /** The bytes as appended (a view into the log's read buffer; copy to keep beyond the iteration). */
  readonly body: Uint8Array;
}

export interface AppendOptions {
  /**
   * Not refused when the queue of appends is full: records that settle work already accepted
   * (delivery outcomes, cancels) must not be turned away by back-pressure meant for new work.
   * They are small and bounded by the work in flight.
   */
  readonly pastQueueLimit?: boolean;
  /**
   * When the log is idle, this record's group is written at once, not after the current task
   * (appends made in the rest of the task ride the next group): for a record that is a full
   * batch on its own, whose write can be under way while the task gathers the next.
   */
  readonly startNow?: boolean;
}

/** Running totals since the log was opened, for /v1/stats and /metrics. */
export interface LogCounters {
  readonly appends: number;
  /** Durable writes (group commits): one covers every record that rode it. */
  readonly syncs: number;
  readonly bytesWritten: number;
  /** Durable writes slower than the log's slow threshold. */
  readonly slowSyncs: number;
  /** When the last durable write ended (wall-clock epoch ms); absent before the first. */
  readonly lastSyncAtMs?: number;
}

export interface DurableLog {
  /**
   * Resolves with the record's sequence once it is durable; rejects with a coded error
   * otherwise (WAL_POISONED, LOG_FENCED, WAL_CLOSED, WAL_QUEUE_FULL, WAL_RECORD_TOO_LARGE). A
   * body given as parts is stored as their concatenation; the parts must not change until the
   * promise settles.
   */
  append(type: number, body: Uint8Array | readonly Uint8Array[], options?: AppendOptions): Promise<number>;
  /** Durable records with sequence ≥ fromSeq (and ≥ firstSeq), in order. */
  records(fromSeq?: number): AsyncIterable<LogRecord>;
  /** The newest durable record's sequence (0: the log has never held one). */
  readonly lastSeq: number;
  /** The oldest record the log still holds (lastSeq + 1 when truncation dropped every one). */
  readonly firstSeq: number;
  /** Why the log stopped taking appends for good (WAL_POISONED or LOG_FENCED), or undefined. */
  readonly poisoned: FermataError | undefined;
  readonly counters: LogCounters;
  /** Bytes a reopen would replay now (records not yet truncated): what a checkpoint would save. */
  readonly bytesToReplay: number;
  /**
   * Drops what a durable checkpoint covering `coveredSeq` holds (see the contract above);
   * returns how many units of the log went (the local WAL's segments), 0 when none could.
   */
  truncateCovered(coveredSeq: number): Promise<number>;
  /**
   * After the log stopped: drops what was written but never acknowledged, so that the next
   * open shows only acknowledged records and appends after none whose write failed. Rejects
   * while the storage still fails (the owner tries again before it opens the log anew).
   */
  cutToSynced(): Promise<void>;
  /** Where the log is and its shape, for the start-up log line (the directory and segments). */
  describe(): Readonly<Record<string, string | number>>;
  /** Waits for the appends made so far, refuses later ones (WAL_CLOSED), lets the log go. */
  close(): Promise<void>;
}

/** How an opener hands the engine the records it must replay. */
export interface LogReplay {
  /**
   * Roughly how many bytes the records to come take, in the unit `record` counts them in
   * (0: unknown); told once, before the first record. The engine sizes memory ahead from it.
   */
  expectBytes(bytes: number): void;
  /**
   * One durable record, in order; `bytes` is its share of expectBytes. A promise when the
   * engine must read elsewhere first: the next record waits for it. Throwing fails the open.
   */
  record(seq: number, type: number, body: Uint8Array, bytes: number): void | Promise<void>;
}

export interface LogOpenRequest {
  /** The sequence the engine's checkpoint covers (0: none): the log may start after it, never later than coveredSeq + 1. */
  readonly coveredSeq: number;
  readonly replay: LogReplay;
  /** Told once, when the log stops for good (WAL_POISONED or LOG_FENCED). */
  readonly onPoisoned?: ((poison: FermataError) => void) | undefined;
}

/** Opens (creating if needed) one engine's log and replays it into the engine. */
export type LogOpener = (request: LogOpenRequest) => Promise<DurableLog>;
