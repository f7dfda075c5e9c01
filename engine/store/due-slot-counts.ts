// Resident timers counted by when they are next due, for the due histogram (engine/due-histogram.ts):
// the store's setters keep it (resident-store.ts), so a timer counts while its state is pending or
// retrying (held timers are pending), at its dueAt. Counts are by absolute time slots of
// `slotWidthMs` (a minute, or less when the spill tier's buckets are narrower, so that slots tile
// its buckets), grouped by the spill bucket width (an hour); only groups with timers due in them
// are kept:
//
//   groups: Map<floor(dueAt / group width), Int32Array>   [slot 0 │ slot 1 │ … │ slot n−1 │ total]
//
// An add is an increment in a typed array (the map is asked only when a row's group is not one of
// the last touched, cached by index). Main thread, with the store.
import assert from 'node:assert/strict';
import { timerState } from './timer-state.ts';

/** The widest resident slot: an edge is at most this much past now + its span, below the watermark. */
const slotWidthMsMax = 60_000;

/** Whether a timer in this state counts: waiting for its next attempt (pending, retrying; held ones are pending). */
export const countsAsDue = (state: number): boolean => state === timerState.pending || state === timerState.retrying;

/** Groups whose counts are found by index: 4,096 hours is over five months. */
const cacheSize = 4096;

const gcd = (a: number, b: number): number => (b === 0 ? a : gcd(b, a % b));

/** Resident timers counted by when they are due, in absolute slots grouped by the spill bucket width. */
export class DueSlotCounts {
  readonly slotWidthMs: number;
  readonly groupWidthMs: number;
  readonly slotsPerGroup: number;
  readonly #groups = new Map<number, Int32Array>();
  /**
   * The groups last touched, direct-mapped by group modulo cacheSize (a group's id and counts),
   * so that rows due across many hours find theirs by an index rather than a map lookup.
   */
  readonly #cachedGroup = new Float64Array(cacheSize).fill(NaN);
  readonly #cachedCounts = new Array<Int32Array | undefined>(cacheSize).fill(undefined);
  #total = 0;

  constructor(groupWidthMs: number) {
    assert.ok(Number.isSafeInteger(groupWidthMs) && groupWidthMs >= 1, 'the group width is a whole number of ms');
    this.groupWidthMs = groupWidthMs;
    // A minute, or the largest width that divides both a minute and the group (so slots tile groups).
    this.slotWidthMs = gcd(slotWidthMsMax, groupWidthMs);
    this.slotsPerGroup = groupWidthMs / this.slotWidthMs;
  }

  /** Timers counted. */
  get total(): number {
    return this.#total;
  }

  /** Counts `delta` (1 or −1) timers due at `dueAtMs`. */
  add(dueAtMs: number, delta: number): void {
    const group = Math.floor(dueAtMs / this.groupWidthMs);
    const at = ((group % cacheSize) + cacheSize) % cacheSize;
    let counts = this.#cachedGroup[at] === group ? this.#cachedCounts[at] : this.#groups.get(group);
    if (counts === undefined) {
      counts = new Int32Array(this.slotsPerGroup + 1);
      this.#groups.set(group, counts);
    }
    const slot = Math.floor((dueAtMs - group * this.groupWidthMs) / this.slotWidthMs);
    counts[slot] = (counts[slot] as number) + delta;
    const total = (counts[this.slotsPerGroup] as number) + delta;
    counts[this.slotsPerGroup] = total;
    this.#total += delta;
    if (total === 0) {
      // An empty group goes, so the map holds only groups with timers due in them.
      this.#groups.delete(group);
      this.#cachedGroup[at] = NaN;
      this.#cachedCounts[at] = undefined;
      return;
    }
    this.#cachedGroup[at] = group;
    this.#cachedCounts[at] = counts;
  }

  /** Adds the counts to `into[k]`, k the bucket each slot falls in by `edgesMs` (sorted, on slot boundaries). */
  countInto(edgesMs: readonly number[], into: number[]): void {
    const { groupWidthMs, slotWidthMs, slotsPerGroup } = this;
    for (const [group, counts] of this.#groups) {
      const startMs = group * groupWidthMs;
      const k = bucketOf(edgesMs, startMs);
      if (k === edgesMs.length || startMs + groupWidthMs <= (edgesMs[k] as number)) {
        into[k] = (into[k] as number) + (counts[slotsPerGroup] as number);
        continue;
      }
      for (let slot = 0; slot < slotsPerGroup; slot++) {
        const count = counts[slot] as number;
        if (count === 0) continue;
        const at = bucketOf(edgesMs, startMs + slot * slotWidthMs);
        into[at] = (into[at] as number) + count;
      }
    }
  }
}

/** The bucket a time falls in: how many edges are at or before it. */
export function bucketOf(edgesMs: readonly number[], atMs: number): number {
  let k = 0;
  while (k < edgesMs.length && (edgesMs[k] as number) <= atMs) k++;
  return k;
}
