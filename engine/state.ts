// The state the engine's parts share (admission, key-plan, hand-out, outcomes, cancel-lookup,
// queue-registry, replay; spill/checkpoint, promotion, spill-planning, restore), all on the
// main thread. One EngineState per engine; the parts are plain functions over it and the facade
// (engine.ts) is the only thing that hands it out. Its methods are the few steps every part
// takes and that keep its tallies true: a state change moves the counts, a release clears
// every index.
//
//   store (slots, columns, arena) ◄── index (seq,row → slot), keys (key hash → slot)
//     ├── heap: pending and retrying, by dueAt      ├── parked: due, held back for queue room
//     └── expiring: finished, by retention's end    └── spill: runs on disk past the watermark
//   claims in flight: keysInFlight (admits), settling (outcomes), cancelling, cancellingSpilled
import assert from 'node:assert/strict';
import type { FermataError } from './errors.ts';
import type { FileSystem } from './fs/file-system.ts';
import { decodeTimerId } from './ids.ts';
import type { Retention, TimerLimits } from './limits.ts';
import type { DurableLog } from './log.ts';
import type { QueueConfig } from './queues.ts';
import { RescheduledTimers } from './rescheduled-timers.ts';
import { ScratchArrays } from './memory/scratch-arrays.ts';
import type { SpilledTimers } from './spill/spilled-timers.ts';
import { KeyClaims } from './store/key-claims.ts';
import { KeyIndex, keyHash } from './store/key-index.ts';
import { type ResidentStore, timerState, type TimerStateCode } from './store/resident-store.ts';
import { SlotClaims } from './store/slot-claims.ts';
import { SlotIndex } from './store/slot-index.ts';
import { TimerHeap } from './store/timer-heap.ts';
import { QueueLimits } from './queue-limit-table.ts';
import { TimerFailures } from './timer-failures.ts';
import { AddTimes } from './add-times.ts';
import { ScheduleBook } from './schedules/schedule-book.ts';
import type { CancelOutcome, Clock, ShrinkLimits, Withdraw } from './types.ts';

/** Outcome, cancel and redrive records settle accepted work: the log's back-pressure on new work does not refuse them. */
export const settlingWork = { pastQueueLimit: true } as const;

export const isFinished = (state: number): boolean => state === timerState.delivered || state === timerState.dead || state === timerState.cancelled;

/** Open()'s progress through the log, for replay's sizing of the store (replay.ts). */
export interface ReplaySizing {
  /** What the log expects replay to read (LogReplay.expectBytes). */
  logBytes: number;
  /** Record bytes (in the log's unit) replayed so far. */
  bytesSeen: number;
  /** Timers (and keyed ones) replayed ADD records put in so far. */
  rowsSeen: number;
  keyedSeen: number;
  /** ADD records replayed so far (those reserveForReplay saw). */
  addsSeen: number;
  /** Whether the store's columns for the whole log were asked for ahead (replay.ts's guessColumnsAhead). */
  guessed: boolean;
  /** Timers and keys in memory before the first record (the checkpoint's resident run). */
  readonly slotsBefore: number;
  readonly keysBefore: number;
}

/** Due timers of one queue held back for want of room: store handles, in the order they fell due, from `head` on. */
export interface ParkedQueue {
  handles: number[];
  head: number;
}

/** What EngineState is made from (the facade reads it out of EngineOptions). */
export interface EngineStateOptions {
  readonly clock: Clock;
  readonly limits: TimerLimits;
  readonly retention: Retention;
  readonly shrinkLimits: ShrinkLimits;
  readonly store: ResidentStore;
  readonly fs: FileSystem;
  readonly spillDir: string;
  readonly spill: SpilledTimers;
  readonly checkTarget: ((target: string) => string | undefined) | undefined;
  readonly admitGate: (() => FermataError | undefined) | undefined;
  readonly idPrefix: string;
}

export class EngineState {
  /** Set once by open(), before anything appends. */
  log!: DurableLog;
  readonly clock: Clock;
  readonly limits: TimerLimits;
  readonly retention: Retention;
  readonly shrinkLimits: ShrinkLimits;
  /** Live timers by state code (index = timerState value). */
  readonly counts = new Float64Array(7);
  readonly store: ResidentStore;
  /** Typed arrays for synchronous work that keeps none of them (scratch-arrays.ts). */
  readonly scratch = new ScratchArrays();
  readonly heap: TimerHeap;
  /** Finished timers, by the expiry of their records (their dueAt). */
  readonly expiring: TimerHeap;
  /** The latest expiry among released timers: an ADD decides its keys no earlier than this. */
  releasedExpiryMax = 0;
  /** Timers whose OUTCOME record is being synced, by slot. */
  readonly settling = new SlotClaims();
  /** Made again over moved slots when the store shrinks (spill-planning.ts). */
  index: SlotIndex;
  keys: KeyIndex;
  /**
   * Key hashes of admits whose ADD record is not yet durable → settles when that admit is done.
   * Two keys with one hash only make the later admit wait needlessly.
   */
  readonly keysInFlight = new KeyClaims();
  /** While open() replays the log: how far it is, to size the store for what is still to come. */
  replaySizing: ReplaySizing | undefined;
  readonly queueNames: string[] = [];
  readonly queueIndexOf = new Map<string, number>();
  /** Configs set through setQueue(); other queues run with defaultQueueConfig. */
  readonly queueConfigs = new Map<string, QueueConfig>();
  /** Queues deleted (queue-registry.ts) and not named by a timer added since: not listed. */
  readonly deletedQueues = new Set<string>();
  /** Indexes of paused queues (queue-registry.ts): takeDue hands out none of their timers (queue-pause.ts). */
  readonly pausedQueues = new Set<number>();
  /** Queues' retention and pending caps by index (queue-limits.ts), kept by applyQueueChange. */
  readonly queueLimits = new QueueLimits();
  /** By queue index, when a live resume last released it (replay sets none): timers due by then that go out were held. */
  readonly queueResumedAtMs: number[] = [];
  /** The latest of queueResumedAtMs (-Infinity: no resume yet), so hand-out checks one number for most timers. */
  resumedAtMsMax = -Infinity;
  /** Timers handed out since open that fell due while their queue was paused. */
  heldReleased = 0;
  /** The latest pause or resume of each queue whose QUEUE record is not yet applied (settled: applied, or failed with that error): a request decides against it. */
  readonly pauseChangesInFlight = new Map<string, { readonly paused: boolean; readonly settled: Promise<unknown> }>();
  /** Rows admitted but not yet in the store: capacity promised to appends in flight. */
  reservedRows = 0;
  /** Payload, header and key bytes of those rows: what the arena will take when they go in. */
  reservedBytes = 0;
  /** Cancels whose CANCEL record is not yet durable, by slot. */
  readonly cancelling = new Map<number, Promise<CancelOutcome>>();
  /** Told when a timer may have become the earliest due (the scheduler re-arms its timer). */
  onDueChanged: () => void = () => undefined;
  /** Takes back a timer handed out for delivery but not sent yet (true: it will not be sent). */
  withdraw: Withdraw = () => false;
  /**
   * Due timers held back because their queue had no room, by queue index. An entry counts only
   * while its timer is still waiting, out of the heap and not being cancelled (see takeParked in
   * hand-out.ts); anything else is a stale entry, skipped.
   */
  readonly parked: ParkedQueue[] = [];
  parkedCount = 0;
  /** Why each dead timer died (dead timers are few; the OUTCOME record holds the reason). */
  readonly deadReasons = new Map<number, number>();
  /** Why each timer whose last attempt failed failed, and when (timer-failures.ts; the OUTCOME_DETAILED record holds it). */
  readonly failures = new TimerFailures();
  readonly checkTarget: ((target: string) => string | undefined) | undefined;
  readonly admitGate: (() => FermataError | undefined) | undefined;
  /** EngineOptions.idPrefix ('' for none): before the id a callback's follow-up names its timer by. */
  readonly idPrefix: string;

  readonly fs: FileSystem;
  readonly spillDir: string;
  /** The timers on disk: runs, key hashes, tombstones and the watermark. */
  readonly spill: SpilledTimers;
  /** The log sequence the last durable checkpoint covers (0: none yet). */
  checkpointSeq = 0;
  nextRunId = 1;
  memoryBudgetBytes: number | undefined;
  /** Checkpoints and promotions run one at a time, in order. */
  spillWork: Promise<void> = Promise.resolve();
  /**
   * While a checkpoint is under way, 1 at each slot whose timer it copies into its spilled run,
   * until that timer leaves the slot (evicted or released): a cancel of one is logged as
   * CANCEL_SPILLED. Marked in the snapshot's pass over the slots; sorting the handles instead
   * held that turn 150-190 ms longer at 4 million spilled timers.
   */
  spilling: Uint8Array | undefined;
  /**
   * Rows of the spilled run just installed whose timers the eviction has not reached yet: the
   * spill tier counts them already, and memory still does (or they are no longer pending).
   */
  notYetEvicted = 0;
  /** The due times of that run's rows in eviction order (its last notYetEvicted are not evicted yet), for the due histogram. */
  evictingDueAtMs: Float64Array | undefined;
  /** Rows put in the store since open, replayed or admitted, and outcomes applied: how busy the engine is, for the loader. */
  rowsInserted = 0;
  outcomesApplied = 0;
  /** Bulk cancels (CANCEL_BULK records) applied since open, live, and the timers they cancelled (for stats). */
  bulkCancels = 0;
  timersCancelledInBulk = 0;
  /** Cancels of spilled timers whose CANCEL_SPILLED record is not yet durable, by "seq:row". */
  readonly cancellingSpilled = new Map<string, Promise<CancelOutcome>>();
  /** A manual clock's last logged position (CLOCK records, the manifest), whatever clock this life runs on; undefined: none logged (clock-moves.ts). */
  clockPositionMs: number | undefined;
  /** Clock moves run one at a time, each logged before the next reads the position. */
  clockMoves: Promise<unknown> = Promise.resolve();
  /** Timers a PATCH changed: revision and current fire time (rescheduled-timers.ts; reschedule.ts). */
  readonly rescheduled = new RescheduledTimers();
  /** When each ADD record holding a timer was accepted, by sequence: views' created_at (add-times.ts). */
  readonly addTimes = new AddTimes();
  /** Schedules and their high-water marks (engine/schedules/schedule-book.ts). */
  readonly schedules = new ScheduleBook();
  /** Before a manual clock moves to a position (clock-moves.ts): the schedules catch up to it (engine/schedules/schedules.ts). */
  beforeClockMove: ((toMs: number) => Promise<void>) | undefined;
  /** PATCHes whose RESCHEDULE record is not yet durable, by "seq:row" (resident or spilled). */
  readonly rescheduling = new Map<string, Promise<unknown>>();
  /** Of those, the spilled timers' (tombstoned before their record is durable), by "seq:row". */
  readonly reschedulingSpilled = new Set<string>();

  constructor(options: EngineStateOptions) {
    this.clock = options.clock;
    this.limits = options.limits;
    this.retention = options.retention;
    this.shrinkLimits = options.shrinkLimits;
    this.store = options.store;
    this.fs = options.fs;
    this.spillDir = options.spillDir;
    this.spill = options.spill;
    this.checkTarget = options.checkTarget;
    this.admitGate = options.admitGate;
    this.idPrefix = options.idPrefix;
    this.heap = new TimerHeap(this.store);
    this.expiring = new TimerHeap(this.store);
    this.index = new SlotIndex(this.store);
    this.keys = new KeyIndex(this.store);
  }

  setState(slot: number, state: TimerStateCode): void {
    const counts = this.counts;
    const before = this.store.state[slot] as number;
    counts[before] = (counts[before] as number) - 1;
    counts[state] = (counts[state] as number) + 1;
    this.store.setState(slot, state);
  }

  finishCancelled(slot: number, expiresAtMs: number): void {
    this.setState(slot, timerState.cancelled);
    this.store.setDueAt(slot, expiresAtMs);
    this.expiring.push(slot);
  }

  /** Forgets a finished timer whose retention ended: its slot, id and key go. */
  release(slot: number): void {
    const store = this.store;
    assert.ok(isFinished(store.state[slot] as number), 'only finished timers are released');
    this.expiring.remove(slot);
    this.deadReasons.delete(slot);
    this.failures.clear(slot);
    this.releasedExpiryMax = Math.max(this.releasedExpiryMax, store.dueAt[slot] as number);
    this.index.delete(store.logSeq[slot] as number, store.row[slot] as number);
    this.rescheduled.delete(store.logSeq[slot] as number, store.row[slot] as number);
    if (store.keyLengthOf(slot) > 0) this.keys.delete(slot, keyHash(store.keyOf(slot)));
    const state = store.state[slot] as number;
    this.counts[state] = (this.counts[state] as number) - 1;
    if (this.spilling !== undefined) this.spilling[slot] = 0;
    store.release(slot);
  }

  /** Releases finished timers whose retention ended by `nowMs`, at most `max` of them. */
  releaseExpired(nowMs: number, max: number): void {
    for (let released = 0; released < max; released++) {
      const slot = this.expiring.peek();
      if (slot < 0 || (this.store.dueAt[slot] as number) > nowMs) return;
      this.release(slot);
    }
  }

  /** When an admit decides its keys: now, but never before an expiry already acted on (the clock may step back). */
  decisionTime(): number {
    return Math.max(this.clock.now(), this.releasedExpiryMax);
  }

  /** The index of queue `name`, given one the first time it is named. */
  queueIndex(name: string): number {
    let index = this.queueIndexOf.get(name);
    if (index === undefined) {
      index = this.queueNames.push(name) - 1;
      this.queueIndexOf.set(name, index);
    }
    return index;
  }

  /** The slot of the timer `id` names: (sequence, row) finds it, and the fire time must match too, or it is not that id. */
  slotOfId(id: string): number {
    const parts = decodeTimerId(id);
    if (parts === undefined) return -1;
    const slot = this.index.get(parts.seq, parts.row);
    return slot >= 0 && this.store.fireAt[slot] === parts.fireAtMs ? slot : -1;
  }

  /** Pending timers on disk, less those a checkpoint has put there but not yet evicted (still counted in memory). */
  spilledPending(): number {
    return this.spill.count - this.notYetEvicted;
  }
}
