// Idempotency key → slot, for resident timers that were added with a key. Open addressing
// with linear probing and backward-shift deletion, like SlotIndex, but a cell also keeps the
// key's 32-bit hash: probes compare hashes first and read the key bytes back from the store
// (where they live next to the payload) only on a hash match. 8 bytes a cell, at most two
// cells a key, no string or object per key. Main thread only.
//
//   cells:  [ slot0 | hash0 | slot1 | hash1 | … ]     cell i = cells[2i], cells[2i + 1]
//   cell i:   slot ──► store.keyOf(slot) = the key bytes       slot = -1 → empty
//
// A cell's slot and hash sit side by side: an insert or a hit touches one cache line, not one
// in each of two arrays (a table of a million keys is far larger than the caches).
import assert from 'node:assert/strict';

const emptySlot = -1;
const loadFactorMax = 0.5;

export interface KeyBytes {
  keyOf(slot: number): Uint8Array;
}

/** Murmur3 (x86, 32-bit, seed 0) over the key bytes, four at a time (keys are at most 256 bytes). */
export function keyHash(key: Uint8Array): number {
  const length = key.length;
  const whole = length & ~3;
  let h = 0;
  let i = 0;
  for (; i < whole; i += 4) {
    const word = (key[i] as number) | ((key[i + 1] as number) << 8) | ((key[i + 2] as number) << 16) | ((key[i + 3] as number) << 24);
    h ^= mixWord(word);
    h = (h << 13) | (h >>> 19);
    h = (Math.imul(h, 5) + 0xe6546b64) | 0;
  }
  if (i < length) {
    let tail = 0;
    for (let at = length - 1; at >= i; at--) tail = (tail << 8) | (key[at] as number);
    h ^= mixWord(tail);
  }
  return finalMix(h ^ length);
}

/** Murmur3's 32-bit finaliser: every input bit reaches every output bit. */
export function finalMix(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

function mixWord(word: number): number {
  let k = Math.imul(word, 0xcc9e2d51);
  k = (k << 15) | (k >>> 17);
  return Math.imul(k, 0x1b873593);
}

export function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

export class KeyIndex {
  readonly #keys: KeyBytes;
  /** Slot and hash (as int32) of each cell, interleaved. */
  #cells: Int32Array;
  #mask: number;
  #size = 0;

  constructor(keys: KeyBytes, initialCapacity = 1024) {
    assert.ok(initialCapacity >= 2 && (initialCapacity & (initialCapacity - 1)) === 0, 'capacity is a power of two');
    this.#keys = keys;
    this.#cells = new Int32Array(2 * initialCapacity).fill(emptySlot);
    this.#mask = initialCapacity - 1;
  }

  get size(): number {
    return this.#size;
  }

  get bytesUsed(): number {
    return this.#cells.byteLength;
  }

  /** The slot holding `key` (whose hash is `hash`), or -1. */
  find(key: Uint8Array, hash: number): number {
    const cells = this.#cells;
    const hash32 = hash | 0;
    for (let i = hash & this.#mask; ; i = (i + 1) & this.#mask) {
      const slot = cells[2 * i] as number;
      if (slot === emptySlot) return emptySlot;
      if (cells[2 * i + 1] === hash32 && sameBytes(this.#keys.keyOf(slot), key)) return slot;
    }
  }

  /** Indexes `slot`, whose key (hash `hash`) the store already holds and the index does not. */
  insert(slot: number, hash: number): void {
    // A plain condition, assert only on failure: a batch inserts thousands (assert.ok's rest arguments cost an array per call).
    if (slot < 0) assert.fail('slots are non-negative');
    this.reserve(1);
    this.#place(slot, hash);
    this.#size++;
  }

  /** Grows the table, if needed, so that `n` more inserts do not grow it. */
  reserve(n: number): void {
    let capacity = this.#mask + 1;
    while (this.#size + n > capacity * loadFactorMax) capacity *= 2;
    if (capacity > this.#mask + 1) this.#rehash(capacity);
  }

  /** Removes `slot` (indexed under `hash`); false if it was not indexed. */
  delete(slot: number, hash: number): boolean {
    const cells = this.#cells;
    const mask = this.#mask;
    let i = hash & mask;
    for (; ; i = (i + 1) & mask) {
      const cell = cells[2 * i] as number;
      if (cell === emptySlot) return false;
      if (cell === slot) break;
    }
    // Backward shift: pull later members of the probe run into the hole when that keeps each
    // reachable from its home cell.
    for (let hole = i, j = (i + 1) & mask; ; j = (j + 1) & mask) {
      const cell = cells[2 * j] as number;
      if (cell === emptySlot) {
        cells[2 * hole] = emptySlot;
        break;
      }
      const cellHash = cells[2 * j + 1] as number;
      const home = cellHash & mask;
      const movable = hole <= j ? home <= hole || home > j : home <= hole && home > j;
      if (movable) {
        cells[2 * hole] = cell;
        cells[2 * hole + 1] = cellHash;
        hole = j;
      }
    }
    this.#size--;
    return true;
  }

  #place(slot: number, hash: number): void {
    const cells = this.#cells;
    let i = hash & this.#mask;
    while (cells[2 * i] !== emptySlot) i = (i + 1) & this.#mask;
    cells[2 * i] = slot;
    cells[2 * i + 1] = hash;
  }

  #rehash(capacity: number): void {
    const cells = this.#cells;
    this.#cells = new Int32Array(2 * capacity).fill(emptySlot);
    this.#mask = capacity - 1;
    for (let i = 0; i < cells.length; i += 2) if (cells[i] !== emptySlot) this.#place(cells[i] as number, cells[i + 1] as number);
  }
}
