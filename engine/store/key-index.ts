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
  return keyHashIn(key, 0, key.length);
}

/**
 * keyHash() of values[start, end), without a view over it (replay hashes a million keys).
 * `words`, a DataView over exactly `values`, reads each little-endian word in one load instead
 * of four byte loads: the same hash, in about 60% of the time (1,000,000 keys of 64 bytes:
 * 30–37 ms against 50–65).
 */
export function keyHashIn(values: Uint8Array, start: number, end: number, words?: DataView): number {
  const length = end - start;
  const whole = start + (length & ~3);
  let h = 0;
  let i = start;
  for (; i < whole; i += 4) {
    const word =
      words === undefined
        ? (values[i] as number) | ((values[i + 1] as number) << 8) | ((values[i + 2] as number) << 16) | ((values[i + 3] as number) << 24)
        : words.getInt32(i, true);
    h ^= mixWord(word);
    h = (h << 13) | (h >>> 19);
    h = (Math.imul(h, 5) + 0xe6546b64) | 0;
  }
  if (i < end) {
    let tail = 0;
    for (let at = end - 1; at >= i; at--) tail = (tail << 8) | (values[at] as number);
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
  return a.length === b.length && sameBytesIn(a, b, 0);
}

/** Whether `a` equals values[start, start + a.length). */
function sameBytesIn(a: Uint8Array, values: Uint8Array, start: number): boolean {
  for (let i = 0; i < a.length; i++) if (a[i] !== values[start + i]) return false;
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

  /** The slot holding the key values[start, end) (whose hash is `hash`), or -1: a range, not a view (a replay looks up a million keys). */
  find(values: Uint8Array, start: number, end: number, hash: number): number {
    const cells = this.#cells;
    const hash32 = hash | 0;
    for (let i = hash & this.#mask; ; i = (i + 1) & this.#mask) {
      const slot = cells[2 * i] as number;
      if (slot === emptySlot) return emptySlot;
      if (cells[2 * i + 1] !== hash32) continue;
      const held = this.#keys.keyOf(slot);
      if (held.length === end - start && sameBytesIn(held, values, start)) return slot;
    }
  }

  /**
   * Sets unindexed[i] to 1 for each hashes[i], i < count, that no cell holds (to 0 for the
   * others): find() would answer -1 for a key with that hash, and goes on doing so while only
   * deletes follow. For a replay, which looks up a million keys in a table far larger than the
   * caches: a first pass reads every home cell with no branch on what it reads (an empty slot
   * is -1, its sign bit the answer), so the processor overlaps those misses instead of waiting
   * out each one; only keys whose home cell is taken are probed further, from cache by then.
   */
  markUnindexed(hashes: Uint32Array, count: number, unindexed: Uint8Array): void {
    const cells = this.#cells;
    const mask = this.#mask;
    for (let n = 0; n < count; n++) unindexed[n] = (cells[2 * ((hashes[n] as number) & mask)] as number) >>> 31;
    for (let n = 0; n < count; n++) {
      if (unindexed[n] === 1) continue;
      const hash32 = (hashes[n] as number) | 0;
      let absent = 1;
      for (let i = hash32 & mask; cells[2 * i] !== emptySlot; i = (i + 1) & mask) {
        if (cells[2 * i + 1] === hash32) {
          absent = 0;
          break;
        }
      }
      unindexed[n] = absent;
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

  /**
   * Indexes slots[i] under hashes[i], i < count, as that many insert() calls would. Two passes,
   * for the cache misses of a batch's worth of inserts into a large table (see markUnindexed):
   * the first reads each home cell with no branch on it, the second places each slot.
   */
  insertMany(slots: Int32Array, hashes: Uint32Array, count: number): void {
    this.reserve(count);
    const cells = this.#cells;
    const mask = this.#mask;
    const homeFree = new Uint8Array(count);
    for (let n = 0; n < count; n++) homeFree[n] = (cells[2 * ((hashes[n] as number) & mask)] as number) >>> 31;
    for (let n = 0; n < count; n++) {
      const slot = slots[n] as number;
      if (slot < 0) assert.fail('slots are non-negative');
      const hash = hashes[n] as number;
      const home = hash & mask;
      // An earlier slot of this batch may have taken the home cell since the first pass.
      if (homeFree[n] === 1 && cells[2 * home] === emptySlot) {
        cells[2 * home] = slot;
        cells[2 * home + 1] = hash;
      } else this.#place(slot, hash);
    }
    this.#size += count;
  }

  /** Grows the table, if needed, so that `n` more inserts do not grow it. */
  reserve(n: number): void {
    let capacity = this.#mask + 1;
    while (this.#size + n > capacity * loadFactorMax) capacity *= 2;
    if (capacity > this.#mask + 1) this.#rehash(capacity);
  }

  /**
   * As reserve(n); but when the table must grow, it grows for `expectedKeys` keys in all
   * instead of doubling: recovery's one rehash instead of a chain of them.
   */
  reserveTowards(n: number, expectedKeys: number): void {
    if (this.#size + n <= (this.#mask + 1) * loadFactorMax) return;
    const wanted = Math.max(this.#size + n, Math.ceil(expectedKeys));
    let capacity = this.#mask + 1;
    while (wanted > capacity * loadFactorMax) capacity *= 2;
    this.#rehash(capacity);
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
