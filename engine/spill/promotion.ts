// Promotion, on the main thread: spilled timers due before a new watermark come back into
// memory, their buckets read from the runs, after a PROMOTE record is durable (replay promotes
// at the same point, unlogged). Run serially with checkpoints (Engine.promote).
import assert from 'node:assert/strict';
import { errorCodes, FermataError } from '../errors.ts';
import { encodePromote, recordType } from '../records.ts';
import { type EngineState, settlingWork } from '../state.ts';
import { timerState } from '../store/resident-store.ts';
import { insertRunRow } from './restore.ts';

/**
 * Brings every spilled timer due before `toMs` (a bucket start) into memory and moves the
 * watermark there; `log`: a PROMOTE record first (replay passes false). Returns how many came.
 */
export async function promote(s: EngineState, toMs: number, log: boolean): Promise<number> {
  if (toMs <= s.spill.watermarkMs) return 0;
  assert.ok(toMs === s.spill.bucketStartOf(toMs), 'a watermark is a bucket start');
  const buckets = await s.spill.bucketsBefore(toMs);
  let rows = 0;
  for (const bucket of buckets) rows += bucket.rows;
  if (!s.store.canAllocate(s.reservedRows + rows)) {
    throw new FermataError(errorCodes.capacityFull, `promoting ${rows} spilled timers would overfill the resident store (${s.store.count} timers)`, { rows });
  }
  if (log) await s.log.append(recordType.promote, encodePromote(toMs), settlingWork);
  // No await from here: the buckets go in and the watermark moves in one step.
  let promoted = 0;
  for (const bucket of buckets) {
    for (let i = 0; i < bucket.rows; i++) {
      const seq = bucket.seq[i] as number;
      const row = bucket.row[i] as number;
      // Cancelled on disk (in memory as cancelled), or already brought in by a cancel.
      if (s.spill.isTombstoned(seq, row) || s.index.get(seq, row) >= 0) continue;
      insertRunRow(s, bucket, i, timerState.pending, bucket.dueAtMs[i] as number);
      promoted++;
    }
  }
  s.spill.promoted(toMs);
  s.onDueChanged();
  return promoted;
}
