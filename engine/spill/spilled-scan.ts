// The spilled buckets in due order, for scans that walk the spill tier from a point in time
// (list and export, bulk cancel: engine/timer-query.ts). A run holds one batch per bucket (or a
// few with one start when a bucket is large), its rows sorted by (due, seq, row); several runs
// may hold a bucket with the same start. A scan reads the buckets of one start together, from
// the start its position falls in, and stops once it has what it needs, so a page never reads
// every run. Pure over what SpilledTimers shows; main thread.
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
 * hold a timer due in [fromMs, beforeMs), grouped by start, earliest first.
 */
export function bucketGroups(spill: SpilledTimers, fromMs: number, beforeMs: number): BucketGroup[] {
  const firstStart = spill.bucketStartOf(Math.max(fromMs, spill.watermarkMs));
  const byStart = new Map<number, Array<{ run: RunMeta; bucket: number }>>();
  const rowsByStart = new Map<number, number>();
  for (const run of spill.runs) {
    const buckets = run.meta.buckets;
    for (let bucket = 0; bucket < buckets.length; bucket++) {
      const startMs = (buckets[bucket] as RunBucket).startMs;
      if (startMs < firstStart || startMs < run.validFromMs || startMs < spill.watermarkMs || startMs >= beforeMs) continue;
      let group = byStart.get(startMs);
      if (group === undefined) byStart.set(startMs, (group = []));
      group.push({ run: run.meta, bucket });
      rowsByStart.set(startMs, (rowsByStart.get(startMs) ?? 0) + (buckets[bucket] as RunBucket).rows);
    }
  }
  return [...byStart.keys()].sort((a, b) => a - b).map((startMs) => ({ startMs, rows: rowsByStart.get(startMs) ?? 0, batches: byStart.get(startMs) ?? [] }));
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
