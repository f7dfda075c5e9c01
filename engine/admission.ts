// Admission, on the main thread: a batch becomes timers. admit() (columns from JSON or in
// process) and admitArrow() (an Arrow IPC stream, logged as it came) validate the batch, check
// its targets, plan its keys, reserve room in the store, log one ADD record and, once it is
// durable, put the new rows in the store (insertBatch: one loop, heap and index in bulk).
// Replay puts logged ADD records in through insertBatch as well.
//
//   admit ─► validate ─► gate ─► plan keys ─► reserve rows ─► log ADD ─► insertBatch ─► Admitted
//                                                        (duplicates only: compared with their originals)
import assert from 'node:assert/strict';
import { batchFromArrow } from './batch/arrow-codec.ts';
import { encodeBatch, hasCallbacks } from './batch/batch-codec.ts';
import { stringBytesOf, type TimerBatch } from './batch/timer-batch.ts';
import { validateBatch } from './batch/validate.ts';
import { checkCallbacks } from './callbacks.ts';
import { errorCodes, FermataError } from './errors.ts';
import { compareDuplicates, differingNames, type DuplicateColumns } from './duplicate-answers.ts';
import { timerStateNames } from './store/timer-state.ts';
import { encodeTimerId, encodeTimerIdInto } from './ids.ts';
import type { RescheduledTimers } from './rescheduled-timers.ts';
import { type KeyPlan, planKeys } from './key-plan.ts';
import { queueNamed } from './queue-registry.ts';
import { releaseRoom, takeRoom } from './queue-limits.ts';
import type { AppendOptions } from './log.ts';
import { type AddEncoding, addEncodingArrowStream, addEncodingColumns, addEncodingColumnsWithCallbacks, encodeAddHeader, recordType } from './records.ts';
import type { SpilledKeyHolder } from './spill/spilled-timers.ts';
import type { EngineState } from './state.ts';
import { timerState } from './store/resident-store.ts';
import type { Admitted, DuplicateAnswer, TimerStateName } from './types.ts';

const startNow = { startNow: true } as const;

/** An Admitted over the batch and its key plan: methods on a prototype, no closures per admit. */
class AdmittedBatch implements Admitted {
  readonly seq: number;
  readonly rows: number;
  readonly duplicates: number;
  readonly #fireAtMs: Float64Array;
  readonly #plan: KeyPlan | undefined;
  /** Undefined when no row is a duplicate. */
  readonly #compared: DuplicateColumns | undefined;
  readonly #rescheduled: RescheduledTimers;

  constructor(batch: TimerBatch, seq: number, plan: KeyPlan | undefined, compared: DuplicateColumns | undefined, rescheduled: RescheduledTimers) {
    this.seq = seq;
    this.rows = batch.rows;
    this.duplicates = plan?.duplicates ?? 0;
    this.#fireAtMs = batch.fireAtMs;
    this.#plan = plan;
    this.#compared = compared;
    this.#rescheduled = rescheduled;
  }

  isDuplicate(row: number): boolean {
    return this.#plan !== undefined && !Number.isNaN(this.#plan.originalSeq[row]);
  }

  duplicateOf(row: number): DuplicateAnswer | undefined {
    const compared = this.#compared;
    if (compared === undefined || !this.isDuplicate(row)) return undefined;
    const plan = this.#plan as KeyPlan;
    const originalSeq = plan.originalSeq[row] as number;
    const fireAtMs = this.#rescheduled.placeOf(originalSeq === 0 ? this.seq : originalSeq, plan.originalRow[row] as number, plan.originalFireAt[row] as number);
    return { state: timerStateNames[compared.states[row] as number] as TimerStateName, revision: this.revisionOf(row), fireAtMs, differs: differingNames(compared.differs[row] as number) };
  }

  revisionOf(row: number): number {
    const plan = this.#plan;
    if (plan === undefined || !this.isDuplicate(row)) return 1;
    const originalSeq = plan.originalSeq[row] as number;
    return this.#rescheduled.revisionOf(originalSeq === 0 ? this.seq : originalSeq, plan.originalRow[row] as number);
  }

  idOf(row: number): string {
    const plan = this.#plan;
    if (plan === undefined || !this.isDuplicate(row)) return encodeTimerId(this.seq, row, this.#fireAtMs[row] as number);
    const originalSeq = plan.originalSeq[row] as number;
    return encodeTimerId(originalSeq === 0 ? this.seq : originalSeq, plan.originalRow[row] as number, plan.originalFireAt[row] as number);
  }

  idInto(row: number, out: Uint8Array, at: number): void {
    const plan = this.#plan;
    if (plan === undefined || !this.isDuplicate(row)) {
      encodeTimerIdInto(out, at, this.seq, row, this.#fireAtMs[row] as number);
      return;
    }
    const originalSeq = plan.originalSeq[row] as number;
    encodeTimerIdInto(out, at, originalSeq === 0 ? this.seq : originalSeq, plan.originalRow[row] as number, plan.originalFireAt[row] as number);
  }
}

/**
 * The answer to a durable batch. Its duplicate rows (only they) are compared with their
 * originals as they are now, which may read a spilled original's run; a batch without
 * duplicates is answered at once, with no promise of its own.
 */
function admittedOf(s: EngineState, batch: TimerBatch, seq: number, plan: KeyPlan | undefined): Admitted | Promise<Admitted> {
  if (plan === undefined || plan.duplicates === 0) return new AdmittedBatch(batch, seq, plan, undefined, s.rescheduled);
  const compared = compareDuplicates(s, batch, seq, plan);
  if (compared instanceof Promise) return compared.then((columns) => new AdmittedBatch(batch, seq, plan, columns, s.rescheduled));
  return new AdmittedBatch(batch, seq, plan, compared, s.rescheduled);
}

/**
 * Admits a batch built in process or from JSON: logged in the engine's columnar form.
 * `startNow`: when the log is idle its record is written at once, not after the current task
 * (AppendOptions.startNow; the admit coalescer's full records).
 */
export async function admit(s: EngineState, batch: TimerBatch, options?: { readonly startNow?: boolean }): Promise<Admitted> {
  const acceptedAtMs = s.clock.now();
  validateBatch(batch, s.limits, acceptedAtMs);
  checkTargets(s, batch);
  return admitLogged(s, batch, hasCallbacks(batch) ? addEncodingColumnsWithCallbacks : addEncodingColumns, encodeBatch(batch), acceptedAtMs, options?.startNow === true ? startNow : undefined);
}

/**
 * Checks a batch as admit() does, admitting nothing: throws admit()'s BATCH_INVALID or
 * TARGET_REFUSED. The admit coalescer checks each timer alone with it before merging.
 */
export function validate(s: EngineState, batch: TimerBatch): void {
  validateBatch(batch, s.limits, s.clock.now());
  checkTargets(s, batch);
}

/**
 * Admits a schedule's occurrences (engine/schedules/materializer.ts): as admit(), their reserved
 * keys allowed, and not held to a queue's max_pending: one batch holds every schedule's
 * occurrences, and a full queue refusing it would hold back the schedules of other queues.
 */
export async function admitOccurrences(s: EngineState, batch: TimerBatch): Promise<Admitted> {
  const acceptedAtMs = s.clock.now();
  validateBatch(batch, s.limits, acceptedAtMs, true);
  checkTargets(s, batch);
  return admitLogged(s, batch, addEncodingColumns, encodeBatch(batch), acceptedAtMs, undefined, false);
}

/** Admits an Arrow IPC stream as it arrived; the bytes are logged whole. */
export async function admitArrow(s: EngineState, ipc: Uint8Array): Promise<Admitted> {
  const acceptedAtMs = s.clock.now();
  const batch = batchFromArrow(ipc, acceptedAtMs, s.limits.rowsPerBatchMax, 'client');
  validateBatch(batch, s.limits, acceptedAtMs);
  checkTargets(s, batch);
  return admitLogged(s, batch, addEncodingArrowStream, [ipc], acceptedAtMs);
}

/**
 * Logs a validated batch and puts it in memory once durable. Keyed rows are planned against
 * the keys known so far; if an admit still in flight holds one of them, this one waits for it
 * and plans again, so the log's order decides which row is the original, live and on replay.
 */
async function admitLogged(s: EngineState, batch: TimerBatch, encoding: AddEncoding, encoded: readonly Uint8Array[], acceptedAtMs: number, appendOptions?: AppendOptions, capped = true): Promise<Admitted> {
  // A batch that would grow the store's columns while the columns for that growth are still
  // being made ahead waits for them, rather than have the growth fault their pages on the main
  // thread (ResidentStore.columnsAheadPending); the gate is asked once it goes on.
  const columnsMade = s.store.columnsAheadPending(s.reservedRows + batch.rows);
  if (columnsMade !== undefined) await columnsMade;
  const refusal = s.admitGate?.();
  if (refusal !== undefined) throw refusal;
  let decidedAtMs = s.decisionTime();
  // Replay releases what had expired by the decision time before it plans this ADD: so does
  // the live engine, or a clock stepping back afterwards would leave the two disagreeing.
  s.releaseExpired(decidedAtMs, Infinity);
  const spilledAnswers = new Map<number, SpilledKeyHolder | null>();
  let plan = planKeys(s, batch, decidedAtMs, spilledAnswers);
  while (plan !== undefined && plan.waitFor.length > 0) {
    // Admits and cancels waited for settle either way; a spill bucket that cannot be read
    // (a failing or damaged disk) fails this admit, or asking again would loop on it.
    const waited = await Promise.allSettled(plan.waitFor);
    for (const result of waited) if (result.status === 'rejected') throw result.reason;
    decidedAtMs = s.decisionTime();
    s.releaseExpired(decidedAtMs, Infinity);
    plan = planKeys(s, batch, decidedAtMs, spilledAnswers);
  }
  const newRows = batch.rows - (plan?.duplicates ?? 0);
  if (!s.store.canAllocate(s.reservedRows + newRows)) {
    throw new FermataError(errorCodes.capacityFull, `the resident store is full (${s.store.count} timers)`, { rows: newRows });
  }
  // Slabs this batch and the admits still in flight will need beyond the arena's current one
  // (asked for together: one admit at a time, each fits the room the others will take), and the
  // next columns when the rows on their way near the capacity, are made while the record syncs
  // (asked for before anything is claimed or reserved: nothing to undo if it throws).
  const bytes = stringBytesOf(batch);
  s.store.arena.prefaultFor(s.reservedBytes + bytes);
  s.store.prefaultColumnsFor(s.reservedRows + newRows);
  // From here to the append call nothing awaits: the keys are claimed and the record queued in one step.
  const room = capped ? takeRoom(s, batch, plan) : undefined;
  const introduced = plan?.introduced ?? [];
  const settled = introduced.length === 0 ? undefined : Promise.withResolvers<void>();
  const claim = settled === undefined ? -1 : s.keysInFlight.claim(introduced, settled.promise);
  s.reservedRows += newRows;
  s.reservedBytes += bytes;
  let seq: number;
  try {
    seq = await s.log.append(recordType.add, [encodeAddHeader(encoding, batch.rows, acceptedAtMs, decidedAtMs), ...encoded], appendOptions);
    insertBatch(s, batch, seq, plan);
    s.addTimes.add(seq, acceptedAtMs);
  } finally {
    s.reservedRows -= newRows;
    s.reservedBytes -= bytes;
    if (room !== undefined) releaseRoom(s, room);
    if (settled !== undefined) s.keysInFlight.release(claim, introduced);
    settled?.resolve();
  }
  return admittedOf(s, batch, seq, plan);
}

/** Refuses a batch with a target the dispatcher would refuse (targets are a dictionary: each is checked once). */
function checkTargets(s: EngineState, batch: TimerBatch): void {
  if (batch.callback !== undefined) checkCallbacks(s, batch);
  if (s.checkTarget === undefined) return;
  for (let entry = 0; entry < batch.targets.length; entry++) {
    const refusal = s.checkTarget(batch.targets[entry] as string);
    if (refusal === undefined) continue;
    const row = batch.targetIndex.indexOf(entry);
    throw new FermataError(errorCodes.targetRefused, `${refusal} (row ${row})`, { column: 'target', row });
  }
}

/** Puts a durable batch into memory: one slot, heap entry and index entry per new row. */
export function insertBatch(s: EngineState, batch: TimerBatch, seq: number, plan: KeyPlan | undefined): void {
  const store = s.store;
  const targets: number[] = [];
  for (const target of batch.targets) targets.push(store.internTarget(target));
  const queues: number[] = [];
  for (const queue of batch.queues) {
    queues.push(s.queueIndex(queue));
    queueNamed(s, queue);
  }
  // Duplicates get no slot: only the rows listed go in (every row when `rows` is undefined).
  let rows: Int32Array | undefined;
  if (plan !== undefined && plan.duplicates > 0) {
    rows = new Int32Array(batch.rows - plan.duplicates);
    let at = 0;
    for (let row = 0; row < batch.rows; row++) if (Number.isNaN(plan.originalSeq[row])) rows[at++] = row;
  }
  const count = rows?.length ?? batch.rows;
  // Synchronous to the end, and nothing keeps them: scratch arrays (see scratch-arrays.ts).
  const slots = s.scratch.int32('insert.slots', count);
  assert.ok(store.canAllocate(count), 'capacity was reserved before the append');
  store.allocateRows(batch, seq, rows, count, queues, targets, slots);
  for (const target of targets) store.releaseTarget(target);
  s.counts[timerState.pending] = (s.counts[timerState.pending] as number) + count;
  s.rowsInserted += count;
  s.index.insertBatch(slots, count);
  s.heap.pushMany(slots, count);
  if (plan !== undefined) {
    // The keyed rows' slots and hashes side by side, for the key index's batch insert.
    const keyOffsets = batch.keys.offsets;
    const keyedSlots = s.scratch.int32('insert.keyedSlots', count);
    const keyedHashes = s.scratch.uint32('insert.keyedHashes', count);
    let keyed = 0;
    for (let i = 0; i < count; i++) {
      const row = rows === undefined ? i : (rows[i] as number);
      if ((keyOffsets[row + 1] as number) === (keyOffsets[row] as number)) continue;
      keyedSlots[keyed] = slots[i] as number;
      keyedHashes[keyed++] = plan.hashes[row] as number;
    }
    s.keys.insertMany(keyedSlots, keyedHashes, keyed);
    // An occurrence's ADD carries its schedule's high-water mark in its key, live and in replay.
    if (s.schedules.size > 0) s.schedules.raiseMarksOf(batch);
  }
  s.onDueChanged();
}
