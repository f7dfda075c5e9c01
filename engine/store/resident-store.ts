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
// setters and the counts they keep, snapshots and shrink. It extends, in turn:
//   resident-content.ts  a slot's bytes in the arena and its interned target; compaction
//   resident-slots.ts    which slots are live (handles), which a timer takes next, capacity,
//                        growth (reserve) and the columns asked for ahead
//   resident-columns.ts  the columns themselves, their growth and their move on a shrink
// Beside it:
//   resident-layout.ts   the limits the columns' widths set, the handle's bits, the types
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
import { keysWithCallbacks } from './callback-bytes.ts';
import type { ByteArenaOptions } from './byte-arena.ts';
import { countsAsDue, type DueSlotCounts } from './due-slot-counts.ts';
import type { QueueStateCounts } from './queue-state-counts.ts';
import { columnsBytes } from './column-growth.ts';
import { ResidentContent } from './resident-content.ts';
import {
  assertRowsFit,
  type BatchRows,
  keyHasCallbacksBit,
  residentCapacityLimit,
  residentGenerationMax,
  residentHeadersBytesMax,
  residentKeyBytesMax,
  residentQueueCountMax,
  type TimerFields,
} from './resident-layout.ts';
import { planShrink, shrinkCapacity } from './shrink.ts';
import { StoreSnapshot, type StoreSnapshotColumns } from './store-snapshot.ts';
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

/**
 * Extends its columns (resident-columns.ts, through resident-slots.ts and resident-content.ts)
 * rather than holding them: a column read through a getter, once per timer on the engine's
 * paths, is one load and not two.
 */
export class ResidentStore extends ResidentContent {
  readonly generationMax: number;
  #count = 0;
  /** Counts the changes to which slots hold timers, and to their due times and states (see changes). */
  #changes = 0;
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
    super(capacity, capacityMax, options);
    this.generationMax = generationMax;
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
    assert.ok(this.targets.isInterned(targetIndex), 'targetIndex is not an interned target: pin it with internTarget()');
    const slot = this.takeSlot();
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
    this.targets.addRef(targetIndex);
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
    for (const targetIndex of targetIndexOf) assert.ok(this.targets.isInterned(targetIndex), 'targetIndex is not an interned target: pin it with internTarget()');
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
    const targetRefs = this.targets.refs;
    const slots = this.freeSlots;
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

  /** Frees the slot's bytes and target reference and makes every handle to it stale. */
  release(slot: number): void {
    this.assertLive(slot);
    this.arena.free(this.bytesRefOf(slot), this.bytesLengthOf(slot));
    this.targets.unref(this.targetIndexColumn[slot] as number);
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
    this.freeSlots.free(slot);
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
    this.freeSlots.snapshotTaken();
    return new StoreSnapshot(this, slots, columns, [...this.targetNames], this.arena.hold(), () => this.freeSlots.snapshotReleased());
  }

  /** Changes when the timer is next due; a heap holding the slot must then be told with update(slot). */
  setDueAt(slot: number, dueAt: number): void {
    this.assertLive(slot);
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
    this.assertLive(slot);
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
    this.assertLive(slot);
    if (!(attempts >>> 0 === attempts && attempts <= 0xffff)) assert.fail('attempts must be a u16');
    this.attemptsColumn[slot] = attempts;
  }

  setLastStatus(slot: number, status: number): void {
    this.assertLive(slot);
    if (!(status >>> 0 === status && status <= 0xffff)) assert.fail('lastStatus must be a u16');
    this.lastStatusColumn[slot] = status;
  }

  /** Bytes held by the columns, the free stack, the target refcounts and the arena's slabs. */
  bytesUsed(): number {
    return this.columnsBytesUsed() + this.freeSlots.bytesUsed + this.targets.bytesUsed + this.arena.bytesReserved;
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
    if (this.freeSlots.snapshotHeld) return undefined;
    const plan = planShrink(this.stateColumn, this.generationColumn, this.freeSlots.highWater, this.#count);
    const floor = Math.max(this.freeSlots.generationFloor, plan.generationTop + 1);
    if (floor > this.generationMax) return undefined;
    this.shrinkColumnsTo(plan, capacity);
    this.#changes++;
    this.generationColumn.fill(floor, 0, this.#count);
    this.freeSlots.restart(this.#count, floor);
    // The fill rate follows the high-water mark, which just fell: it starts again.
    this.columnsAhead.restartFillRate();
    return plan.moves;
  }
}
