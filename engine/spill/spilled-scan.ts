// The spilled buckets in due order, for scans that walk the spill tier from a point in time
// (list and export, bulk cancel: engine/timer-query.ts). A run holds one batch per bucket (or a
// few with one start when a bucket is large), its rows sorted by (due, seq, row); several runs
// may hold a bucket with the same start. A scan reads the buckets of one start together, from
// the start its position falls in, and stops once it has what it needs, so a page never reads
// every run, nor looks at every bucket's entry. Pure over what SpilledTimers shows; main thread.
//
//   runs:    run 1 [b0][b1]    [b3]          groups by start: b0 (run 1)
//            run 2     [b1][b2][b3]                           b1 (run 1, run 2) …
import type { RunBucket, RunMeta } from './run-meta.ts';
import type { RunRows } from './run-rows.ts';
import type { SpilledTimers } from './spilled-timers.ts';

/** The batches that share one bucket start, across runs. */
export interface BucketGroup {
  readonly startMs: number;
  /** Rows of its batches (the spilled timers of the bucket, and those cancelled since). */
  readonly rows: number;
  readonly batches: ReadonlyArray<{ readonly run: RunMeta; readonly bucket: number }>;
}

/**
 * The spilled buckets (those at or past the watermark and still counted by their run) that may
 * hold a timer due in [fromMs, beforeMs), grouped by start, earliest first. The groups are made
 * as the scan asks for them, a merge of the runs' bucket lists (each in start order) from where
 * `fromMs` falls: a page that reads two groups looks at two, not at every bucket of every run.
 * The runs, the watermark and each run's validFromMs are read once, when made.
 */
export class BucketGroups {
  readonly #beforeMs: number;
  readonly #runs: readonly RunMeta[];
  /** Per run, its next bucket not yet in a group. */
  readonly #next: number[];
  readonly #made: BucketGroup[] = [];

  constructor(spill: Pick<SpilledTimers, 'runs' | 'watermarkMs' | 'bucketStartOf'>, fromMs: number, beforeMs: number) {
    const firstStart = spill.bucketStartOf(Math.max(fromMs, spill.watermarkMs));
    this.#beforeMs = beforeMs;
    this.#runs = spill.runs.map((run) => run.meta);
    this.#next = spill.runs.map((run) => firstBucketFrom(run.meta.buckets, Math.max(firstStart, run.validFromMs, spill.watermarkMs)));
  }

  /** Group `g` (0: the earliest), or undefined when there are not so many. */
  at(g: number): BucketGroup | undefined {
    while (this.#made.length <= g) {
      const group = this.#nextGroup();
      if (group === undefined) return undefined;
      this.#made.push(group);
    }
    return this.#made[g];
  }

  #nextGroup(): BucketGroup | undefined {
    let startMs = this.#beforeMs;
    for (let r = 0; r < this.#runs.length; r++) {
      const bucket = (this.#runs[r] as RunMeta).buckets[this.#next[r] as number];
      if (bucket !== undefined && bucket.startMs < startMs) startMs = bucket.startMs;
    }
    if (startMs >= this.#beforeMs) return undefined;
    const batches: Array<{ run: RunMeta; bucket: number }> = [];
    let rows = 0;
    for (let r = 0; r < this.#runs.length; r++) {
      const run = this.#runs[r] as RunMeta;
      // A large bucket is several consecutive batches of one start.
      for (let b = this.#next[r] as number; b < run.buckets.length && (run.buckets[b] as RunBucket).startMs === startMs; b++) {
        batches.push({ run, bucket: b });
        rows += (run.buckets[b] as RunBucket).rows;
        this.#next[r] = b + 1;
      }
    }
    return { startMs, rows, batches };
  }
}

/** The first of `buckets` (in start order) starting at or after `startMs`; their length when none. */
function firstBucketFrom(buckets: readonly RunBucket[], startMs: number): number {
  let low = 0;
  let high = buckets.length;
  while (low < high) {
    const mid = (low + high) >>> 1;
    if ((buckets[mid] as RunBucket).startMs < startMs) low = mid + 1;
    else high = mid;
  }
  return low;
}

/** The first row of `rows` (sorted by due, seq, row) that comes after (dueMs, seq, row). */
export function firstRowAfter(rows: RunRows, dueMs: number, seq: number, row: number): number {
  let low = 0;
  let high = rows.rows;
  while (low < high) {
    const mid = (low + high) >>> 1;
    const at = rows.dueAtMs[mid] as number;
    const midSeq = rows.seq[mid] as number;
    const notAfter = at < dueMs || (at === dueMs && (midSeq < seq || (midSeq === seq && (rows.row[mid] as number) <= row)));
    if (notAfter) low = mid + 1;
    else high = mid;
  }
  return low;
}
