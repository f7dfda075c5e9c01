// (log sequence, row) → slot, for the timers resident in memory: how get and cancel find a
// timer from its id. Main thread only. Two tables, no object per timer:
//
// - Runs: the rows of one ADD record that went into consecutive slots (a bulk admit, or a
//   replay, fills the store from its high-water mark) are one entry keyed by the sequence,
//   with a bit per row that delete() sets. 1/8 byte a timer, and one Map entry a batch.
//
//     runs.get(seq) = { firstRow r0, firstSlot s0, rows n, deleted bits }
//     (seq, r) with r0 ≤ r < r0 + n  ──►  slot s0 + (r − r0), unless its bit is set
//
// - Rows: every other timer, by open addressing with linear probing and deletion by backward
//   shift (no tombstones). A cell holds only the slot: the key is read back from the store's
//   own logSeq and row columns, so it costs 4 bytes a cell, at most two cells a timer.
//
//     cell i:   slots[i] = s  ──►  keys.logSeq[s], keys.row[s]        slots[i] = -1 → empty
//     hash(seq,row) → probe i, i+1, i+2, … until a cell whose slot has that key, or an empty cell
//
// A row covered by a run is in the rows table only once its run bit is set: a timer that left
// memory (spilled) and came back (promoted) gets a new slot, indexed row by row. So a lookup
// that finds its row live in a run has its answer there; a deleted one looks in the rows table.
import assert from 'node:assert/strict';
import { finalMix } from './key-index.ts';

/** Where the index reads a slot's key: the resident store (its columns may be replaced as it grows). */
export interface SlotKeys {
  readonly logSeq: { readonly [slot: number]: number };
  readonly row: { readonly [slot: number]: number };
}

const emptySlot = -1;
const initialCapacityDefault = 1024;
const loadFactorMax = 0.5;
/** Batches of fewer rows are indexed row by row: a run's Map entry and object cost about as much as 16 cells. */
export const slotIndexRunRowsMin = 16;

interface Run {
  readonly firstRow: number;
  readonly firstSlot: number;
  readonly rows: number;
  /** Rows of the run still indexed. */
  live: number;
  /** Bit r − firstRow is set once row r was deleted. */
  readonly deleted: Uint32Array;
}

function hashOf(seq: number, row: number): number {
  // Mix the low and high halves of the sequence with the row (Murmur3's finaliser).
  return finalMix((seq | 0) ^ Math.imul((seq / 2 ** 32) | 0, 0x9e3779b1) ^ Math.imul(row, 0x85ebca6b));
}

export class SlotIndex {
  readonly #keys: SlotKeys;
  #slots: Int32Array;
  #mask: number;
  /** Timers in the rows table. */
  #rowEntries = 0;
  readonly #runs = new Map<number, Run>();
  /** Live rows over all runs. */
  #runRows = 0;
  #runBitmapBytes = 0;

  /** `keys` must already hold a slot's key when it is inserted, and until it is deleted. */
  constructor(keys: SlotKeys, initialCapacity = initialCapacityDefault) {
    assert.ok(initialCapacity >= 2 && (initialCapacity & (initialCapacity - 1)) === 0, 'capacity is a power of two');
    this.#keys = keys;
    this.#slots = new Int32Array(initialCapacity).fill(emptySlot);
    this.#mask = initialCapacity - 1;
  }

  get size(): number {
    return this.#rowEntries + this.#runRows;
  }

  /** Batches indexed as runs (for tests and stats). */
  get runCount(): number {
    return this.#runs.size;
  }

  get bytesUsed(): number {
    return this.#slots.byteLength + this.#runBitmapBytes;
  }

  #holds(slot: number, seq: number, row: number): boolean {
    return this.#keys.logSeq[slot] === seq && this.#keys.row[slot] === row;
  }

  #homeOf(slot: number): number {
    return hashOf(this.#keys.logSeq[slot] as number, this.#keys.row[slot] as number) & this.#mask;
  }

  /** The run of `seq` covering `row` with the row still live in it, if any. */
  #runOf(seq: number, row: number): Run | undefined {
    if (this.#runs.size === 0) return undefined;
    const run = this.#runs.get(seq);
    if (run === undefined || row < run.firstRow || row - run.firstRow >= run.rows) return undefined;
    const offset = row - run.firstRow;
    return ((run.deleted[offset >>> 5] as number) >>> (offset & 31)) & 1 ? undefined : run;
  }

  /** The slot of (seq, row), or -1. */
  get(seq: number, row: number): number {
    const run = this.#runOf(seq, row);
    if (run !== undefined) return run.firstSlot + (row - run.firstRow);
    for (let i = hashOf(seq, row) & this.#mask; ; i = (i + 1) & this.#mask) {
      const slot = this.#slots[i] as number;
      if (slot === emptySlot || this.#holds(slot, seq, row)) return slot;
    }
  }

  /**
   * Indexes `slot` under the key the store holds for it; the key must not be indexed yet (a
   * key deleted from its run may come back: a promoted timer).
   */
  insert(slot: number): void {
    assert.ok(slot >= 0, 'slots are non-negative');
    assert.ok(this.#runOf(this.#keys.logSeq[slot] as number, this.#keys.row[slot] as number) === undefined, 'the key lies in an indexed run');
    this.reserve(1);
    this.#place(slot);
    this.#rowEntries++;
  }

  /**
   * Indexes `count` slots the store just filled with rows of one sequence, none of them
   * indexed yet. Consecutive rows in consecutive slots (as a bulk admit or a replay allocates
   * them) become one run; anything else is indexed row by row.
   */
  insertBatch(slots: Int32Array, count: number): void {
    if (count === 0) return;
    const first = slots[0] as number;
    if (count >= slotIndexRunRowsMin && !this.#runs.has(this.#keys.logSeq[first] as number) && this.#isRun(slots, count)) {
      const deleted = new Uint32Array(Math.ceil(count / 32));
      this.#runs.set(this.#keys.logSeq[first] as number, { firstRow: this.#keys.row[first] as number, firstSlot: first, rows: count, live: count, deleted });
      this.#runRows += count;
      this.#runBitmapBytes += deleted.byteLength;
      return;
    }
    this.reserve(count);
    const hasRun = this.#runs.has(this.#keys.logSeq[first] as number);
    for (let i = 0; i < count; i++) {
      const slot = slots[i] as number;
      assert.ok(slot >= 0, 'slots are non-negative');
      assert.ok(!hasRun || this.#runOf(this.#keys.logSeq[slot] as number, this.#keys.row[slot] as number) === undefined, 'the key lies in an indexed run');
      this.#place(slot);
    }
    this.#rowEntries += count;
  }

  /** Grows the rows table, if needed, so that `n` more row-by-row inserts do not grow it. */
  reserve(n: number): void {
    let capacity = this.#mask + 1;
    while (this.#rowEntries + n > capacity * loadFactorMax) capacity *= 2;
    if (capacity > this.#mask + 1) this.#rehash(capacity);
  }

  /** Removes (seq, row); returns its slot, or -1 if it was absent. */
  delete(seq: number, row: number): number {
    const run = this.#runOf(seq, row);
    if (run !== undefined) return this.#deleteFromRun(run, seq, row);
    let i = hashOf(seq, row) & this.#mask;
    for (; ; i = (i + 1) & this.#mask) {
      const slot = this.#slots[i] as number;
      if (slot === emptySlot) return emptySlot;
      if (this.#holds(slot, seq, row)) break;
    }
    const removed = this.#slots[i] as number;
    // Backward shift: pull later members of the probe run into the hole when that keeps each
    // reachable from its home cell.
    for (let hole = i, j = (i + 1) & this.#mask; ; j = (j + 1) & this.#mask) {
      const slot = this.#slots[j] as number;
      if (slot === emptySlot) {
        this.#slots[hole] = emptySlot;
        break;
      }
      const home = this.#homeOf(slot);
      const movable = hole <= j ? home <= hole || home > j : home <= hole && home > j;
      if (movable) {
        this.#slots[hole] = slot;
        hole = j;
      }
    }
    this.#rowEntries--;
    return removed;
  }

  #deleteFromRun(run: Run, seq: number, row: number): number {
    const offset = row - run.firstRow;
    const word = offset >>> 5;
    const bit = 1 << (offset & 31);
    run.deleted[word] = (run.deleted[word] as number) | bit;
    run.live--;
    this.#runRows--;
    if (run.live === 0) {
      this.#runs.delete(seq);
      this.#runBitmapBytes -= run.deleted.byteLength;
    }
    return run.firstSlot + offset;
  }

  /** Whether slots[0..count) are consecutive slots holding consecutive rows of one sequence. */
  #isRun(slots: Int32Array, count: number): boolean {
    const first = slots[0] as number;
    const seq = this.#keys.logSeq[first] as number;
    const firstRow = this.#keys.row[first] as number;
    for (let i = 1; i < count; i++) {
      const slot = first + i;
      if (slots[i] !== slot || this.#keys.row[slot] !== firstRow + i || this.#keys.logSeq[slot] !== seq) return false;
    }
    return true;
  }

  /** Puts `slot` in the first empty cell of its probe run (its key is not in the table). */
  #place(slot: number): void {
    let i = this.#homeOf(slot);
    while (this.#slots[i] !== emptySlot) i = (i + 1) & this.#mask;
    this.#slots[i] = slot;
  }

  #rehash(capacity: number): void {
    const slots = this.#slots;
    this.#slots = new Int32Array(capacity).fill(emptySlot);
    this.#mask = capacity - 1;
    for (const slot of slots) if (slot !== emptySlot) this.#place(slot);
  }
}
