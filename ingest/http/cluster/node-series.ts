// What a cluster node's ring of one-second samples (engine/stats-series.ts) is the difference
// of: its partitions' engines' adds and log syncs and their dispatchers' deliveries, failures
// and fire lateness, summed. Partitions come and go (takeovers, handovers), and each engine and
// dispatcher counts from its own start, so the sums are kept monotone: each counter's growth
// is added as it is read (an engine's first reading only sets where it starts, since a taken
// partition's replayed adds are not this node's adds; a dispatcher, made when its partition was
// taken, counts from 0), and a partition that left keeps what it counted until its last reading. Lateness is the node's cumulative histogram: every dispatcher's
// histogram added up, the ones that left included at their last state. Read once a second by
// the series' interval timer, and at each change of the partitions owned; main thread.
import * as hdr from 'hdr-histogram-js';
import type { Engine } from '../../../engine/engine.ts';
import type { SeriesSources } from '../../../engine/stats-series.ts';
import type { PartitionDirectory } from '../../../cluster/partition-directory.ts';

/** What the series reads of a partition's dispatcher (dispatch/dispatcher.ts). */
export interface DeliveryFigures {
  stats(): ReadonlyMap<string, { readonly delivered: number }>;
  failuresByKind(): Array<[string, number]>;
  readonly lateness: hdr.Histogram;
}

/** A directory that can also name its partitions' dispatchers (the node's does; a fixture's need not). */
export type SeriesDirectory = PartitionDirectory & { dispatcherOf?(partition: number): DeliveryFigures | undefined };

/** A monotone sum over objects that come and go, each counting from its own start. */
class GrowthSum {
  readonly #last = new Map<object, number>();
  /** Whether an object's first reading is all growth (a dispatcher, made when its partition was taken) or only where it starts (an engine, whose counts include its replay). */
  readonly #fromZero: boolean;
  #total = 0;

  constructor(fromZero: boolean) {
    this.#fromZero = fromZero;
  }

  /** The total after adding each object's growth since its last reading; objects not given are forgotten (what they counted stays). */
  read(values: Iterable<readonly [object, number]>): number {
    const seen = new Set<object>();
    for (const [source, value] of values) {
      seen.add(source);
      const before = this.#last.get(source) ?? (this.#fromZero ? 0 : value);
      if (value > before) this.#total += value - before;
      this.#last.set(source, value);
    }
    for (const source of this.#last.keys()) if (!seen.has(source)) this.#last.delete(source);
    return this.#total;
  }
}

const histogram = (): hdr.Histogram => hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 3_600_000, numberOfSignificantValueDigits: 3 });

/** The node's sources; close() stops the readings taken at each change of the partitions owned. */
export function nodeSeriesSources(directory: SeriesDirectory): SeriesSources & { close(): void } {
  const engines = function* (): Generator<Engine> {
    for (const partition of directory.owned()) {
      const engine = directory.engineOf(partition);
      if (engine !== undefined) yield engine;
    }
  };
  const dispatchers = function* (): Generator<DeliveryFigures> {
    for (const partition of directory.owned()) {
      const dispatcher = directory.dispatcherOf?.(partition);
      if (dispatcher !== undefined) yield dispatcher;
    }
  };
  const added = new GrowthSum(false);
  const syncs = new GrowthSum(false);
  const delivered = new GrowthSum(true);
  const failed = new GrowthSum(true);
  const byQueue = new Map<string, GrowthSum>();
  // The lateness of dispatchers that left, at their last state, and the sum handed out.
  const left = histogram();
  const summed = histogram();
  let held = new Set<DeliveryFigures>();
  let summedCount = -1;

  const sources: SeriesSources = {
    added: () => added.read(Array.from(engines(), (engine) => [engine, engine.stats().rowsInserted] as const)),
    syncs: () => syncs.read(Array.from(engines(), (engine) => [engine, engine.log.counters.syncs] as const)),
    delivered: () =>
      delivered.read(
        Array.from(dispatchers(), (dispatcher) => {
          let sum = 0;
          for (const stats of dispatcher.stats().values()) sum += stats.delivered;
          return [dispatcher, sum] as const;
        }),
      ),
    failed: () => failed.read(Array.from(dispatchers(), (dispatcher) => [dispatcher, dispatcher.failuresByKind().reduce((sum, [, count]) => sum + count, 0)] as const)),
    deliveredByQueue: () => {
      const now = new Map<string, [object, number][]>();
      for (const dispatcher of dispatchers()) {
        for (const [queue, stats] of dispatcher.stats()) {
          const list = now.get(queue) ?? [];
          list.push([dispatcher, stats.delivered]);
          now.set(queue, list);
        }
      }
      for (const queue of byQueue.keys()) if (!now.has(queue)) now.set(queue, []);
      const out: [string, number][] = [];
      for (const [queue, values] of now) {
        let sum = byQueue.get(queue);
        if (sum === undefined) byQueue.set(queue, (sum = new GrowthSum(true)));
        out.push([queue, sum.read(values)]);
      }
      return out;
    },
    lateness: () => {
      const current = new Set(dispatchers());
      for (const dispatcher of held) if (!current.has(dispatcher)) left.add(dispatcher.lateness);
      held = current;
      let count = left.totalCount;
      for (const dispatcher of current) count += dispatcher.lateness.totalCount;
      if (count === 0) return undefined;
      // Summed again only when a first attempt started since (the series reads it once a second).
      if (count !== summedCount) {
        summed.reset();
        summed.add(left);
        for (const dispatcher of current) summed.add(dispatcher.lateness);
        summedCount = count;
      }
      return summed;
    },
  };
  // Read at once when a partition comes (its engine just replayed: its adds count from here) or
  // goes (what it counted up to the last reading stays), not only at the next sample.
  const stop = directory.onChange(() => {
    sources.added();
    sources.syncs();
    sources.delivered();
    sources.failed();
    sources.deliveredByQueue();
    sources.lateness();
  });
  return { ...sources, close: stop };
}
