// Delivery figures since start, for /metrics (dispatch-metrics.ts) and the benches: per queue,
// the outcomes recorded and HDR histograms of fire lateness and delivery latency; over all
// queues, the same two histograms, the release lateness, and first attempts that started early
// (a bug, counted on its own so that it is never hidden as a lateness of 0). Main thread: the
// dispatcher and the outcome recorder write them; metrics read them at scrape time.
import * as hdr from 'hdr-histogram-js';
import type { Engine } from '../engine/engine.ts';
import { failureKindNames } from './failure-description.ts';

/** Per-queue delivery figures since start (for /metrics). */
export interface QueueDeliveryStats {
  delivered: number;
  retried: number;
  dead: number;
  /** Delivery start − fire time of first attempts, ms. */
  readonly lateness: hdr.Histogram;
  /** Request sent → answer's head (or failure), ms. */
  readonly latency: hdr.Histogram;
}

/** Milliseconds from 1 to an hour, to three significant digits. */
const histogram = (): hdr.Histogram => hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 3_600_000, numberOfSignificantValueDigits: 3 });

export class DeliveryStats {
  /** Delivery start − fire time of first attempts, in ms, all queues. */
  readonly lateness = histogram();
  /**
   * Release − fire time of first attempts, in ms: when the scheduler handed the timer over, on
   * the main thread. The part of `lateness` spent before a worker had the timer (the rest is the
   * task's trip to the worker and its turn there); 0 for timers taken ahead, unless the main
   * thread fell behind by more than the lead.
   */
  readonly releaseLateness = histogram();
  /** Request sent → answer's head (or failure), in ms, all queues. */
  readonly latency = histogram();
  readonly #engine: Engine;
  readonly #byName = new Map<string, QueueDeliveryStats>();
  /** The same, by queue index (per timer, a Map lookup by name showed in profiles). */
  readonly #byIndex: QueueDeliveryStats[] = [];
  #earlyDeliveries = 0;
  /** Failed attempts since start, by failureKind (failure-description.ts). */
  readonly #failures = new Float64Array(failureKindNames.length);

  constructor(engine: Engine) {
    this.#engine = engine;
  }

  /** First attempts that started before their fire time by the worker's clock (must stay 0). */
  get earlyDeliveries(): number {
    return this.#earlyDeliveries;
  }

  /** A first attempt started before its fire time. */
  countEarlyDelivery(): void {
    this.#earlyDeliveries++;
  }

  /** An attempt failed, as `kind` (a failureKind). */
  countFailure(kind: number): void {
    this.#failures[kind] = (this.#failures[kind] as number) + 1;
  }

  /** Failed attempts since start by kind label (status, timeout, connect, tls, guard, other). */
  failuresByKind(): Array<[string, number]> {
    return failureKindNames.slice(1).map((name, i) => [name, this.#failures[i + 1] as number]);
  }

  /** Figures by queue name since start. */
  byQueue(): ReadonlyMap<string, Readonly<QueueDeliveryStats>> {
    return this.#byName;
  }

  /** The figures of the queue at `queueIndex`, made on its first use. */
  of(queueIndex: number): QueueDeliveryStats {
    const known = this.#byIndex[queueIndex];
    if (known !== undefined) return known;
    const name = this.#engine.queueNameAt(queueIndex);
    let stats = this.#byName.get(name);
    if (stats === undefined) {
      stats = { delivered: 0, retried: 0, dead: 0, lateness: histogram(), latency: histogram() };
      this.#byName.set(name, stats);
    }
    // A queue's index names it for the engine's life, so its figures are found by index from now on.
    this.#byIndex[queueIndex] = stats;
    return stats;
  }
}
