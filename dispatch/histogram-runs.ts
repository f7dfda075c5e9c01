// Records values into hdr histograms a run at a time: consecutive equal values (into the same
// histograms) become one recordValueWithCount instead of one recordValue each. The timers of a
// delivery task mostly share their lateness and duration to the millisecond — all the rows of an
// Arrow batch share one request — so a 10,000-timer task costs a few histogram updates, not
// tens of thousands (hdr-histogram-js spends ~50 ns in each). Main thread: one is made for a
// loop over a slice or a task, and flushed at its end.
import type { Histogram } from 'hdr-histogram-js';

export class HistogramRuns {
  #first: Histogram | undefined;
  #second: Histogram | undefined;
  #value = 0;
  #count = 0;

  /** Records `value` into `first`, and into `second` when given (the same histogram twice records it twice). */
  add(value: number, first: Histogram, second?: Histogram): void {
    if (this.#count > 0 && value === this.#value && first === this.#first && second === this.#second) {
      this.#count++;
      return;
    }
    this.flush();
    this.#first = first;
    this.#second = second;
    this.#value = value;
    this.#count = 1;
  }

  /** Records the run being gathered; call it before the histograms are read. */
  flush(): void {
    if (this.#count === 0) return;
    (this.#first as Histogram).recordValueWithCount(this.#value, this.#count);
    this.#second?.recordValueWithCount(this.#value, this.#count);
    this.#count = 0;
    this.#first = undefined;
    this.#second = undefined;
  }
}
