// Pending timers (retrying and held ones too) by when they are next due, in disjoint buckets:
// the next minute, hour, day, 30 days, and beyond (GET /v1/stats/due-histogram). Cheap for
// resident and spilled timers alike: no timer is looked at when it is asked.
//
// Resident timers are counted as they change (store/due-slot-counts.ts, kept by the store's
// setters), by absolute time slots of a minute or less grouped by the spill bucket width.
// Spilled timers are counted from what the spill tier keeps anyway: each run's rows per bucket,
// less the tombstones (engine/spill/spilled-timers.ts counts them the same way), less the rows of
// a checkpoint's run whose timers are still being evicted from memory (counted resident until
// then). So the answer is exact for edges on slot boundaries: each edge (now + a minute, an
// hour, a day, 30 days) is rounded up to the next slot, or, past the spill watermark, where
// buckets of spilled timers lie, to the next bucket. The answer names the edges it used.
// decisions/0025-due-histogram.md says why it is kept this way.
//
// Main thread: the engine's state owns the counts; the query reads the state.
import assert from 'node:assert/strict';
import type { EngineState } from './state.ts';
import { bucketOf } from './store/due-slot-counts.ts';

/** The spans after now that bound the buckets: a minute, an hour, a day, 30 days. */
export const dueHistogramSpansMs = [60_000, 3_600_000, 86_400_000, 30 * 86_400_000] as const;
export const dueHistogramBucketNames = ['minute', 'hour', 'day', 'month', 'beyond'] as const;

export interface DueHistogram {
  readonly nowMs: number;
  /** The upper edges of the first four buckets (epoch ms; the last bucket has none). */
  readonly edgesMs: readonly number[];
  /** Timers in each bucket: due before edgesMs[0], in [edgesMs[k − 1], edgesMs[k]), at or after the last edge. */
  readonly counts: readonly number[];
  readonly resident: number;
  readonly spilled: number;
}

/** Where each bucket ends for `nowMs`: now + its span, rounded up to a resident slot, or past the watermark to a spill bucket. */
export function dueHistogramEdges(nowMs: number, slotWidthMs: number, bucketWidthMs: number, watermarkMs: number): number[] {
  return dueHistogramSpansMs.map((spanMs) => {
    const fine = Math.ceil((nowMs + spanMs) / slotWidthMs) * slotWidthMs;
    return fine <= watermarkMs ? fine : Math.ceil((nowMs + spanMs) / bucketWidthMs) * bucketWidthMs;
  });
}

/** The histogram now: resident counts as kept, spilled ones from the spill tier's bucket counts. */
export function dueHistogram(s: EngineState, nowMs: number): DueHistogram {
  const resident = s.store.dueCounts;
  assert.ok(resident !== undefined, 'the engine\'s store counts its timers by due time');
  const spill = s.spill;
  const watermarkMs = spill.watermarkMs;
  const edgesMs = dueHistogramEdges(nowMs, resident.slotWidthMs, spill.bucketWidthMs, watermarkMs);
  const counts = new Array<number>(edgesMs.length + 1).fill(0);
  resident.countInto(edgesMs, counts);
  let spilled = 0;
  if (Number.isFinite(watermarkMs)) {
    const place = (bucketStartMs: number, rows: number): void => {
      const k = bucketOf(edgesMs, bucketStartMs);
      counts[k] = (counts[k] as number) + rows;
      spilled += rows;
    };
    for (const run of spill.runs) {
      const fromMs = Math.max(run.validFromMs, watermarkMs);
      for (const bucket of run.meta.buckets) if (bucket.startMs >= fromMs) place(bucket.startMs, bucket.rows);
    }
    for (const atMs of spill.tombstoneColumns().fireAtMs) if (atMs >= watermarkMs) place(spill.bucketStartOf(atMs), -1);
    // A checkpoint's spilled timers not yet evicted are still counted in memory.
    const evicting = s.evictingDueAtMs;
    if (evicting !== undefined) for (let i = evicting.length - s.notYetEvicted; i < evicting.length; i++) place(spill.bucketStartOf(evicting[i] as number), -1);
  }
  return { nowMs, edgesMs, counts, resident: resident.total, spilled };
}
