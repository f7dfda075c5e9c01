// The timers a scan found (engine/timer-query.ts), as columns: one entry a timer, no object per
// timer. A scan of the export finds tens of thousands a window and keeps them across turns, so
// objects for them lived long enough to be allocated in the old generation and cost a full
// collection every few windows; these columns are made once a scan and reused. Main thread.
//
//   entry i:  dueMs[i] seq[i] row[i] fireAtMs[i]   slot[i]  (resident: its slot when found; -1)
//                                                   source[i] index[i]  (spilled: row index[i] of
//                                                   sources[source[i]]; -1 for a resident one)
import type { RunRows } from './spill/run-rows.ts';

export class HitList {
  #capacity: number;
  length = 0;
  dueMs: Float64Array;
  seq: Float64Array;
  row: Float64Array;
  fireAtMs: Float64Array;
  slot: Int32Array;
  source: Int32Array;
  index: Int32Array;
  /** The decoded batches spilled entries point into; shared with the lists merged from this one. */
  sources: RunRows[] = [];

  constructor(capacity: number) {
    this.#capacity = Math.max(1, capacity);
    this.dueMs = new Float64Array(this.#capacity);
    this.seq = new Float64Array(this.#capacity);
    this.row = new Float64Array(this.#capacity);
    this.fireAtMs = new Float64Array(this.#capacity);
    this.slot = new Int32Array(this.#capacity);
    this.source = new Int32Array(this.#capacity);
    this.index = new Int32Array(this.#capacity);
  }

  /** Empties the list, keeping its columns; `sources` is a new list (the old one may be shared). */
  clear(): void {
    this.length = 0;
    this.sources = [];
  }

  push(dueMs: number, seq: number, row: number, fireAtMs: number, slot: number, source: number, index: number): void {
    if (this.length === this.#capacity) this.#grow(this.#capacity * 2);
    this.set(this.length++, dueMs, seq, row, fireAtMs, slot, source, index);
  }

  /** Makes the list `length` entries long (those past the old length to be set). */
  resize(length: number): void {
    if (length > this.#capacity) this.#grow(Math.max(length, this.#capacity * 2));
    this.length = length;
  }

  set(i: number, dueMs: number, seq: number, row: number, fireAtMs: number, slot: number, source: number, index: number): void {
    this.dueMs[i] = dueMs;
    this.seq[i] = seq;
    this.row[i] = row;
    this.fireAtMs[i] = fireAtMs;
    this.slot[i] = slot;
    this.source[i] = source;
    this.index[i] = index;
  }

  /** Appends entry `i` of `from`, whose `sources` must be this list's. */
  pushFrom(from: HitList, i: number): void {
    this.push(from.dueMs[i] as number, from.seq[i] as number, from.row[i] as number, from.fireAtMs[i] as number, from.slot[i] as number, from.source[i] as number, from.index[i] as number);
  }

  /** Moves entry `from` to `to` (to ≤ from), for filtering in place. */
  move(from: number, to: number): void {
    this.dueMs[to] = this.dueMs[from] as number;
    this.seq[to] = this.seq[from] as number;
    this.row[to] = this.row[from] as number;
    this.fireAtMs[to] = this.fireAtMs[from] as number;
    this.slot[to] = this.slot[from] as number;
    this.source[to] = this.source[from] as number;
    this.index[to] = this.index[from] as number;
  }

  /** The decoded batch of spilled entry `i` (undefined: a resident one). */
  rowsOf(i: number): RunRows | undefined {
    const source = this.source[i] as number;
    return source < 0 ? undefined : this.sources[source];
  }

  #grow(capacity: number): void {
    this.#capacity = capacity;
    const grow = <C extends Float64Array | Int32Array>(old: C, make: (n: number) => C): C => {
      const next = make(this.#capacity);
      next.set(old);
      return next;
    };
    this.dueMs = grow(this.dueMs, (n) => new Float64Array(n));
    this.seq = grow(this.seq, (n) => new Float64Array(n));
    this.row = grow(this.row, (n) => new Float64Array(n));
    this.fireAtMs = grow(this.fireAtMs, (n) => new Float64Array(n));
    this.slot = grow(this.slot, (n) => new Int32Array(n));
    this.source = grow(this.source, (n) => new Int32Array(n));
    this.index = grow(this.index, (n) => new Int32Array(n));
  }
}

/** (due, seq, row) of entry i of a comes before (negative), with, or after entry j of b's. */
export function compareHits(a: HitList, i: number, b: HitList, j: number): number {
  return (a.dueMs[i] as number) - (b.dueMs[j] as number) || (a.seq[i] as number) - (b.seq[j] as number) || (a.row[i] as number) - (b.row[j] as number);
}
