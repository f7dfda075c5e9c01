// The timer engine's public face: the one owner of timer state, on the main thread. Every
// change is a log record first (a DurableLog, engine/log.ts) and a change in memory after the
// record is durable; reopening replays the log and arrives at the same state. It knows nothing
// of HTTP: transports call admit(), cancel() and get().
//
// Pending and retrying timers are in the due heap, ordered by dueAt. Finished ones (delivered,
// dead, cancelled) are in the expiry heap, ordered by when their retention ends (logged with
// the change that finished them); then they are released. Each ADD logs the time its keys were
// decided at, and replay releases what had expired by then before it decides, so replay holds
// no more timers than the live engine did and deduplicates keys exactly as it did.
//
// This class holds the shared state (state.ts) and hands it to the part that does the work,
// one concern a file: admission.ts, key-plan.ts, hand-out.ts, outcomes.ts, cancel-lookup.ts,
// queue-registry.ts, replay.ts; spill/checkpoint.ts, spill/promotion.ts, spill/restore.ts,
// spill/spill-planning.ts. Its methods are grouped by caller.
//
//   admit(batch) ─► validate ─► reserve rows ─► log ADD [header | batch] ─► durable ─► insertBatch
//   cancel(id)   ─► index → slot ─► out of the heap (it can no longer fire) ─► log CANCEL ─► cancelled
//   open()       ─► restore the checkpoint ─► open the log (EngineOptions.openLog) ─► replay every record after it
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { admit, admitArrow, validate } from './admission.ts';
import type { TimerBatch } from './batch/timer-batch.ts';
import { bulkCancel, type BulkCancelOutcome, type BulkCancelTarget } from './bulk-cancel.ts';
import { cancel, getTimer, lookup, payloadOf } from './cancel-lookup.ts';
import { type ClockMove, moveClock, resumeClock } from './clock-moves.ts';
import { nodeFileSystem } from './fs/node-file-system.ts';
import { deliveryInto, deliveryOf, nextDeliveryDueMs, nextDueMs, queueNameAt, takeDue } from './hand-out.ts';
import { memoryLimits, retentionDefaults, spillLimits, timerLimits } from './limits.ts';
import type { DurableLog } from './log.ts';
import { discardDead, listDead, redrive, settle } from './outcomes.ts';
import { targetsDueBefore } from './targets-due.ts';
import { deleteQueue, findQueue, findQueueView, listQueues, queueConfig, type QueueView, setQueue, setQueuePaused } from './queue-registry.ts';
import { type QueueHoldStats, queueHoldStats } from './queue-pause.ts';
import { exportTimers } from './timer-export.ts';
import { listTimers, type QueryPosition, queryStart, type TimerFilter, type TimerPage } from './timer-query.ts';
import type { QueueConfig } from './queues.ts';
import type { Outcomes } from './records.ts';
import { beginReplay, endReplay } from './replay.ts';
import { reschedule, type RescheduleOutcome, type RevisionCondition, type TimerPatch } from './reschedule.ts';
import { checkpoint } from './spill/checkpoint.ts';
import { readManifest } from './spill/manifest.ts';
import { promote } from './spill/promotion.ts';
import { restoreCheckpoint } from './spill/restore.ts';
import { residentBytes, shrinkResident, spillableBytesByBucket, spillStats } from './spill/spill-planning.ts';
import { SpilledTimers } from './spill/spilled-timers.ts';
import { EngineState } from './state.ts';
import { type DueHistogram, dueHistogram } from './due-histogram.ts';
import { DueSlotCounts } from './store/due-slot-counts.ts';
import { QueueStateCounts } from './store/queue-state-counts.ts';
import { type ScheduleInput, type SchedulePage, Schedules, type ScheduleView } from './schedules/schedules.ts';
import { ResidentStore, timerState } from './store/resident-store.ts';
import {
  type Admitted,
  type CancelOutcome,
  type CheckpointReport,
  type Clock,
  type DeadPage,
  type DeadTimer,
  type DiscardOutcome,
  type DueSlice,
  type EngineOptions,
  type EngineStats,
  type QueueRoom,
  type RedriveOutcome,
  systemClock,
  type TakeAhead,
  type TimerDelivery,
  type TimerDeliveryRef,
  type TimerView,
  type Withdraw,
} from './types.ts';
import { localLog } from './wal/local-log.ts';

// The public types live in types.ts; importers keep importing them from here.
export * from './types.ts';
export type { RescheduleOutcome, RevisionCondition, TimerPatch } from './reschedule.ts';
export type { BulkCancelOutcome, BulkCancelTarget } from './bulk-cancel.ts';
export type { DueHistogram } from './due-histogram.ts';
export { decodeCursor, type QueryPosition, queryStart, type TimerFilter, type TimerPage } from './timer-query.ts';

export type { ScheduleInput, SchedulePage, ScheduleView } from './schedules/schedules.ts';

export class Engine {
  readonly #s: EngineState;
  readonly #schedules: Schedules;

  private constructor(options: EngineOptions) {
    const retention = { ...retentionDefaults, ...options.retention };
    assert.ok(retention.finishedMs >= 1 && retention.deadMs >= 1, 'retention must be at least 1 ms');
    const { residentShrinkShare, residentShrinkBusySlots, residentShrinkDueClearMs } = memoryLimits;
    const fs = options.fs ?? nodeFileSystem;
    const spillDir = join(options.dataDir, 'spill');
    this.#s = new EngineState({
      clock: options.clock ?? systemClock,
      limits: { ...timerLimits, ...options.limits },
      retention,
      shrinkLimits: { residentShrinkShare, residentShrinkBusySlots, residentShrinkDueClearMs, ...options.shrinkLimits },
      store: dueCountingStore(options.store, options.spillBucketWidthMs ?? spillLimits.bucketWidthMs),
      fs,
      spillDir,
      spill: new SpilledTimers(fs, spillDir, options.spillBucketWidthMs ?? spillLimits.bucketWidthMs),
      checkTarget: options.checkTarget,
      admitGate: options.admitGate,
      idPrefix: options.idPrefix ?? '',
    });
    this.#schedules = new Schedules(this.#s);
  }

  // ---- life ----

  /** Opens the engine over its data directory: the checkpoint restored, the log replayed on top. */
  static async open(options: EngineOptions): Promise<Engine> {
    // The engine exists before its log does: the log's opener replays every record into it
    // while it reads the log for recovery, one pass over the log.
    const engine = new Engine(options);
    const s = engine.#s;
    // Every timer the checkpoint and the log hold comes back, whatever this life's slot limit.
    s.store.beginReplay();
    const manifest = await readManifest(s.fs, s.spillDir);
    if (manifest !== undefined) await restoreCheckpoint(s, manifest);
    const openLog = options.openLog ?? localLog({ dir: join(options.dataDir, 'wal'), fs: options.fs, limits: options.walLimits, logger: options.logger });
    s.log = await openLog({ coveredSeq: s.checkpointSeq, replay: beginReplay(s), onPoisoned: options.onLogPoisoned });
    endReplay(s);
    await resumeClock(s);
    // A schedule change the power cut off before its cancel is finished, then occurrences
    // overdue after the downtime follow their catch_up, before anything is handed out.
    await engine.#schedules.settleOwedCancels();
    await engine.#schedules.materializer.start();
    return engine;
  }

  /** Waits for a checkpoint or promotion under way, closes the log (appends made so far are waited for), frees the store. */
  async close(): Promise<void> {
    await this.#schedules.materializer.stop();
    await this.#s.spillWork;
    await this.#s.log.close();
    this.#s.store.close();
  }

  /** The clock timer time is read from (engine/clock.ts): the real time, or a manual clock. */
  get clock(): Clock {
    return this.#s.clock;
  }

  /** Moves a manual clock once its CLOCK record is durable (clock-moves.ts); resolves with the new position. */
  moveClock(move: ClockMove): Promise<number> {
    return moveClock(this.#s, move);
  }

  /** A manual clock's last logged position (undefined: none), also when this life runs on the real clock. */
  get loggedClockMs(): number | undefined {
    return this.#s.clockPositionMs;
  }

  /** The log: readiness (poisoned or fenced) and counters. */
  get log(): DurableLog {
    return this.#s.log;
  }

  // ---- for ingest: add, look up, cancel, queues, dead letters (admission.ts, cancel-lookup.ts, queue-registry.ts, outcomes.ts) ----

  /** Admits a batch built in process or from JSON; resolves once it is durable. */
  admit(batch: TimerBatch, options?: { readonly startNow?: boolean }): Promise<Admitted> {
    return admit(this.#s, batch, options);
  }

  /** Admits an Arrow IPC stream as it arrived (logged whole); resolves once it is durable. */
  admitArrow(ipc: Uint8Array): Promise<Admitted> {
    return admitArrow(this.#s, ipc);
  }

  /** Checks a batch as admit() does, admitting nothing (throws BATCH_INVALID or TARGET_REFUSED). */
  validate(batch: TimerBatch): void {
    validate(this.#s, batch);
  }

  /** A timer in memory (undefined: not resident; lookup() looks on disk too). */
  get(id: string): TimerView | undefined {
    return getTimer(this.#s, id);
  }

  /** A timer in memory or on disk. */
  lookup(id: string): Promise<TimerView | undefined> {
    return lookup(this.#s, id);
  }

  /** The payload of a resident timer (a view: copy it to keep it). */
  payloadOf(id: string): Uint8Array | undefined {
    return payloadOf(this.#s, id);
  }

  /** Cancels a timer, resident or spilled; resolves once the cancel is durable. */
  cancel(id: string, condition?: RevisionCondition): Promise<CancelOutcome> {
    return cancel(this.#s, id, condition);
  }

  /** Changes a pending or retrying timer (PATCH), if its revision meets `condition`; resolves once durable (reschedule.ts). */
  reschedule(id: string, patch: TimerPatch, condition?: RevisionCondition): Promise<RescheduleOutcome> {
    return reschedule(this.#s, id, patch, condition);
  }

  /** Validates and durably sets a queue's config (a whole replacement: absent fields take defaults). */
  setQueue(name: string, input: unknown): Promise<QueueConfig> {
    return setQueue(this.#s, name, input);
  }

  queueConfig(name: string): QueueConfig {
    return queueConfig(this.#s, name);
  }

  /** A queue's config; undefined when no queue has the name (never configured nor named by a timer, or deleted). */
  findQueue(name: string): QueueConfig | undefined {
    return findQueue(this.#s, name);
  }

  /** Deletes a queue durably (false: no such queue); refused while timers wait in it, and for the default queue. */
  deleteQueue(name: string): Promise<boolean> {
    return deleteQueue(this.#s, name);
  }

  /** Every queue that was configured or has held a timer, with its config and pause, by name. */
  queues(): QueueView[] {
    return listQueues(this.#s);
  }

  /** A queue's config and pause; undefined when no queue has the name. */
  findQueueView(name: string): QueueView | undefined {
    return findQueueView(this.#s, name);
  }

  /** Pauses (true) or resumes (false) a queue durably; undefined: no such queue. Its due timers are held while it is paused. */
  setQueuePaused(name: string, paused: boolean): Promise<QueueView | undefined> {
    return setQueuePaused(this.#s, name, paused);
  }

  /** Dead timers, oldest first (by log position), at most `limit`, optionally of one queue only. */
  listDead(limit: number, queue?: string): DeadTimer[] {
    return (listDead(this.#s, limit, queue) as DeadPage).dead;
  }

  /** A page of dead timers from after `cursor` (a page's nextCursor); undefined: the cursor is not one. */
  deadPage(limit: number, queue?: string, cursor?: string): DeadPage | undefined {
    return listDead(this.#s, limit, queue, cursor);
  }

  /** Discards a dead timer (released at once); resolves once durable. */
  discardDead(id: string): Promise<DiscardOutcome> {
    return discardDead(this.#s, id);
  }

  /** Sends a dead timer round again (attempts reset, due now); resolves once durable. */
  redrive(id: string): Promise<RedriveOutcome> {
    return redrive(this.#s, id);
  }

  /** The first `limit` timers matching `filter` after `after`, resident and spilled, in (due, id) order (timer-query.ts). */
  listTimers(filter: TimerFilter, limit: number, after: QueryPosition = queryStart): Promise<TimerPage> {
    return listTimers(this.#s, filter, limit, after);
  }

  /** Every timer matching `filter` as the bytes of one Arrow IPC stream, made a batch at a time as it is read (timer-export.ts). */
  exportTimers(filter: TimerFilter, batchRows: number, after: QueryPosition = queryStart, idPrefix = ''): AsyncGenerator<Uint8Array> {
    return exportTimers(this.#s, filter, batchRows, after, idPrefix);
  }

  /** Cancels every pending or retrying timer a filter or list of ids names, as one record; resolves once durable (bulk-cancel.ts). */
  bulkCancel(what: BulkCancelTarget): Promise<BulkCancelOutcome> {
    return bulkCancel(this.#s, what);
  }

  // ---- for ingest: schedules (schedules/schedules.ts; their occurrences: schedules/materializer.ts) ----

  /** Creates or replaces a schedule once its SCHEDULE record is durable (SCHEDULE_INVALID names a bad field). */
  putSchedule(name: string, input: ScheduleInput): Promise<ScheduleView> {
    return this.#schedules.put(name, input);
  }

  /** A schedule with its next occurrences; undefined: no such schedule. */
  schedule(name: string): ScheduleView | undefined {
    return this.#schedules.get(name);
  }

  /** Schedules by name after `cursor` (the last name of the page before), at most `limit`. */
  listSchedules(limit: number, cursor?: string): SchedulePage {
    return this.#schedules.list(limit, cursor);
  }

  /** Pauses (true) or resumes (false) a schedule durably; undefined: no such schedule. */
  setSchedulePaused(name: string, paused: boolean): Promise<ScheduleView | undefined> {
    return this.#schedules.setPaused(name, paused);
  }

  /** Deletes a schedule durably, cancelling its pending occurrences; false: no such schedule. */
  deleteSchedule(name: string): Promise<boolean> {
    return this.#schedules.delete(name);
  }

  // ---- for dispatch: due timers out, outcomes back (hand-out.ts, outcomes.ts) ----

  /** Takes up to `max` timers due at `nowMs` (and ahead, for queues that allow it) and marks them delivering. */
  takeDue(nowMs: number, max: number, queueRoom?: QueueRoom, ahead?: TakeAhead): DueSlice {
    return takeDue(this.#s, nowMs, max, queueRoom, ahead);
  }

  /** The name of the queue with index `index` (DueSlice.queues). */
  queueNameAt(index: number): string {
    return queueNameAt(this.#s, index);
  }

  /** A handed-out timer's target and bytes (a view of the store's arena: copy to keep). */
  deliveryOf(seq: number, row: number): TimerDelivery | undefined {
    return deliveryOf(this.#s, seq, row);
  }

  /** As deliveryOf, into `into` (one object filled again for every timer), with no view made. */
  deliveryInto(seq: number, row: number, into: TimerDeliveryRef): boolean {
    return deliveryInto(this.#s, seq, row, into);
  }

  /** Records delivery outcomes: one OUTCOME record, applied once durable. */
  settle(outcomes: Outcomes, responses?: ReadonlyArray<Uint8Array | undefined>): Promise<void> {
    return settle(this.#s, outcomes, responses);
  }

  /** When the next delivery falls due (undefined: none resident before the watermark). */
  nextDeliveryDueMs(): number | undefined {
    return nextDeliveryDueMs(this.#s);
  }

  /** The distinct targets of resident timers due before `untilMs`, looking at `timersMax` timers at most (targets-due.ts). */
  targetsDueBefore(untilMs: number, timersMax: number): string[] {
    return targetsDueBefore(this.#s, untilMs, timersMax);
  }

  /** When the engine next has work: a delivery falls due or a finished timer's retention ends. */
  nextDueMs(): number | undefined {
    return nextDueMs(this.#s);
  }

  /** Told when a timer may have become the earliest due (the scheduler re-arms its timer). */
  setDueChangedHook(hook: () => void): void {
    this.#s.onDueChanged = hook;
  }

  /** How a cancel takes back a timer the dispatcher holds (taken ahead, or waiting its turn) but has not sent. */
  setWithdrawHook(hook: Withdraw): void {
    this.#s.withdraw = hook;
  }

  // ---- for the memory loader: the spill tier (spill/checkpoint.ts, spill/promotion.ts, spill/spill-planning.ts) ----

  /**
   * Writes a checkpoint (the sequence in docs/format/spill.md): every live timer goes into runs
   * on disk, the pending ones due at or past `watermarkMs` into a spilled run and out of memory;
   * then the log is truncated to what it covers and the store shrinks if it is mostly empty.
   * `watermarkMs` is a bucket start; it only lowers the watermark (Infinity keeps it).
   */
  checkpoint(watermarkMs = Infinity): Promise<CheckpointReport> {
    return this.#serially(async () => {
      let report: CheckpointReport;
      try {
        report = await checkpoint(this.#s, watermarkMs);
      } finally {
        this.#s.spilling = undefined;
        this.#s.notYetEvicted = 0;
        this.#s.evictingDueAtMs = undefined;
      }
      return { ...report, residentShrunkTo: shrinkResident(this.#s) };
    });
  }

  /** Brings every spilled timer due before `toMs` (a bucket start) into memory; logged first. Returns how many. */
  promote(toMs: number): Promise<number> {
    return this.#serially(() => promote(this.#s, toMs, true));
  }

  /** Live bytes of resident pending timers that could spill, by the start of the bucket they are due in. */
  spillableBytesByBucket(): Promise<Map<number, number>> {
    return spillableBytesByBucket(this.#s);
  }

  /** Live bytes of resident timers: their share of the columns and indexes, and their bytes in the arena. */
  residentBytes(): number {
    return residentBytes(this.#s);
  }

  get bucketWidthMs(): number {
    return this.#s.spill.bucketWidthMs;
  }

  /** Told by the memory loader, for stats. */
  setMemoryBudget(bytes: number): void {
    this.#s.memoryBudgetBytes = bytes;
  }

  // ---- for metrics and stats (and the loader's pace) ----

  /** The engine's figures now, as one plain object. */
  stats(): EngineStats {
    const s = this.#s;
    const counts = s.counts;
    const store = s.store;
    const spilled = s.spilledPending();
    return {
      pending: (counts[timerState.pending] as number) + (counts[timerState.retrying] as number) + spilled,
      counts: {
        pending: (counts[timerState.pending] as number) + spilled,
        delivering: counts[timerState.delivering] as number,
        retrying: counts[timerState.retrying] as number,
        delivered: counts[timerState.delivered] as number,
        dead: counts[timerState.dead] as number,
        cancelled: counts[timerState.cancelled] as number,
      },
      resident: store.count,
      residentCapacity: store.capacity,
      residentMax: store.capacityMax,
      slabsPrefaulted: store.arena.slabsPrefaulted,
      columnGrowthsMadeAhead: store.columnGrowthsMadeAhead,
      rowsInserted: s.rowsInserted,
      outcomesApplied: s.outcomesApplied,
      heldBack: s.parkedCount,
      bulkCancels: s.bulkCancels,
      timersCancelledInBulk: s.timersCancelledInBulk,
      spill: spillStats(s),
      reschedules: { applied: s.rescheduled.applied, redirects: s.rescheduled.size, redirectBytes: s.rescheduled.bytesUsed },
      addTimes: { entries: s.addTimes.size, bytes: s.addTimes.bytesUsed },
      schedules: {
        count: s.schedules.size,
        paused: s.schedules.pausedCount,
        occurrencesCreated: s.schedules.occurrencesCreated,
        catchUpCreated: s.schedules.catchUpCreated,
        skipped: s.schedules.occurrencesSkipped,
        catchUpCancelled: s.schedules.catchUpCancelled,
        occurrencesFired: s.schedules.occurrencesFired,
      },
    };
  }

  /** Pending, retrying and held timers, resident and spilled, by when they are next due (due-histogram.ts): no timer is read. */
  dueHistogram(nowMs: number = this.#s.clock.now()): DueHistogram {
    return dueHistogram(this.#s, nowMs);
  }

  /**
   * A queue's timers waiting (pending, retrying, held; in memory and spilled to disk, of which
   * `spilled`) and being delivered, from counts kept (none read).
   */
  queueCounts(name: string): { readonly waiting: number; readonly inFlight: number; readonly spilled: number } {
    const s = this.#s;
    const index = s.queueIndexOf.get(name);
    const counts = s.store.queueCounts;
    if (index === undefined || counts === undefined) return { waiting: 0, inFlight: 0, spilled: 0 };
    const spilled = s.spill.queueCounts.of(index);
    return { waiting: counts.waiting(index) + spilled, inFlight: counts.of(index, timerState.delivering), spilled };
  }

  /** Paused queues and the timers they hold (queue-pause.ts): one pass over the held timers. */
  queueHoldStats(): QueueHoldStats {
    return queueHoldStats(this.#s);
  }

  /** Checkpoints and promotions run one at a time, in order. */
  #serially<T>(work: () => Promise<T>): Promise<T> {
    const result = this.#s.spillWork.then(work);
    this.#s.spillWork = result.then(
      () => undefined,
      () => undefined,
    );
    return result;
  }
}

/** The engine's store, counting its pending and retrying timers by due time in slots that tile the spill buckets, and its timers by queue and state. */
function dueCountingStore(options: EngineOptions['store'], bucketWidthMs: number): ResidentStore {
  const store = new ResidentStore(options);
  store.countIn(new DueSlotCounts(bucketWidthMs), new QueueStateCounts());
  return store;
}
