// Outcomes: what became of a delivery, on the main thread. settle() logs one OUTCOME record for
// a batch of outcomes (OUTCOME_DETAILED when some attempt says why it failed, OUTCOME_FOLLOWED
// when final outcomes make callbacks' follow-up timers: callbacks.ts) and applies it once durable: delivered and dead timers are finished (into the expiry heap, with the end of
// their retention), retries go back to the due heap; a failed attempt's error and time go to
// s.failures, a delivery clears them. Dead letters: listDead() (a page at a time, by log
// position), redrive() (a retry outcome, due now, attempts reset) and discardDead() (a dead
// outcome again, expiring now: released at once). Replay applies logged outcomes through
// applyOutcomes as well.
//
//   settle ─► claim slots (settling) ─► log OUTCOME ─► applyOutcomes ─┬► heap (retry)
//                                                                   ├► expiring (delivered, dead)
//                                                                   └► follow-ups inserted (callbacks)
import assert from 'node:assert/strict';
import { errorCodes, isFermataError } from './errors.ts';
import { failpoint } from './failpoints.ts';
import { decodeTimerId, encodeTimerId } from './ids.ts';
import { insertBatch } from './admission.ts';
import { encodeBatch } from './batch/batch-codec.ts';
import { stringBytesOf } from './batch/timer-batch.ts';
import { followUpKeyPlan, type FollowUps, followUpsOf } from './callbacks.ts';
import {
  addEncodingColumns,
  deadReason,
  emptyOutcomes,
  encodeAddHeader,
  encodeOutcomeFollowed,
  encodeOutcomeRecord,
  encodeOutcomes,
  outcomeKind,
  type Outcomes,
  recordType,
} from './records.ts';
import { deadExpiry, finishedExpiry } from './queue-limits.ts';
import { type EngineState, settlingWork } from './state.ts';
import { timerState } from './store/resident-store.ts';
import { residentContent } from './timer-content.ts';
import type { DeadPage, DeadReasonName, DiscardOutcome, RedriveOutcome } from './types.ts';
import { isOccurrenceKey, occurrenceKeyPrefix } from './schedules/occurrence-key.ts';

const deadReasonNames: Record<number, DeadReasonName> = {
  [deadReason.attemptsExhausted]: 'attempts_exhausted',
  [deadReason.gone]: 'gone',
  [deadReason.targetRefused]: 'target_refused',
};

/**
 * Records delivery outcomes: one OUTCOME record for all of them; once it is durable,
 * delivered and dead timers are final, retries go back to the heap at their retry time, and
 * the follow-ups of final timers with a callback are in. `responses[i]` is the body the target
 * answered outcome i with, when the dispatcher kept it (a timer with a callback).
 */
export async function settle(s: EngineState, outcomes: Outcomes, responses?: ReadonlyArray<Uint8Array | undefined>): Promise<void> {
  // A bad outcome is the dispatcher's bug: refuse it before anything is logged, never halfway
  // through applying it. Plain conditions, assert.fail only on failure: this runs once per
  // delivered timer. Then every slot is claimed in s.settling at once (so that a cancel, a
  // redrive or a second outcome for it finds the claim), all with one promise that settles
  // when this call is done; a slot claimed already, or twice here, is refused the same way.
  const count = outcomes.count;
  const slots = new Int32Array(count);
  const store = s.store;
  for (let i = 0; i < count; i++) {
    const slot = s.index.get(outcomes.seqs[i] as number, outcomes.rows[i] as number);
    const kind = outcomes.kinds[i] as number;
    if (!(slot >= 0 && store.state[slot] === timerState.delivering)) assert.fail('an outcome for a timer that is not being delivered');
    if (!(kind >= outcomeKind.delivered && kind <= outcomeKind.dead)) assert.fail(`outcome kind ${kind}`);
    if (kind === outcomeKind.retry && !Number.isFinite(outcomes.retryAtMs[i])) assert.fail('a retry needs a finite time');
    slots[i] = slot;
  }
  const settling = s.settling;
  const { promise: settled, resolve: release } = Promise.withResolvers<void>();
  const ticket = settling.claimUnique(slots, settled);
  if (ticket < 0) {
    release();
    assert.fail('two outcomes for one delivery');
  }
  let followUps: FollowUpsLogged | undefined;
  try {
    // Finished timers carry their expiry in the record, so replay releases them when the live engine did.
    const now = s.clock.now();
    const queueIndex = store.queueIndex;
    for (let i = 0; i < count; i++) {
      const kind = outcomes.kinds[i];
      if (kind === outcomeKind.delivered) outcomes.retryAtMs[i] = finishedExpiry(s, queueIndex[slots[i] as number] as number, now);
      else if (kind === outcomeKind.dead) outcomes.retryAtMs[i] = deadExpiry(s, queueIndex[slots[i] as number] as number, now);
    }
    failpoint('delivery.outcome-before-append');
    try {
      followUps = followUpsToLog(s, outcomes, slots, responses, now);
      if (followUps === undefined) {
        const record = encodeOutcomeRecord(outcomes);
        await s.log.append(record.type, record.body, settlingWork);
      } else {
        try {
          followUps.seq = await s.log.append(recordType.outcomeFollowed, followUps.body, settlingWork);
        } finally {
          followUpsSettled(s, followUps);
        }
      }
    } catch (err) {
      // A poisoned or closed log: the timers stay "delivering" (not handed out again now, which
      // would re-send what was delivered); recovery finds them pending and delivers them again.
      if (isFermataError(err, errorCodes.walPoisoned) || isFermataError(err, errorCodes.logFenced) || isFermataError(err, errorCodes.walClosed) || s.log.poisoned !== undefined) throw err;
      // Not logged for another reason: the timers go back to waiting, to be delivered again.
      for (const slot of slots) {
        s.setState(slot, (s.store.attempts[slot] as number) > 0 ? timerState.retrying : timerState.pending);
        s.heap.push(slot);
      }
      s.onDueChanged();
      throw err;
    }
  } finally {
    settling.release(ticket);
    release();
  }
  // The claims kept every slot live and its timer in it until now, and nothing has awaited since.
  applyOutcomes(s, outcomes, slots);
  if (followUps === undefined) return;
  insertBatch(s, followUps.batch, followUps.seq, followUpKeyPlan(followUps.batch));
  s.addTimes.add(followUps.seq, followUps.acceptedAtMs);
}

/** Follow-ups on their way into the log with the outcomes that made them. */
interface FollowUpsLogged extends FollowUps {
  readonly body: Uint8Array[];
  readonly rows: number;
  readonly bytes: number;
  readonly claim: number;
  readonly claimed: PromiseWithResolvers<void>;
  /** The ADD part's accepted-at-ms: the settle time. */
  readonly acceptedAtMs: number;
  seq: number;
}

/**
 * The follow-up timers these outcomes make (engine/callbacks.ts), claimed as an admit's are
 * (room in the store, their keys in flight) and encoded with the outcomes as one
 * OUTCOME_FOLLOWED body; undefined when they make none. Their keys are decided as an ADD's: at
 * the decision time, after releasing what had expired by then, which replay does too. With no
 * room in the store the outcomes are logged alone (the callbacks are not made).
 */
function followUpsToLog(s: EngineState, outcomes: Outcomes, slots: Int32Array, responses: ReadonlyArray<Uint8Array | undefined> | undefined, nowMs: number): FollowUpsLogged | undefined {
  const store = s.store;
  let any = false;
  for (let i = 0; i < outcomes.count && !any; i++) any = store.hasCallbacks(slots[i] as number) && outcomes.kinds[i] !== outcomeKind.retry;
  if (!any) return undefined;
  const decidedAtMs = s.decisionTime();
  s.releaseExpired(decidedAtMs, Infinity);
  const made = followUpsOf(s, outcomes, slots, responses, nowMs);
  if (made === undefined || !store.canAllocate(s.reservedRows + made.batch.rows)) return undefined;
  const rows = made.batch.rows;
  const bytes = stringBytesOf(made.batch);
  const claimed = Promise.withResolvers<void>();
  const claim = s.keysInFlight.claim(made.keyHashes, claimed.promise);
  s.reservedRows += rows;
  s.reservedBytes += bytes;
  const addBody = [encodeAddHeader(addEncodingColumns, rows, nowMs, decidedAtMs), ...encodeBatch(made.batch)];
  return { ...made, body: encodeOutcomeFollowed(outcomes, addBody), rows, bytes, claim, claimed, acceptedAtMs: nowMs, seq: 0 };
}

function followUpsSettled(s: EngineState, followUps: FollowUpsLogged): void {
  s.reservedRows -= followUps.rows;
  s.reservedBytes -= followUps.bytes;
  s.keysInFlight.release(followUps.claim, followUps.keyHashes);
  followUps.claimed.resolve();
}

/** `slots[i]`, when known, is outcome i's slot (else looked up; a timer not resident is skipped, as in replay). */
export function applyOutcomes(s: EngineState, outcomes: Outcomes, slots?: Int32Array): void {
  const store = s.store;
  const failures = s.failures;
  const { errors, errorTexts } = outcomes;
  s.outcomesApplied += outcomes.count;
  for (let i = 0; i < outcomes.count; i++) {
    const slot = slots === undefined ? s.index.get(outcomes.seqs[i] as number, outcomes.rows[i] as number) : (slots[i] as number);
    if (slot < 0) continue;
    // A redrive is a retry outcome for a dead timer, which sits in the expiry heap.
    if (!s.heap.remove(slot)) s.expiring.remove(slot);
    if (s.deadReasons.size > 0) s.deadReasons.delete(slot);
    const attempts = Math.min(outcomes.attempts[i] as number, 0xffff);
    store.setAttempts(slot, attempts);
    store.setLastStatus(slot, outcomes.statuses[i] as number);
    const kind = outcomes.kinds[i];
    if (kind === outcomeKind.dead) s.deadReasons.set(slot, outcomes.reasons[i] as number);
    // A failed attempt that says why replaces what the timer showed; a delivery clears it; an
    // outcome that says nothing (a redrive, a discard, a task that failed as a whole) keeps it.
    const error = errors[i] as number;
    if (error > 0) failures.set(slot, errorTexts[error - 1] as string, outcomes.attemptedAtMs[i] as number);
    else if (kind === outcomeKind.delivered && failures.size > 0) failures.clear(slot);
    if (kind === outcomeKind.delivered && s.schedules.size > 0) countOccurrenceDelivered(s, slot);
    const state = kind === outcomeKind.delivered ? timerState.delivered : kind === outcomeKind.dead ? timerState.dead : attempts > 0 ? timerState.retrying : timerState.pending;
    s.setState(slot, state);
    // A retry's time, or a finished timer's expiry: either way, when its heap hands it back.
    store.setDueAt(slot, outcomes.retryAtMs[i] as number);
    (kind === outcomeKind.retry ? s.heap : s.expiring).push(slot);
  }
  s.onDueChanged();
}

/** A delivered timer that is a schedule's occurrence counts as one fired (its key says so). */
function countOccurrenceDelivered(s: EngineState, slot: number): void {
  const length = s.store.keyLengthOf(slot);
  if (length < occurrenceKeyPrefix.length) return;
  const key = s.store.keyOf(slot);
  if (isOccurrenceKey(key, 0, length)) s.schedules.occurrencesFired++;
}

/** (seq, row) of a, compared with b's: log order. */
function logOrder(s: EngineState, a: number, b: number): number {
  const store = s.store;
  return (store.logSeq[a] as number) - (store.logSeq[b] as number) || (store.row[a] as number) - (store.row[b] as number);
}

/**
 * Dead timers, oldest first (by log position), at most `limit`, optionally of one queue only,
 * from after `cursor` (the id of the last timer of the page before; undefined: the first page).
 * The page's `nextCursor` is its last id when more follow: a position in the log, so it stays
 * good whatever is redriven, discarded or released meanwhile. Undefined: `cursor` is no id.
 */
export function listDead(s: EngineState, limit: number, queue?: string, cursor?: string): DeadPage | undefined {
  const after = cursor === undefined ? { seq: -1, row: 0 } : decodeTimerId(cursor);
  if (after === undefined) return undefined;
  const store = s.store;
  const queueIndex = queue === undefined ? -1 : (s.queueIndexOf.get(queue) ?? -2);
  if (queueIndex === -2) return { dead: [], nextCursor: null };
  const slots: number[] = [];
  for (const slot of s.deadReasons.keys()) {
    if (queueIndex >= 0 && store.queueIndex[slot] !== queueIndex) continue;
    const seq = store.logSeq[slot] as number;
    if (seq < after.seq || (seq === after.seq && (store.row[slot] as number) <= after.row)) continue;
    slots.push(slot);
  }
  slots.sort((a, b) => logOrder(s, a, b));
  const page = slots.slice(0, limit).map((slot) => {
    const status = store.lastStatus[slot] as number;
    return {
      id: encodeTimerId(store.logSeq[slot] as number, store.row[slot] as number, store.fireAt[slot] as number),
      revision: s.rescheduled.revisionOf(store.logSeq[slot] as number, store.row[slot] as number),
      queue: s.queueNames[store.queueIndex[slot] as number] as string,
      target: store.targetOf(slot),
      fireAtMs: s.rescheduled.placeOf(store.logSeq[slot] as number, store.row[slot] as number, store.fireAt[slot] as number),
      attempts: store.attempts[slot] as number,
      lastStatus: status === 0 ? null : status,
      reason: deadReasonNames[s.deadReasons.get(slot) as number] ?? 'unknown',
      lastError: s.failures.errorOf(slot),
      lastAttemptAtMs: s.failures.attemptedAtOf(slot),
      ...residentContent(store, slot),
      createdAtMs: s.addTimes.acceptedAtOf(store.logSeq[slot] as number),
    };
  });
  const last = page[page.length - 1];
  return { dead: page, nextCursor: slots.length > limit && last !== undefined ? last.id : null };
}

/**
 * Logs one outcome for a dead timer, filled by `fill`, under a claim on its slot, and applies it
 * once durable. Resolves with the slot, or why there is none to settle.
 */
async function settleDeadTimer(s: EngineState, id: string, what: string, fill: (outcome: Outcomes, slot: number) => void): Promise<number | 'not-found' | 'not-dead'> {
  for (;;) {
    const slot = s.slotOfId(id);
    if (slot < 0) return 'not-found';
    const inFlight = s.settling.get(slot);
    if (inFlight !== undefined) {
      // An outcome of this timer is being logged: decide once it is.
      await inFlight;
      continue;
    }
    if (s.store.state[slot] !== timerState.dead) return 'not-dead';
    const outcome = emptyOutcomes(1);
    outcome.count = 1;
    outcome.seqs[0] = s.store.logSeq[slot] as number;
    outcome.rows[0] = s.store.row[slot] as number;
    fill(outcome, slot);
    const appended = s.log.append(recordType.outcome, encodeOutcomes(outcome), settlingWork).then(() => undefined);
    // No other claim holds the slot: none did above, and nothing has awaited since.
    const ticket = s.settling.claimUnique(Int32Array.of(slot), appended.catch(() => undefined));
    if (ticket < 0) assert.fail(`a ${what} of a timer whose outcome is being logged`);
    try {
      await appended;
    } finally {
      s.settling.release(ticket);
    }
    applyOutcomes(s, outcome);
    return slot;
  }
}

/**
 * Sends a dead timer round again: a retry outcome, due now, with its attempts reset, so it
 * gets its queue's full max_attempts once more. Durable before it resolves.
 */
export async function redrive(s: EngineState, id: string): Promise<RedriveOutcome> {
  const settled = await settleDeadTimer(s, id, 'redrive', (outcome, slot) => {
    outcome.kinds[0] = outcomeKind.retry;
    outcome.statuses[0] = s.store.lastStatus[slot] as number;
    outcome.attempts[0] = 0;
    outcome.retryAtMs[0] = s.clock.now();
  });
  return typeof settled === 'number' ? 'redriven' : settled;
}

/**
 * Discards a dead timer: a dead outcome for it once more, whose expiry is now, so it is
 * released as soon as the record is durable (GET answers 404 from then on, its key is free)
 * and replay releases it at the same point. Durable before it resolves.
 */
export async function discardDead(s: EngineState, id: string): Promise<DiscardOutcome> {
  const settled = await settleDeadTimer(s, id, 'discard', (outcome, slot) => {
    outcome.kinds[0] = outcomeKind.dead;
    outcome.reasons[0] = s.deadReasons.get(slot) ?? deadReason.none;
    outcome.statuses[0] = s.store.lastStatus[slot] as number;
    outcome.attempts[0] = s.store.attempts[slot] as number;
    // Never before an expiry already acted on, so replay releases it no later than this engine did.
    outcome.retryAtMs[0] = s.decisionTime();
  });
  if (typeof settled !== 'number') return settled;
  s.release(settled);
  return 'discarded';
}
