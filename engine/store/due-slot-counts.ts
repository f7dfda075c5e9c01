// Resident timers counted by when they are next due, for the due histogram (engine/due-histogram.ts):
// the store's setters keep it (resident-store.ts), so a timer counts while its state is pending or
// retrying (held timers are pending), at its dueAt. Counts are by absolute time slots of
// `slotWidthMs` (a minute, or less when the spill tier's buckets are narrower, so that slots tile
// its buckets), grouped by the spill bucket width (an hour); only groups with timers due in them
// are kept:
//
//   groups: Map<floor(dueAt / group width), Int32Array>   [slot 0 │ slot 1 │ … │ slot n−1 │ total]
//
// An add is an increment in a typed array: the group last counted in is kept with its bounds, so
// the rows of a batch due in the same hour, and timers handed out in due order, find it by two
// comparisons; another group is found by index among those touched last (the map is asked only
// when it is not one of them). A group holds the times t with start ≤ t < start + width, compared
// in exact arithmetic on both paths, so an add and the removal that undoes it always meet in the
// same slot. Main thread, with the store.
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
  /** The group last counted in: [#lastStartMs, #lastEndMs) and its counts (NaN bounds: none). */
  #lastStartMs = NaN;
  #lastEndMs = NaN;
  #lastCounts: Int32Array = new Int32Array(0);
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
    // NaN bounds (no group yet, or it went) fail both comparisons.
    if (!(dueAtMs >= this.#lastStartMs && dueAtMs < this.#lastEndMs)) this.#touch(dueAtMs);
    const counts = this.#lastCounts;
    const slot = Math.floor((dueAtMs - this.#lastStartMs) / this.slotWidthMs);
    counts[slot] = (counts[slot] as number) + delta;
    const total = (counts[this.slotsPerGroup] as number) + delta;
    counts[this.slotsPerGroup] = total;
    this.#total += delta;
    // An empty group goes, so the map holds only groups with timers due in them.
    if (total === 0) this.#drop(this.#lastStartMs / this.groupWidthMs);
  }

  /** Counts one timer due at times[rows[i]] (times[i] when `rows` is undefined) for each i < count: a batch's new rows. */
  addRows(times: Float64Array, rows: Int32Array | undefined, count: number): void {
    for (let i = 0; i < count; i++) this.add(times[rows === undefined ? i : (rows[i] as number)] as number, 1);
  }

  /** Makes the group `dueAtMs` falls in the last one counted in, made if new. */
  #touch(dueAtMs: number): void {
    const width = this.groupWidthMs;
    let group = Math.floor(dueAtMs / width);
    // The quotient may round up to the next whole number just below a boundary: the group is
    // the one whose [start, end) holds dueAtMs, as the fast path in add() compares it.
    if (group * width > dueAtMs) group--;
    const at = ((group % cacheSize) + cacheSize) % cacheSize;
    let counts = this.#cachedGroup[at] === group ? this.#cachedCounts[at] : this.#groups.get(group);
    if (counts === undefined) {
      counts = new Int32Array(this.slotsPerGroup + 1);
      this.#groups.set(group, counts);
    }
    this.#cachedGroup[at] = group;
    this.#cachedCounts[at] = counts;
    this.#lastStartMs = group * width;
    this.#lastEndMs = (group + 1) * width;
    this.#lastCounts = counts;
  }

  /** Forgets group `group` (its counts are all zero), wherever it is kept. */
  #drop(group: number): void {
    this.#groups.delete(group);
    const at = ((group % cacheSize) + cacheSize) % cacheSize;
    this.#cachedGroup[at] = NaN;
    this.#cachedCounts[at] = undefined;
    this.#lastStartMs = NaN;
    this.#lastEndMs = NaN;
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
