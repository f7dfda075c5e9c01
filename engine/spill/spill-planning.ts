// Spill planning, on the main thread: the figures the memory loader weighs to choose a watermark
// (live resident bytes, spillable bytes by bucket, the spill tier's stats), and the shrink of
// the store after a checkpoint that spilled most of it (its columns and indexes made again to
// fit what stayed, so the memory the spill freed goes back).
import { setImmediate as nextTurn } from 'node:timers/promises';
import { nextDeliveryDueMs } from '../hand-out.ts';
import type { EngineState } from '../state.ts';
import { keyHash, KeyIndex } from '../store/key-index.ts';
import { timerState } from '../store/resident-store.ts';
import { SlotIndex } from '../store/slot-index.ts';
import type { SpillStats } from '../types.ts';

/**
 * Memory a resident timer takes besides its bytes in the arena: its store columns (57 B), free
 * stack and growth slack, its id index and heap entries (engine/store/resident-store.ts).
 */
const residentBytesPerSlot = 100;

/** Spill buckets spanned that spillableBytesByBucket() tallies in a typed array; a wider spread is tallied in a Map. */
const bucketTallyMax = 2 ** 20;

/** spillableBytesByBucket() looks at this many slots a turn. */
const spillTallySliceSlots = 2 ** 20;

/** The spill tier's figures. */
export function spillStats(s: EngineState): SpillStats {
  return {
    watermarkMs: s.spill.watermarkMs,
    spilled: s.spilledPending(),
    runs: s.spill.runs.length,
    tombstones: s.spill.tombstoneCount,
    metadataBytes: s.spill.bytesUsed,
    residentBytes: residentBytes(s),
    residentReservedBytes: s.store.bytesUsed(),
    budgetBytes: s.memoryBudgetBytes,
    checkpointSeq: s.checkpointSeq,
  };
}

/** Live bytes of resident timers: their share of the columns and indexes, and their bytes in the arena. */
export function residentBytes(s: EngineState): number {
  return s.store.count * residentBytesPerSlot + s.store.arena.bytesLive;
}

/** Whether the timer in `slot` is due at the fire time a PATCH gave it (it spills there, as checkpoint.ts decides). */
function dueAtPatchedTime(s: EngineState, slot: number): boolean {
  return s.rescheduled.size > 0 && s.rescheduled.get(s.store.logSeq[slot] as number, s.store.row[slot] as number)?.fireAtMs === s.store.dueAt[slot];
}

/**
 * Live bytes of resident pending timers that could spill (never attempted), by the start of
 * the bucket they are due in: what the loader weighs to choose a watermark.
 */
export async function spillableBytesByBucket(s: EngineState): Promise<Map<number, number>> {
  const store = s.store;
  const width = s.spill.bucketWidthMs;
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
      if (state[slot] !== timerState.pending || attempts[slot] !== 0 || (dueAt[slot] !== fireAt[slot] && !dueAtPatchedTime(s, slot))) continue;
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
      if (state[slot] !== timerState.pending || attempts[slot] !== 0 || (dueAt[slot] !== fireAt[slot] && !dueAtPatchedTime(s, slot)) || !s.heap.has(slot)) continue;
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
export function shrinkResident(s: EngineState): number | undefined {
  const store = s.store;
  const limits = s.shrinkLimits;
  const capacity = store.shrinkCapacity(limits.residentShrinkShare);
  // Settles, cancels and PATCHes being synced hold their timer's slot across the sync.
  if (capacity === undefined || s.settling.size > 0 || s.cancelling.size > 0 || s.rescheduling.size > 0) return undefined;
  // Large columns take a while to go over: not while a delivery falls due.
  const dueMs = nextDeliveryDueMs(s);
  if (store.capacity > limits.residentShrinkBusySlots && dueMs !== undefined && dueMs < s.clock.now() + limits.residentShrinkDueClearMs) return undefined;
  // Held-back timers are kept by handle, which the move makes stale: by slot across it.
  const parkedSlots = s.parked.map((parked) => (parked === undefined ? undefined : parked.handles.slice(parked.head).map((handle) => store.slotOf(handle))));
  const moves = store.shrink(capacity);
  if (moves === undefined) return undefined;
  const movedOf = (slot: number): number => (slot >= 0 && slot < moves.length ? (moves[slot] as number) : -1);
  s.parkedCount = 0;
  parkedSlots.forEach((slots, queue) => {
    const parked = s.parked[queue];
    if (slots === undefined || parked === undefined) return;
    parked.handles = slots.map(movedOf).filter((slot) => slot >= 0).map((slot) => store.handleOf(slot));
    parked.head = 0;
    s.parkedCount += parked.handles.length;
  });
  if (s.deadReasons.size > 0) {
    const reasons = [...s.deadReasons];
    s.deadReasons.clear();
    for (const [slot, reason] of reasons) s.deadReasons.set(movedOf(slot), reason);
  }
  s.failures.move(movedOf);
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
  s.index = index;
  const keys = new KeyIndex(store);
  const keyed = slots.filter((slot) => store.keyLengthOf(slot) > 0);
  keys.insertMany(keyed, Uint32Array.from(keyed, (slot) => keyHash(store.keyOf(slot))), keyed.length);
  s.keys = keys;
  return capacity;
}
