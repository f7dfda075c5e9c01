// (log sequence, row) → slot, for the timers resident in memory: how get and cancel find a
// timer from its id. Open addressing with linear probing, deletion by backward shift (no
// tombstones). A cell holds only the slot: the key is read back from the store's own logSeq
// and row columns, so the index costs 4 bytes a cell, at most two cells a timer, and no
// object per timer. Main thread only.
//
//   cell i:   slots[i] = s  ──►  keys.logSeq[s], keys.row[s]        slots[i] = -1 → empty
//   hash(seq,row) → probe i, i+1, i+2, … until a cell whose slot has that key, or an empty cell
import assert from 'node:assert/strict';

/** Where the index reads a slot's key: the resident store (its columns may be replaced as it grows). */
export interface SlotKeys {
  readonly logSeq: { readonly [slot: number]: number };
  readonly row: { readonly [slot: number]: number };
}

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
  readonly #keys: SlotKeys;
  #slots: Int32Array;
  #mask: number;
  #size = 0;

  /** `keys` must already hold a slot's key when it is inserted, and until it is deleted. */
  constructor(keys: SlotKeys, initialCapacity = initialCapacityDefault) {
    assert.ok(initialCapacity >= 2 && (initialCapacity & (initialCapacity - 1)) === 0, 'capacity is a power of two');
    this.#keys = keys;
    this.#slots = new Int32Array(initialCapacity).fill(emptySlot);
    this.#mask = initialCapacity - 1;
  }

  get size(): number {
    return this.#size;
  }

  get bytesUsed(): number {
    return this.#slots.byteLength;
  }

  #holds(slot: number, seq: number, row: number): boolean {
    return this.#keys.logSeq[slot] === seq && this.#keys.row[slot] === row;
  }

  #homeOf(slot: number): number {
    return hashOf(this.#keys.logSeq[slot] as number, this.#keys.row[slot] as number) & this.#mask;
  }

  /** The slot of (seq, row), or -1. */
  get(seq: number, row: number): number {
    for (let i = hashOf(seq, row) & this.#mask; ; i = (i + 1) & this.#mask) {
      const slot = this.#slots[i] as number;
      if (slot === emptySlot || this.#holds(slot, seq, row)) return slot;
    }
  }

  /** Indexes `slot` under the key the store holds for it; the key must not be indexed yet. */
  insert(slot: number): void {
    assert.ok(slot >= 0, 'slots are non-negative');
    if (this.#size + 1 > (this.#mask + 1) * loadFactorMax) this.#grow();
    this.#place(slot);
    this.#size++;
  }

  /** Removes (seq, row); returns its slot, or -1 if it was absent. */
  delete(seq: number, row: number): number {
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
    this.#size--;
    return removed;
  }

  #place(slot: number): void {
    const seq = this.#keys.logSeq[slot] as number;
    const row = this.#keys.row[slot] as number;
    let i = hashOf(seq, row) & this.#mask;
    for (let other = this.#slots[i] as number; other !== emptySlot; other = this.#slots[i] as number) {
      assert.ok(!this.#holds(other, seq, row), `(${seq}, ${row}) is already indexed`);
      i = (i + 1) & this.#mask;
    }
    this.#slots[i] = slot;
  }

  #grow(): void {
    const slots = this.#slots;
    this.#slots = new Int32Array(slots.length * 2).fill(emptySlot);
    this.#mask = slots.length * 2 - 1;
    for (const slot of slots) if (slot !== emptySlot) this.#place(slot);
  }
}
