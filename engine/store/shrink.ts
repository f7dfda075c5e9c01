// Shrinking the resident store's columns: columns only grow as timers come, so a store that held
// many timers and holds few now (after a spill) gives memory back by moving its live timers to
// the lowest slots, in their order, into new columns that fit them. This module decides the
// capacity (shrinkCapacity), where each timer goes (planShrink) and makes the moved columns;
// the store (resident-store.ts) swaps them in and makes every handle given out before stale.
// Owned by the main thread, with the store.
//
//   before: capacity 8, highWater 7              after: capacity 4
//   slot      0   1   2   3   4   5   6   7      slot      0   1   2   3
//   state     P   ·   ·   D   ·   P   ·   ·      state     P   D   P   ·
//   moves     0  -1  -1   1  -1   2  -1          livesAt   0   3   5        (· free)
//
// moves (old slot → new) is what the structures outside that keep slots remap by; livesAt (new
// slot → old) is what the columns are copied by, a pass over the live timers each rather than
// over every slot.
import assert from 'node:assert/strict';
import type { ColumnMaker } from './column-growth.ts';
import { timerState } from './timer-state.ts';

/** Where the live timers go, and the highest generation of any slot used (handles above it were never given out). */
export interface ShrinkPlan {
  /** By old slot below the high-water mark: its new slot, or -1 when it was free. */
  readonly moves: Int32Array;
  /** By new slot: the old slot its timer was in. As long as the live timers. */
  readonly livesAt: Int32Array;
  readonly generationTop: number;
}

/**
 * The capacity to shrink a store of `capacity` slots holding `count` timers to, when its
 * columns are at least `share` times larger than the timers need (and larger than `initial`):
 * the smallest of the capacities growth passes through (the initial one, doubled) that holds
 * twice the timers. Undefined when shrinking is not worth it.
 */
export function shrinkCapacity(capacity: number, count: number, share: number, initial: number): number | undefined {
  if (capacity <= initial || count * share > capacity) return undefined;
  let shrunk = Math.max(1, Math.min(initial, capacity));
  while (shrunk < count * 2) shrunk *= 2;
  return shrunk < capacity ? shrunk : undefined;
}

/** One pass over the slots below `highWater`: where each of the `count` live timers goes. */
export function planShrink(state: Uint8Array, generation: Uint32Array, highWater: number, count: number): ShrinkPlan {
  const moves = new Int32Array(highWater).fill(-1);
  const livesAt = new Int32Array(count);
  let generationTop = 0;
  let next = 0;
  for (let slot = 0; slot < highWater; slot++) {
    const slotGeneration = generation[slot] as number;
    if (slotGeneration > generationTop) generationTop = slotGeneration;
    if (state[slot] === timerState.free) continue;
    livesAt[next] = slot;
    moves[slot] = next++;
  }
  assert.equal(next, count, 'every live timer is moved once');
  return { moves, livesAt, generationTop };
}

/** What a shrink makes of a column that holds a value by slot: the live timers' values at their new slots, `capacity` long. */
export function movedColumns(plan: ShrinkPlan, capacity: number): ColumnMaker {
  const { livesAt } = plan;
  const live = livesAt.length;
  return (Type, old) => {
    const column = new Type(capacity);
    for (let to = 0; to < live; to++) column[to] = old[livesAt[to] as number] as number;
    return column;
  };
}

/**
 * A column that holds slot numbers in its first entries (a heap's entries, as many as the live
 * timers at most), each renamed to its new slot, `capacity` long.
 */
export function movedSlotNumbers(old: Int32Array, plan: ShrinkPlan, capacity: number): Int32Array {
  const { moves, livesAt } = plan;
  const highWater = moves.length;
  const array = new Int32Array(capacity);
  for (let i = 0; i < livesAt.length; i++) {
    const slot = old[i] as number;
    array[i] = slot >= 0 && slot < highWater ? Math.max(0, moves[slot] as number) : 0;
  }
  return array;
}
