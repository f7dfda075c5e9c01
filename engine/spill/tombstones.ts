// Tombstones: the set of spilled timers cancelled since they were written to a run (runs are
// immutable), as (seq, row) with the timer's fire time. Kept as sorted columns: 20 bytes a
// tombstone, no object or string per entry. New ones go to a small sorted side list, merged
// into the main columns when it fills, so an add costs O(recentMax) and a merge O(n) once per
// recentMax adds. Cancels of far-future timers are rare; the set stays small. Main thread.
//
//   main:   seqs [3, 3, 9, 12]  rows [0, 4, 1, 0]  fireAtMs […]     sorted by (seq, row)
//   recent: seqs [5, 40]        rows [2, 0]        fireAtMs […]     sorted, ≤ recentMax
import assert from 'node:assert/strict';
import { spillLimits } from '../limits.ts';

export interface TombstoneColumns {
  readonly seqs: Float64Array;
  readonly rows: Uint32Array;
  readonly fireAtMs: Float64Array;
}

class SortedColumns {
  seqs: Float64Array;
  rows: Uint32Array;
  fireAtMs: Float64Array;
  count = 0;

  constructor(capacity: number) {
    this.seqs = new Float64Array(capacity);
    this.rows = new Uint32Array(capacity);
    this.fireAtMs = new Float64Array(capacity);
  }

  /** The first index whose (seq, row) is not below the given one. */
  lowerBound(seq: number, row: number): number {
    let low = 0;
    let high = this.count;
    while (low < high) {
      const mid = (low + high) >>> 1;
      const s = this.seqs[mid] as number;
      if (s < seq || (s === seq && (this.rows[mid] as number) < row)) low = mid + 1;
      else high = mid;
    }
    return low;
  }

  find(seq: number, row: number): number {
    const at = this.lowerBound(seq, row);
    return at < this.count && this.seqs[at] === seq && this.rows[at] === row ? at : -1;
  }

  insertAt(at: number, seq: number, row: number, fireAtMs: number): void {
    if (this.count === this.seqs.length) this.reserve(Math.max(16, this.count * 2));
    this.seqs.copyWithin(at + 1, at, this.count);
    this.rows.copyWithin(at + 1, at, this.count);
    this.fireAtMs.copyWithin(at + 1, at, this.count);
    this.seqs[at] = seq;
    this.rows[at] = row;
    this.fireAtMs[at] = fireAtMs;
    this.count++;
  }

  removeAt(at: number): void {
    this.seqs.copyWithin(at, at + 1, this.count);
    this.rows.copyWithin(at, at + 1, this.count);
    this.fireAtMs.copyWithin(at, at + 1, this.count);
    this.count--;
  }

  reserve(capacity: number): void {
    if (capacity <= this.seqs.length) return;
    const seqs = new Float64Array(capacity);
    const rows = new Uint32Array(capacity);
    const fireAtMs = new Float64Array(capacity);
    seqs.set(this.seqs.subarray(0, this.count));
    rows.set(this.rows.subarray(0, this.count));
    fireAtMs.set(this.fireAtMs.subarray(0, this.count));
    this.seqs = seqs;
    this.rows = rows;
    this.fireAtMs = fireAtMs;
  }

  get bytes(): number {
    return this.seqs.byteLength + this.rows.byteLength + this.fireAtMs.byteLength;
  }
}

export class Tombstones {
  readonly #recentMax: number;
  #main: SortedColumns;
  readonly #recent: SortedColumns;

  constructor(recentMax: number = spillLimits.tombstonesRecentMax) {
    assert.ok(Number.isSafeInteger(recentMax) && recentMax >= 1, 'recentMax must be a positive integer');
    this.#recentMax = recentMax;
    this.#main = new SortedColumns(0);
    this.#recent = new SortedColumns(Math.min(recentMax, 64));
  }

  /** A set holding `columns` (sorted by (seq, row), no duplicates: readManifest checks that). */
  static fromColumns(columns: TombstoneColumns, recentMax?: number): Tombstones {
    const count = columns.seqs.length;
    assert.ok(columns.rows.length === count && columns.fireAtMs.length === count, 'tombstone columns have one length');
    for (let i = 1; i < count; i++) {
      const order = (columns.seqs[i] as number) - (columns.seqs[i - 1] as number) || (columns.rows[i] as number) - (columns.rows[i - 1] as number);
      assert.ok(order > 0, 'tombstone columns are sorted by (seq, row) without duplicates');
    }
    const set = new Tombstones(recentMax);
    const main = new SortedColumns(count);
    main.seqs.set(columns.seqs);
    main.rows.set(columns.rows);
    main.fireAtMs.set(columns.fireAtMs);
    main.count = count;
    set.#main = main;
    return set;
  }

  get size(): number {
    return this.#main.count + this.#recent.count;
  }

  /** Bytes of the columns, capacity included. */
  get bytesUsed(): number {
    return this.#main.bytes + this.#recent.bytes;
  }

  has(seq: number, row: number): boolean {
    return this.#recent.find(seq, row) >= 0 || this.#main.find(seq, row) >= 0;
  }

  /** The fire time recorded with the tombstone, or undefined when (seq, row) has none. */
  fireAtOf(seq: number, row: number): number | undefined {
    const recent = this.#recent.find(seq, row);
    if (recent >= 0) return this.#recent.fireAtMs[recent] as number;
    const main = this.#main.find(seq, row);
    return main >= 0 ? (this.#main.fireAtMs[main] as number) : undefined;
  }

  /** Adds a tombstone; false (and nothing changes) when (seq, row) already has one. */
  add(seq: number, row: number, fireAtMs: number): boolean {
    if (this.#main.find(seq, row) >= 0) return false;
    const at = this.#recent.lowerBound(seq, row);
    if (at < this.#recent.count && this.#recent.seqs[at] === seq && this.#recent.rows[at] === row) return false;
    this.#recent.insertAt(at, seq, row, fireAtMs);
    if (this.#recent.count >= this.#recentMax) this.#merge();
    return true;
  }

  /** Removes the tombstone of (seq, row); false when there was none. */
  delete(seq: number, row: number): boolean {
    const recent = this.#recent.find(seq, row);
    if (recent >= 0) {
      this.#recent.removeAt(recent);
      return true;
    }
    const main = this.#main.find(seq, row);
    if (main < 0) return false;
    this.#main.removeAt(main);
    return true;
  }

  /** Keeps only the tombstones `keep` accepts (after a promotion or a compaction); how many went. */
  retain(keep: (seq: number, row: number, fireAtMs: number) => boolean): number {
    this.#merge();
    const main = this.#main;
    let kept = 0;
    for (let i = 0; i < main.count; i++) {
      const seq = main.seqs[i] as number;
      const row = main.rows[i] as number;
      const fireAtMs = main.fireAtMs[i] as number;
      if (!keep(seq, row, fireAtMs)) continue;
      main.seqs[kept] = seq;
      main.rows[kept] = row;
      main.fireAtMs[kept] = fireAtMs;
      kept++;
    }
    const removed = main.count - kept;
    main.count = kept;
    return removed;
  }

  /** A sorted copy of every tombstone, for the manifest. */
  columns(): TombstoneColumns {
    this.#merge();
    const main = this.#main;
    return { seqs: main.seqs.slice(0, main.count), rows: main.rows.slice(0, main.count), fireAtMs: main.fireAtMs.slice(0, main.count) };
  }

  /** Merges the recent list into the main columns (one linear pass from the end, in place). */
  #merge(): void {
    const recent = this.#recent;
    if (recent.count === 0) return;
    const main = this.#main;
    main.reserve(main.count + recent.count);
    let i = main.count - 1;
    let j = recent.count - 1;
    for (let out = main.count + recent.count - 1; j >= 0; out--) {
      const takeMain = i >= 0 && ((main.seqs[i] as number) > (recent.seqs[j] as number) || (main.seqs[i] === recent.seqs[j] && (main.rows[i] as number) > (recent.rows[j] as number)));
      const from = takeMain ? main : recent;
      const at = takeMain ? i-- : j--;
      main.seqs[out] = from.seqs[at] as number;
      main.rows[out] = from.rows[at] as number;
      main.fireAtMs[out] = from.fireAtMs[at] as number;
    }
    main.count += recent.count;
    recent.count = 0;
  }
}
