// Restoring a checkpoint at open, on the main thread: the manifest's queues, its resident run
// into the store and its spilled runs' metadata into the spill tier; the log's records after
// the checkpoint are replayed on top (replay.ts). insertRunRow puts one row of a run into the
// store: for the resident run here, and for spilled timers brought back by a promotion or a cancel
// (each of which leaves its queue's spilled count: spilled-queue-counts.ts).
// Only the resident run holds failures (spilled timers were never attempted): restoring it
// puts them back into s.failures.
import { errorCodes, FermataError } from '../errors.ts';
import { applyQueueChange } from '../queue-registry.ts';
import { decodeQueueRecord } from '../queues.ts';
import { restoreScheduleFile, restoreSchedules } from '../schedules/schedule-checkpoint.ts';
import { type EngineState, isFinished } from '../state.ts';
import { keyHash } from '../store/key-index.ts';
import { timerState, type TimerStateCode } from '../store/resident-store.ts';
import { readRunKeys } from './keys-file.ts';
import type { Manifest } from './manifest.ts';
import type { SpilledQueueCount } from './manifest-codec.ts';
import type { RunBucket } from './run-meta.ts';
import { readRunBucket } from './run-reader.ts';
import { bytesOf, createdAtOf, type RunRows } from './run-rows.ts';
import type { SpilledRun } from './spilled-timers.ts';

/** Loads a checkpoint at open: the resident run into the store, the spilled runs' metadata. */
export async function restoreCheckpoint(s: EngineState, manifest: Manifest): Promise<void> {
  s.checkpointSeq = manifest.checkpointSeq;
  s.nextRunId = manifest.nextRunId;
  s.releasedExpiryMax = manifest.releasedExpiryMaxMs;
  s.clockPositionMs = manifest.clockPositionMs;
  for (const queue of manifest.queues) {
    const decoded = decodeQueueRecord(new TextEncoder().encode(JSON.stringify(queue)));
    if (decoded === undefined) throw new FermataError(errorCodes.spillCorrupt, `spill manifest: queue ${queue.name} has a config or pause this version cannot read`, { queue: queue.name });
    applyQueueChange(s, decoded);
  }
  // A section (or slice) a turn: a million schedules are not looked at in one.
  if (manifest.schedules !== undefined) await restoreSchedules(s, manifest.schedules);
  if (manifest.scheduleFile !== undefined) await restoreScheduleFile(s, manifest.scheduleFile);
  // Changes whose cancel had not landed at the checkpoint: open settles them (Schedules.settleOwedCancels).
  for (const [name, seq] of manifest.scheduleCancelsOwed ?? []) s.schedules.cancelsOwed.set(name, seq);
  const run = manifest.residentRun;
  // The run says how many timers and keys it holds: room for them at once, not by doubling.
  s.store.reserve(run.rows);
  s.keys.reserve(run.buckets.reduce((keyed, bucket) => keyed + bucket.keyed, 0));
  for (let bucket = 0; bucket < run.buckets.length; bucket++) {
    const rows = await readRunBucket(s.fs, s.spillDir, run, bucket);
    // Why the last attempt of the few that failed did, which the log before the checkpoint said.
    const { failures } = rows;
    let failure = 0;
    for (let i = 0; i < rows.rows; i++) {
      const slot = insertRow(s, rows, i, rows.state[i] as TimerStateCode, rows.dueAtMs[i] as number);
      if (failures.rows[failure] !== i) continue;
      s.failures.set(slot, failures.errors[failure] as string, failures.attemptedAtMs[failure] as number);
      failure++;
    }
  }
  // Patched timers' revisions and fire times (all of them in the resident run: they never spill).
  if (manifest.rescheduled !== undefined) s.rescheduled.restore(manifest.rescheduled);
  // When the ADD records it truncated were accepted, for the timers they still hold (add-times.ts).
  if (manifest.addTimes !== undefined) s.addTimes.restore(manifest.addTimes);
  const spilledRuns: SpilledRun[] = [];
  for (const meta of manifest.spilledRuns) spilledRuns.push({ meta, validFromMs: meta.validFromMs, keyHashes: await readRunKeys(s.fs, s.spillDir, meta) });
  s.spill.reset(spilledRuns, manifest.watermarkMs, manifest.tombstones);
  await restoreSpilledQueueCounts(s, manifest.spilledQueues);
}

/**
 * The spilled timers' counts by queue as of the checkpoint: the manifest's, or, in a manifest
 * from before it kept them, counted from the spilled runs' queue column, one batch read at a
 * time (every live spilled row is read once: the first open of such a directory only).
 */
async function restoreSpilledQueueCounts(s: EngineState, kept: readonly SpilledQueueCount[] | undefined): Promise<void> {
  const counts = s.spill.queueCounts;
  counts.clear();
  if (kept !== undefined) {
    for (const [queue, count] of kept) counts.add(s.queueIndex(queue), count);
    return;
  }
  const spill = s.spill;
  const tombstoned = spill.tombstoneCount > 0;
  for (const run of spill.runs) {
    const fromMs = Math.max(run.validFromMs, spill.watermarkMs);
    for (let bucket = 0; bucket < run.meta.buckets.length; bucket++) {
      if ((run.meta.buckets[bucket] as RunBucket).startMs < fromMs) continue;
      const rows = await readRunBucket(s.fs, s.spillDir, run.meta, bucket);
      // The run's queue dictionary by the engine's queue index, then a typed-array count a row.
      const byQueue = new Float64Array(rows.queues.length);
      for (let i = 0; i < rows.rows; i++) {
        if (tombstoned && spill.isTombstoned(rows.seq[i] as number, rows.row[i] as number)) continue;
        const q = rows.queueIndex[i] as number;
        byQueue[q] = (byQueue[q] as number) + 1;
      }
      for (let q = 0; q < byQueue.length; q++) if (byQueue[q] !== 0) counts.add(s.queueIndex(rows.queues[q] as string), byQueue[q] as number);
    }
  }
}

/**
 * Puts row `i` of a spilled run into the store in `state`, due at `dueAtMs` (a promotion, or a
 * cancel or PATCH of a spilled timer): it leaves its queue's spilled count.
 */
export function insertRunRow(s: EngineState, rows: RunRows, i: number, state: TimerStateCode, dueAtMs: number): number {
  const slot = insertRow(s, rows, i, state, dueAtMs);
  s.spill.queueCounts.add(s.store.queueIndex[slot] as number, -1);
  return slot;
}

/** Puts row `i` of a run into the store in `state`, due at `dueAtMs`: its slot, index, key and heap entry. */
function insertRow(s: EngineState, rows: RunRows, i: number, state: TimerStateCode, dueAtMs: number): number {
  const store = s.store;
  const target = store.internTarget(rows.targets[rows.targetIndex[i] as number] as string);
  const queue = s.queueIndex(rows.queues[rows.queueIndex[i] as number] as string);
  const key = bytesOf(rows.keys, i);
  const slot = store.allocateRaw(rows.fireAtMs[i] as number, rows.seq[i] as number, rows.row[i] as number, queue, target, bytesOf(rows.payload, i), bytesOf(rows.headers, i), key, rows.callbacks === undefined ? undefined : bytesOf(rows.callbacks, i));
  store.releaseTarget(target);
  if (slot < 0) throw new FermataError(errorCodes.capacityFull, `the resident store is full (${store.count} timers)`, { rows: 1 });
  store.setState(slot, state);
  store.setAttempts(slot, rows.attempts[i] as number);
  store.setLastStatus(slot, rows.lastStatus[i] as number);
  store.setDueAt(slot, dueAtMs);
  s.counts[state] = (s.counts[state] as number) + 1;
  s.index.insert(slot);
  if (key.length > 0) s.keys.insert(slot, keyHash(key));
  if (state === timerState.dead) s.deadReasons.set(slot, rows.deadReason[i] as number);
  (isFinished(state) ? s.expiring : s.heap).push(slot);
  // Resident again: its ADD's entry back in the table, from the run (add-times.ts).
  const createdAtMs = createdAtOf(rows, i);
  if (createdAtMs !== null) s.addTimes.add(rows.seq[i] as number, createdAtMs);
  return slot;
}
