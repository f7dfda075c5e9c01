// The last 15 minutes of the service, a sample a second: timers added, deliveries and failed
// attempts in that second, and the fire lateness (p50, p99, max) of the first attempts that
// started in it; beside the ring, each queue's deliveries over the last minute and when the log
// last synced (to the second). GET /v1/stats/series serves the ring whole, so a dashboard opened late draws
// the last 15 minutes at once, and GET /v1/events sends each sample as it is taken.
//
// A sample is a difference of counters the engine and the dispatcher keep anyway (rows
// inserted, outcomes and failures by kind, the cumulative lateness HDR histogram), read once a
// second: nothing is done per timer for it. A second's lateness is the cumulative histogram
// minus the copy taken a second before (two passes over its counts, some 23,000 of them; none
// when no first attempt started meanwhile).
//
//   ring (typed columns, 900 slots): at_ms │ adds │ deliveries │ failures │ p50 │ p99 │ max
//                                    ▲ head: the next slot written; the oldest is at head when full
//
// Main thread: one interval timer (unref'd) a life of the HTTP server, stopped with it.
import * as hdr from 'hdr-histogram-js';
import { statsSeriesLimits } from './limits.ts';

/** The cumulative counters a sample is the difference of (each since the start of this life). */
export interface SeriesSources {
  /** Timers put in the store by adds (engine.stats().rowsInserted). */
  added(): number;
  /** Delivery attempts that delivered. */
  delivered(): number;
  /** Delivery attempts that failed (any kind). */
  failed(): number;
  /** Delivery start − fire time of first attempts, ms, cumulative; undefined when nothing delivers. */
  lateness(): hdr.Histogram | undefined;
  /** Attempts that delivered, by queue name. */
  deliveredByQueue(): Iterable<readonly [string, number]>;
  /** The log's durable writes (group commits). */
  syncs(): number;
}

/** One second, as the ring holds it; lateness is NaN for a second in which no first attempt started. */
export interface SeriesSample {
  atMs: number;
  adds: number;
  deliveries: number;
  failures: number;
  latenessP50Ms: number;
  latenessP99Ms: number;
  latenessMaxMs: number;
}

/** The ring's samples as columns, oldest first. */
export interface SeriesColumns {
  readonly atMs: Float64Array;
  readonly adds: Float64Array;
  readonly deliveries: Float64Array;
  readonly failures: Float64Array;
  readonly latenessP50Ms: Float64Array;
  readonly latenessP99Ms: Float64Array;
  readonly latenessMaxMs: Float64Array;
}

/** A queue's rate is over the last minute: 61 samples make 60 seconds. */
const rateWindow = 61;

const histogram = (): hdr.Histogram => hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 3_600_000, numberOfSignificantValueDigits: 3 });

export class StatsSeries {
  readonly #sources: SeriesSources;
  readonly #now: () => number;
  readonly #capacity: number;
  readonly #columns: SeriesColumns;
  #head = 0;
  #size = 0;
  #added = 0;
  #delivered = 0;
  #failed = 0;
  #syncs = 0;
  /** When a sample first saw the log's syncs grow, the last time they did (NaN: not since the start). */
  #lastSyncAtMs = NaN;
  /** The lateness histogram as it was at the last sample, and a scratch one for the difference. */
  readonly #latenessBefore = histogram();
  readonly #latenessSecond = histogram();
  #timer: NodeJS.Timeout | undefined;
  readonly #listeners = new Set<(sample: Readonly<SeriesSample>) => void>();
  /** Each queue's delivered count at the last `rateWindow` samples (a ring; `#rateHead` the next written), for its rate. */
  readonly #queueDelivered = new Map<string, Float64Array>();
  #rateHead = 0;
  #rateFilled = 0;
  readonly #last: SeriesSample = { atMs: 0, adds: 0, deliveries: 0, failures: 0, latenessP50Ms: NaN, latenessP99Ms: NaN, latenessMaxMs: NaN };

  constructor(sources: SeriesSources, options: { readonly now?: () => number; readonly capacity?: number } = {}) {
    this.#sources = sources;
    this.#now = options.now ?? Date.now;
    this.#capacity = options.capacity ?? statsSeriesLimits.samplesMax;
    const column = (): Float64Array => new Float64Array(this.#capacity);
    this.#columns = { atMs: column(), adds: column(), deliveries: column(), failures: column(), latenessP50Ms: column(), latenessP99Ms: column(), latenessMaxMs: column() };
    this.#baseline();
  }

  /** Takes a sample every sampleIntervalMs until stop(). */
  start(): void {
    if (this.#timer !== undefined) return;
    this.#baseline();
    this.#timer = setInterval(() => this.sample(), statsSeriesLimits.sampleIntervalMs);
    this.#timer.unref();
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#timer = undefined;
    this.#listeners.clear();
  }

  /** Called with each sample as it is taken (GET /v1/events); returns the unsubscribe. */
  onSample(listener: (sample: Readonly<SeriesSample>) => void): () => void {
    this.#listeners.add(listener);
    return () => void this.#listeners.delete(listener);
  }

  /** The latest sample (undefined: none taken yet). */
  get last(): Readonly<SeriesSample> | undefined {
    return this.#size === 0 ? undefined : this.#last;
  }

  get size(): number {
    return this.#size;
  }

  /** Takes one sample now: the counters' growth since the sample before (the interval timer calls it; tests too). */
  sample(): Readonly<SeriesSample> {
    const sources = this.#sources;
    const added = sources.added();
    const delivered = sources.delivered();
    const failed = sources.failed();
    const last = this.#last;
    last.atMs = this.#now();
    last.adds = Math.max(0, added - this.#added);
    last.deliveries = Math.max(0, delivered - this.#delivered);
    last.failures = Math.max(0, failed - this.#failed);
    this.#added = added;
    this.#delivered = delivered;
    this.#failed = failed;
    const syncs = sources.syncs();
    if (syncs > this.#syncs) this.#lastSyncAtMs = last.atMs;
    this.#syncs = syncs;
    this.#sampleLateness(last);
    this.#sampleQueues();
    const c = this.#columns;
    const at = this.#head;
    c.atMs[at] = last.atMs;
    c.adds[at] = last.adds;
    c.deliveries[at] = last.deliveries;
    c.failures[at] = last.failures;
    c.latenessP50Ms[at] = last.latenessP50Ms;
    c.latenessP99Ms[at] = last.latenessP99Ms;
    c.latenessMaxMs[at] = last.latenessMaxMs;
    this.#head = (at + 1) % this.#capacity;
    this.#size = Math.min(this.#size + 1, this.#capacity);
    for (const listener of this.#listeners) listener(last);
    return last;
  }

  /** The samples taken after `afterMs` (all of them by default), oldest first, as columns. */
  columns(afterMs = -Infinity): SeriesColumns {
    const c = this.#columns;
    const oldest = (this.#head - this.#size + this.#capacity) % this.#capacity;
    let skip = 0;
    while (skip < this.#size && (c.atMs[(oldest + skip) % this.#capacity] as number) <= afterMs) skip++;
    const n = this.#size - skip;
    const pick = (column: Float64Array): Float64Array => {
      const out = new Float64Array(n);
      for (let i = 0; i < n; i++) out[i] = column[(oldest + skip + i) % this.#capacity] as number;
      return out;
    };
    return {
      atMs: pick(c.atMs),
      adds: pick(c.adds),
      deliveries: pick(c.deliveries),
      failures: pick(c.failures),
      latenessP50Ms: pick(c.latenessP50Ms),
      latenessP99Ms: pick(c.latenessP99Ms),
      latenessMaxMs: pick(c.latenessMaxMs),
    };
  }

  /** The time of the sample that last saw the log sync (to the second); NaN when none did since the start. */
  get lastSyncAtMs(): number {
    return this.#lastSyncAtMs;
  }

  /** A queue's deliveries a second over the last minute of samples (0 before two samples, or for a queue that delivered none). */
  deliveredPerSecond(queue: string): number {
    const ring = this.#queueDelivered.get(queue);
    if (ring === undefined || this.#rateFilled < 2) return 0;
    const newest = (this.#rateHead - 1 + rateWindow) % rateWindow;
    const oldest = (this.#rateHead - this.#rateFilled + rateWindow) % rateWindow;
    const seconds = ((this.#rateFilled - 1) * statsSeriesLimits.sampleIntervalMs) / 1000;
    return ((ring[newest] as number) - (ring[oldest] as number)) / seconds;
  }

  #sampleQueues(): void {
    const at = this.#rateHead;
    for (const [queue, delivered] of this.#sources.deliveredByQueue()) {
      let ring = this.#queueDelivered.get(queue);
      if (ring === undefined) {
        // A queue's figures appear with its first delivery: one not there at the start delivered all of it since.
        ring = new Float64Array(rateWindow);
        this.#queueDelivered.set(queue, ring);
      }
      ring[at] = delivered;
    }
    this.#rateHead = (at + 1) % rateWindow;
    this.#rateFilled = Math.min(this.#rateFilled + 1, rateWindow);
  }

  /** The counters as they are now, so that the first sample counts only what comes after. */
  #baseline(): void {
    const sources = this.#sources;
    this.#added = sources.added();
    this.#delivered = sources.delivered();
    this.#failed = sources.failed();
    this.#syncs = sources.syncs();
    // What a queue delivered before the start is before the window.
    this.#queueDelivered.clear();
    for (const [queue, delivered] of sources.deliveredByQueue()) this.#queueDelivered.set(queue, new Float64Array(rateWindow).fill(delivered));
    this.#latenessBefore.reset();
    const lateness = sources.lateness();
    if (lateness !== undefined) this.#latenessBefore.add(lateness);
  }

  #sampleLateness(into: SeriesSample): void {
    const cumulative = this.#sources.lateness();
    const before = this.#latenessBefore;
    if (cumulative === undefined || cumulative.totalCount === before.totalCount) {
      into.latenessP50Ms = into.latenessP99Ms = into.latenessMaxMs = NaN;
      return;
    }
    const second = this.#latenessSecond;
    second.reset();
    second.add(cumulative);
    second.subtract(before);
    before.reset();
    before.add(cumulative);
    into.latenessP50Ms = second.getValueAtPercentile(50);
    into.latenessP99Ms = second.getValueAtPercentile(99);
    // As /metrics gives the most (quantile 1): the highest value equivalent to the largest recorded.
    into.latenessMaxMs = second.getValueAtPercentile(100);
  }
}
