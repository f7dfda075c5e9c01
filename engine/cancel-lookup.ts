// Cancel and lookup, on the main thread, of timers in memory and on disk. A resident timer's
// cancel takes it out of the heap at once (it can no longer fire), logs CANCEL (CANCEL_SPILLED
// while a checkpoint is copying it to disk) and finishes it once durable; a timer handed out
// but not sent yet is withdrawn from the dispatcher first. A spilled timer (its id's fire time
// at or past the watermark) is found in its run's bucket, tombstoned before its record is
// written so no promotion brings it back, and comes into memory as cancelled.
//
//   cancel(id) ─► resident? ─► out of the heap ─► log CANCEL ─► cancelled (expiring)
//              └► past the watermark? ─► find in runs ─► tombstone ─► log CANCEL_SPILLED ─► cancelled
import { decodeTimerId } from './ids.ts';
import { encodeCancel, encodeCancelSpilled, recordType } from './records.ts';
import { finishedExpiry, finishedRetentionOf } from './queue-limits.ts';
import { matches, type RevisionCondition } from './revision-condition.ts';
import { insertRunRow } from './spill/restore.ts';
import { bytesOf, createdAtOf, type RunRows } from './spill/run-rows.ts';
import { type EngineState, settlingWork } from './state.ts';
import { timerState, type TimerStateCode } from './store/resident-store.ts';
import { callbackBytesOf, failureCallbackBytesOf, urlOrNull } from './store/callback-bytes.ts';
import { timerStateNames } from './store/timer-state.ts';
import { residentContent, spilledContent } from './timer-content.ts';
import type { CancelOutcome, TimerStateName, TimerView } from './types.ts';

const utf8 = new TextDecoder();

/** Cancels a timer; resolves once the cancel is durable. */
export function cancel(s: EngineState, id: string, condition: RevisionCondition = undefined): Promise<CancelOutcome> {
  // A PATCH of it is being synced: decide on what it leaves (reschedule.ts).
  const patching = s.rescheduling.size === 0 ? undefined : patchInFlight(s, id);
  if (patching !== undefined) {
    const again = (): Promise<CancelOutcome> => cancel(s, id, condition);
    return patching.then(again, again);
  }
  const slot = s.slotOfId(id);
  if (slot < 0) {
    const parts = decodeTimerId(id);
    // Not in memory, but its fire time (as a PATCH left it) is past the watermark: it may be on disk.
    const placeMs = parts === undefined ? -Infinity : s.rescheduled.placeOf(parts.seq, parts.row, parts.fireAtMs);
    return parts !== undefined && placeMs >= s.spill.watermarkMs ? cancelSpilled(s, id, parts.seq, parts.row, placeMs, condition) : Promise.resolve('not-found');
  }
  // If-Match: decided on the revision the timer has now (a PATCH being synced was waited for above).
  if (!matches(condition, s.rescheduled.revisionOf(s.store.logSeq[slot] as number, s.store.row[slot] as number))) return Promise.resolve('revision-mismatch');
  const inFlight = s.cancelling.get(slot);
  if (inFlight !== undefined) return inFlight;
  const state = s.store.state[slot] as TimerStateCode;
  if (state === timerState.cancelled) return Promise.resolve('cancelled');
  const seq = s.store.logSeq[slot] as number;
  const row = s.store.row[slot] as number;
  // Handed out but not sent yet: the dispatcher gives it back, or it has started (too late).
  const withdrawn = state === timerState.delivering && s.withdraw(seq, row);
  if (state !== timerState.pending && state !== timerState.retrying && !withdrawn) return Promise.resolve('too-late');
  // Out of the heap now, so the timer cannot fire while its CANCEL record is being synced.
  s.heap.remove(slot);
  const expiresAtMs = finishedExpiry(s, s.store.queueIndex[slot] as number, s.clock.now());
  // A timer a checkpoint in progress has copied into its spilled run: after a restart it is on
  // disk, not in memory, so its cancel names its fire time (replay finds it either way).
  const spilling = s.spilling?.[slot] === 1;
  const body = spilling ? encodeCancelSpilled(expiresAtMs, seq, row, s.rescheduled.placeOf(seq, row, s.store.fireAt[slot] as number)) : encodeCancel(expiresAtMs, [seq], [row]);
  const outcome = s.log.append(spilling ? recordType.cancelSpilled : recordType.cancel, body, settlingWork).then(
    () => {
      s.finishCancelled(slot, expiresAtMs);
      return 'cancelled' as const;
    },
    (err: unknown) => {
      // Not cancelled: back to waiting (a withdrawn timer too, from "delivering").
      if (withdrawn) s.setState(slot, (s.store.attempts[slot] as number) > 0 ? timerState.retrying : timerState.pending);
      s.heap.push(slot);
      s.onDueChanged();
      throw err;
    },
  );
  s.cancelling.set(slot, outcome);
  const forget = (): void => void s.cancelling.delete(slot);
  outcome.then(forget, forget);
  return outcome;
}

/** A timer's callback URLs from its callbacks run (callback-bytes.ts), as the view shows them. */
function callbackUrls(run: Uint8Array): Pick<TimerView, 'callback' | 'failureCallback'> {
  return { callback: urlOrNull(callbackBytesOf(run)), failureCallback: urlOrNull(failureCallbackBytesOf(run)) };
}

function spilledCallbackUrls(rows: RunRows, index: number): Pick<TimerView, 'callback' | 'failureCallback'> {
  return callbackUrls(rows.callbacks === undefined ? new Uint8Array(0) : bytesOf(rows.callbacks, index));
}

function patchInFlight(s: EngineState, id: string): Promise<unknown> | undefined {
  const parts = decodeTimerId(id);
  return parts === undefined ? undefined : s.rescheduling.get(`${parts.seq}:${parts.row}`);
}

export function getTimer(s: EngineState, id: string): TimerView | undefined {
  const slot = s.slotOfId(id);
  if (slot < 0) return undefined;
  const store = s.store;
  const status = store.lastStatus[slot] as number;
  const patched = s.rescheduled.get(store.logSeq[slot] as number, store.row[slot] as number);
  return {
    id,
    state: timerStateNames[store.state[slot] as number] as TimerStateName,
    revision: patched?.revision ?? 1,
    fireAtMs: patched?.fireAtMs ?? (store.fireAt[slot] as number),
    dueAtMs: store.dueAt[slot] as number,
    attempts: store.attempts[slot] as number,
    queue: s.queueNames[store.queueIndex[slot] as number] as string,
    target: store.targetOf(slot),
    key: store.keyLengthOf(slot) === 0 ? null : utf8.decode(store.keyOf(slot)),
    lastStatus: status === 0 ? null : status,
    lastError: s.failures.errorOf(slot),
    lastAttemptAtMs: s.failures.attemptedAtOf(slot),
    nextAttemptAtMs: store.state[slot] === timerState.retrying ? (store.dueAt[slot] as number) : null,
    ...callbackUrls(store.callbacksOf(slot)),
    ...residentContent(store, slot),
    createdAtMs: s.addTimes.acceptedAtOf(store.logSeq[slot] as number),
  };
}

/** A timer in memory or on disk (get() answers for timers in memory only, without waiting). */
export async function lookup(s: EngineState, id: string): Promise<TimerView | undefined> {
  const resident = getTimer(s, id);
  if (resident !== undefined) return resident;
  const parts = decodeTimerId(id);
  if (parts === undefined) return undefined;
  const placeMs = s.rescheduled.placeOf(parts.seq, parts.row, parts.fireAtMs);
  if (placeMs < s.spill.watermarkMs) return undefined;
  const found = await s.spill.find(parts.seq, parts.row, placeMs);
  // Promoted while the bucket was read: it is in memory now.
  if (found === undefined) return getTimer(s, id);
  return spilledTimerView(s, id, found.rows, found.index);
}

/** The view of a spilled timer, row `index` of a decoded bucket (spilled timers are pending and never attempted). */
export function spilledTimerView(s: EngineState, id: string, rows: RunRows, index: number): TimerView {
  const key = bytesOf(rows.keys, index);
  const seq = rows.seq[index] as number;
  const row = rows.row[index] as number;
  return {
    id,
    state: 'pending',
    // A PATCH's revision and fire time are kept in memory, not in the run (rescheduled-timers.ts).
    revision: s.rescheduled.revisionOf(seq, row),
    fireAtMs: s.rescheduled.placeOf(seq, row, rows.fireAtMs[index] as number),
    dueAtMs: rows.dueAtMs[index] as number,
    attempts: 0,
    queue: rows.queues[rows.queueIndex[index] as number] as string,
    target: rows.targets[rows.targetIndex[index] as number] as string,
    key: key.length === 0 ? null : utf8.decode(key),
    lastStatus: null,
    // Only timers never attempted spill: none has a failure to show.
    lastError: null,
    lastAttemptAtMs: null,
    nextAttemptAtMs: null,
    ...spilledCallbackUrls(rows, index),
    ...spilledContent(rows, index),
    // Its run row carries it (the table keeps resident timers' only, add-times.ts); a run written
    // before the column has none, but the manifest beside it kept the entry until the next checkpoint.
    createdAtMs: createdAtOf(rows, index) ?? s.addTimes.acceptedAtOf(seq),
  };
}

/** The payload of a resident timer (a view: copy it to keep it). */
export function payloadOf(s: EngineState, id: string): Uint8Array | undefined {
  const slot = s.slotOfId(id);
  return slot < 0 ? undefined : s.store.payloadOf(slot);
}

function cancelSpilled(s: EngineState, id: string, seq: number, row: number, fireAtMs: number, condition: RevisionCondition): Promise<CancelOutcome> {
  const name = `${seq}:${row}`;
  const inFlight = s.cancellingSpilled.get(name);
  if (inFlight !== undefined) return inFlight;
  const outcome = cancelSpilledNow(s, id, seq, row, fireAtMs, condition);
  s.cancellingSpilled.set(name, outcome);
  const forget = (): void => void s.cancellingSpilled.delete(name);
  outcome.then(forget, forget);
  return outcome;
}

async function cancelSpilledNow(s: EngineState, id: string, seq: number, row: number, fireAtMs: number, condition: RevisionCondition): Promise<CancelOutcome> {
  const found = await s.spill.find(seq, row, fireAtMs);
  // Promoted (or cancelled) while its bucket was read: it is in memory now, if it exists.
  if (s.index.get(seq, row) >= 0 || fireAtMs < s.spill.watermarkMs) return cancel(s, id, condition);
  if (found === undefined) return 'not-found';
  if (!matches(condition, s.rescheduled.revisionOf(seq, row))) return 'revision-mismatch';
  // Tombstoned before its record is written, so a promotion meanwhile skips it: it cannot fire.
  s.spill.tombstone(seq, row, fireAtMs);
  const expiresAtMs = s.clock.now() + finishedRetentionOf(s, found.rows.queues[found.rows.queueIndex[found.index] as number] as string);
  try {
    await s.log.append(recordType.cancelSpilled, encodeCancelSpilled(expiresAtMs, seq, row, fireAtMs), settlingWork);
  } catch (err) {
    s.spill.untombstone(seq, row);
    throw err;
  }
  insertRunRow(s, found.rows, found.index, timerState.cancelled, expiresAtMs);
  return 'cancelled';
}
