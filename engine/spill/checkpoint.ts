// Checkpoints, on the main thread (docs/format/spill.md has the sequence): every live timer is
// taken as it is in one turn (the snapshot), then written over many turns into runs on disk: the
// pending ones due at or past the watermark into a spilled run, the rest into the resident run.
// Once the manifest naming them is durable, the spilled timers leave memory (evicted a slice a
// turn) and the log is truncated to what the checkpoint covers. Run serially with promotions.
//
//   snapshot (one turn) ─► write runs (slices) ─► sync dir ─► manifest ─► evict spilled ─► truncate log
import assert from 'node:assert/strict';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { failpoint } from '../failpoints.ts';
import { memoryLimits, spillLimits } from '../limits.ts';
import { queueRecordsInForce } from '../queue-registry.ts';
import { cutSchedules, scheduleCutMemory, writeSchedules } from '../schedules/schedule-checkpoint.ts';
import { deadReason } from '../records.ts';
import type { EngineState } from '../state.ts';
import { keyHash } from '../store/key-index.ts';
import { timerState } from '../store/resident-store.ts';
import type { StoreSnapshot } from '../store/store-snapshot.ts';
import type { CheckpointReport } from '../types.ts';
import { compactRuns } from './compaction.ts';
import { readRunKeys } from './keys-file.ts';
import { type AddTimeColumns, acceptedAtIn } from '../add-times.ts';
import { type Manifest, removeUnreferenced, writeManifest } from './manifest.ts';
import type { SpilledQueueCount } from './manifest-codec.ts';
import type { RunMeta } from './run-meta.ts';
import { runOrder } from './run-order.ts';
import { indexInAscending, type RunRowFields, type RunRows, RunRowsBuilder } from './run-rows.ts';
import { type RunWriteOptions, RunWriter } from './run-writer.ts';
import type { SpilledRun } from './spilled-timers.ts';

type TombstoneSet = { seqs: Float64Array; rows: Uint32Array; fireAtMs: Float64Array };

/** Timers a checkpoint took at its instant, to be copied into run rows afterwards. */
interface TakenRows {
  readonly store: StoreSnapshot;
  readonly deadReasons: Uint8Array;
  readonly queueNames: readonly string[];
  readonly failures: TakenFailures;
}

/** The taken timers whose last attempt failed, and why and when, as they were at the instant; an entry's index is the same in each. */
interface TakenFailures {
  /** Taken index. */
  readonly taken: Int32Array;
  readonly errors: readonly string[];
  readonly attemptedAtMs: Float64Array;
}

const noTakenFailures: TakenFailures = { taken: new Int32Array(0), errors: [], attemptedAtMs: new Float64Array(0) };

/** What a snapshot fills: per timer (slot, copied fields, dead reason, handle) and per slot (spilling marks). */
interface SnapshotMemory {
  readonly slots: Int32Array;
  readonly dueAt: Float64Array;
  readonly state: Uint8Array;
  readonly attempts: Uint16Array;
  readonly lastStatus: Uint16Array;
  readonly deadReasons: Uint8Array;
  readonly handles: Float64Array;
  readonly spilling: Uint8Array;
}

function snapshotMemory(timers: number, slots: number): SnapshotMemory {
  return {
    slots: new Int32Array(timers),
    dueAt: new Float64Array(timers),
    state: new Uint8Array(timers),
    attempts: new Uint16Array(timers),
    lastStatus: new Uint16Array(timers),
    deadReasons: new Uint8Array(timers),
    handles: new Float64Array(timers),
    spilling: new Uint8Array(slots),
  };
}

/** Faulting in a snapshot's memory touches one byte a page, and yields once this much is touched. */
const pageBytes = 4096;

const prefaultSliceBytes = 16 * 1024 * 1024;

/** A checkpoint's spilled timers in their run's order: which logged row each is, and its fire time. */
type SpilledRowIds = Pick<RunRows, 'seq' | 'row' | 'fireAtMs'>;

/** The tombstones of `all` that are not in `applied`. */
function withoutTombstones(all: TombstoneSet, applied: TombstoneSet): TombstoneSet {
  const done = new Set<string>();
  for (let i = 0; i < applied.seqs.length; i++) done.add(`${applied.seqs[i]}:${applied.rows[i]}`);
  const keep: number[] = [];
  for (let i = 0; i < all.seqs.length; i++) if (!done.has(`${all.seqs[i]}:${all.rows[i]}`)) keep.push(i);
  return {
    seqs: Float64Array.from(keep, (i) => all.seqs[i] as number),
    rows: Uint32Array.from(keep, (i) => all.rows[i] as number),
    fireAtMs: Float64Array.from(keep, (i) => all.fireAtMs[i] as number),
  };
}

export async function checkpoint(s: EngineState, requestedMs: number): Promise<CheckpointReport> {
  assert.ok(requestedMs === Infinity || requestedMs === s.spill.bucketStartOf(requestedMs), 'a watermark is a bucket start');
  const memory = await snapshotMemoryAhead(s);
  const scheduleMemory = await scheduleCutMemory(s);
  // Between macrotasks every durable record has been applied and no later one has: the
  // store is exactly the log up to its last durable sequence.
  await nextTurn();
  const coveredSeq = s.log.lastSeq;
  const watermarkMs = Math.min(requestedMs, s.spill.watermarkMs);
  // The fence first: from now on nothing due at or past the watermark is handed out.
  s.spill.lowerWatermark(watermarkMs);
  const taken = snapshot(s, watermarkMs, memory);
  s.spilling = taken.spilling;
  // The manifest's counts by queue, as of S: those on disk now and this checkpoint's run.
  const spilledQueues = s.spill.runs.length > 0 || taken.spilled.store.count > 0 ? spilledQueuesAt(s, taken.spilledByQueue) : undefined;
  const rescheduled = s.rescheduled.columns();
  // The entries of timers staying resident, for the manifest; a spilled timer's goes into its run.
  const addTimes = s.addTimes.checkpoint(s.store, taken.spilling, coveredSeq);
  try {
    // A spilled timer's cancel tombstones it before its record is durable; this checkpoint covers
    // durable records only, so until then the timer stays in its runs and untombstoned on disk.
    const tombstones = s.cancellingSpilled.size === 0 && s.reschedulingSpilled.size === 0 ? s.spill.tombstoneColumns() : withoutTombstones(s.spill.tombstoneColumns(), spilledCancelsInFlight(s));
    // Configured and paused queues, in the QUEUE record's JSON form (read back the way replay reads it).
    const queues = queueRecordsInForce(s);
    // The marks as of S; the schedules files are written with the runs (schedule-checkpoint.ts).
    const scheduleCut = cutSchedules(s, scheduleMemory);
    const scheduleCancelsOwed = [...s.schedules.cancelsOwed];
    const releasedExpiryMaxMs = s.releasedExpiryMax;
    // From here the store keeps changing; the snapshot does not. Its timers are copied into
    // run rows a slice at a time and written as they are, over several turns, reading their
    // bytes through the hold (released once both runs are written).
    const fs = s.fs;
    const dir = s.spillDir;
    const runOptions = { bucketWidthMs: s.spill.bucketWidthMs };
    let residentMeta: RunMeta;
    let spilledMeta: RunMeta | undefined;
    // The spilled timers in their run's order (filled as it is written): handles for the
    // eviction, and where each is on disk.
    const spilledCount = taken.spilled.store.count;
    const spilledHandles = new Float64Array(spilledCount);
    const spilledIds: SpilledRowIds = { seq: new Float64Array(spilledCount), row: new Uint32Array(spilledCount), fireAtMs: new Float64Array(spilledCount) };
    try {
      await fs.mkdirp(dir);
      residentMeta = await writeTaken(s, taken.resident, s.nextRunId++, coveredSeq, runOptions);
      if (spilledCount > 0) spilledMeta = await writeTaken(s, taken.spilled, s.nextRunId++, coveredSeq, runOptions, { byTaken: taken.spilledHandles, handles: spilledHandles, ids: spilledIds, addTimes: addTimes.spilling });
    } finally {
      taken.resident.store.release();
      taken.spilled.store.release();
    }
    let bytesWritten = residentMeta.bytes;
    let spilledRuns: SpilledRun[] = s.spill.runs.map((run) => ({ meta: run.meta, validFromMs: run.validFromMs, keyHashes: run.keyHashes }));
    if (spilledMeta !== undefined) {
      bytesWritten += spilledMeta.bytes;
      spilledRuns.push({ meta: spilledMeta, validFromMs: watermarkMs, keyHashes: await readRunKeys(fs, dir, spilledMeta) });
    }
    // Too many runs make every lookup and promotion read more files, and tombstones take memory
    // and disk: merge the runs into one, leaving out what was promoted (below a run's
    // validFromMs) and what was cancelled.
    let tombstonesKept = tombstones;
    const tombstonesPiledUp = tombstones.seqs.length > Math.max(memoryLimits.tombstonesCompactMin, s.spill.count * memoryLimits.tombstonesCompactShare);
    if (spilledRuns.length > memoryLimits.spilledRunsMax || (tombstonesPiledUp && spilledRuns.length > 0)) {
      const inputs = spilledRuns;
      const cancelled = new Set<string>();
      for (let i = 0; i < tombstones.seqs.length; i++) cancelled.add(`${tombstones.seqs[i]}:${tombstones.rows[i]}`);
      const meta = await compactRuns(
        fs,
        dir,
        inputs.map((run) => run.meta),
        s.nextRunId++,
        coveredSeq,
        (seq, row, dueAtMs, input) => dueAtMs < Math.max((inputs[input] as SpilledRun).validFromMs, watermarkMs) || cancelled.has(`${seq}:${row}`),
        runOptions,
      );
      bytesWritten += meta.bytes;
      spilledRuns = [{ meta, validFromMs: watermarkMs, keyHashes: await readRunKeys(fs, dir, meta) }];
      // Every tombstone of the snapshot guarded a row the merge left out.
      tombstonesKept = { seqs: new Float64Array(0), rows: new Uint32Array(0), fireAtMs: new Float64Array(0) };
    }
    const schedules = await writeSchedules(s, scheduleCut);
    // The runs' names are durable before the manifest that names them.
    await fs.syncDir(dir);
    failpoint('checkpoint.runs-written');
    const manifest: Manifest = {
      checkpointSeq: coveredSeq,
      watermarkMs,
      releasedExpiryMaxMs,
      nextRunId: s.nextRunId,
      residentRun: residentMeta,
      spilledRuns: spilledRuns.map((run) => ({ ...run.meta, validFromMs: run.validFromMs })),
      queues,
      tombstones: tombstonesKept,
      ...(s.clockPositionMs === undefined ? {} : { clockPositionMs: s.clockPositionMs }),
      rescheduled,
      addTimes: addTimes.kept,
      ...(schedules === undefined ? {} : { scheduleFile: schedules.meta }),
      ...(spilledQueues === undefined ? {} : { spilledQueues }),
      scheduleCancelsOwed,
    };
    await writeManifest(fs, dir, manifest);
    s.schedules.checkpointed = schedules;
    failpoint('checkpoint.manifest-installed');
    // Durable: the spilled timers leave memory, and the log before the checkpoint can go.
    // Tombstones added while it was written guard rows of the new runs too: they stay.
    const tombstonesNow = s.spill.tombstoneColumns();
    s.spill.reset(spilledRuns, watermarkMs, tombstonesKept === tombstones ? tombstonesNow : withoutTombstones(tombstonesNow, tombstones));
    s.notYetEvicted = spilledHandles.length;
    s.evictingDueAtMs = spilledIds.fireAtMs;
    await evictSpilled(s, spilledHandles, spilledIds, addTimes.spilling);
    // The evicted timers' bytes leave holes in the arena's slabs: a few timers left in a slab
    // would keep all of it (4 MiB), so slabs mostly emptied are compacted now.
    const arena = s.store.arena;
    if (arena.bytesLive < arena.bytesReserved * memoryLimits.arenaLiveShareMin) s.store.compact();
    s.checkpointSeq = coveredSeq;
    // What the checkpoint covers leaves the log (a quiet WAL's last segment too: sealed, it goes with the others).
    const segmentsDeleted = await s.log.truncateCovered(coveredSeq);
    failpoint('checkpoint.segments-deleted');
    // A lookup or a cancel may still be reading a run this checkpoint merged away: it finishes first.
    await s.spill.earlierReadsSettled();
    await removeUnreferenced(fs, dir, manifest);
    return { coveredSeq, watermarkMs, residentRows: residentMeta.rows, spilledRows: spilledHandles.length, bytesWritten, segmentsDeleted };
  } catch (err) {
    // The spilled timers stay resident: their entries come back (an extra one is dropped next time).
    for (let i = 0; i < addTimes.spilling.seqs.length; i++) s.addTimes.add(addTimes.spilling.seqs[i] as number, addTimes.spilling.acceptedAtMs[i] as number);
    throw err;
  }
}

/**
 * Takes every live timer as it is now (its fields copied, its bytes held: writeTaken sorts them
 * by (dueAt, seq, row) and writes them as a run afterwards, yielding as it goes): pending, never
 * attempted timers due at or past the watermark into `spilled` (their handles kept, to evict
 * them once the checkpoint is durable), the rest into `resident`, as the log has them
 * (a delivering timer was not logged as such: it is pending or retrying).
 */
function snapshot(s: EngineState, watermarkMs: number, prepared: SnapshotMemory): { resident: TakenRows; spilled: TakenRows; spilledHandles: Float64Array; spilling: Uint8Array; spilledByQueue: Float64Array } {
  const store = s.store;
  const { state, attempts, dueAt, fireAt } = store;
  // The memory faulted in beforehand, unless the store outgrew it meanwhile.
  const memory = prepared.slots.length >= store.count && prepared.spilling.length >= store.capacity ? prepared : snapshotMemory(store.count, store.capacity);
  // Typed arrays and plain column reads: this runs in one turn over every slot (2^24 at most),
  // and pushing into arrays and asking Maps per timer held the event loop for seconds.
  // Resident slots fill `slots` from the front, spilled ones from the back; every per-timer
  // array below is indexed like `slots`.
  const count = store.count;
  const slots = memory.slots.subarray(0, count);
  let residentCount = 0;
  let spillFrom = count;
  const cancelling = s.cancelling.size > 0 ? s.cancelling : undefined;
  // A PATCHed timer spills at the fire time its PATCH gave it (its due time; rescheduled-timers.ts),
  // unless an old copy of it on disk is still tombstoned: a tombstone names (seq, row), so it
  // would hide the new copy too. It stays resident until promotion or compaction drops that.
  const rescheduled = s.rescheduled.size > 0 ? s.rescheduled : undefined;
  const oldCopies = rescheduled !== undefined && s.spill.tombstoneCount > 0;
  const { logSeq, row, queueIndex } = store;
  const spilling = memory.spilling.subarray(0, store.capacity);
  const spilledByQueue = new Float64Array(s.queueNames.length);
  for (let slot = 0; slot < store.capacity; slot++) {
    const slotState = state[slot] as number;
    if (slotState === timerState.free) continue;
    // Only timers due at their fire time spill: a spilled timer is found by its id's fire time,
    // or by the one a PATCH gave it.
    const due = dueAt[slot] as number;
    // In the heap: a held-back (parked) timer is due and stays, like one being cancelled.
    const spills =
      slotState === timerState.pending &&
      attempts[slot] === 0 &&
      due >= watermarkMs &&
      (due === fireAt[slot] || rescheduled?.get(logSeq[slot] as number, row[slot] as number)?.fireAtMs === due) &&
      !(oldCopies && s.spill.isTombstoned(logSeq[slot] as number, row[slot] as number)) &&
      cancelling?.has(slot) !== true &&
      s.heap.has(slot);
    if (spills) {
      slots[--spillFrom] = slot;
      spilling[slot] = 1;
      const q = queueIndex[slot] as number;
      spilledByQueue[q] = (spilledByQueue[q] as number) + 1;
    } else slots[residentCount++] = slot;
  }
  assert.equal(residentCount, spillFrom, 'every live slot is taken once');
  const spillSlots = slots.subarray(spillFrom);
  const spilledHandles = memory.handles.subarray(spillFrom, count);
  for (let i = 0; i < spillSlots.length; i++) spilledHandles[i] = store.handleOf(spillSlots[i] as number);
  const resident = take(s, memory, 0, residentCount, takeFailures(s, slots.subarray(0, residentCount)));
  return { resident, spilled: take(s, memory, spillFrom, count, noTakenFailures), spilledHandles, spilling, spilledByQueue };
}

/**
 * The spilled timers by queue as of the checkpoint's sequence, for its manifest: the spill tier's
 * counts (a spilled cancel still being logged is still counted, as its record is after the
 * sequence) plus the timers `spilledByQueue` the checkpoint is spilling, by queue index. Called
 * in the snapshot's turn.
 */
function spilledQueuesAt(s: EngineState, spilledByQueue: Float64Array): SpilledQueueCount[] {
  const counts = s.spill.queueCounts;
  const out: SpilledQueueCount[] = [];
  for (let q = 0; q < s.queueNames.length; q++) {
    const count = counts.of(q) + (spilledByQueue[q] ?? 0);
    if (count > 0) out.push([s.queueNames[q] as string, count]);
  }
  return out.sort(([a], [b]) => (a < b ? -1 : 1));
}

/**
 * The failures (timer-failures.ts) of the resident timers taken, as they are now: they change
 * while the runs are written. A visit per failing timer and none for the others (the great
 * many): the resident slots were taken in ascending order, so each failing slot's taken index
 * is found by bisection.
 */
function takeFailures(s: EngineState, residentSlots: Int32Array): TakenFailures {
  const count = s.failures.size;
  if (count === 0) return noTakenFailures;
  const taken = new Int32Array(count);
  const errors: string[] = [];
  const attemptedAtMs = new Float64Array(count);
  s.failures.forEach((slot, error, at) => {
    const i = indexInAscending(residentSlots, slot);
    // Not resident: a redriven timer (attempts reset, due at the redrive's instant) spills
    // only if that instant is its fire time and at or past the watermark. Its failure is then
    // shown until its eviction releases the slot, and not after.
    if (i < 0) return;
    taken[errors.length] = i;
    attemptedAtMs[errors.length] = at;
    errors.push(error);
  });
  return { taken: taken.subarray(0, errors.length), errors, attemptedAtMs: attemptedAtMs.subarray(0, errors.length) };
}


/**
 * The fields of memory.slots[from, to) and the engine's own per-timer facts (dead reasons,
 * queue names), as they are now, in `memory` at the same indexes.
 */
function take(s: EngineState, memory: SnapshotMemory, from: number, to: number, failures: TakenFailures): TakenRows {
  const slots = memory.slots.subarray(from, to);
  const deadReasons = memory.deadReasons.subarray(from, to);
  if (s.deadReasons.size > 0) {
    const state = s.store.state;
    for (let i = 0; i < slots.length; i++) {
      const slot = slots[i] as number;
      if (state[slot] === timerState.dead) deadReasons[i] = s.deadReasons.get(slot) ?? deadReason.none;
    }
  }
  const columns = { dueAt: memory.dueAt.subarray(from, to), state: memory.state.subarray(from, to), attempts: memory.attempts.subarray(from, to), lastStatus: memory.lastStatus.subarray(from, to) };
  return { store: s.store.snapshot(slots, columns), deadReasons, queueNames: [...s.queueNames], failures };
}

/**
 * Memory for the next snapshot, faulted in a few MiB a turn before the snapshot's own turn,
 * which would otherwise wait for the kernel to zero it all (about 280 MB at 12.6 million
 * timers; 1.9 ms a MiB on the VM measured). Room for timers admitted meanwhile.
 */
async function snapshotMemoryAhead(s: EngineState): Promise<SnapshotMemory> {
  const store = s.store;
  const memory = snapshotMemory(Math.min(store.capacityMax, Math.ceil(store.count * 1.05) + 1024), store.capacity);
  let touched = 0;
  for (const array of [memory.slots, memory.spilling, memory.dueAt, memory.state, memory.attempts, memory.lastStatus, memory.deadReasons, memory.handles]) {
    const stride = pageBytes / array.BYTES_PER_ELEMENT;
    for (let i = 0; i < array.length; i += stride) {
      array[i] = 0;
      touched += pageBytes;
      if (touched % prefaultSliceBytes === 0) await nextTurn();
    }
  }
  return memory;
}

/**
 * Writes the taken timers as run `runId`, sorted by (dueAt, seq, row); returns its metadata.
 * With `inRunOrder`, it also puts each row's handle (from byTaken, by taken index), log
 * position and fire time there, in the run's order (the eviction's lists). The rows are
 * copied a slice at a time into one of two builders, reused: the next slice is copied while
 * the last one is written.
 * Copying every timer at once had a checkpoint under memory pressure allocate as much again as
 * the timers it wrote, all of it freshly faulted in (on a VM, zeroing those pages was most of
 * the copy's cost), and wrote nothing before the whole copy was done.
 */
async function writeTaken(
    s: EngineState,
  taken: TakenRows,
  runId: number,
  stamp: number,
  options: RunWriteOptions,
  inRunOrder?: { readonly byTaken: Float64Array; readonly handles: Float64Array; readonly ids: SpilledRowIds; readonly addTimes: AddTimeColumns },
): Promise<RunMeta> {
  const { store, deadReasons, queueNames } = taken;
  const columns = store.columns;
  const count = store.count;
  const sliceRows = spillLimits.checkpointSliceRows;
  // The log positions, for the order: read from the store after the snapshot's turn, 16 slices a turn.
  const logSeq = new Float64Array(count);
  const row = new Uint32Array(count);
  for (let i = 0; i < count; i++) {
    if (i > 0 && i % (sliceRows * 16) === 0) await nextTurn();
    logSeq[i] = store.logSeqOf(i);
    row[i] = store.rowOf(i);
  }
  const order = await runOrder({ dueAt: columns.dueAt, logSeq, row }, s.spill.bucketWidthMs, sliceRows, () => nextTurn());
  const failing = failuresInRunOrder(taken.failures, order, { dueAt: columns.dueAt, logSeq, row });
  let nextFailing = 0;
  const builders = [new RunRowsBuilder(Math.min(Math.max(1, count), sliceRows)), new RunRowsBuilder(Math.min(Math.max(1, count), sliceRows))];
  const fields: { -readonly [K in keyof RunRowFields]-?: number } = { seq: 0, row: 0, fireAtMs: 0, dueAtMs: 0, state: 0, attempts: 0, lastStatus: 0, deadReason: 0, createdAtMs: NaN };
  const writer = await RunWriter.create(s.fs, s.spillDir, runId, stamp, options);
  // The slice being written, while the next is copied; at most one append is in flight.
  let writing: Promise<void> = Promise.resolve();
  try {
    for (let from = 0, turn = 0; from < count; from += sliceRows, turn++) {
      // A turn for the event loop between slices, whether or not the last write is done.
      if (from > 0) await nextTurn();
      // Its last rows were written two turns ago (awaited in the turn before this one).
      const builder = builders[turn % 2] as RunRowsBuilder;
      builder.reset();
      for (let at = from, end = Math.min(count, from + sliceRows); at < end; at++) {
        const i = order[at] as number;
        const state = columns.state[i] as number;
        const attempts = columns.attempts[i] as number;
        fields.seq = logSeq[i] as number;
        fields.row = row[i] as number;
        fields.fireAtMs = store.fireAtOf(i);
        fields.dueAtMs = columns.dueAt[i] as number;
        // A delivering timer was not logged as such: it is pending or retrying.
        fields.state = state === timerState.delivering ? (attempts > 0 ? timerState.retrying : timerState.pending) : state;
        fields.attempts = attempts;
        fields.lastStatus = columns.lastStatus[i] as number;
        fields.deadReason = deadReasons[i] as number;
        // A spilled timer takes its created_at along: the table keeps resident timers' only.
        if (inRunOrder !== undefined) fields.createdAtMs = acceptedAtIn(inRunOrder.addTimes, fields.seq);
        builder.append(fields, queueNames[store.queueIndexOf(i)] as string, store.targetOf(i), store.keyOf(i), store.payloadOf(i), store.headersOf(i), store.callbacksOf(i));
        if (inRunOrder !== undefined) {
          inRunOrder.handles[at] = inRunOrder.byTaken[i] as number;
          inRunOrder.ids.seq[at] = fields.seq;
          inRunOrder.ids.row[at] = fields.row;
          // The time naming its bucket, for a tombstone: a spilled timer's due time, which is the
          // fire time its id carries or the one a PATCH gave it.
          inRunOrder.ids.fireAtMs[at] = fields.dueAtMs;
        }
      }
      // The slice's few failing timers, by their place in it.
      for (const end = Math.min(count, from + sliceRows); nextFailing < failing.places.length && (failing.places[nextFailing] as number) < end; nextFailing++) {
        builder.setFailure((failing.places[nextFailing] as number) - from, failing.errors[nextFailing] as string, failing.attemptedAtMs[nextFailing] as number);
      }
      await writing;
      writing = writer.append(builder.finish());
      // Awaited in the next turn or below; a failure meanwhile is not an unhandled rejection.
      writing.catch(() => undefined);
    }
    await writing;
    return await writer.finish();
  } catch (err) {
    // No write may still be landing when the file is closed.
    await writing.catch(() => undefined);
    await writer.abort();
    throw err;
  }
}

/**
 * `failures` by their timers' places in the run (`order`: place → taken index, sorted by
 * `columns`' (dueAt, seq, row)), ascending. Each place is found by bisection of the order:
 * nothing is done for the timers that have no failure.
 */
function failuresInRunOrder(
  failures: TakenFailures,
  order: Int32Array,
  columns: { readonly dueAt: Float64Array; readonly logSeq: Float64Array; readonly row: Uint32Array },
): { readonly places: Int32Array; readonly errors: readonly string[]; readonly attemptedAtMs: Float64Array } {
  const count = failures.taken.length;
  if (count === 0) return { places: failures.taken, errors: failures.errors, attemptedAtMs: failures.attemptedAtMs };
  const { dueAt, logSeq, row } = columns;
  const places = new Int32Array(count);
  for (let k = 0; k < count; k++) {
    const i = failures.taken[k] as number;
    let low = 0;
    let high = order.length - 1;
    for (;;) {
      assert.ok(low <= high, `taken timer ${i} is not in the run's order`);
      const mid = (low + high) >>> 1;
      const j = order[mid] as number;
      const c = (dueAt[j] as number) - (dueAt[i] as number) || (logSeq[j] as number) - (logSeq[i] as number) || (row[j] as number) - (row[i] as number);
      if (c === 0) {
        places[k] = mid;
        break;
      }
      if (c < 0) low = mid + 1;
      else high = mid - 1;
    }
  }
  const byPlace = Array.from({ length: count }, (_, k) => k).sort((a, b) => (places[a] as number) - (places[b] as number));
  return {
    places: Int32Array.from(byPlace, (k) => places[k] as number),
    errors: byPlace.map((k) => failures.errors[k] as string),
    attemptedAtMs: Float64Array.from(byPlace, (k) => failures.attemptedAtMs[k] as number),
  };
}

/**
 * After a durable checkpoint: the timers it spilled leave memory. One that changed since the
 * snapshot (a cancel being logged) stays, and its copy on disk is tombstoned, never promoted.
 */
async function evictSpilled(s: EngineState, handles: Float64Array, rows: SpilledRowIds, addTimes: AddTimeColumns): Promise<void> {
  // In slices, yielding between them: evicting half a million timers at once held the event
  // loop for over a second. Meanwhile the rest stay in memory as well as on disk: fenced by
  // the watermark (never handed out), and a cancel of one is logged as CANCEL_SPILLED
  // (s.spilling), so its slice tombstones its copy on disk.
  for (let from = 0; from < handles.length; from += spillLimits.checkpointSliceRows) {
    if (from > 0) await nextTurn();
    evictSlice(s, handles, rows, from, Math.min(handles.length, from + spillLimits.checkpointSliceRows), addTimes);
  }
}

/** `addTimes`: the spilled timers' add-times entries, given back to the table for one that stays. */
function evictSlice(s: EngineState, handles: Float64Array, rows: SpilledRowIds, from: number, to: number, addTimes: AddTimeColumns): void {
  const store = s.store;
  const evicted = new Int32Array(to - from);
  let count = 0;
  for (let i = from; i < to; i++) {
    const slot = store.slotOf(handles[i] as number);
    // Gone: cancelled while the checkpoint was written, and its retention already over. Its
    // copy on disk must never be promoted.
    if (slot < 0) {
      s.spill.tombstone(rows.seq[i] as number, rows.row[i] as number, rows.fireAtMs[i] as number);
      continue;
    }
    if (store.state[slot] !== timerState.pending || store.attempts[slot] !== 0 || s.cancelling.has(slot) || !s.heap.has(slot)) {
      s.spill.tombstone(rows.seq[i] as number, rows.row[i] as number, rows.fireAtMs[i] as number);
      const acceptedAtMs = acceptedAtIn(addTimes, rows.seq[i] as number);
      if (!Number.isNaN(acceptedAtMs)) s.addTimes.add(rows.seq[i] as number, acceptedAtMs);
      continue;
    }
    evicted[count++] = slot;
  }
  // Out of the heap at once: one O(n) rebuild when that is cheaper than a removal each.
  s.heap.removeMany(evicted.subarray(0, count));
  const spilledByQueue = s.spill.queueCounts;
  for (let i = 0; i < count; i++) {
    const slot = evicted[i] as number;
    spilledByQueue.add(store.queueIndex[slot] as number, 1);
    s.index.delete(store.logSeq[slot] as number, store.row[slot] as number);
    if (store.keyLengthOf(slot) > 0) s.keys.delete(slot, keyHash(store.keyOf(slot)));
    if (s.spilling !== undefined) s.spilling[slot] = 0;
    store.release(slot);
  }
  s.counts[timerState.pending] = (s.counts[timerState.pending] as number) - count;
  s.notYetEvicted -= to - from;
}

/** The timers whose spilled cancel or PATCH is under way (tombstoned, maybe, but not yet logged). */
function spilledCancelsInFlight(s: EngineState): TombstoneSet {
  const names = [...s.cancellingSpilled.keys(), ...s.reschedulingSpilled].map((name) => name.split(':').map(Number));
  return { seqs: Float64Array.from(names, ([seq]) => seq as number), rows: Uint32Array.from(names, ([, row]) => row as number), fireAtMs: new Float64Array(names.length) };
}
