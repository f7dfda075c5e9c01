// The engine's public types: what ingest, dispatch, the loader, the CLI and the bench see of
// it (options, views, slices handed to dispatch, reports). engine.ts re-exports them all, so
// importers keep importing from there. Types only, and the default clock.
import type { FermataError } from './errors.ts';
import type { FileSystem } from './fs/file-system.ts';
import type { MemoryLimits, Retention, TimerLimits, WalLimits } from './limits.ts';
import type { LogOpener } from './log.ts';
import type { ResidentStoreOptions } from './store/resident-store.ts';
import type { WalLogger } from './wal/wal.ts';

/** Wall-clock time in epoch ms; injected so tests can move it (and make it jump). */
export interface Clock {
  now(): number;
  /**
   * A clock that jumps (a manual clock, engine/clock.ts) calls `watcher` after each move, so a
   * sleep armed by the real time is cut short; returns the unwatch. A running clock has none.
   */
  watch?(watcher: () => void): () => void;
}

export const systemClock: Clock = { now: () => Date.now() };

export interface EngineOptions {
  readonly dataDir: string;
  readonly fs?: FileSystem;
  readonly clock?: Clock;
  readonly limits?: Partial<TimerLimits>;
  /**
   * Opens the engine's log (engine/log.ts). Default: the local WAL in dataDir/wal, with `fs`,
   * `walLimits` and `logger` (the last two are read by that default only).
   */
  readonly openLog?: LogOpener;
  readonly walLimits?: Partial<WalLimits>;
  readonly store?: ResidentStoreOptions;
  /** How long finished timers stay after they finish (their record, and their key's dedup). */
  readonly retention?: Partial<Retention>;
  readonly logger?: WalLogger;
  /**
   * Why a target is refused when a timer is added (the dispatcher's SSRF guard refuses literal
   * private addresses here, as a 400), or undefined. Run once per distinct target of a batch.
   */
  readonly checkTarget?: (target: string) => string | undefined;
  /** Width of a spill bucket (tests shrink it); spillLimits.bucketWidthMs otherwise. */
  readonly spillBucketWidthMs?: number;
  /**
   * Why adds are refused right now, or undefined: asked before anything of an add is logged
   * (the server refuses adds this way while the disk is nearly full, keeping the space left
   * for cancels and delivery outcomes). Cheap and synchronous: it runs on every add.
   */
  readonly admitGate?: () => FermataError | undefined;
  /** Told once, when the log stops (a failed write or sync poisons it, or it is fenced): the owner recovers by opening the data directory again. */
  readonly onLogPoisoned?: (poison: FermataError) => void;
  /** When the store shrinks after a checkpoint (memoryLimits' residentShrink* by default; tests lower them). */
  readonly shrinkLimits?: Partial<ShrinkLimits>;
  /**
   * Put before the timer's id in what a callback's follow-up writes (engine/callbacks.ts: its
   * body `id`, `fermata-callback-for` header and `callback:{id}` key), so that it names the
   * timer as the API outside does: a cluster partition's engine gets its three-character
   * partition prefix (cluster/node.ts), whose timers' 24-character ids other partitions share.
   * Default: none. The ids the engine answers with are unprefixed; the front prefixes its views.
   */
  readonly idPrefix?: string;
}

/** memoryLimits' settings of the shrink after a checkpoint (shrinkResident, spill/spill-planning.ts). */
export type ShrinkLimits = Pick<MemoryLimits, 'residentShrinkShare' | 'residentShrinkBusySlots' | 'residentShrinkDueClearMs'>;

/** Where a resident timer's delivery bytes are (Engine.deliveryInto): its payload, headers and key back to back in `bytes` from `bytesStart` on. */
export interface TimerDeliveryRef {
  target: string;
  bytes: Uint8Array;
  bytesStart: number;
  payloadLength: number;
  headersLength: number;
  keyLength: number;
  /** Bytes of the target's answer to keep for the timer's callback (engine/callbacks.ts); 0: it has none. */
  responseBytesMax: number;
}

/** A resident timer's delivery bytes (Engine.deliveryOf). */
export interface TimerDelivery {
  readonly target: string;
  /** Payload, headers (JSON; empty: none), key (empty: none), back to back. */
  readonly bytes: Uint8Array;
  readonly payloadLength: number;
  readonly headersLength: number;
}

/** What one checkpoint did. */
export interface CheckpointReport {
  /** The log sequence it covers. */
  readonly coveredSeq: number;
  readonly watermarkMs: number;
  /** Timers written to the resident run, and to the new spilled run (which left memory). */
  readonly residentRows: number;
  readonly spilledRows: number;
  readonly bytesWritten: number;
  /** Units of the log truncateCovered dropped (the local WAL's segment files). */
  readonly segmentsDeleted: number;
  /** The store's capacity after the checkpoint, when it shrank its columns to fit what stayed. */
  readonly residentShrunkTo?: number | undefined;
}

/** The spill tier's figures, for /v1/stats and the loader. */
export interface SpillStats {
  /** Pending timers due before this are in memory (Infinity: nothing spilled yet). */
  readonly watermarkMs: number;
  readonly spilled: number;
  readonly runs: number;
  readonly tombstones: number;
  /** Memory the spill tier's metadata takes. */
  readonly metadataBytes: number;
  /** Live bytes of the resident timers (slots in use and their payload, headers and keys). */
  readonly residentBytes: number;
  /** What the store holds from the allocator for them: columns at their grown size and whole arena slabs. */
  readonly residentReservedBytes: number;
  /** What the memory loader keeps residentBytes under (undefined: no loader). */
  readonly budgetBytes: number | undefined;
  readonly checkpointSeq: number;
}

export type TimerStateName = 'pending' | 'delivering' | 'retrying' | 'delivered' | 'dead' | 'cancelled';

/** The engine's figures at one instant (Engine.stats()): for /v1/stats, /metrics, the loader and the bench. */
export interface EngineStats {
  /** Timers waiting to be delivered (pending or retrying, in memory or spilled). */
  readonly pending: number;
  /** Live timers in each state (finished ones until their retention ends; pending counts the spilled ones). */
  readonly counts: Readonly<Record<TimerStateName, number>>;
  /** Timers in memory. */
  readonly resident: number;
  /** Slots the store's columns hold now (they grow as timers come, up to residentMax). */
  readonly residentCapacity: number;
  /** Resident timers at most (the store's slots); past it adds are refused with CAPACITY_FULL. */
  readonly residentMax: number;
  /** Arena slabs that were made ahead (their pages mapped off the main thread) when the store opened them. */
  readonly slabsPrefaulted: number;
  /** Growths of the store's columns that took columns made ahead (their pages mapped off the main thread). */
  readonly columnGrowthsMadeAhead: number;
  /** Timers put in memory since open (replayed or admitted; never less): the loader reads ingest's pace from it. */
  readonly rowsInserted: number;
  /** Delivery outcomes applied since open (replayed or settled; never less): delivery's pace, for the loader. */
  readonly outcomesApplied: number;
  /** Due timers held back for want of queue room (they are still pending or retrying). */
  readonly heldBack: number;
  /** Bulk cancels (and queue purges) since open, and the timers they cancelled. */
  readonly bulkCancels: number;
  readonly timersCancelledInBulk: number;
  readonly spill: SpillStats;
  /** PATCHes applied since open; patched timers held, and the memory their entries take (engine/rescheduled-timers.ts). */
  readonly reschedules: { readonly applied: number; readonly redirects: number; readonly redirectBytes: number };
  /** ADD records whose accept time is held (engine/add-times.ts), and the memory that table takes. */
  readonly addTimes: { readonly entries: number; readonly bytes: number };
  /** Schedules (engine/schedules/) and their occurrences since open: created, of them catching up on missed ones, passed over by catch_up, overdue ones cancelled by it, delivered. */
  readonly schedules: { readonly count: number; readonly paused: number; readonly occurrencesCreated: number; readonly catchUpCreated: number; readonly skipped: number; readonly catchUpCancelled: number; readonly occurrencesFired: number };
}

export interface TimerView {
  readonly id: string;
  readonly state: TimerStateName;
  /** 1 when added, one more for each PATCH (engine/reschedule.ts). */
  readonly revision: number;
  /** The fire time the timer was added with, or the one its latest PATCH gave it. */
  readonly fireAtMs: number;
  /** When it is next due: the fire time, or its retry's time. */
  readonly dueAtMs: number;
  readonly attempts: number;
  readonly queue: string;
  readonly target: string;
  readonly key: string | null;
  readonly lastStatus: number | null;
  /** Why its last attempt failed ("HTTP 503", "timeout after 10000 ms", …); null when it has not failed, or was delivered since. */
  readonly lastError: string | null;
  /** When that failed attempt was made (epoch ms), or null. */
  readonly lastAttemptAtMs: number | null;
  /** When it is tried again (epoch ms) while it is retrying; null otherwise. */
  readonly nextAttemptAtMs: number | null;
  /** Where its outcome is POSTed once delivered (engine/callbacks.ts), or null. */
  readonly callback: string | null;
  /** Where its outcome is POSTed once dead, or null. */
  readonly failureCallback: string | null;
  /** Extra headers its delivery sends; {} when none (timer-content.ts). */
  readonly headers: TimerHeaders;
  /** Its payload: a copy, the view's own. */
  readonly payload: Uint8Array;
  /** When its ADD was accepted (epoch ms; engine/add-times.ts), or null when no longer known. */
  readonly createdAtMs: number | null;
}

/** A timer's extra delivery headers, name → value, as its add gave them. */
export type TimerHeaders = Readonly<Record<string, string>>;

/**
 * What admit() made durable: row i's id is idOf(i). A row whose idempotency key was already
 * known is a duplicate: no new timer, idOf gives the original's id and duplicateOf what the
 * original is now and where the row differs from it.
 */
export interface Admitted {
  readonly seq: number;
  readonly rows: number;
  readonly duplicates: number;
  idOf(row: number): string;
  /** Row i's id as its 24 ASCII bytes at `out[at…at+24)`: no string, for answers written as bytes. */
  idInto(row: number, out: Uint8Array, at: number): void;
  isDuplicate(row: number): boolean;
  /** Undefined for a new row. */
  duplicateOf(row: number): DuplicateAnswer | undefined;
  /** Row i's timer's revision: 1 for a new row, the original's now for a duplicate. */
  revisionOf(row: number): number;
}

/** A field in which a duplicate row differs from the timer its key named (payload: by its bytes). */
export type DifferingField = 'target' | 'payload' | 'headers' | 'queue' | 'fire_at' | 'callback' | 'failure_callback';

/**
 * The timer a duplicate row's key named, as it is when the admit is answered: its state, and
 * the fields in which the row differs from it (none: an exact retry). `fire_at` is compared
 * here for every row; a transport whose row gave a delay instead leaves it out.
 */
export interface DuplicateAnswer {
  readonly state: TimerStateName;
  /** The original's revision now (1 until a PATCH changed it). */
  readonly revision: number;
  /** The original's fire time now: the one it was added with, or the one a PATCH gave it. */
  readonly fireAtMs: number;
  readonly differs: readonly DifferingField[];
}

/** 'revision-mismatch': the cancel was conditional (If-Match) and the timer's revision is not one it names. */
export type CancelOutcome = 'cancelled' | 'not-found' | 'too-late' | 'revision-mismatch';

/**
 * Due timers handed to the dispatcher, as columns: timer i is (seqs[i], rows[i]), about to get
 * delivery attempt attempts[i] (1-based); fireAtMs[i] is its fire time (the one it was added
 * with, which its id carries; a retry is due later).
 */
export interface DueSlice {
  readonly count: number;
  readonly seqs: Float64Array;
  readonly rows: Uint32Array;
  readonly attempts: Uint32Array;
  readonly fireAtMs: Float64Array;
  /** When each may be sent: its fire time, or a retry's time (later than `nowMs` only when taken ahead). */
  readonly dueAtMs: Float64Array;
  /** Each timer's queue, as an index: queueNameAt() names it. */
  readonly queues: Uint16Array;
}

/**
 * How many more timers of a queue the dispatcher takes now (its concurrency and rate room);
 * takeDue() holds back, in order, due timers of a queue with no room so other queues go on.
 */
export type QueueRoom = (queueIndex: number) => number;

/** Asks the dispatcher to give back the timer it was handed as (seq, row); true when it will not be sent. */
export type Withdraw = (seq: number, row: number) => boolean;

/**
 * Timers a dispatcher takes before they are due, up to `ms` ahead, for queues where `queue`
 * says so: it holds each until its due time by the wall clock and sends it then, so the trip
 * from this thread to a worker is not part of a timer's lateness.
 */
export interface TakeAhead {
  readonly ms: number;
  readonly queue: (queueIndex: number) => boolean;
}

/** A dead timer, as GET /v1/dead lists it. */
export interface DeadTimer {
  readonly id: string;
  /** As TimerView's. */
  readonly revision: number;
  readonly queue: string;
  readonly target: string;
  readonly fireAtMs: number;
  readonly attempts: number;
  readonly lastStatus: number | null;
  readonly reason: DeadReasonName;
  /** Why its last attempt failed, and when (TimerView's); null when no record said. */
  readonly lastError: string | null;
  readonly lastAttemptAtMs: number | null;
  /** As TimerView's. */
  readonly headers: TimerHeaders;
  readonly payload: Uint8Array;
  readonly createdAtMs: number | null;
}

/** A page of GET /v1/dead: `nextCursor` names the page after it, null when this is the last. */
export interface DeadPage {
  readonly dead: DeadTimer[];
  readonly nextCursor: string | null;
}

export type DiscardOutcome = 'discarded' | 'not-found' | 'not-dead';

export type DeadReasonName = 'attempts_exhausted' | 'gone' | 'target_refused' | 'unknown';

export type RedriveOutcome = 'redriven' | 'not-found' | 'not-dead';
