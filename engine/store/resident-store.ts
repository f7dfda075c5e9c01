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
// This file is the structure: slots, columns, handles and the free stack. Beside it:
//   column-growth.ts   the capacities a growth goes to, the columns' bytes and their layout
//   shrink.ts          the capacity worth shrinking to and where each live timer moves
//   target-table.ts    the interned targets the targetIndex column points into
//   timer-state.ts     the codes of the state column
//   byte-arena.ts      the payload, headers and key bytes
//   ../memory/columns-ahead.ts   tuning: the next growth's columns made ahead, their pages
//                      mapped off the main thread, once the engine says rows are coming
//                      (prefaultColumnsFor); the growth then takes them and is a copy only
//
//   slot:          0      1      2      3      4      5   …  capacity-1
//   state        [ 1    | 0    | 2    | 1    | 0    | 3  … ]     0 = free
//   fireAt       [ t0   |      | t2   | t3   |      | t5 … ]     f64 epoch ms
//   generation   [ 1    | 2    | 1    | 5    | 1    | 1  … ]     bumped on release
//   …one typed array per column, all `capacity` long
//   freeSlots    [ 4, 1 ]  ← stack of released slots; slots ≥ highWater were never used (a batch
//                           takes the top k in the order they were pushed, so slots released in
//                           order are taken again in order: runs for the timer heap)
//
//   handle = generation · 2^28 + slot      (generation ≥ 1, so 0 is never a handle)
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
// that saves a second and third ref per timer. The arena's ref (slab · 2^32 + offset) is kept
// in two columns, offset and slab, 6 bytes instead of a float64's 8. The headers start at the
// ref + payloadLength, the key after them.
//
// fireAt is the fire time the timer was added with, and never changes (a timer's id carries
// it); dueAt is when it is next due: the fire time, then each retry's time. The heap orders by
// dueAt.
import assert from 'node:assert/strict';
import type { TimerBatch } from '../batch/timer-batch.ts';
import { storeLimits } from '../limits.ts';
import { ColumnsAhead, type ColumnsAheadOptions } from '../memory/columns-ahead.ts';
import { callbacksRunBytesAt, callbacksRunHeaderBytes, keysWithCallbacks } from './callback-bytes.ts';
import { arenaOffsetSpan, arenaSlabCountMax, ByteArena, type ByteArenaOptions } from './byte-arena.ts';
import { capacityTowards, type ColumnMaker, ColumnMemory, columnsBytes, doubledCapacity, widened } from './column-growth.ts';
import { movedColumns, movedSlotNumbers, planShrink, shrinkCapacity } from './shrink.ts';
import { StoreSnapshot, type StoreSnapshotColumns } from './store-snapshot.ts';
import { TargetTable } from './target-table.ts';
import { timerState, type TimerStateCode } from './timer-state.ts';

export { columnsBytes, timerState, type TimerStateCode };

/** Low bits of a handle that carry the slot. */
export const residentSlotBits = 28;
/** Slots a handle can address: the ceiling for capacityMax. */
export const residentCapacityLimit = 2 ** residentSlotBits;
/** Highest generation that still fits a safe-integer handle; a slot that reaches it is retired. */
export const residentGenerationMax = 2 ** (53 - residentSlotBits) - 1;
/** queueIndex is a u16 column. */
export const residentQueueCountMax = 2 ** 16;
/** headersLength and keyLength are u16 columns. */
export const residentHeadersBytesMax = 2 ** 16 - 1;
/** keyLength's top bit says a callbacks run follows the key (callback-bytes.ts). */
export const residentKeyBytesMax = 2 ** 15 - 1;
const hasCallbacksBit = 2 ** 15;

const slotSpan = 2 ** residentSlotBits;
// bytesSlab is a u16 column.
assert.ok(arenaSlabCountMax <= 2 ** 16, 'an arena slab id must fit the u16 bytesSlab column');
const noBytes = new Uint8Array(0);
const freeStackInitial = 64;

/** A column to read by slot; write through the store's setters. */
export interface ReadonlyColumn {
  readonly [slot: number]: number;
  readonly length: number;
}

export interface TimerFields {
  readonly key?: Uint8Array;
  readonly fireAt: number;
  readonly logSeq: number;
  readonly row: number;
  readonly queueIndex: number;
  readonly target: string;
  readonly payload: Uint8Array;
  readonly headers: Uint8Array;
  /** Both callback URLs as one run (callback-bytes.ts's packCallbacks); empty: none. */
  readonly callbacks?: Uint8Array;
}

/** The columns of a batch that allocateRows() reads. */
export type BatchRows = Pick<TimerBatch, 'fireAtMs' | 'queueIndex' | 'targetIndex' | 'payload' | 'headers' | 'keys' | 'callback' | 'failureCallback'>;

/** The store's sizes, and (tests) the tuning of the columns it makes ahead (memory/columns-ahead.ts). */
export interface ResidentStoreOptions extends ColumnsAheadOptions {
  readonly capacityInitial?: number;
  readonly capacityMax?: number;
  /** Lower than residentGenerationMax only in tests, to reach slot retirement quickly. */
  readonly generationMax?: number;
  readonly arena?: ByteArenaOptions;
}

/**
 * An Int32 column the store keeps for another structure over its slots (a timer heap's
 * entries and positions): `capacity` long, zero when new, grown with the store's own columns
 * (and made ahead with them, so a growth stops for a copy and no page faults). Its owner reads
 * `array` again after anything that may grow or shrink the store. A column holds a value for
 * each slot (`bySlot`: a heap's positions), or slot numbers in its first `count` entries
 * (`slots`: a heap's entries); shrink() moves each kind as it must.
 */
export interface IndexColumn {
  array: Int32Array;
  readonly holds: IndexColumnKind;
}

export type IndexColumnKind = 'bySlot' | 'slots';

/**
 * Asserts that rows rows[i] (i when `rows` is undefined), i < count, are rows of the batch with
 * a finite fire time and headers and key that fit their u16 length columns: checked for the
 * whole batch before any row is allocated. A plain condition per row, assert only on failure
 * (assert.ok's rest arguments would cost an array per call).
 */
function assertRowsFit(batch: BatchRows, rows: Int32Array | undefined, count: number): void {
  const { fireAtMs, headers, keys } = batch;
  for (let i = 0; i < count; i++) {
    const row = rows === undefined ? i : (rows[i] as number);
    const time = fireAtMs[row] as number;
    // NaN and ±Infinity fail this, and so does a row past the batch's end (undefined).
    if (!(time - time === 0)) assert.fail('fireAt must be a finite number of ms');
    const headersBytes = (headers.offsets[row + 1] as number) - (headers.offsets[row] as number);
    const keyBytes = (keys.offsets[row + 1] as number) - (keys.offsets[row] as number);
    if (!(headersBytes <= residentHeadersBytesMax && keyBytes <= residentKeyBytesMax)) assert.fail('headers or key longer than its u16 length column');
  }
}

export class ResidentStore {
  #capacityMax: number;
  /** While a log is replayed, growth may pass capacityMax (beginReplay). */
  #replaying = false;
  readonly generationMax: number;
  /** Payload and headers bytes; read its counters for stats, never add or free through it. */
  readonly arena: ByteArena;

  #capacity: number;
  #count = 0;
  /** Slots at and above this were never allocated (their generation is still 0). */
  #highWater = 0;
  // The columns, `capacity` long (#replaceColumns makes them all).
  #fireAt = new Float64Array(0);
  #dueAt = new Float64Array(0);
  #logSeq = new Float64Array(0);
  #row = new Uint32Array(0);
  #generation = new Uint32Array(0);
  #state = new Uint8Array(0);
  #attempts = new Uint16Array(0);
  #queueIndex = new Uint16Array(0);
  #targetIndex = new Uint32Array(0);
  #lastStatus = new Uint16Array(0);
  #bytesOffset = new Uint32Array(0);
  #bytesSlab = new Uint16Array(0);
  #payloadLength = new Uint32Array(0);
  #headersLength = new Uint16Array(0);
  #keyLength = new Uint16Array(0);
  readonly #indexColumns: IndexColumn[] = [];
  /** The columns of the next growth, made ahead (prefaultColumnsFor). */
  readonly #columnsAhead: ColumnsAhead;
  /** The generation a slot takes when first used: above every handle given out before the last shrink(). */
  #generationFloor = 1;
  #freeSlots = new Int32Array(freeStackInitial);
  #freeCount = 0;
  /** Snapshots not yet released (snapshot()); while any is, released slots are set aside here. */
  #snapshotsHeld = 0;
  #setAside: number[] = [];

  /** The targets the targetIndex column points into (target-table.ts). */
  readonly #targets = new TargetTable();
  /** The table's names, the same array for its life: read by targetOf() once per timer delivered. */
  readonly #targetNames = this.#targets.names;

  constructor(options: ResidentStoreOptions = {}) {
    const capacityMax = options.capacityMax ?? storeLimits.residentTimersMax;
    const generationMax = options.generationMax ?? residentGenerationMax;
    assert.ok(Number.isSafeInteger(capacityMax) && capacityMax >= 1 && capacityMax <= residentCapacityLimit, 'capacityMax out of range');
    assert.ok(Number.isSafeInteger(generationMax) && generationMax >= 1 && generationMax <= residentGenerationMax, 'generationMax out of range');
    const capacity = Math.min(options.capacityInitial ?? storeLimits.residentTimersInitial, capacityMax);
    assert.ok(Number.isSafeInteger(capacity) && capacity >= 1, 'capacityInitial must be a positive integer');
    this.#capacityMax = capacityMax;
    this.generationMax = generationMax;
    this.arena = new ByteArena(options.arena);
    this.#columnsAhead = new ColumnsAhead(options);
    this.#capacity = capacity;
    this.#replaceColumns((Type) => new Type(capacity));
  }

  /** Live timers. */
  get count(): number {
    return this.#count;
  }

  /** Slots at or past this were never used: a pass over every live timer stops here. */
  get slotsUsed(): number {
    return this.#highWater;
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
    this.#capacityMax = Math.max(this.#capacityMax, this.#capacity);
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
    return this.#capacity;
  }

  /** Distinct targets interned. */
  get targetCount(): number {
    return this.#targets.size;
  }

  // The columns. Growth replaces them, so read these again after any allocate().
  get fireAt(): ReadonlyColumn {
    return this.#fireAt;
  }
  get dueAt(): ReadonlyColumn {
    return this.#dueAt;
  }
  get logSeq(): ReadonlyColumn {
    return this.#logSeq;
  }
  get row(): ReadonlyColumn {
    return this.#row;
  }
  get state(): ReadonlyColumn {
    return this.#state;
  }
  get attempts(): ReadonlyColumn {
    return this.#attempts;
  }
  get queueIndex(): ReadonlyColumn {
    return this.#queueIndex;
  }
  get targetIndex(): ReadonlyColumn {
    return this.#targetIndex;
  }
  get lastStatus(): ReadonlyColumn {
    return this.#lastStatus;
  }

  /** Whether `n` more allocations would succeed (a batch is admitted whole or not at all). */
  canAllocate(n: number): boolean {
    return n <= this.#freeCount + (this.#limit() - this.#highWater);
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
    this.#fireAt[slot] = fireAt;
    this.#dueAt[slot] = fireAt;
    this.#logSeq[slot] = logSeq;
    this.#row[slot] = row;
    this.#state[slot] = timerState.pending;
    this.#attempts[slot] = 0;
    this.#queueIndex[slot] = queueIndex;
    this.#targetIndex[slot] = targetIndex;
    this.#lastStatus[slot] = 0;
    assert.ok(headers.length <= residentHeadersBytesMax && key.length <= residentKeyBytesMax, 'headers or key longer than its u16 length column');
    // A timer with callbacks (rare) joins them after its key: one copy more, no arena change.
    const keyAndCallbacks = callbacks.length === 0 ? key : Buffer.concat([key, callbacks]);
    this.#setBytesRef(slot, this.arena.addJoined(payload, headers, keyAndCallbacks));
    this.#payloadLength[slot] = payload.length;
    this.#headersLength[slot] = headers.length;
    this.#keyLength[slot] = callbacks.length === 0 ? key.length : key.length | hasCallbacksBit;
    this.#targets.addRef(targetIndex);
    this.#count++;
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
    const fireAt = this.#fireAt;
    const dueAt = this.#dueAt;
    const logSeqs = this.#logSeq;
    const rowColumn = this.#row;
    const generation = this.#generation;
    const state = this.#state;
    const attempts = this.#attempts;
    const queueIndex = this.#queueIndex;
    const targetIndex = this.#targetIndex;
    const lastStatus = this.#lastStatus;
    const payloadLength = this.#payloadLength;
    const headersLength = this.#headersLength;
    const keyLength = this.#keyLength;
    // A batch with callbacks copies each row's run after its key (callback-bytes.ts): the arena
    // takes key and run as one part. Without, nothing is made.
    let hasRun: Uint8Array | undefined;
    let thirdColumn = keys;
    if (batch.callback !== undefined && batch.failureCallback !== undefined) {
      hasRun = new Uint8Array(fireAtMs.length);
      thirdColumn = keysWithCallbacks(keys, batch.callback, batch.failureCallback, fireAtMs.length, hasRun);
    }
    const targetRefs = this.#targets.refs;
    const freeSlots = this.#freeSlots;
    const payloadOffsets = payload.offsets;
    const headersOffsets = headers.offsets;
    const keyOffsets = keys.offsets;
    // Released slots first, the top `reused` of the free stack in the order they were released:
    // a batch released in slot order (finished timers expire in the order they finished) is taken
    // again in slot order, so its rows stay runs of consecutive slots for the timer heap.
    const reused = Math.min(count, this.#freeCount);
    const reusedFrom = this.#freeCount - reused;
    this.#freeCount = reusedFrom;
    for (let i = 0; i < count; i++) {
      const row = rows === undefined ? i : (rows[i] as number);
      let slot: number;
      if (i < reused) slot = freeSlots[reusedFrom + i] as number;
      else {
        slot = this.#highWater++;
        generation[slot] = this.#generationFloor;
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
      keyLength[slot] = ((keyOffsets[row + 1] as number) - (keyOffsets[row] as number)) | (hasRun !== undefined && hasRun[row] === 1 ? hasCallbacksBit : 0);
      targetRefs[target] = (targetRefs[target] as number) + 1;
      slotsOut[i] = slot;
    }
    this.arena.addRows(payload, headers, thirdColumn, rows, count, slotsOut, this.#bytesSlab, this.#bytesOffset);
    this.#count += count;
  }

  /** Grows the columns, if needed, so that `n` more allocations take slots without growing them. */
  reserve(n: number): void {
    const fresh = n - this.#freeCount;
    if (fresh <= this.#capacity - this.#highWater) return;
    const needed = this.#highWater + fresh;
    assert.ok(needed <= this.#limit(), 'reserve beyond capacityMax');
    this.#grow(Math.min(doubledCapacity(this.#capacity, needed), this.#growthCap(needed)));
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
    const fresh = n - this.#freeCount;
    if (fresh <= this.#capacity - this.#highWater) return;
    const needed = this.#highWater + fresh;
    assert.ok(needed <= this.#limit(), 'reserve beyond capacityMax');
    this.#grow(Math.min(capacityTowards(this.#capacity, needed, expectedSlots), this.#growthCap(needed)));
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
    this.#columnsAhead.rowsComing(rows, this.#capacity, this.capacityMax, this.#highWater, this.#freeCount, this.#indexColumns.length);
  }

  /**
   * While a log is replayed: the columns for `capacity` slots (what the replay expects the
   * store to end at) are made ahead, their pages mapped off the main thread, and kept for the
   * growth that needs them (memory/columns-ahead.ts's makeForReplay). Nothing when the columns
   * hold that many already.
   */
  prefaultColumnsForReplay(capacity: number): void {
    if (capacity <= this.#capacity) return;
    this.#columnsAhead.makeForReplay(capacity, this.#indexColumns.length);
  }

  /** Lets go of the columns made ahead (not the arena's slabs). */
  dropColumnsAhead(): void {
    this.#columnsAhead.drop();
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
    const fresh = rows - this.#freeCount;
    if (fresh <= this.#capacity - this.#highWater) return undefined;
    return this.#columnsAhead.pending(this.#highWater + fresh, this.capacityMax);
  }

  /** Growths that took columns made ahead. */
  get columnGrowthsMadeAhead(): number {
    return this.#columnsAhead.growthsMadeAhead;
  }

  /** Capacity of the columns being made ahead (0: none). */
  get columnsAheadCapacity(): number {
    return this.#columnsAhead.capacity;
  }

  /** Whether columns made ahead are ready for the next growth to take. */
  get columnsAheadReady(): boolean {
    return this.#columnsAhead.ready;
  }

  /** A new index column (zero, `capacity` long) that grows with the store's columns from now on. */
  indexColumn(holds: IndexColumnKind = 'bySlot'): IndexColumn {
    // Columns made ahead before it have no room for it: the growth that takes them makes it (#grow).
    const column: IndexColumn = { array: new Int32Array(this.#capacity), holds };
    this.#indexColumns.push(column);
    return column;
  }

  /** Lets go of memory made ahead and not used: the arena's slabs and the next columns. */
  dropPrefaulted(): void {
    this.arena.dropPrefaulted();
    this.#columnsAhead.drop();
  }

  /** Stops making memory ahead, for good; the timers stay readable. */
  close(): void {
    this.arena.close();
    this.#columnsAhead.close();
  }

  /** Frees the slot's bytes and target reference and makes every handle to it stale. */
  release(slot: number): void {
    this.#assertLive(slot);
    this.arena.free(this.#bytesRefOf(slot), this.#bytesLength(slot));
    this.#targets.unref(this.#targetIndex[slot] as number);
    this.#state[slot] = timerState.free;
    this.#count--;
    const generation = (this.#generation[slot] as number) + 1;
    this.#generation[slot] = generation;
    // A slot whose generation would leave the handle's bits is retired, never handed out again:
    // wrapping around could let a very old handle match a new timer.
    if (generation > this.generationMax) return;
    // A snapshot held reads this slot's fixed fields from the columns: no new timer in it until it is released.
    if (this.#snapshotsHeld > 0) this.#setAside.push(slot);
    else this.#pushFree(slot);
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
    return (this.#state[slot] ?? timerState.free) !== timerState.free;
  }

  handleOf(slot: number): number {
    this.#assertLive(slot);
    return (this.#generation[slot] as number) * slotSpan + slot;
  }

  /** The slot a handle names, or -1 if that timer was released (whatever took the slot since). */
  slotOf(handle: number): number {
    if (!Number.isSafeInteger(handle) || handle < 0) return -1;
    const slot = handle % slotSpan;
    const generation = (handle - slot) / slotSpan;
    if (!this.isLive(slot) || this.#generation[slot] !== generation) return -1;
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
      dueAt[i] = this.#dueAt[slot] as number;
      state[i] = this.#state[slot] as number;
      attempts[i] = this.#attempts[slot] as number;
      lastStatus[i] = this.#lastStatus[slot] as number;
    }
    this.#snapshotsHeld++;
    return new StoreSnapshot(this, slots, columns, [...this.#targetNames], this.arena.hold(), () => this.#snapshotReleased());
  }

  #snapshotReleased(): void {
    this.#snapshotsHeld--;
    if (this.#snapshotsHeld > 0) return;
    for (const slot of this.#setAside) this.#pushFree(slot);
    this.#setAside = [];
  }

  /** The payload bytes, a view into the arena: copy them before the slot is released. */
  payloadOf(slot: number): Uint8Array {
    this.#assertLive(slot);
    return this.arena.view(this.#bytesRefOf(slot), this.#payloadLength[slot] as number);
  }

  /** The headers bytes (JSON), a view into the arena: copy them before the slot is released. */
  headersOf(slot: number): Uint8Array {
    this.#assertLive(slot);
    const payloadLength = this.#payloadLength[slot] as number;
    return this.arena.view(this.#bytesRefOf(slot) + payloadLength, this.#headersLength[slot] as number);
  }

  /** The idempotency key bytes (empty: none), a view into the arena. */
  keyOf(slot: number): Uint8Array {
    this.#assertLive(slot);
    const at = this.#bytesRefOf(slot) + (this.#payloadLength[slot] as number) + (this.#headersLength[slot] as number);
    return this.arena.view(at, this.keyLengthOf(slot));
  }

  /** Whether the timer has a callback or a failure callback (a callbacks run follows its key). */
  hasCallbacks(slot: number): boolean {
    return ((this.#keyLength[slot] as number) & hasCallbacksBit) !== 0;
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
    return this.#bytesRefOf(slot) + (this.#payloadLength[slot] as number) + (this.#headersLength[slot] as number) + this.keyLengthOf(slot);
  }

  /** Where the slot's payload, headers, key and callbacks are in the arena, one after another. */
  bytesRefOf(slot: number): number {
    return this.#bytesRefOf(slot);
  }

  payloadLengthOf(slot: number): number {
    return this.#payloadLength[slot] as number;
  }

  headersLengthOf(slot: number): number {
    return this.#headersLength[slot] as number;
  }

  /** Bytes of the slot's payload, headers, key and callbacks together (what it holds in the arena). */
  bytesLengthOf(slot: number): number {
    return this.#bytesLength(slot);
  }

  keyLengthOf(slot: number): number {
    return (this.#keyLength[slot] as number) & residentKeyBytesMax;
  }

  targetOf(slot: number): string {
    this.#assertLive(slot);
    return this.#targetNames[this.#targetIndex[slot] as number] as string;
  }

  /** Changes when the timer is next due; a heap holding the slot must then be told with update(slot). */
  setDueAt(slot: number, dueAt: number): void {
    this.#assertLive(slot);
    // Plain conditions, assert only on failure, in these setters: each runs once per timer settled.
    if (!Number.isFinite(dueAt)) assert.fail('dueAt must be a finite number of ms');
    this.#dueAt[slot] = dueAt;
  }

  setState(slot: number, state: TimerStateCode): void {
    this.#assertLive(slot);
    if (!(state >= timerState.pending && state <= timerState.cancelled)) assert.fail('setState needs a live state; release() frees a slot');
    this.#state[slot] = state;
  }

  setAttempts(slot: number, attempts: number): void {
    this.#assertLive(slot);
    if (!(attempts >>> 0 === attempts && attempts <= 0xffff)) assert.fail('attempts must be a u16');
    this.#attempts[slot] = attempts;
  }

  setLastStatus(slot: number, status: number): void {
    this.#assertLive(slot);
    if (!(status >>> 0 === status && status <= 0xffff)) assert.fail('lastStatus must be a u16');
    this.#lastStatus[slot] = status;
  }

  /** Bytes held by the columns, the free stack, the target refcounts and the arena's slabs. */
  bytesUsed(): number {
    let columns = 0;
    for (const column of this.#indexColumns) columns += column.array.byteLength;
    columns +=
      this.#fireAt.byteLength +
      this.#dueAt.byteLength +
      this.#logSeq.byteLength +
      this.#row.byteLength +
      this.#generation.byteLength +
      this.#state.byteLength +
      this.#attempts.byteLength +
      this.#queueIndex.byteLength +
      this.#targetIndex.byteLength +
      this.#lastStatus.byteLength +
      this.#bytesOffset.byteLength +
      this.#bytesSlab.byteLength +
      this.#payloadLength.byteLength +
      this.#headersLength.byteLength +
      this.#keyLength.byteLength;
    return columns + this.#freeSlots.byteLength + this.#targets.bytesUsed + this.arena.bytesReserved;
  }

  /**
   * Moves the payload and headers of every live timer out of arena slabs whose live share is
   * below `liveRatioMax`, so those slabs are released; returns how many timers moved. One pass
   * over all slots: call it when the arena's bytesLive / bytesReserved has fallen, not per tick.
   */
  compact(liveRatioMax: number = storeLimits.arenaCompactLiveRatio): number {
    // A held snapshot reads its timers' bytes where they were taken.
    assert.equal(this.#snapshotsHeld, 0, 'compaction while a snapshot is held');
    if (this.arena.markSparseSlabs(liveRatioMax) === 0) return 0;
    let moved = 0;
    for (let slot = 0; slot < this.#highWater; slot++) {
      if (this.#state[slot] === timerState.free) continue;
      const ref = this.#bytesRefOf(slot);
      const length = this.#bytesLength(slot);
      if (!this.arena.isMarked(ref, length)) continue;
      this.#setBytesRef(slot, this.arena.move(ref, length));
      moved++;
    }
    this.arena.markSparseSlabs(0); // no slab is below a ratio of 0: clears the marks
    return moved;
  }

  #bytesRefOf(slot: number): number {
    return (this.#bytesSlab[slot] as number) * arenaOffsetSpan + (this.#bytesOffset[slot] as number);
  }

  #setBytesRef(slot: number, ref: number): void {
    const offset = ref % arenaOffsetSpan;
    this.#bytesOffset[slot] = offset;
    this.#bytesSlab[slot] = (ref - offset) / arenaOffsetSpan;
  }

  #bytesLength(slot: number): number {
    return (this.#payloadLength[slot] as number) + (this.#headersLength[slot] as number) + this.keyLengthOf(slot) + this.callbacksLengthOf(slot);
  }

  #assertLive(slot: number): void {
    // A plain condition, assert only on failure: assert.ok's rest arguments cost an array per call, on per-timer paths.
    if (!this.isLive(slot)) assert.fail('slot is not live: released twice, or never allocated');
  }

  #takeSlot(): number {
    if (this.#freeCount > 0) return this.#freeSlots[--this.#freeCount] as number;
    if (this.#highWater === this.#capacity) {
      if (this.#capacity === this.#limit()) return -1;
      this.#grow(Math.min(this.#capacity * 2, this.#growthCap(this.#highWater + 1)));
    }
    const slot = this.#highWater++;
    this.#generation[slot] = this.#generationFloor;
    return slot;
  }

  #pushFree(slot: number): void {
    if (this.#freeCount === this.#freeSlots.length) {
      this.#freeSlots = widened(this.#freeSlots, this.#freeSlots.length * 2, (n) => new Int32Array(n));
    }
    this.#freeSlots[this.#freeCount++] = slot;
  }

  /**
   * The capacity shrink() would take now, when the columns are at least `share` times larger
   * than the live timers need (shrink.ts). Undefined when shrinking is not worth it.
   */
  shrinkCapacity(share: number, initial: number = storeLimits.residentTimersInitial): number | undefined {
    return shrinkCapacity(this.#capacity, this.#count, share, initial);
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
    assert.ok(Number.isSafeInteger(capacity) && capacity >= Math.max(1, this.#count) && capacity <= this.#capacity, 'shrink to a capacity between the live timers and the current one');
    if (this.#snapshotsHeld > 0) return undefined;
    const plan = planShrink(this.#state, this.#generation, this.#highWater, this.#count);
    const floor = Math.max(this.#generationFloor, plan.generationTop + 1);
    if (floor > this.generationMax) return undefined;
    this.#columnsAhead.drop();
    const moved = movedColumns(plan, capacity);
    this.#replaceColumns(moved);
    this.#generation.fill(floor, 0, this.#count);
    for (const column of this.#indexColumns) {
      column.array = column.holds === 'bySlot' ? moved(Int32Array, column.array) : movedSlotNumbers(column.array, plan, capacity);
    }
    this.#generationFloor = floor;
    this.#capacity = capacity;
    this.#highWater = this.#count;
    this.#freeSlots = new Int32Array(freeStackInitial);
    this.#freeCount = 0;
    // The fill rate follows the high-water mark, which just fell: it starts again.
    this.#columnsAhead.restartFillRate();
    return plan.moves;
  }

  #grow(capacity: number): void {
    // Columns made ahead for this growth or a larger one, if their pages are mapped by now.
    const ahead = this.#columnsAhead.takeFor(capacity);
    const carved = ahead?.indexColumns ?? this.#indexColumns.length;
    const columns = new ColumnMemory(ahead?.memory, ahead?.capacity ?? capacity, carved);
    this.#replaceColumns((Type, old) => columns.widen(Type, old));
    this.#indexColumns.forEach((column, i) => {
      column.array = i < carved ? columns.widen(Int32Array, column.array) : widened(column.array, columns.capacity, (n) => new Int32Array(n));
    });
    this.#capacity = columns.capacity;
  }

  /**
   * Replaces each of the store's own columns (not the index columns) with what `make` makes of
   * it. The order is the layout of a buffer made ahead (column-growth.ts's columnsBytes).
   */
  #replaceColumns(make: ColumnMaker): void {
    this.#fireAt = make(Float64Array, this.#fireAt);
    this.#dueAt = make(Float64Array, this.#dueAt);
    this.#logSeq = make(Float64Array, this.#logSeq);
    this.#row = make(Uint32Array, this.#row);
    this.#generation = make(Uint32Array, this.#generation);
    this.#state = make(Uint8Array, this.#state);
    this.#attempts = make(Uint16Array, this.#attempts);
    this.#queueIndex = make(Uint16Array, this.#queueIndex);
    this.#targetIndex = make(Uint32Array, this.#targetIndex);
    this.#lastStatus = make(Uint16Array, this.#lastStatus);
    this.#bytesOffset = make(Uint32Array, this.#bytesOffset);
    this.#bytesSlab = make(Uint16Array, this.#bytesSlab);
    this.#payloadLength = make(Uint32Array, this.#payloadLength);
    this.#headersLength = make(Uint16Array, this.#headersLength);
    this.#keyLength = make(Uint16Array, this.#keyLength);
  }
}
