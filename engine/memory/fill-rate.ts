// How fast a count grows (a store's slots in use, an arena's bytes added), for the structures
// that make memory ahead: the growth per ms over the last window at least windowMs long.
// Sampled by the caller as it goes (no timer): a caller that stops sampling keeps the last
// rate, and its next sample after a long pause spans the pause, so a rate that stopped reads
// low once sampling resumes. Owned by the thread of the structure it measures (main).

/** Windows are at least this long by default: a few batches' worth at any rate that matters. */
const windowMsDefault = 250;

export class FillRate {
  readonly #now: () => number;
  readonly #windowMs: number;
  #perMs = 0;
  #markMs = Number.NEGATIVE_INFINITY;
  #markCount = 0;

  /** `now`: monotonic ms (performance.now() where not under test). */
  constructor(now: () => number, windowMs = windowMsDefault) {
    this.#now = now;
    this.#windowMs = windowMs;
  }

  /** Notes the count as of now and answers the growth per ms over the last whole window (0 before one). */
  sample(count: number): number {
    const now = this.#now();
    const elapsed = now - this.#markMs;
    if (elapsed < this.#windowMs) return this.#perMs;
    // The first sample only starts a window (elapsed is Infinity).
    this.#perMs = Number.isFinite(elapsed) ? (count - this.#markCount) / elapsed : 0;
    this.#markMs = now;
    this.#markCount = count;
    return this.#perMs;
  }
}
