// Idempotency keys claimed by admits still in flight (logged, not yet durable), by 32-bit key
// hash: a later admit that plans a key with a claimed hash waits for the claiming admit to
// settle, so the log's order decides which row is the original. Main thread only. (The slots
// whose delivery outcomes are being logged are claimed in a bitmap instead: slot-claims.ts.)
//
// An admit claims every key it introduces at once and releases them at once, so the table
// holds a ticket per hash and the admit's promise once, by ticket: no Map entry and no boxed
// number per key (a 10,000-key admit costs two passes over a typed array). Open addressing
// with linear probing and backward-shift deletion, as KeyIndex.
//
//   cell i:   hashes[i]  tickets[i] ──► settled.get(ticket) = the claiming admit's promise
//                                       tickets[i] = -1 → empty
import assert from 'node:assert/strict';

const emptyTicket = -1;
const loadFactorMax = 0.5;
const initialCapacity = 1024;
/** Tickets are Int32 cells; they wrap around long before two in flight could meet. */
const ticketSpan = 2 ** 31;

export class KeyClaims {
  #hashes = new Uint32Array(initialCapacity);
  #tickets = new Int32Array(initialCapacity).fill(emptyTicket);
  #mask = initialCapacity - 1;
  #size = 0;
  #nextTicket = 0;
  readonly #settled = new Map<number, Promise<void>>();

  /** Claims held, over all admits in flight. */
  get size(): number {
    return this.#size;
  }

  /** Claims `hashes` until `settled` settles; returns the ticket to release() them with. */
  claim(hashes: ArrayLike<number>, settled: Promise<void>): number {
    const ticket = this.#nextTicket;
    this.#nextTicket = (ticket + 1) % ticketSpan;
    if (this.#settled.has(ticket)) assert.fail('key claim tickets wrapped around onto one in flight');
    this.#settled.set(ticket, settled);
    this.#reserve(hashes.length);
    for (let i = 0; i < hashes.length; i++) this.#place(hashes[i] as number, ticket);
    this.#size += hashes.length;
    return ticket;
  }

  /** The promise of the admit that claimed `hash`, if one has. */
  get(hash: number): Promise<void> | undefined {
    for (let i = this.#home(hash); ; i = (i + 1) & this.#mask) {
      const ticket = this.#tickets[i] as number;
      if (ticket === emptyTicket) return undefined;
      if (this.#hashes[i] === hash) return this.#settled.get(ticket);
    }
  }

  /** Releases the claims a claim() call took, with the same hashes. */
  release(ticket: number, hashes: ArrayLike<number>): void {
    assert.ok(this.#settled.delete(ticket), 'released a key claim ticket not in flight');
    for (let i = 0; i < hashes.length; i++) this.#delete(hashes[i] as number, ticket);
    this.#size -= hashes.length;
    // A burst of large admits grew the table; once none is in flight it goes back to its first size.
    if (this.#size === 0 && this.#mask + 1 > initialCapacity) {
      this.#hashes = new Uint32Array(initialCapacity);
      this.#tickets = new Int32Array(initialCapacity).fill(emptyTicket);
      this.#mask = initialCapacity - 1;
    }
  }

  #home(hash: number): number {
    return hash & this.#mask;
  }

  #place(hash: number, ticket: number): void {
    let i = this.#home(hash);
    while (this.#tickets[i] !== emptyTicket) i = (i + 1) & this.#mask;
    this.#hashes[i] = hash;
    this.#tickets[i] = ticket;
  }

  #delete(hash: number, ticket: number): void {
    let i = this.#home(hash);
    for (; ; i = (i + 1) & this.#mask) {
      const cell = this.#tickets[i] as number;
      assert.ok(cell !== emptyTicket, 'released a key claim that was not held');
      if (cell === ticket && this.#hashes[i] === hash) break;
    }
    // Backward shift: pull later members of the probe run into the hole when that keeps each
    // reachable from its home cell.
    for (let hole = i, j = (i + 1) & this.#mask; ; j = (j + 1) & this.#mask) {
      const cell = this.#tickets[j] as number;
      if (cell === emptyTicket) {
        this.#tickets[hole] = emptyTicket;
        return;
      }
      const home = this.#home(this.#hashes[j] as number);
      const movable = hole <= j ? home <= hole || home > j : home <= hole && home > j;
      if (movable) {
        this.#tickets[hole] = cell;
        this.#hashes[hole] = this.#hashes[j] as number;
        hole = j;
      }
    }
  }

  /** Grows the table, if needed, so that `n` more claims keep it at most half full. */
  #reserve(n: number): void {
    let capacity = this.#mask + 1;
    while (this.#size + n > capacity * loadFactorMax) capacity *= 2;
    if (capacity === this.#mask + 1) return;
    const hashes = this.#hashes;
    const tickets = this.#tickets;
    this.#hashes = new Uint32Array(capacity);
    this.#tickets = new Int32Array(capacity).fill(emptyTicket);
    this.#mask = capacity - 1;
    for (let i = 0; i < tickets.length; i++) if (tickets[i] !== emptyTicket) this.#place(hashes[i] as number, tickets[i] as number);
  }
}
