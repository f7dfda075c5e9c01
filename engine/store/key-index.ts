// Idempotency key → slot, for resident timers that were added with a key. Open addressing
// with linear probing and backward-shift deletion, like SlotIndex, but a cell also keeps the
// key's 32-bit hash: probes compare hashes first and read the key bytes back from the store
// (where they live next to the payload) only on a hash match. 8 bytes a cell, at most two
// cells a key, no string or object per key. Main thread only.
//
//   cell i:   hashes[i]  slots[i] ──► store.keyOf(slot) = the key bytes      slots[i] = -1 → empty
import assert from 'node:assert/strict';

const emptySlot = -1;
const loadFactorMax = 0.5;

export interface KeyBytes {
  keyOf(slot: number): Uint8Array;
}

/** FNV-1a over the key bytes (keys are at most 256 bytes). */
export function keyHash(key: Uint8Array): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) hash = Math.imul(hash ^ (key[i] as number), 0x01000193);
  return hash >>> 0;
}

export function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

export class KeyIndex {
  readonly #keys: KeyBytes;
  #hashes: Uint32Array;
  #slots: Int32Array;
  #mask: number;
  #size = 0;

  constructor(keys: KeyBytes, initialCapacity = 1024) {
    assert.ok(initialCapacity >= 2 && (initialCapacity & (initialCapacity - 1)) === 0, 'capacity is a power of two');
    this.#keys = keys;
    this.#hashes = new Uint32Array(initialCapacity);
    this.#slots = new Int32Array(initialCapacity).fill(emptySlot);
    this.#mask = initialCapacity - 1;
  }

  get size(): number {
    return this.#size;
  }

  get bytesUsed(): number {
    return this.#hashes.byteLength + this.#slots.byteLength;
  }

  /** The slot holding `key` (whose hash is `hash`), or -1. */
  find(key: Uint8Array, hash: number): number {
    for (let i = hash & this.#mask; ; i = (i + 1) & this.#mask) {
      const slot = this.#slots[i] as number;
      if (slot === emptySlot) return emptySlot;
      if (this.#hashes[i] === hash && sameBytes(this.#keys.keyOf(slot), key)) return slot;
    }
  }

  /** Indexes `slot`, whose key (hash `hash`) the store already holds and the index does not. */
  insert(slot: number, hash: number): void {
    if (this.#size + 1 > (this.#mask + 1) * loadFactorMax) this.#grow();
    this.#place(slot, hash);
    this.#size++;
  }

  /** Removes `slot` (indexed under `hash`); false if it was not indexed. */
  delete(slot: number, hash: number): boolean {
    let i = hash & this.#mask;
    for (; ; i = (i + 1) & this.#mask) {
      const cell = this.#slots[i] as number;
      if (cell === emptySlot) return false;
      if (cell === slot) break;
    }
    for (let hole = i, j = (i + 1) & this.#mask; ; j = (j + 1) & this.#mask) {
      const cell = this.#slots[j] as number;
      if (cell === emptySlot) {
        this.#slots[hole] = emptySlot;
        break;
      }
      const home = (this.#hashes[j] as number) & this.#mask;
      const movable = hole <= j ? home <= hole || home > j : home <= hole && home > j;
      if (movable) {
        this.#slots[hole] = cell;
        this.#hashes[hole] = this.#hashes[j] as number;
        hole = j;
      }
    }
    this.#size--;
    return true;
  }

  #place(slot: number, hash: number): void {
    let i = hash & this.#mask;
    while (this.#slots[i] !== emptySlot) i = (i + 1) & this.#mask;
    this.#slots[i] = slot;
    this.#hashes[i] = hash;
  }

  #grow(): void {
    const slots = this.#slots;
    const hashes = this.#hashes;
    this.#slots = new Int32Array(slots.length * 2).fill(emptySlot);
    this.#hashes = new Uint32Array(slots.length * 2);
    this.#mask = slots.length * 2 - 1;
    for (let i = 0; i < slots.length; i++) if (slots[i] !== emptySlot) this.#place(slots[i] as number, hashes[i] as number);
  }
}
