// The timer engine: the one owner of timer state, on the main thread. Every change is a WAL
// record first and a change in memory after the record is durable; reopening replays the
// log and arrives at the same state. It knows nothing of HTTP: transports call admit(),
// cancel() and get(); this module is its public face.
//
// Pending and retrying timers are in the due heap, ordered by dueAt. Finished ones (delivered,
// dead, cancelled) are in the expiry heap, ordered by when their retention ends (logged with
// the change that finished them); then they are released. Each ADD logs the time its keys were
// decided at, and replay releases what had expired by then before it decides, so replay holds
// no more timers than the live engine did and deduplicates keys exactly as it did.
//
//   admit(batch) ─► validate ─► reserve rows ─► WAL append [ADD header | Arrow batch] ─► durable
//                                                 └─► store.allocateRows (one loop), heap.pushMany, index run
//   cancel(id)   ─► index → slot ─► out of the heap (it can no longer fire) ─► WAL CANCEL ─► cancelled
//   open()       ─► restore the checkpoint ─► open the log (EngineOptions.openLog) ─► replay every record after it
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { admit, admitArrow, validate } from './admission.ts';
import type { TimerBatch } from './batch/timer-batch.ts';
import { cancel, getTimer, lookup, payloadOf } from './cancel-lookup.ts';
import { failpoint } from './failpoints.ts';
import { nodeFileSystem } from './fs/node-file-system.ts';
import { deliveryInto, deliveryOf, nextDeliveryDueMs, nextDueMs, queueNameAt, takeDue } from './hand-out.ts';
import { memoryLimits, retentionDefaults, spillLimits, timerLimits } from './limits.ts';
import type { DurableLog } from './log.ts';
import { listDead, redrive, settle } from './outcomes.ts';
import { listQueues, queueConfig, setQueue } from './queue-registry.ts';
import { encodeQueueRecord, type QueueConfig } from './queues.ts';
import { deadReason, type Outcomes } from './records.ts';
import { beginReplay, endReplay } from './replay.ts';
import { compactRuns } from './spill/compaction.ts';
import { readRunKeys } from './spill/keys-file.ts';
import { type Manifest, readManifest, removeUnreferenced, writeManifest } from './spill/manifest.ts';
import { promote } from './spill/promotion.ts';
import { restoreCheckpoint } from './spill/restore.ts';
import type { RunMeta } from './spill/run-meta.ts';
import { runOrder } from './spill/run-order.ts';
import { type RunRowFields, type RunRows, RunRowsBuilder } from './spill/run-rows.ts';
import { type RunWriteOptions, RunWriter } from './spill/run-writer.ts';
import { type SpilledRun, SpilledTimers } from './spill/spilled-timers.ts';
import { EngineState } from './state.ts';
import { keyHash, KeyIndex } from './store/key-index.ts';
import { ResidentStore, timerState } from './store/resident-store.ts';
import { SlotIndex } from './store/slot-index.ts';
import type { StoreSnapshot } from './store/store-snapshot.ts';
import {
  type Admitted,
  type CancelOutcome,
  type CheckpointReport,
  type DeadTimer,
  type DueSlice,
  type EngineOptions,
  type QueueRoom,
  type RedriveOutcome,
  type SpillStats,
  systemClock,
  type TakeAhead,
  type TimerDelivery,
  type TimerDeliveryRef,
  type TimerStateName,
  type TimerView,
  type Withdraw,
} from './types.ts';
import { localLog } from './wal/local-log.ts';

// The public types live in types.ts; importers keep importing them from here.
export * from './types.ts';

const utf8 = new TextDecoder();

/**
 * Memory a resident timer takes besides its bytes in the arena: its store columns (57 B), free
 * stack and growth slack, its id index and heap entries (engine/store/resident-store.ts).
 */
const residentBytesPerSlot = 100;

/** Spill buckets spanned that spillableBytesByBucket() tallies in a typed array; a wider spread is tallied in a Map. */
const bucketTallyMax = 2 ** 20;
/** spillableBytesByBucket() looks at this many slots a turn. */
const spillTallySliceSlots = 2 ** 20;

type TombstoneSet = { seqs: Float64Array; rows: Uint32Array; fireAtMs: Float64Array };

/** Timers a checkpoint took at its instant, to be copied into run rows afterwards. */
interface TakenRows {
  readonly store: StoreSnapshot;
  readonly deadReasons: Uint8Array;
  readonly queueNames: readonly string[];
}

/** What a snapshot fills: per timer (slot, copied fields, dead reason, handle) and per slot (spilling marks). */
interface SnapshotMemory {
  readonly slots: Int32Array;
  readonly dueAt: Float64Array;
  readonly state: Uint8Array;
  readonly attempts: Uint16Array;
  readonly lastStatus: Uint16Array;
  readonly deadReasons: Uint8Array;
  readonly handles: Float64Array;
  readonly spilling: Uint8Array;
}

function snapshotMemory(timers: number, slots: number): SnapshotMemory {
  return {
    slots: new Int32Array(timers),
    dueAt: new Float64Array(timers),
    state: new Uint8Array(timers),
    attempts: new Uint16Array(timers),
    lastStatus: new Uint16Array(timers),
    deadReasons: new Uint8Array(timers),
    handles: new Float64Array(timers),
    spilling: new Uint8Array(slots),
  };
}

/** Faulting in a snapshot's memory touches one byte a page, and yields once this much is touched. */
const pageBytes = 4096;
const prefaultSliceBytes = 16 * 1024 * 1024;

/** A checkpoint's spilled timers in their run's order: which logged row each is, and its fire time. */
type SpilledRowIds = Pick<RunRows, 'seq' | 'row' | 'fireAtMs'>;

/** The tombstones of `all` that are not in `applied`. */
function withoutTombstones(all: TombstoneSet, applied: TombstoneSet): TombstoneSet {
  const done = new Set<string>();
  for (let i = 0; i < applied.seqs.length; i++) done.add(`${applied.seqs[i]}:${applied.rows[i]}`);
  const keep: number[] = [];
  for (let i = 0; i < all.seqs.length; i++) if (!done.has(`${all.seqs[i]}:${all.rows[i]}`)) keep.push(i);
  return {
    seqs: Float64Array.from(keep, (i) => all.seqs[i] as number),
    rows: Uint32Array.from(keep, (i) => all.rows[i] as number),
    fireAtMs: Float64Array.from(keep, (i) => all.fireAtMs[i] as number),
  };
}

export class Engine {
  readonly #s: EngineState;

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
      store: new ResidentStore(options.store),
      fs,
      spillDir,
      spill: new SpilledTimers(fs, spillDir, options.spillBucketWidthMs ?? spillLimits.bucketWidthMs),
      checkTarget: options.checkTarget,
      admitGate: options.admitGate,
    });
  }

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
    return engine;
  }

  /** Timers waiting to be delivered (pending or retrying). */
  get pending(): number {
    return (this.#s.counts[timerState.pending] as number) + (this.#s.counts[timerState.retrying] as number) + this.#s.spilledPending();
  }

  /** Live timers in each state (finished ones until their retention ends). */
  countsByState(): Record<TimerStateName, number> {
    const counts = this.#s.counts;
    return {
      pending: (counts[timerState.pending] as number) + this.#s.spilledPending(),
      delivering: counts[timerState.delivering] as number,
      retrying: counts[timerState.retrying] as number,
      delivered: counts[timerState.delivered] as number,
      dead: counts[timerState.dead] as number,
      cancelled: counts[timerState.cancelled] as number,
    };
  }

  get resident(): number {
    return this.#s.store.count;
  }

  /** Slots the store's columns hold now (they grow as timers come, up to residentMax). */
  get residentCapacity(): number {
    return this.#s.store.capacity;
  }

  /** Resident timers at most (the store's slots); past it adds are refused with CAPACITY_FULL. */
  get residentMax(): number {
    return this.#s.store.capacityMax;
  }

  /** Arena slabs that were made ahead (their pages mapped off the main thread) when the store opened them. */
  get slabsPrefaulted(): number {
    return this.#s.store.arena.slabsPrefaulted;
  }

  /** Growths of the store's columns that took columns made ahead (their pages mapped off the main thread). */
  get columnGrowthsMadeAhead(): number {
    return this.#s.store.columnGrowthsMadeAhead;
  }

  /** Timers put in memory since open (replayed or admitted; never less): the loader reads ingest's pace from it. */
  get rowsInserted(): number {
    return this.#s.rowsInserted;
  }

  /** Delivery outcomes applied since open (replayed or settled; never less): delivery's pace, for the loader. */
  get outcomesApplied(): number {
    return this.#s.outcomesApplied;
  }

  /** The log, for readiness (poisoned?) and counters. */
  get log(): DurableLog {
    return this.#s.log;
  }

  /**
   * When the next delivery falls due (now, while timers are held back for room), leaving out the
   * expiry of finished timers; undefined when none is resident before the watermark.
   */
  nextDeliveryDueMs(): number | undefined {
    return nextDeliveryDueMs(this.#s);
  }

  /** When the engine next has work. */
  nextDueMs(): number | undefined {
    return nextDueMs(this.#s);
  }

  setDueChangedHook(hook: () => void): void {
    this.#s.onDueChanged = hook;
  }

  /** How a cancel takes back a timer the dispatcher holds (taken ahead, or waiting its turn) but has not sent. */
  setWithdrawHook(hook: Withdraw): void {
    this.#s.withdraw = hook;
  }

  /**
   * Takes up to `max` timers due at `nowMs` (fire time ≤ now, earliest first) out of the heap
   * and marks them delivering.
   */
  takeDue(nowMs: number, max: number, queueRoom?: QueueRoom, ahead?: TakeAhead): DueSlice {
    return takeDue(this.#s, nowMs, max, queueRoom, ahead);
  }

  /** Due timers held back for want of queue room (they are still pending or retrying). */
  get heldBack(): number {
    return this.#s.parkedCount;
  }

  /** The name of the queue with index `index` (DueSlice.queues). */
  queueNameAt(index: number): string {
    return queueNameAt(this.#s, index);
  }

  /** What a dispatcher needs to deliver a timer it was handed. */
  deliveryOf(seq: number, row: number): TimerDelivery | undefined {
    return deliveryOf(this.#s, seq, row);
  }

  /** As deliveryOf, into `into` (one object filled again for every timer) and with no view made. */
  deliveryInto(seq: number, row: number, into: TimerDeliveryRef): boolean {
    return deliveryInto(this.#s, seq, row, into);
  }

  /** Records delivery outcomes. */
  async settle(outcomes: Outcomes): Promise<void> {
    return settle(this.#s, outcomes);
  }

  /** Validates and durably sets a queue's config (a whole replacement. */
  async setQueue(name: string, input: unknown): Promise<QueueConfig> {
    return setQueue(this.#s, name, input);
  }

  queueConfig(name: string): QueueConfig {
    return queueConfig(this.#s, name);
  }

  /** Every queue that was configured or has held a timer, with its config, by name. */
  queues(): Array<{ name: string; config: QueueConfig }> {
    return listQueues(this.#s);
  }

  /** Admits a batch built in process or from JSON. */
  async admit(batch: TimerBatch, options?: { readonly startNow?: boolean }): Promise<Admitted> {
    return admit(this.#s, batch, options);
  }

  /** Checks a batch as admit() does, admitting nothing. */
  validate(batch: TimerBatch): void {
    return validate(this.#s, batch);
  }

  /** Admits an Arrow IPC stream as it arrived; the bytes are logged whole. */
  async admitArrow(ipc: Uint8Array): Promise<Admitted> {
    return admitArrow(this.#s, ipc);
  }

  /** Cancels a timer; resolves once the cancel is durable. */
  cancel(id: string): Promise<CancelOutcome> {
    return cancel(this.#s, id);
  }

  get(id: string): TimerView | undefined {
    return getTimer(this.#s, id);
  }

  /** A timer in memory or on disk (get() answers for timers in memory only, without waiting). */
  async lookup(id: string): Promise<TimerView | undefined> {
    return lookup(this.#s, id);
  }

  /** The payload of a resident timer (a view. */
  payloadOf(id: string): Uint8Array | undefined {
    return payloadOf(this.#s, id);
  }

  /** Dead timers, oldest first (by log position), at most `limit`, optionally of one queue only. */
  listDead(limit: number, queue?: string): DeadTimer[] {
    return listDead(this.#s, limit, queue);
  }

  /** Sends a dead timer round again. */
  async redrive(id: string): Promise<RedriveOutcome> {
    return redrive(this.#s, id);
  }

  async close(): Promise<void> {
    await this.#s.spillWork;
    await this.#s.log.close();
    this.#s.store.close();
  }

  // ---- the spill tier (docs/format/spill.md) ----

  /** The spill tier's figures. */
  spillStats(): SpillStats {
    return {
      watermarkMs: this.#s.spill.watermarkMs,
      spilled: this.#s.spilledPending(),
      runs: this.#s.spill.runs.length,
      tombstones: this.#s.spill.tombstoneCount,
      metadataBytes: this.#s.spill.bytesUsed,
      residentBytes: this.residentBytes(),
      residentReservedBytes: this.#s.store.bytesUsed(),
      budgetBytes: this.#s.memoryBudgetBytes,
      checkpointSeq: this.#s.checkpointSeq,
    };
  }

  /** Told by the memory loader, for stats. */
  setMemoryBudget(bytes: number): void {
    this.#s.memoryBudgetBytes = bytes;
  }

  /** Live bytes of resident timers: their share of the columns and indexes, and their bytes in the arena. */
  residentBytes(): number {
    return this.#s.store.count * residentBytesPerSlot + this.#s.store.arena.bytesLive;
  }

  /**
   * Live bytes of resident pending timers that could spill (never attempted), by the start of
   * the bucket they are due in: what the loader weighs to choose a watermark.
   */
  async spillableBytesByBucket(): Promise<Map<number, number>> {
    const store = this.#s.store;
    const width = this.#s.spill.bucketWidthMs;
    // Tallied by bucket number in a typed array, not a Map updated per timer, and over several
    // turns: the loader asks with up to 2^24 timers resident (1.3 s in one turn at 12.6 million
    // timers with a Map, 0.3 s without). An estimate: timers added or gone meanwhile may or may
    // not be counted. The heap holds a timer unless it is held back or cancelling.
    // The columns are read again after each pause: the store replaces them when it grows.
    let first = Infinity;
    let last = -Infinity;
    for (let from = 0; from < store.capacity; from += spillTallySliceSlots) {
      if (from > 0) await nextTurn();
      const { state, attempts, dueAt, fireAt } = store;
      for (let slot = from, end = Math.min(store.capacity, from + spillTallySliceSlots); slot < end; slot++) {
        if (state[slot] !== timerState.pending || attempts[slot] !== 0 || dueAt[slot] !== fireAt[slot]) continue;
        const bucket = Math.floor((dueAt[slot] as number) / width);
        if (bucket < first) first = bucket;
        if (bucket > last) last = bucket;
      }
    }
    const out = new Map<number, number>();
    if (first > last) return out;
    const tally = last - first < bucketTallyMax ? new Float64Array(last - first + 1) : undefined;
    for (let from = 0; from < store.capacity; from += spillTallySliceSlots) {
      await nextTurn();
      const { state, attempts, dueAt, fireAt } = store;
      for (let slot = from, end = Math.min(store.capacity, from + spillTallySliceSlots); slot < end; slot++) {
        if (state[slot] !== timerState.pending || attempts[slot] !== 0 || dueAt[slot] !== fireAt[slot] || !this.#s.heap.has(slot)) continue;
        const bucket = Math.floor((dueAt[slot] as number) / width);
        const bytes = residentBytesPerSlot + store.bytesLengthOf(slot);
        // A timer added after the first pass may lie outside it: the Map takes it.
        const at = bucket - first;
        if (tally !== undefined && at >= 0 && at < tally.length) tally[at] = (tally[at] as number) + bytes;
        else out.set(bucket * width, (out.get(bucket * width) ?? 0) + bytes);
      }
    }
    if (tally !== undefined) for (let i = 0; i < tally.length; i++) if ((tally[i] as number) > 0) out.set((first + i) * width, (out.get((first + i) * width) ?? 0) + (tally[i] as number));
    return out;
  }

  get bucketWidthMs(): number {
    return this.#s.spill.bucketWidthMs;
  }

  /**
   * Writes a checkpoint (the sequence in docs/format/spill.md): every live timer goes into runs
   * on disk, the pending ones due at or past `watermarkMs` into a spilled run and out of memory;
   * then the log segments it covers are deleted. `watermarkMs` is a bucket start; it only lowers
   * the watermark (Infinity keeps it where it is).
   */
  checkpoint(watermarkMs = Infinity): Promise<CheckpointReport> {
    return this.#serially(async () => {
      let report: CheckpointReport;
      try {
        report = await this.#checkpoint(watermarkMs);
      } finally {
        this.#s.spilling = undefined;
        this.#s.notYetEvicted = 0;
      }
      return { ...report, residentShrunkTo: this.#shrinkResident() };
    });
  }

  /**
   * After a checkpoint that left the store's columns far larger than its timers need (a spill of
   * most of them): the timers move to the lowest slots and the columns, the id and key indexes
   * and the free stack are made again at a size that fits them, so that the memory the spill
   * freed is given back (columns only grow otherwise: 64 bytes a slot, 68 MB after a fill of a
   * million). One turn; skipped while anything holds a slot across turns (an outcome or a
   * cancel being logged), and for large columns while a delivery falls due (it holds the main
   * thread: 5–9 ms over 2^20 slots, 20–70 ms over 2^22). Returns the new capacity, or undefined
   * when nothing moved.
   */
  #shrinkResident(): number | undefined {
    const store = this.#s.store;
    const limits = this.#s.shrinkLimits;
    const capacity = store.shrinkCapacity(limits.residentShrinkShare);
    if (capacity === undefined || this.#s.settling.size > 0 || this.#s.cancelling.size > 0) return undefined;
    // Large columns take a while to go over: not while a delivery falls due.
    const dueMs = nextDeliveryDueMs(this.#s);
    if (store.capacity > limits.residentShrinkBusySlots && dueMs !== undefined && dueMs < this.#s.clock.now() + limits.residentShrinkDueClearMs) return undefined;
    // Held-back timers are kept by handle, which the move makes stale: by slot across it.
    const parkedSlots = this.#s.parked.map((parked) => (parked === undefined ? undefined : parked.handles.slice(parked.head).map((handle) => store.slotOf(handle))));
    const moves = store.shrink(capacity);
    if (moves === undefined) return undefined;
    const movedOf = (slot: number): number => (slot >= 0 && slot < moves.length ? (moves[slot] as number) : -1);
    this.#s.parkedCount = 0;
    parkedSlots.forEach((slots, queue) => {
      const parked = this.#s.parked[queue];
      if (slots === undefined || parked === undefined) return;
      parked.handles = slots.map(movedOf).filter((slot) => slot >= 0).map((slot) => store.handleOf(slot));
      parked.head = 0;
      this.#s.parkedCount += parked.handles.length;
    });
    if (this.#s.deadReasons.size > 0) {
      const reasons = [...this.#s.deadReasons];
      this.#s.deadReasons.clear();
      for (const [slot, reason] of reasons) this.#s.deadReasons.set(movedOf(slot), reason);
    }
    // The indexes, made again over the moved slots: a batch's rows still in consecutive slots are a run again.
    const count = store.count;
    const slots = new Int32Array(count);
    for (let slot = 0; slot < count; slot++) slots[slot] = slot;
    const index = new SlotIndex(store);
    const { logSeq, row } = store;
    for (let from = 0; from < count; ) {
      let to = from + 1;
      while (to < count && logSeq[to] === logSeq[from] && row[to] === (row[to - 1] as number) + 1) to++;
      index.insertBatch(slots.subarray(from, to), to - from);
      from = to;
    }
    this.#s.index = index;
    const keys = new KeyIndex(store);
    const keyed = slots.filter((slot) => store.keyLengthOf(slot) > 0);
    keys.insertMany(keyed, Uint32Array.from(keyed, (slot) => keyHash(store.keyOf(slot))), keyed.length);
    this.#s.keys = keys;
    return capacity;
  }

  /** Brings every spilled timer due before `toMs` (a bucket start) into memory; logged first. Returns how many. */
  promote(toMs: number): Promise<number> {
    return this.#serially(() => promote(this.#s, toMs, true));
  }

  #serially<T>(work: () => Promise<T>): Promise<T> {
    const result = this.#s.spillWork.then(work);
    this.#s.spillWork = result.then(
      () => undefined,
      () => undefined,
    );
    return result;
  }

  async #checkpoint(requestedMs: number): Promise<CheckpointReport> {
    assert.ok(requestedMs === Infinity || requestedMs === this.#s.spill.bucketStartOf(requestedMs), 'a watermark is a bucket start');
    const memory = await this.#snapshotMemory();
    // Between macrotasks every durable record has been applied and no later one has: the
    // store is exactly the log up to its last durable sequence.
    await nextTurn();
    const coveredSeq = this.#s.log.lastSeq;
    const watermarkMs = Math.min(requestedMs, this.#s.spill.watermarkMs);
    // The fence first: from now on nothing due at or past the watermark is handed out.
    this.#s.spill.lowerWatermark(watermarkMs);
    const taken = this.#snapshot(watermarkMs, memory);
    this.#s.spilling = taken.spilling;
    // A spilled timer's cancel tombstones it before its record is durable; this checkpoint covers
    // durable records only, so until then the timer stays in its runs and untombstoned on disk.
    const tombstones = this.#s.cancellingSpilled.size === 0 ? this.#s.spill.tombstoneColumns() : withoutTombstones(this.#s.spill.tombstoneColumns(), this.#spilledCancelsInFlight());
    // Configured queues, in the QUEUE record's JSON form (read back the way replay reads it).
    const queues = [...this.#s.queueConfigs].map(([name, config]) => JSON.parse(utf8.decode(encodeQueueRecord(name, config))) as { name: string; config: unknown });
    const releasedExpiryMaxMs = this.#s.releasedExpiryMax;
    // From here the store keeps changing; the snapshot does not. Its timers are copied into
    // run rows a slice at a time and written as they are, over several turns, reading their
    // bytes through the hold (released once both runs are written).
    const fs = this.#s.fs;
    const dir = this.#s.spillDir;
    const runOptions = { bucketWidthMs: this.#s.spill.bucketWidthMs };
    let residentMeta: RunMeta;
    let spilledMeta: RunMeta | undefined;
    // The spilled timers in their run's order (filled as it is written): handles for the
    // eviction, and where each is on disk.
    const spilledCount = taken.spilled.store.count;
    const spilledHandles = new Float64Array(spilledCount);
    const spilledIds: SpilledRowIds = { seq: new Float64Array(spilledCount), row: new Uint32Array(spilledCount), fireAtMs: new Float64Array(spilledCount) };
    try {
      await fs.mkdirp(dir);
      residentMeta = await this.#writeTaken(taken.resident, this.#s.nextRunId++, coveredSeq, runOptions);
      if (spilledCount > 0) spilledMeta = await this.#writeTaken(taken.spilled, this.#s.nextRunId++, coveredSeq, runOptions, { byTaken: taken.spilledHandles, handles: spilledHandles, ids: spilledIds });
    } finally {
      taken.resident.store.release();
      taken.spilled.store.release();
    }
    let bytesWritten = residentMeta.bytes;
    let spilledRuns: SpilledRun[] = this.#s.spill.runs.map((run) => ({ meta: run.meta, validFromMs: run.validFromMs, keyHashes: run.keyHashes }));
    if (spilledMeta !== undefined) {
      bytesWritten += spilledMeta.bytes;
      spilledRuns.push({ meta: spilledMeta, validFromMs: watermarkMs, keyHashes: await readRunKeys(fs, dir, spilledMeta) });
    }
    // Too many runs make every lookup and promotion read more files, and tombstones take memory
    // and disk: merge the runs into one, leaving out what was promoted (below a run's
    // validFromMs) and what was cancelled.
    let tombstonesKept = tombstones;
    const tombstonesPiledUp = tombstones.seqs.length > Math.max(memoryLimits.tombstonesCompactMin, this.#s.spill.count * memoryLimits.tombstonesCompactShare);
    if (spilledRuns.length > memoryLimits.spilledRunsMax || (tombstonesPiledUp && spilledRuns.length > 0)) {
      const inputs = spilledRuns;
      const cancelled = new Set<string>();
      for (let i = 0; i < tombstones.seqs.length; i++) cancelled.add(`${tombstones.seqs[i]}:${tombstones.rows[i]}`);
      const meta = await compactRuns(
        fs,
        dir,
        inputs.map((run) => run.meta),
        this.#s.nextRunId++,
        coveredSeq,
        (seq, row, dueAtMs, input) => dueAtMs < Math.max((inputs[input] as SpilledRun).validFromMs, watermarkMs) || cancelled.has(`${seq}:${row}`),
        runOptions,
      );
      bytesWritten += meta.bytes;
      spilledRuns = [{ meta, validFromMs: watermarkMs, keyHashes: await readRunKeys(fs, dir, meta) }];
      // Every tombstone of the snapshot guarded a row the merge left out.
      tombstonesKept = { seqs: new Float64Array(0), rows: new Uint32Array(0), fireAtMs: new Float64Array(0) };
    }
    // The runs' names are durable before the manifest that names them.
    await fs.syncDir(dir);
    failpoint('checkpoint.runs-written');
    const manifest: Manifest = {
      checkpointSeq: coveredSeq,
      watermarkMs,
      releasedExpiryMaxMs,
      nextRunId: this.#s.nextRunId,
      residentRun: residentMeta,
      spilledRuns: spilledRuns.map((run) => ({ ...run.meta, validFromMs: run.validFromMs })),
      queues,
      tombstones: tombstonesKept,
    };
    await writeManifest(fs, dir, manifest);
    failpoint('checkpoint.manifest-installed');
    // Durable: the spilled timers leave memory, and the log before the checkpoint can go.
    // Tombstones added while it was written guard rows of the new runs too: they stay.
    const tombstonesNow = this.#s.spill.tombstoneColumns();
    this.#s.spill.reset(spilledRuns, watermarkMs, tombstonesKept === tombstones ? tombstonesNow : withoutTombstones(tombstonesNow, tombstones));
    this.#s.notYetEvicted = spilledHandles.length;
    await this.#evictSpilled(spilledHandles, spilledIds);
    // The evicted timers' bytes leave holes in the arena's slabs: a few timers left in a slab
    // would keep all of it (4 MiB), so slabs mostly emptied are compacted now.
    const arena = this.#s.store.arena;
    if (arena.bytesLive < arena.bytesReserved * memoryLimits.arenaLiveShareMin) this.#s.store.compact();
    this.#s.checkpointSeq = coveredSeq;
    // What the checkpoint covers leaves the log (a quiet WAL's last segment too: sealed, it goes with the others).
    const segmentsDeleted = await this.#s.log.truncateCovered(coveredSeq);
    failpoint('checkpoint.segments-deleted');
    // A lookup or a cancel may still be reading a run this checkpoint merged away: it finishes first.
    await this.#s.spill.earlierReadsSettled();
    await removeUnreferenced(fs, dir, manifest);
    return { coveredSeq, watermarkMs, residentRows: residentMeta.rows, spilledRows: spilledHandles.length, bytesWritten, segmentsDeleted };
  }

  /**
   * Takes every live timer as it is now (its fields copied, its bytes held: #writeTaken sorts them
   * by (dueAt, seq, row) and writes them as a run afterwards, yielding as it goes): pending, never
   * attempted timers due at or past the watermark into `spilled` (their handles kept, to evict
   * them once the checkpoint is durable), the rest into `resident`, as the log has them
   * (a delivering timer was not logged as such: it is pending or retrying).
   */
  #snapshot(watermarkMs: number, prepared: SnapshotMemory): { resident: TakenRows; spilled: TakenRows; spilledHandles: Float64Array; spilling: Uint8Array } {
    const store = this.#s.store;
    const { state, attempts, dueAt, fireAt } = store;
    // The memory faulted in beforehand, unless the store outgrew it meanwhile.
    const memory = prepared.slots.length >= store.count && prepared.spilling.length >= store.capacity ? prepared : snapshotMemory(store.count, store.capacity);
    // Typed arrays and plain column reads: this runs in one turn over every slot (2^24 at most),
    // and pushing into arrays and asking Maps per timer held the event loop for seconds.
    // Resident slots fill `slots` from the front, spilled ones from the back; every per-timer
    // array below is indexed like `slots`.
    const count = store.count;
    const slots = memory.slots.subarray(0, count);
    let residentCount = 0;
    let spillFrom = count;
    const cancelling = this.#s.cancelling.size > 0 ? this.#s.cancelling : undefined;
    const spilling = memory.spilling.subarray(0, store.capacity);
    for (let slot = 0; slot < store.capacity; slot++) {
      const slotState = state[slot] as number;
      if (slotState === timerState.free) continue;
      // Only timers due at their fire time spill: a spilled timer is found by its id's fire time.
      const due = dueAt[slot] as number;
      // In the heap: a held-back (parked) timer is due and stays, like one being cancelled.
      const spills = slotState === timerState.pending && attempts[slot] === 0 && due >= watermarkMs && due === fireAt[slot] && cancelling?.has(slot) !== true && this.#s.heap.has(slot);
      if (spills) {
        slots[--spillFrom] = slot;
        spilling[slot] = 1;
      } else slots[residentCount++] = slot;
    }
    assert.equal(residentCount, spillFrom, 'every live slot is taken once');
    const spillSlots = slots.subarray(spillFrom);
    const spilledHandles = memory.handles.subarray(spillFrom, count);
    for (let i = 0; i < spillSlots.length; i++) spilledHandles[i] = store.handleOf(spillSlots[i] as number);
    return { resident: this.#take(memory, 0, residentCount), spilled: this.#take(memory, spillFrom, count), spilledHandles, spilling };
  }

  /**
   * The fields of memory.slots[from, to) and the engine's own per-timer facts (dead reasons,
   * queue names), as they are now, in `memory` at the same indexes.
   */
  #take(memory: SnapshotMemory, from: number, to: number): TakenRows {
    const slots = memory.slots.subarray(from, to);
    const deadReasons = memory.deadReasons.subarray(from, to);
    if (this.#s.deadReasons.size > 0) {
      const state = this.#s.store.state;
      for (let i = 0; i < slots.length; i++) {
        const slot = slots[i] as number;
        if (state[slot] === timerState.dead) deadReasons[i] = this.#s.deadReasons.get(slot) ?? deadReason.none;
      }
    }
    const columns = { dueAt: memory.dueAt.subarray(from, to), state: memory.state.subarray(from, to), attempts: memory.attempts.subarray(from, to), lastStatus: memory.lastStatus.subarray(from, to) };
    return { store: this.#s.store.snapshot(slots, columns), deadReasons, queueNames: [...this.#s.queueNames] };
  }

  /**
   * Memory for the next snapshot, faulted in a few MiB a turn before the snapshot's own turn,
   * which would otherwise wait for the kernel to zero it all (about 280 MB at 12.6 million
   * timers; 1.9 ms a MiB on the VM measured). Room for timers admitted meanwhile.
   */
  async #snapshotMemory(): Promise<SnapshotMemory> {
    const store = this.#s.store;
    const memory = snapshotMemory(Math.min(store.capacityMax, Math.ceil(store.count * 1.05) + 1024), store.capacity);
    let touched = 0;
    for (const array of [memory.slots, memory.spilling, memory.dueAt, memory.state, memory.attempts, memory.lastStatus, memory.deadReasons, memory.handles]) {
      const stride = pageBytes / array.BYTES_PER_ELEMENT;
      for (let i = 0; i < array.length; i += stride) {
        array[i] = 0;
        touched += pageBytes;
        if (touched % prefaultSliceBytes === 0) await nextTurn();
      }
    }
    return memory;
  }

  /**
   * Writes the taken timers as run `runId`, sorted by (dueAt, seq, row); returns its metadata.
   * With `inRunOrder`, it also puts each row's handle (from byTaken, by taken index), log
   * position and fire time there, in the run's order (the eviction's lists). The rows are
   * copied a slice at a time into one of two builders, reused: the next slice is copied while
   * the last one is written.
   * Copying every timer at once had a checkpoint under memory pressure allocate as much again as
   * the timers it wrote, all of it freshly faulted in (on a VM, zeroing those pages was most of
   * the copy's cost), and wrote nothing before the whole copy was done.
   */
  async #writeTaken(
    taken: TakenRows,
    runId: number,
    stamp: number,
    options: RunWriteOptions,
    inRunOrder?: { readonly byTaken: Float64Array; readonly handles: Float64Array; readonly ids: SpilledRowIds },
  ): Promise<RunMeta> {
    const { store, deadReasons, queueNames } = taken;
    const columns = store.columns;
    const count = store.count;
    const sliceRows = spillLimits.checkpointSliceRows;
    // The log positions, for the order: read from the store after the snapshot's turn, 16 slices a turn.
    const logSeq = new Float64Array(count);
    const row = new Uint32Array(count);
    for (let i = 0; i < count; i++) {
      if (i > 0 && i % (sliceRows * 16) === 0) await nextTurn();
      logSeq[i] = store.logSeqOf(i);
      row[i] = store.rowOf(i);
    }
    const order = await runOrder({ dueAt: columns.dueAt, logSeq, row }, this.#s.spill.bucketWidthMs, sliceRows, () => nextTurn());
    const builders = [new RunRowsBuilder(Math.min(Math.max(1, count), sliceRows)), new RunRowsBuilder(Math.min(Math.max(1, count), sliceRows))];
    const fields: { -readonly [K in keyof RunRowFields]: number } = { seq: 0, row: 0, fireAtMs: 0, dueAtMs: 0, state: 0, attempts: 0, lastStatus: 0, deadReason: 0 };
    const writer = await RunWriter.create(this.#s.fs, this.#s.spillDir, runId, stamp, options);
    // The slice being written, while the next is copied; at most one append is in flight.
    let writing: Promise<void> = Promise.resolve();
    try {
      for (let from = 0, turn = 0; from < count; from += sliceRows, turn++) {
        // A turn for the event loop between slices, whether or not the last write is done.
        if (from > 0) await nextTurn();
        // Its last rows were written two turns ago (awaited in the turn before this one).
        const builder = builders[turn % 2] as RunRowsBuilder;
        builder.reset();
        for (let at = from, end = Math.min(count, from + sliceRows); at < end; at++) {
          const i = order[at] as number;
          const state = columns.state[i] as number;
          const attempts = columns.attempts[i] as number;
          fields.seq = logSeq[i] as number;
          fields.row = row[i] as number;
          fields.fireAtMs = store.fireAtOf(i);
          fields.dueAtMs = columns.dueAt[i] as number;
          // A delivering timer was not logged as such: it is pending or retrying.
          fields.state = state === timerState.delivering ? (attempts > 0 ? timerState.retrying : timerState.pending) : state;
          fields.attempts = attempts;
          fields.lastStatus = columns.lastStatus[i] as number;
          fields.deadReason = deadReasons[i] as number;
          builder.append(fields, queueNames[store.queueIndexOf(i)] as string, store.targetOf(i), store.keyOf(i), store.payloadOf(i), store.headersOf(i));
          if (inRunOrder !== undefined) {
            inRunOrder.handles[at] = inRunOrder.byTaken[i] as number;
            inRunOrder.ids.seq[at] = fields.seq;
            inRunOrder.ids.row[at] = fields.row;
            inRunOrder.ids.fireAtMs[at] = fields.fireAtMs;
          }
        }
        await writing;
        writing = writer.append(builder.finish());
        // Awaited in the next turn or below; a failure meanwhile is not an unhandled rejection.
        writing.catch(() => undefined);
      }
      await writing;
      return await writer.finish();
    } catch (err) {
      // No write may still be landing when the file is closed.
      await writing.catch(() => undefined);
      await writer.abort();
      throw err;
    }
  }

  /**
   * After a durable checkpoint: the timers it spilled leave memory. One that changed since the
   * snapshot (a cancel being logged) stays, and its copy on disk is tombstoned, never promoted.
   */
  async #evictSpilled(handles: Float64Array, rows: SpilledRowIds): Promise<void> {
    // In slices, yielding between them: evicting half a million timers at once held the event
    // loop for over a second. Meanwhile the rest stay in memory as well as on disk: fenced by
    // the watermark (never handed out), and a cancel of one is logged as CANCEL_SPILLED
    // (#spilling), so its slice tombstones its copy on disk.
    for (let from = 0; from < handles.length; from += spillLimits.checkpointSliceRows) {
      if (from > 0) await nextTurn();
      this.#evictSlice(handles, rows, from, Math.min(handles.length, from + spillLimits.checkpointSliceRows));
    }
  }

  #evictSlice(handles: Float64Array, rows: SpilledRowIds, from: number, to: number): void {
    const store = this.#s.store;
    const evicted = new Int32Array(to - from);
    let count = 0;
    for (let i = from; i < to; i++) {
      const slot = store.slotOf(handles[i] as number);
      // Gone: cancelled while the checkpoint was written, and its retention already over. Its
      // copy on disk must never be promoted.
      if (slot < 0) {
        this.#s.spill.tombstone(rows.seq[i] as number, rows.row[i] as number, rows.fireAtMs[i] as number);
        continue;
      }
      if (store.state[slot] !== timerState.pending || store.attempts[slot] !== 0 || this.#s.cancelling.has(slot) || !this.#s.heap.has(slot)) {
        this.#s.spill.tombstone(store.logSeq[slot] as number, store.row[slot] as number, store.fireAt[slot] as number);
        continue;
      }
      evicted[count++] = slot;
    }
    // Out of the heap at once: one O(n) rebuild when that is cheaper than a removal each.
    this.#s.heap.removeMany(evicted.subarray(0, count));
    for (let i = 0; i < count; i++) {
      const slot = evicted[i] as number;
      this.#s.index.delete(store.logSeq[slot] as number, store.row[slot] as number);
      if (store.keyLengthOf(slot) > 0) this.#s.keys.delete(slot, keyHash(store.keyOf(slot)));
      if (this.#s.spilling !== undefined) this.#s.spilling[slot] = 0;
      store.release(slot);
    }
    this.#s.counts[timerState.pending] = (this.#s.counts[timerState.pending] as number) - count;
    this.#s.notYetEvicted -= to - from;
  }

  /** The timers whose spilled cancel is under way (tombstoned, maybe, but not yet logged). */
  #spilledCancelsInFlight(): TombstoneSet {
    const names = [...this.#s.cancellingSpilled.keys()].map((name) => name.split(':').map(Number));
    return { seqs: Float64Array.from(names, ([seq]) => seq as number), rows: Uint32Array.from(names, ([, row]) => row as number), fireAtMs: new Float64Array(names.length) };
  }

}
