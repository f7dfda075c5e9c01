// What the compare suite's two sides (compare-fermata.ts, compare-bullmq.ts) share: the shape
// of the workloads, so both run exactly the same ones, the shape of what each returns, and how
// both wait for their deliveries at the sink.
import assert from 'node:assert/strict';
import type { Histogram } from 'hdr-histogram-js';
import { awaitTimers, type BenchSink } from '../loadgen/sink.ts';
import { median } from './report.ts';

export const compareShape = {
  /** Concurrent writers of single adds. */
  singleWriters: 256,
  /** Timers of one bulk add (BullMQ addBulk, one Arrow batch) and of each batch the other runs add. */
  batchRows: 10_000,
  payloadBytes: 128,
  /** Far-future fire times: uniformly this far ahead, so nothing fires during the run. */
  farDelayMinMs: 3_600_000,
  farDelayMaxMs: 30 * 86_400_000,
  /** Target of the far-future timers (a reserved name that never resolves; they never fire here anyway). */
  farTarget: 'https://example.invalid/fermata-bench',
  /** Concurrent deliveries of the BullMQ worker: as many as fermata's worker has to one origin. */
  workerConcurrency: 256,
} as const;

/** After the last fire time, how long deliveries are waited for before a run fails. */
export const deliveryWaitMs = 120_000;

export interface CompareTiming {
  readonly warmupMs: number;
  readonly measureMs: number;
}

export interface SingleAdds {
  /** Adds acknowledged a second inside the measured span. */
  readonly perS: number;
  /** Call (or request) to acknowledgement, µs. */
  readonly latencyUs: Histogram;
  readonly errors: number;
}

export interface Delivery {
  /** Timers delivered a second, from their common fire time to the last arrival. */
  readonly perS: number;
  readonly early: number;
}

export interface Lateness {
  /** Arrival at the sink − intended fire time, µs. */
  readonly latenessUs: Histogram;
  readonly early: number;
}

export interface MemoryUse {
  readonly bytesPerTimer: number;
  /** What was measured, for the meta line. */
  readonly measure: string;
}

/**
 * fermata's VmRSS a timer (bytesPerTimer: the larger of the live growth and the restart's figure,
 * SpilledMemoryUse.processBytesPerTimer) and its spread over the readings it is made of: a few MB
 * of VmRSS over a million timers is within how much a process at rest moves, so a ratio is formed
 * over the upper end (bytesPerTimerMax), never the middle; the live process's growth once
 * settled, and a second after the last add, before the loader spilled the far future.
 */
export interface FermataMemoryUse extends MemoryUse {
  /** The least the readings allow: the larger of the two measures' lower ends (may be ≤ 0: no growth told from none). */
  readonly bytesPerTimerMin: number;
  /** The most the readings allow: the larger of the two measures' upper ends. */
  readonly bytesPerTimerMax: number;
  readonly liveBytesPerTimer: number;
  readonly filledBytesPerTimer: number;
}

/** fermata's memory for far-future timers it keeps on disk: what the engine counts, and what the process shows. */
export interface SpilledMemoryUse {
  /** The engine's own count (resident timers' bytes + the spill tier's metadata) ÷ timers: the like of Redis's used_memory. */
  readonly countedBytesPerTimer: number;
  /** VmRSS of the service restarted on those timers, over an empty service's (at least the empty ones' spread), ÷ timers: an upper bound. */
  readonly processBytesPerTimer: number;
  /** The same from the readings' extremes: the highest restart over the lowest empty service (at least their spread). */
  readonly processBytesPerTimerMax: number;
  readonly spilled: number;
  readonly measure: string;
}

/**
 * The growth from readings `before` to readings `after` (each a few readings of one quantity),
 * ÷ `per`: from their medians, and the least and most their extremes allow.
 */
export function growthRange(before: readonly number[], after: readonly number[], per: number): { readonly median: number; readonly min: number; readonly max: number } {
  return {
    median: (median(after) - median(before)) / per,
    min: (Math.min(...after) - Math.max(...before)) / per,
    max: (Math.max(...after) - Math.min(...before)) / per,
  };
}

/** Row counts of the batches that add up to `count`. */
export function chunks(count: number): number[] {
  const sizes: number[] = [];
  for (let left = count; left > 0; left -= compareShape.batchRows) sizes.push(Math.min(left, compareShape.batchRows));
  return sizes;
}

/** Waits for `count` arrivals after `dueMs`; the rate from dueMs to the last one. */
export async function awaitDelivery(sink: BenchSink, count: number, dueMs: number): Promise<Delivery> {
  const { snapshot } = await awaitTimers(sink, count, Math.max(0, dueMs - Date.now()) + deliveryWaitMs);
  assert.equal(snapshot.timers, count, `the sink got ${snapshot.timers} of ${count} timers within ${deliveryWaitMs} ms of their fire time`);
  return { perS: count / ((snapshot.lastArrivalMs - dueMs) / 1000), early: snapshot.early };
}

export async function awaitLateness(sink: BenchSink, fireAtMs: readonly number[]): Promise<Lateness> {
  const lastDueMs = fireAtMs.reduce((last, at) => Math.max(last, at), 0);
  const { snapshot } = await awaitTimers(sink, fireAtMs.length, Math.max(0, lastDueMs - Date.now()) + deliveryWaitMs);
  assert.equal(snapshot.timers, fireAtMs.length, `the sink got ${snapshot.timers} of ${fireAtMs.length} timers within ${deliveryWaitMs} ms of the last fire time`);
  return { latenessUs: snapshot.latenessUs, early: snapshot.early };
}
