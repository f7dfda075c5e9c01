// The resident timers: every timer due before the horizon, held as one row of typed-array
// columns (no JavaScript object per timer), addressed by slot. Owned by the main thread (the
// engine's state); nothing here is shared with dispatch workers or touched off-thread.
//
// Contract: allocate() takes a free slot (or a new one, growing the columns up to capacityMax;
// past it, -1 so the caller can answer 503) and copies the payload, headers and key into the
// arena; release() gives the slot back and bumps its generation. Outside code keeps handles,
// not slots: a handle is one safe integer carrying slot and generation, and slotOf(handle)
// answers -1 once the slot was released, even after it was taken again. Columns are read
// directly (store.fireAt[slot]) and written through the setters, which assert the slot is
// live. A bug (releasing a free slot, a bad column value) is an assertion. Columns only grow
// as timers come; once most have left (a spill), shrink() moves the rest to the lowest slots
// into columns that fit them, and every handle given out before goes stale (the moved timers,
// and slots first used after it, take a generation above all given out).
//
// This file is the store's contract and what goes through it: allocation, release, the
// setters, the bytes of a slot, snapshots, compaction and shrink. Beside it:
//   resident-layout.ts   the limits the columns' widths set, the handle's bits, the types
//   resident-columns.ts  the columns themselves, their growth and their move on a shrink
//   free-slots.ts        the high-water mark, the stack of released slots, the generation floor
//   column-growth.ts     the capacities a growth goes to, the columns' bytes and their layout
//   shrink.ts            the capacity worth shrinking to and where each live timer moves
//   target-table.ts      the interned targets the targetIndex column points into
//   timer-state.ts       the codes of the state column
//   byte-arena.ts        the payload, headers and key bytes
//   due-slot-counts.ts   pending and retrying timers counted by due time, and
//   queue-state-counts.ts  every timer by queue and state, both kept by the setters (and
//                      allocation, release) once the engine gives them (countIn)
//   ../memory/columns-ahead.ts   tuning: the next growth's columns made ahead, their pages
//                      mapped off the main thread, once the engine says rows are coming
//                      (prefaultColumnsFor); the growth then takes them and is a copy only
//
// Per-timer cost, in bytes per slot of capacity (capacity is at most twice the count):
//
//   fireAt f64 8 · dueAt f64 8 · logSeq f64 8 · row u32 4 · generation u32 4 · state u8 1
//   attempts u16 2 · queueIndex u16 2 · targetIndex u32 4 · lastStatus u16 2
//   bytesOffset u32 4 · bytesSlab u16 2 · payloadLength u32 4 · headersLength u16 2
//   keyLength u16 2                                                         = 57 bytes a slot
//   + 4 bytes a slot for each index column other structures keep here (a timer heap: 2 once
//     it is first pushed to)
//   + payload, headers, key and callback bytes in the arena (one joined string: one ref, three
//     lengths; the top bit of keyLength says a callbacks run follows the key, and the run says
//     its own length: callback-bytes.ts)
//   + 4 bytes per free slot (the free stack grows with releases, not with capacity)
//   + per distinct target: its string, a Map entry and a u32 refcount (shared by its timers)
//
// Payload, headers and key share one arena string because they are added and freed together;
// that saves a second and third ref per timer. The headers start at the ref + payloadLength,
// the key after them.
//
// fireAt is the fire time the timer was added with, and never changes (a timer's id carries
// it); dueAt is when it is next due: the fire time, then each retry's time. The heap orders by
// dueAt.
import assert from 'node:assert/strict';
import { storeLimits } from '../limits.ts';
import type { ColumnsAheadOptions } from '../memory/columns-ahead.ts';
import { callbacksRunBytesAt, callbacksRunHeaderBytes, keysWithCallbacks } from './callback-bytes.ts';
import { ByteArena, type ByteArenaOptions } from './byte-arena.ts';
import { countsAsDue, type DueSlotCounts } from './due-slot-counts.ts';
import type { QueueStateCounts } from './queue-state-counts.ts';
import { capacityTowards, columnsBytes, doubledCapacity } from './column-growth.ts';
import { FreeSlots } from './free-slots.ts';
import { ResidentColumns } from './resident-columns.ts';
import {
  assertRowsFit,
  type BatchRows,
  type IndexColumn,
  type IndexColumnKind,
  keyHasCallbacksBit,
  type ReadonlyColumn,
  residentCapacityLimit,
  residentGenerationMax,
  residentHeadersBytesMax,
  residentKeyBytesMax,
  residentQueueCountMax,
  residentSlotSpan,
  type TimerFields,
} from './resident-layout.ts';
import { planShrink, shrinkCapacity } from './shrink.ts';
import { StoreSnapshot, type StoreSnapshotColumns } from './store-snapshot.ts';
import { TargetTable } from './target-table.ts';
import { timerState, type TimerStateCode } from './timer-state.ts';

// Importers take the store's names from here: the layout's too.
export { columnsBytes, timerState, type TimerStateCode };
export * from './resident-layout.ts';

const noBytes = new Uint8Array(0);

/** The store's sizes, and (tests) the tuning of the columns it makes ahead (memory/columns-ahead.ts). */
export interface ResidentStoreOptions extends ColumnsAheadOptions {
  readonly capacityInitial?: number;
  readonly capacityMax?: number;
  /** Lower than residentGenerationMax only in tests, to reach slot retirement quickly. */
  readonly generationMax?: number;
  readonly arena?: ByteArenaOptions;
}

/** Extends its columns (resident-columns.ts) rather than holding them: a column read through a getter, once per timer on the engine's paths, is one load and not two. */
export class ResidentStore extends ResidentColumns {

  #capacityMax: number;
  /** While a log is replayed, growth may pass capacityMax (beginReplay). */
  #replaying = false;
  readonly generationMax: number;
  /** Payload and headers bytes; read its counters for stats, never add or free through it. */
  readonly arena: ByteArena;

  #count = 0;
  /** Counts the changes to which slots hold timers, and to their due times and states (see changes). */
  #changes = 0;
  /** Which slots are free (free-slots.ts). */
  readonly #slots = new FreeSlots();

  /** The targets the targetIndex column points into (target-table.ts). */
  readonly #targets = new TargetTable();
  /** The table's names, the same array for its life: read by targetOf() once per timer delivered. */
  readonly #targetNames = this.#targets.names;
  /** Pending and retrying timers by due time (due-slot-counts.ts), kept by the setters once countIn() gives it. */
  #dueCounts: DueSlotCounts | undefined;
  /** Live timers by queue and state (queue-state-counts.ts), kept the same way. */
  #queueCounts: QueueStateCounts | undefined;

  constructor(options: ResidentStoreOptions = {}) {
    const capacityMax = options.capacityMax ?? storeLimits.residentTimersMax;
    const generationMax = options.generationMax ?? residentGenerationMax;
    assert.ok(Number.isSafeInteger(capacityMax) && capacityMax >= 1 && capacityMax <= residentCapacityLimit, 'capacityMax out of range');
    assert.ok(Number.isSafeInteger(generationMax) && generationMax >= 1 && generationMax <= residentGenerationMax, 'generationMax out of range');
    const capacity = Math.min(options.capacityInitial ?? storeLimits.residentTimersInitial, capacityMax);
    assert.ok(Number.isSafeInteger(capacity) && capacity >= 1, 'capacityInitial must be a positive integer');
    super(capacity, options);
    this.#capacityMax = capacityMax;
    this.generationMax = generationMax;
    this.arena = new ByteArena(options.arena);
  }

  /** From now on, pending and retrying timers are counted in `due` by when they are due, and every timer in `byQueue` by queue and state (given before any timer is). */
  countIn(due: DueSlotCounts, byQueue: QueueStateCounts): void {
    assert.ok(this.#count === 0 && this.#dueCounts === undefined, 'counts start with an empty store');
    this.#dueCounts = due;
    this.#queueCounts = byQueue;
  }

  /** The due counts countIn() gave, if any. */
  get dueCounts(): DueSlotCounts | undefined {
    return this.#dueCounts;
  }

  /** The counts by queue and state countIn() gave, if any. */
  get queueCounts(): QueueStateCounts | undefined {
    return this.#queueCounts;
  }

  /** Live timers. */
  get count(): number {
    return this.#count;
  }

  /**
   * Grows with every change to which slots hold timers (allocations, releases, a shrink) and to
   * their due times and states: a scan that saw the same count before and after a pass over the
   * slots, and sees it again later, knows that pass's findings still hold (timer-query.ts).
   */
  get changes(): number {
    return this.#changes;
  }

  /** Slots at or past this were never used: a pass over every live timer stops here. */
  get slotsUsed(): number {
    return this.#slots.highWater;
  }

  /** Live timers at most: allocate() answers -1 past it (the caller refuses adds with CAPACITY_FULL). */
  get capacityMax(): number {
    return this.#capacityMax;
  }

  /**
   * From here until endReplay(), the store grows past capacityMax (up to what a handle
   * addresses): a log replayed at open may hold more timers than this life's limit (a restart
   * with a smaller memory budget, on a smaller machine), and every one of them must come back.
   */
  beginReplay(): void {
    this.#replaying = true;
  }

  /** Ends beginReplay(): capacityMax rises to the slots the replay took, if it passed it. */
  endReplay(): void {
    this.#replaying = false;
    this.#capacityMax = Math.max(this.#capacityMax, this.columnCapacity);
  }

  #limit(): number {
    return this.#replaying ? residentCapacityLimit : this.#capacityMax;
  }

  /** The capacity a growth to hold `needed` slots may reach: past capacityMax only when a replay needs more. */
  #growthCap(needed: number): number {
    return this.#replaying && needed > this.#capacityMax ? residentCapacityLimit : this.#capacityMax;
  }

  /** Slots the columns hold now; grows by doubling up to capacityMax. */
  get capacity(): number {
    return this.columnCapacity;
  }

  /** Distinct targets interned. */
  get targetCount(): number {
    return this.#targets.size;
  }

  // The columns. Growth replaces them, so read these again after any allocate().
  get fireAt(): ReadonlyColumn {
    return this.fireAtColumn;
  }
  get dueAt(): ReadonlyColumn {
    return this.dueAtColumn;
  }
  get logSeq(): ReadonlyColumn {
    return this.logSeqColumn;
  }
  get row(): ReadonlyColumn {
    return this.rowColumn;
  }
  get state(): ReadonlyColumn {
    return this.stateColumn;
  }
  get attempts(): ReadonlyColumn {
    return this.attemptsColumn;
  }
  get queueIndex(): ReadonlyColumn {
    return this.queueIndexColumn;
  }
  get targetIndex(): ReadonlyColumn {
    return this.targetIndexColumn;
  }
  get lastStatus(): ReadonlyColumn {
    return this.lastStatusColumn;
  }

  /** Whether `n` more allocations would succeed (a batch is admitted whole or not at all). */
  canAllocate(n: number): boolean {
    return n <= this.#slots.count + (this.#limit() - this.#slots.highWater);
  }

  /** Allocates a timer from one object; the hot path uses allocateRaw(). Returns -1 when full. */
  allocate(fields: TimerFields): number {
    const targetIndex = this.internTarget(fields.target);
    const slot = this.allocateRaw(fields.fireAt, fields.logSeq, fields.row, fields.queueIndex, targetIndex, fields.payload, fields.headers, fields.key, fields.callbacks);
    this.releaseTarget(targetIndex);
    return slot;
  }

  /**
   * Allocates a pending timer; returns its slot, or -1 when capacityMax slots are live.
   * `targetIndex` is pinned by the caller (internTarget()); the timer takes its own reference,
   * dropped by release().
   */
  allocateRaw(
    fireAt: number,
    logSeq: number,
    row: number,
    queueIndex: number,
    targetIndex: number,
    payload: Uint8Array,
    headers: Uint8Array,
    key: Uint8Array = noBytes,
    callbacks: Uint8Array = noBytes,
  ): number {
    assert.ok(Number.isFinite(fireAt), 'fireAt must be a finite number of ms');
    assert.ok(Number.isSafeInteger(logSeq) && logSeq >= 0, 'logSeq must be a non-negative safe integer');
    assert.ok(row >>> 0 === row, 'row must be a u32');
    assert.ok(queueIndex >>> 0 === queueIndex && queueIndex < residentQueueCountMax, 'queueIndex must be a u16');
    assert.ok(this.#targets.isInterned(targetIndex), 'targetIndex is not an interned target: pin it with internTarget()');
    const slot = this.#takeSlot();
    if (slot < 0) return -1;
    this.#changes++;
    this.fireAtColumn[slot] = fireAt;
    this.dueAtColumn[slot] = fireAt;
    this.logSeqColumn[slot] = logSeq;
    this.rowColumn[slot] = row;
    this.stateColumn[slot] = timerState.pending;
    this.attemptsColumn[slot] = 0;
    this.queueIndexColumn[slot] = queueIndex;
    this.targetIndexColumn[slot] = targetIndex;
    this.lastStatusColumn[slot] = 0;
    assert.ok(headers.length <= residentHeadersBytesMax && key.length <= residentKeyBytesMax, 'headers or key longer than its u16 length column');
    // A timer with callbacks (rare) joins them after its key: one copy more, no arena change.
    const keyAndCallbacks = callbacks.length === 0 ? key : Buffer.concat([key, callbacks]);
    this.setBytesRef(slot, this.arena.addJoined(payload, headers, keyAndCallbacks));
    this.payloadLengthColumn[slot] = payload.length;
    this.headersLengthColumn[slot] = headers.length;
    this.keyLengthColumn[slot] = callbacks.length === 0 ? key.length : key.length | keyHasCallbacksBit;
    this.#targets.addRef(targetIndex);
    this.#count++;
    this.#dueCounts?.add(fireAt, 1);
    this.#queueCounts?.add(queueIndex, timerState.pending, 1);
    return slot;
  }

  /**
   * Allocates a pending timer for each of `count` rows of a batch logged at `logSeq`: row
   * rows[i] (row i when `rows` is undefined) into slot slotsOut[i]. `queueIndexOf` and
   * `targetIndexOf` map the batch's queue and target positions to queue indexes and pinned
   * targets (internTarget()). The caller has checked canAllocate(count): a batch goes in whole.
   * This is the admit and replay path: what can be checked once per batch is, the rows are
   * checked before any is written, and the arena takes the batch's bytes in one call.
   */
  allocateRows(
    batch: BatchRows,
    logSeq: number,
    rows: Int32Array | undefined,
    count: number,
    queueIndexOf: readonly number[],
    targetIndexOf: readonly number[],
    slotsOut: Int32Array,
  ): void {
    assert.ok(Number.isSafeInteger(logSeq) && logSeq >= 0, 'logSeq must be a non-negative safe integer');
    assert.ok(this.canAllocate(count) && slotsOut.length >= count && (rows === undefined || rows.length >= count), 'allocateRows needs room for every row');
    for (const queueIndex of queueIndexOf) assert.ok(queueIndex >>> 0 === queueIndex && queueIndex < residentQueueCountMax, 'queueIndex must be a u16');
    for (const targetIndex of targetIndexOf) assert.ok(this.#targets.isInterned(targetIndex), 'targetIndex is not an interned target: pin it with internTarget()');
    const { fireAtMs, queueIndex: batchQueues, targetIndex: batchTargets, payload, headers, keys } = batch;
    assertRowsFit(batch, rows, count);
    this.reserve(count);
    this.#changes++;
    // The columns as they are after reserve(), which may have grown them.
    const { fireAtColumn: fireAt, dueAtColumn: dueAt, logSeqColumn: logSeqs, rowColumn, generationColumn: generation, stateColumn: state } = this;
    const { attemptsColumn: attempts, queueIndexColumn: queueIndex, targetIndexColumn: targetIndex, lastStatusColumn: lastStatus } = this;
    const { payloadLengthColumn: payloadLength, headersLengthColumn: headersLength, keyLengthColumn: keyLength } = this;
    // A batch with callbacks copies each row's run after its key (callback-bytes.ts): the arena
    // takes key and run as one part. Without, nothing is made.
    let hasRun: Uint8Array | undefined;
    let thirdColumn = keys;
    if (batch.callback !== undefined && batch.failureCallback !== undefined) {
      hasRun = new Uint8Array(fireAtMs.length);
      thirdColumn = keysWithCallbacks(keys, batch.callback, batch.failureCallback, fireAtMs.length, hasRun);
    }
    const targetRefs = this.#targets.refs;
    const slots = this.#slots;
    const payloadOffsets = payload.offsets;
    const headersOffsets = headers.offsets;
    const keyOffsets = keys.offsets;
    // Released slots first, the top `reused` of the free stack in the order they were released:
    // a batch released in slot order (finished timers expire in the order they finished) is taken
    // again in slot order, so its rows stay runs of consecutive slots for the timer heap.
    const reused = Math.min(count, slots.count);
    const reusedFrom = slots.takeTop(reused);
    const freeSlots = slots.stack;
    // The rest take fresh slots from the high-water mark on, at the generation floor.
    const floor = slots.generationFloor;
    let fresh = slots.highWater;
    for (let i = 0; i < count; i++) {
      const row = rows === undefined ? i : (rows[i] as number);
      let slot: number;
      if (i < reused) slot = freeSlots[reusedFrom + i] as number;
      else {
        slot = fresh++;
        generation[slot] = floor;
      }
      const time = fireAtMs[row] as number;
      const target = targetIndexOf[batchTargets[row] as number] as number;
      fireAt[slot] = time;
      dueAt[slot] = time;
      logSeqs[slot] = logSeq;
      rowColumn[slot] = row;
      state[slot] = timerState.pending;
      attempts[slot] = 0;
      queueIndex[slot] = queueIndexOf[batchQueues[row] as number] as number;
      targetIndex[slot] = target;
      lastStatus[slot] = 0;
      payloadLength[slot] = (payloadOffsets[row + 1] as number) - (payloadOffsets[row] as number);
      headersLength[slot] = (headersOffsets[row + 1] as number) - (headersOffsets[row] as number);
      keyLength[slot] = ((keyOffsets[row + 1] as number) - (keyOffsets[row] as number)) | (hasRun !== undefined && hasRun[row] === 1 ? keyHasCallbacksBit : 0);
      targetRefs[target] = (targetRefs[target] as number) + 1;
      slotsOut[i] = slot;
    }
    slots.highWater = fresh;
    this.#dueCounts?.addRows(fireAtMs, rows, count);
    this.#queueCounts?.addRows(queueIndexOf, batchQueues, rows, count, timerState.pending);
    this.arena.addRows(payload, headers, thirdColumn, rows, count, slotsOut, this.bytesSlabColumn, this.bytesOffsetColumn);
    this.#count += count;
  }

  /** Grows the columns, if needed, so that `n` more allocations take slots without growing them. */
  reserve(n: number): void {
    const fresh = n - this.#slots.count;
    if (fresh <= this.columnCapacity - this.#slots.highWater) return;
    const needed = this.#slots.highWater + fresh;
    assert.ok(needed <= this.#limit(), 'reserve beyond capacityMax');
    this.growColumns(Math.min(doubledCapacity(this.columnCapacity, needed), this.#growthCap(needed)));
  }

  /**
   * As reserve(n); but when the columns must grow, they grow to `expectedSlots` (what the
   * caller expects to hold in the end; at least what n needs) instead of doubling: one copy
   * into columns of the final size rather than a chain of copies, each into fresh memory.
   * Recovery does this while it replays the log, whose size tells how many timers are to come.
   * An expectation that falls short still grows them by half at least, so that a run of low
   * guesses cannot turn growth into a copy per batch.
   */
  reserveTowards(n: number, expectedSlots: number): void {
    const fresh = n - this.#slots.count;
    if (fresh <= this.columnCapacity - this.#slots.highWater) return;
    const needed = this.#slots.highWater + fresh;
    assert.ok(needed <= this.#limit(), 'reserve beyond capacityMax');
    this.growColumns(Math.min(capacityTowards(this.columnCapacity, needed, expectedSlots), this.#growthCap(needed)));
  }

  /**
   * Says that about `rows` more timers are to be allocated soon (batches being logged): once
   * they near the capacity, the columns of the next growth are made ahead, their pages mapped
   * off the main thread (memory/columns-ahead.ts), so the growth is a copy and neither it nor
   * the rows that follow stop for page faults. A growth that comes before they are made
   * allocates its own, as without them. Columns made and not taken are let go once no call has
   * asked for them for a while, or by dropPrefaulted or close.
   */
  prefaultColumnsFor(rows: number): void {
    this.columnsAhead.rowsComing(rows, this.columnCapacity, this.capacityMax, this.#slots.highWater, this.#slots.count, this.indexColumns.length);
  }

  /**
   * While a log is replayed: the columns for `capacity` slots (what the replay expects the
   * store to end at) are made ahead, their pages mapped off the main thread, and kept for the
   * growth that needs them (memory/columns-ahead.ts's makeForReplay). Nothing when the columns
   * hold that many already.
   */
  prefaultColumnsForReplay(capacity: number): void {
    if (capacity <= this.columnCapacity) return;
    this.columnsAhead.makeForReplay(capacity, this.indexColumns.length);
  }

  /** Lets go of the columns made ahead (not the arena's slabs). */
  dropColumnsAhead(): void {
    this.columnsAhead.drop();
  }

  /**
   * When `rows` more allocations would grow the columns and the columns for that growth are
   * still being made ahead: a promise that settles once their making has ended (made, failed, or
   * dropped). Otherwise undefined, and the caller goes on at once. Made on the main thread
   * instead, the columns of a large growth stall it for their pages: 1.4–1.5 s for the 1,040 MiB
   * of 2^24 slots, in runs of 10,000-row Arrow batches whose fill outran the threadpool making
   * them (a million rows a second). An admit that waits leaves the main thread to everything
   * else meanwhile (deliveries, other requests).
   */
  columnsAheadPending(rows: number): Promise<void> | undefined {
    const fresh = rows - this.#slots.count;
    if (fresh <= this.columnCapacity - this.#slots.highWater) return undefined;
    return this.columnsAhead.pending(this.#slots.highWater + fresh, this.capacityMax);
  }

  /** Growths that took columns made ahead. */
  get columnGrowthsMadeAhead(): number {
    return this.columnsAhead.growthsMadeAhead;
  }

  /** Capacity of the columns being made ahead (0: none). */
  get columnsAheadCapacity(): number {
    return this.columnsAhead.capacity;
  }

  /** Whether columns made ahead are ready for the next growth to take. */
  get columnsAheadReady(): boolean {
    return this.columnsAhead.ready;
  }

  /** A new index column (zero, `capacity` long) that grows with the store's columns from now on. */
  indexColumn(holds: IndexColumnKind = 'bySlot'): IndexColumn {
    return this.addIndexColumn(holds);
  }

  /** Lets go of memory made ahead and not used: the arena's slabs and the next columns. */
  dropPrefaulted(): void {
    this.arena.dropPrefaulted();
    this.columnsAhead.drop();
  }

  /** Stops making memory ahead, for good; the timers stay readable. */
  close(): void {
    this.arena.close();
    this.columnsAhead.close();
  }

  /** Frees the slot's bytes and target reference and makes every handle to it stale. */
  release(slot: number): void {
    this.#assertLive(slot);
    this.arena.free(this.bytesRefOf(slot), this.#bytesLength(slot));
    this.#targets.unref(this.targetIndexColumn[slot] as number);
    if (this.#dueCounts !== undefined && countsAsDue(this.stateColumn[slot] as number)) this.#dueCounts.add(this.dueAtColumn[slot] as number, -1);
    this.#queueCounts?.add(this.queueIndexColumn[slot] as number, this.stateColumn[slot] as number, -1);
    this.stateColumn[slot] = timerState.free;
    this.#count--;
    this.#changes++;
    const generation = (this.generationColumn[slot] as number) + 1;
    this.generationColumn[slot] = generation;
    // A slot whose generation would leave the handle's bits is retired, never handed out again:
    // wrapping around could let a very old handle match a new timer.
    if (generation > this.generationMax) return;
    // A snapshot held reads this slot's fixed fields from the columns: no new timer in it until it is released.
    this.#slots.free(slot);
  }

  /**
   * The index of `target` in the target table, adding it if new, and pinned: it stays valid
   * until releaseTarget(index), whatever happens to the timers using it meanwhile. A batch
   * interns each distinct target once, allocates its rows, then releases its pins.
   */
  internTarget(target: string): number {
    return this.#targets.intern(target);
  }

  /** Drops a pin taken by internTarget(); the target is freed once no pin or timer holds it. */
  releaseTarget(index: number): void {
    assert.ok(this.#targets.isInterned(index), 'released a target that is not interned');
    this.#targets.unref(index);
  }

  /** Timers and pins holding target `index` (0 for an index no longer interned). */
  targetRefCount(index: number): number {
    return this.#targets.refCount(index);
  }

  isLive(slot: number): boolean {
    // Out of range, negative or fractional slots read undefined: not live.
    return (this.stateColumn[slot] ?? timerState.free) !== timerState.free;
  }

  handleOf(slot: number): number {
    this.#assertLive(slot);
    return (this.generationColumn[slot] as number) * residentSlotSpan + slot;
  }

  /** The slot a handle names, or -1 if that timer was released (whatever took the slot since). */
  slotOf(handle: number): number {
    if (!Number.isSafeInteger(handle) || handle < 0) return -1;
    const slot = handle % residentSlotSpan;
    const generation = (handle - slot) / residentSlotSpan;
    if (!this.isLive(slot) || this.generationColumn[slot] !== generation) return -1;
    return slot;
  }

  /**
   * `slots` (live) as they are now (the changing fields copied into `into`, or fresh arrays),
   * and a hold on their bytes: what a checkpoint writes into its runs over several turns while
   * the store goes on changing (engine/store/store-snapshot.ts). Until the snapshot is
   * released, a slot released meanwhile is not handed out again. The slots must be live (the
   * caller found them so in the same turn).
   */
  snapshot(slots: Int32Array, into?: StoreSnapshotColumns): StoreSnapshot {
    const n = slots.length;
    const columns = into ?? { dueAt: new Float64Array(n), state: new Uint8Array(n), attempts: new Uint16Array(n), lastStatus: new Uint16Array(n) };
    assert.ok(columns.dueAt.length === n && columns.state.length === n && columns.attempts.length === n && columns.lastStatus.length === n, 'snapshot columns of the slots\' length');
    const { dueAt, state, attempts, lastStatus } = columns;
    for (let i = 0; i < n; i++) {
      const slot = slots[i] as number;
      dueAt[i] = this.dueAtColumn[slot] as number;
      state[i] = this.stateColumn[slot] as number;
      attempts[i] = this.attemptsColumn[slot] as number;
      lastStatus[i] = this.lastStatusColumn[slot] as number;
    }
    this.#slots.snapshotTaken();
    return new StoreSnapshot(this, slots, columns, [...this.#targetNames], this.arena.hold(), () => this.#slots.snapshotReleased());
  }

  /** The payload bytes, a view into the arena: copy them before the slot is released. */
  payloadOf(slot: number): Uint8Array {
    this.#assertLive(slot);
    return this.arena.view(this.bytesRefOf(slot), this.payloadLengthColumn[slot] as number);
  }

  /** The headers bytes (JSON), a view into the arena: copy them before the slot is released. */
  headersOf(slot: number): Uint8Array {
    this.#assertLive(slot);
    const payloadLength = this.payloadLengthColumn[slot] as number;
    return this.arena.view(this.bytesRefOf(slot) + payloadLength, this.headersLengthColumn[slot] as number);
  }

  /** The idempotency key bytes (empty: none), a view into the arena. */
  keyOf(slot: number): Uint8Array {
    this.#assertLive(slot);
    const at = this.bytesRefOf(slot) + (this.payloadLengthColumn[slot] as number) + (this.headersLengthColumn[slot] as number);
    return this.arena.view(at, this.keyLengthOf(slot));
  }

  /** Whether the timer has a callback or a failure callback (a callbacks run follows its key). */
  hasCallbacks(slot: number): boolean {
    return ((this.keyLengthColumn[slot] as number) & keyHasCallbacksBit) !== 0;
  }

  /** The slot's callbacks run (callback-bytes.ts; empty: no callbacks), a view into the arena. */
  callbacksOf(slot: number): Uint8Array {
    this.#assertLive(slot);
    return this.arena.view(this.#callbacksRef(slot), this.callbacksLengthOf(slot));
  }

  /** Bytes of the slot's callbacks run (0: none), read from the run's own header. */
  callbacksLengthOf(slot: number): number {
    if (!this.hasCallbacks(slot)) return 0;
    const ref = this.#callbacksRef(slot);
    return callbacksRunBytesAt(this.arena.slabOf(ref, callbacksRunHeaderBytes), this.arena.offsetOf(ref));
  }

  #callbacksRef(slot: number): number {
    return this.bytesRefOf(slot) + (this.payloadLengthColumn[slot] as number) + (this.headersLengthColumn[slot] as number) + this.keyLengthOf(slot);
  }

  payloadLengthOf(slot: number): number {
    return this.payloadLengthColumn[slot] as number;
  }

  headersLengthOf(slot: number): number {
    return this.headersLengthColumn[slot] as number;
  }

  /** Bytes of the slot's payload, headers, key and callbacks together (what it holds in the arena). */
  bytesLengthOf(slot: number): number {
    return this.#bytesLength(slot);
  }

  targetOf(slot: number): string {
    this.#assertLive(slot);
    return this.#targetNames[this.targetIndexColumn[slot] as number] as string;
  }

  /** Changes when the timer is next due; a heap holding the slot must then be told with update(slot). */
  setDueAt(slot: number, dueAt: number): void {
    this.#assertLive(slot);
    // Plain conditions, assert only on failure, in these setters: each runs once per timer settled.
    if (!Number.isFinite(dueAt)) assert.fail('dueAt must be a finite number of ms');
    if (this.#dueCounts !== undefined && countsAsDue(this.stateColumn[slot] as number)) {
      this.#dueCounts.add(this.dueAtColumn[slot] as number, -1);
      this.#dueCounts.add(dueAt, 1);
    }
    this.dueAtColumn[slot] = dueAt;
    this.#changes++;
  }

  setState(slot: number, state: TimerStateCode): void {
    this.#assertLive(slot);
    if (!(state >= timerState.pending && state <= timerState.cancelled)) assert.fail('setState needs a live state; release() frees a slot');
    const counted = countsAsDue(state);
    if (this.#dueCounts !== undefined && countsAsDue(this.stateColumn[slot] as number) !== counted) this.#dueCounts.add(this.dueAtColumn[slot] as number, counted ? 1 : -1);
    if (this.#queueCounts !== undefined) {
      const queueIndex = this.queueIndexColumn[slot] as number;
      this.#queueCounts.add(queueIndex, this.stateColumn[slot] as number, -1);
      this.#queueCounts.add(queueIndex, state, 1);
    }
    this.stateColumn[slot] = state;
    this.#changes++;
  }

  setAttempts(slot: number, attempts: number): void {
    this.#assertLive(slot);
    if (!(attempts >>> 0 === attempts && attempts <= 0xffff)) assert.fail('attempts must be a u16');
    this.attemptsColumn[slot] = attempts;
  }

  setLastStatus(slot: number, status: number): void {
    this.#assertLive(slot);
    if (!(status >>> 0 === status && status <= 0xffff)) assert.fail('lastStatus must be a u16');
    this.lastStatusColumn[slot] = status;
  }

  /** Bytes held by the columns, the free stack, the target refcounts and the arena's slabs. */
  bytesUsed(): number {
    return this.columnsBytesUsed() + this.#slots.bytesUsed + this.#targets.bytesUsed + this.arena.bytesReserved;
  }

  /**
   * Moves the payload and headers of every live timer out of arena slabs whose live share is
   * below `liveRatioMax`, so those slabs are released; returns how many timers moved. One pass
   * over all slots: call it when the arena's bytesLive / bytesReserved has fallen, not per tick.
   */
  compact(liveRatioMax: number = storeLimits.arenaCompactLiveRatio): number {
    // A held snapshot reads its timers' bytes where they were taken.
    assert.ok(!this.#slots.snapshotHeld, 'compaction while a snapshot is held');
    if (this.arena.markSparseSlabs(liveRatioMax) === 0) return 0;
    let moved = 0;
    for (let slot = 0; slot < this.#slots.highWater; slot++) {
      if (this.stateColumn[slot] === timerState.free) continue;
      const ref = this.bytesRefOf(slot);
      const length = this.#bytesLength(slot);
      if (!this.arena.isMarked(ref, length)) continue;
      this.setBytesRef(slot, this.arena.move(ref, length));
      moved++;
    }
    this.arena.markSparseSlabs(0); // no slab is below a ratio of 0: clears the marks
    return moved;
  }

  #bytesLength(slot: number): number {
    return (this.payloadLengthColumn[slot] as number) + (this.headersLengthColumn[slot] as number) + this.keyLengthOf(slot) + this.callbacksLengthOf(slot);
  }

  #assertLive(slot: number): void {
    // A plain condition, assert only on failure: assert.ok's rest arguments cost an array per call, on per-timer paths.
    if (!this.isLive(slot)) assert.fail('slot is not live: released twice, or never allocated');
  }

  #takeSlot(): number {
    const slots = this.#slots;
    const released = slots.pop();
    if (released >= 0) return released;
    if (slots.highWater === this.columnCapacity) {
      if (this.columnCapacity === this.#limit()) return -1;
      this.growColumns(Math.min(this.columnCapacity * 2, this.#growthCap(slots.highWater + 1)));
    }
    const slot = slots.highWater++;
    this.generationColumn[slot] = slots.generationFloor;
    return slot;
  }

  /**
   * The capacity shrink() would take now, when the columns are at least `share` times larger
   * than the live timers need (shrink.ts). Undefined when shrinking is not worth it.
   */
  shrinkCapacity(share: number, initial: number = storeLimits.residentTimersInitial): number | undefined {
    return shrinkCapacity(this.columnCapacity, this.#count, share, initial);
  }

  /**
   * Moves the live timers to the lowest slots, keeping their order, into new columns `capacity`
   * long (at least count): what a store that held many timers and holds few now (after a spill)
   * gives back, since columns otherwise only grow (shrink.ts). Index columns move with them, by
   * their kind. Returns where each slot below the old high-water mark went (-1: it was free),
   * for the structures outside that keep slots. Every handle given out before is stale
   * afterwards, as if its timer had been released: the moved timers, and slots used from now
   * on, take a generation above any given out. Undefined, and nothing moved, while a snapshot
   * is held (it reads its timers' slots) or when the generations are used up.
   */
  shrink(capacity: number): Int32Array | undefined {
    assert.ok(Number.isSafeInteger(capacity) && capacity >= Math.max(1, this.#count) && capacity <= this.columnCapacity, 'shrink to a capacity between the live timers and the current one');
    if (this.#slots.snapshotHeld) return undefined;
    const plan = planShrink(this.stateColumn, this.generationColumn, this.#slots.highWater, this.#count);
    const floor = Math.max(this.#slots.generationFloor, plan.generationTop + 1);
    if (floor > this.generationMax) return undefined;
    this.shrinkColumnsTo(plan, capacity);
    this.#changes++;
    this.generationColumn.fill(floor, 0, this.#count);
    this.#slots.restart(this.#count, floor);
    // The fill rate follows the high-water mark, which just fell: it starts again.
    this.columnsAhead.restartFillRate();
    return plan.moves;
  }
}
