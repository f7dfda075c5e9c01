// The slots whose OUTCOME records are being logged (a delivery task's outcomes, a redrive), each
// with the promise of its record: a cancel, a redrive or a key plan that meets such a slot waits
// for it, and a second outcome for a slot claimed already is refused. Main thread only.
//
// A bit per slot says whether it is claimed: the question asked for every timer of a task, twice
// (claim, release), is one load and one store, with nothing to hash, probe or grow per task.
// Which claim holds a slot is asked only of claimed slots (a cancel or a keyed admit meeting a
// timer being settled), and answered from a map of the claims then held, built on the first such
// question and kept until the next claim or release.
//
//   bits[slot >>> 5] & (1 << (slot & 31))   slot claimed
//   claims: ticket ──► { slots, settled }
import assert from 'node:assert/strict';

/** Tickets wrap around long before two in flight could meet. */
const ticketSpan = 2 ** 31;

interface Claim {
  readonly slots: Int32Array;
  readonly settled: Promise<void>;
}

export class SlotClaims {
  #bits = new Uint32Array(1024);
  readonly #claims = new Map<number, Claim>();
  #nextTicket = 0;
  #size = 0;
  /** Slot → its claim's promise, for the claims held when it was built; undefined after any change. */
  #holders: Map<number, Promise<void>> | undefined;

  /** Slots claimed, over all claims in flight. */
  get size(): number {
    return this.#size;
  }

  /**
   * Claims `slots` (not negative) until `settled` settles, if none of them is claimed already and
   * none appears twice among them; otherwise claims nothing and returns -1. The claim keeps
   * `slots`: the caller must not change it until release().
   */
  claimUnique(slots: Int32Array, settled: Promise<void>): number {
    let min = 0;
    let max = -1;
    for (let i = 0; i < slots.length; i++) {
      min = Math.min(min, slots[i] as number);
      max = Math.max(max, slots[i] as number);
    }
    if (min < 0) assert.fail(`slot ${min} claimed`);
    this.#cover(max);
    const bits = this.#bits;
    for (let i = 0; i < slots.length; i++) {
      const slot = slots[i] as number;
      const word = slot >>> 5;
      const bit = 1 << (slot & 31);
      if (((bits[word] as number) & bit) !== 0) {
        this.#clear(slots, i);
        return -1;
      }
      bits[word] = (bits[word] as number) | bit;
    }
    const ticket = this.#nextTicket;
    this.#nextTicket = (ticket + 1) % ticketSpan;
    if (this.#claims.has(ticket)) assert.fail('slot claim tickets wrapped around onto one in flight');
    this.#claims.set(ticket, { slots, settled });
    this.#size += slots.length;
    this.#holders = undefined;
    return ticket;
  }

  /** The promise of the claim holding `slot`, if one does. */
  get(slot: number): Promise<void> | undefined {
    const word = slot >>> 5;
    if (word >= this.#bits.length || ((this.#bits[word] as number) & (1 << (slot & 31))) === 0) return undefined;
    if (this.#holders === undefined) {
      this.#holders = new Map();
      for (const claim of this.#claims.values()) for (const held of claim.slots) this.#holders.set(held, claim.settled);
    }
    return this.#holders.get(slot);
  }

  /** Releases every slot of claim `ticket`. */
  release(ticket: number): void {
    const claim = this.#claims.get(ticket);
    if (claim === undefined) assert.fail('released a slot claim ticket not in flight');
    this.#claims.delete(ticket);
    this.#clear(claim.slots, claim.slots.length);
    this.#size -= claim.slots.length;
    this.#holders = undefined;
  }

  /** Clears the bits of slots[0 … end). */
  #clear(slots: Int32Array, end: number): void {
    const bits = this.#bits;
    for (let i = 0; i < end; i++) {
      const slot = slots[i] as number;
      bits[slot >>> 5] = (bits[slot >>> 5] as number) & ~(1 << (slot & 31));
    }
  }

  /** Grows the bits, by doubling, to hold slot `max`. */
  #cover(max: number): void {
    if (max >>> 5 < this.#bits.length) return;
    let words = this.#bits.length;
    while (max >>> 5 >= words) words *= 2;
    const bits = new Uint32Array(words);
    bits.set(this.#bits);
    this.#bits = bits;
  }
}
