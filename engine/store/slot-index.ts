// (log sequence, row) → slot, for the timers resident in memory: how get and cancel find a
// timer from its id. Open addressing with linear probing over typed arrays, deletion by
// backward shift (no tombstones), so it costs 16 bytes per cell, at most two cells per entry,
// and no object per timer. Main thread only.
//
//   cell i:   seqs[i]  rows[i]  slots[i]      slots[i] = -1 → empty
//             ───────  ───────  ────────
//   hash(seq,row) → probe i, i+1, i+2, … until the key or an empty cell
import assert from 'node:assert/strict';

const emptySlot = -1;
const initialCapacityDefault = 1024;
const loadFactorMax = 0.5;

function hashOf(seq: number, row: number): number {
  // Mix the low and high halves of the sequence with the row (Murmur3's finaliser).
  let h = (seq | 0) ^ Math.imul((seq / 2 ** 32) | 0, 0x9e3779b1) ^ Math.imul(row, 0x85ebca6b);
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

export class SlotIndex {
  #seqs: Float64Array;
  #rows: Uint32Array;
  #slots: Int32Array;
  #mask: number;
  #size = 0;

  constructor(initialCapacity = initialCapacityDefault) {
    assert.ok(initialCapacity >= 2 && (initialCapacity & (initialCapacity - 1)) === 0, 'capacity is a power of two');
    this.#seqs = new Float64Array(initialCapacity);
    this.#rows = new Uint32Array(initialCapacity);
    this.#slots = new Int32Array(initialCapacity).fill(emptySlot);
    this.#mask = initialCapacity - 1;
  }

  get size(): number {
    return this.#size;
  }

  get bytesUsed(): number {
    return this.#seqs.byteLength + this.#rows.byteLength + this.#slots.byteLength;
  }

  /** The slot of (seq, row), or -1. */
  get(seq: number, row: number): number {
    for (let i = hashOf(seq, row) & this.#mask; ; i = (i + 1) & this.#mask) {
      const slot = this.#slots[i] as number;
      if (slot === emptySlot) return emptySlot;
      if (this.#seqs[i] === seq && this.#rows[i] === row) return slot;
    }
  }

  /** Maps (seq, row) to `slot`; the key must not be present. */
  insert(seq: number, row: number, slot: number): void {
    assert.ok(slot >= 0, 'slots are non-negative');
    if (this.#size + 1 > (this.#mask + 1) * loadFactorMax) this.#grow();
    this.#place(seq, row, slot);
    this.#size++;
  }

  /** Removes (seq, row); returns its slot, or -1 if it was absent. */
  delete(seq: number, row: number): number {
    let i = hashOf(seq, row) & this.#mask;
    for (; ; i = (i + 1) & this.#mask) {
      const slot = this.#slots[i] as number;
      if (slot === emptySlot) return emptySlot;
      if (this.#seqs[i] === seq && this.#rows[i] === row) break;
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
      const home = hashOf(this.#seqs[j] as number, this.#rows[j] as number) & this.#mask;
      const movable = hole <= j ? home <= hole || home > j : home <= hole && home > j;
      if (movable) {
        this.#seqs[hole] = this.#seqs[j] as number;
        this.#rows[hole] = this.#rows[j] as number;
        this.#slots[hole] = slot;
        hole = j;
      }
    }
    this.#size--;
    return removed;
  }

  #place(seq: number, row: number, slot: number): void {
    let i = hashOf(seq, row) & this.#mask;
    while (this.#slots[i] !== emptySlot) {
      assert.ok(this.#seqs[i] !== seq || this.#rows[i] !== row, `(${seq}, ${row}) is already indexed`);
      i = (i + 1) & this.#mask;
    }
    this.#seqs[i] = seq;
    this.#rows[i] = row;
    this.#slots[i] = slot;
  }

  #grow(): void {
    const seqs = this.#seqs;
    const rows = this.#rows;
    const slots = this.#slots;
    const capacity = (this.#mask + 1) * 2;
    this.#seqs = new Float64Array(capacity);
    this.#rows = new Uint32Array(capacity);
    this.#slots = new Int32Array(capacity).fill(emptySlot);
    this.#mask = capacity - 1;
    for (let i = 0; i < slots.length; i++) {
      if (slots[i] !== emptySlot) this.#place(seqs[i] as number, rows[i] as number, slots[i] as number);
    }
  }
}
