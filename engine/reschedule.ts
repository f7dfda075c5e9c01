// PATCH of a timer (reschedule), on the main thread: a pending or retrying timer gets a new fire
// time, payload, headers, target, queue, callback or failure callback as ONE durable RESCHEDULE record
// (docs/format/engine-records.md), optionally only if its revision is one the caller names
// (If-Match: compare-and-set). Its id and key stay the same: the id keeps naming the timer by
// the fire time it was added with, and the table of rescheduled timers (rescheduled-timers.ts)
// holds its revision and the fire time the PATCH gave it.
//
//   reschedule(id) ─► resident? ─► checks ─► out of the heap (the OLD time cannot fire) ─► log RESCHEDULE ─► apply ─► back in the heap
//                  └► past the watermark? ─► find in its bucket ─► tombstone ─► log RESCHEDULE ─► into memory, apply
//
// As a cancel does, it takes the timer out of the due heap before the record is written, so the
// old fire time can never start a delivery once the answer is sent, and puts it back as it was
// if the append fails; a timer handed to the dispatcher ahead of its time is withdrawn first.
// A change of payload, headers, target, queue or callbacks moves the timer to a new slot (its bytes in the
// arena, its target reference, its queue): a checkpoint in progress reads a slot's fixed fields
// while it is held (store-snapshot.ts), so a live slot's content never changes in place.
// Claims: one PATCH of a timer at a time (a second waits for the first and then decides on the
// timer as the first left it), and a cancel of a timer being patched waits too (cancel-lookup.ts).
// On disk, a rescheduled timer lies in the bucket of its new fire time, which its id no longer
// names: rescheduled-timers.ts keeps the redirect (placeOf) every lookup of a spilled timer takes.
import assert from 'node:assert/strict';
import { validate } from './admission.ts';
import { batchFromSpecs, bytesAt, type TimerSpec } from './batch/timer-batch.ts';
import { errorCodes, FermataError } from './errors.ts';
import { getTimer } from './cancel-lookup.ts';
import { failpoint } from './failpoints.ts';
import { decodeTimerId } from './ids.ts';
import { queueNamed } from './queue-registry.ts';
import { matches, type RevisionCondition } from './revision-condition.ts';
import { decodeReschedule, encodeReschedule, recordType, rescheduleChanged, type RescheduleRecord } from './records.ts';
import { insertRunRow } from './spill/restore.ts';
import { bytesOf } from './spill/run-rows.ts';
import type { SpilledRow } from './spill/spilled-timers.ts';
import type { EngineState } from './state.ts';
import { callbackBytesOf, failureCallbackBytesOf, packCallbacks, urlOrNull } from './store/callback-bytes.ts';
import { keyHash } from './store/key-index.ts';
import { timerState, type TimerStateCode } from './store/resident-store.ts';
import { timerStateNames } from './store/timer-state.ts';
import type { TimerStateName, TimerView } from './types.ts';

/** What a PATCH sets; a field left out keeps its value. */
export interface TimerPatch {
  readonly fireAtMs?: number;
  readonly target?: string;
  readonly queue?: string;
  readonly payload?: Uint8Array | string;
  readonly headers?: Readonly<Record<string, string>>;
  /** A new callback URL, or null to remove it (engine/callbacks.ts). */
  readonly callback?: string | null;
  /** A new failure callback URL, or null to remove it. */
  readonly failureCallback?: string | null;
}

export type { RevisionCondition } from './revision-condition.ts';

export type RescheduleOutcome =
  | { readonly outcome: 'rescheduled'; readonly view: TimerView }
  | { readonly outcome: 'not-found' }
  | { readonly outcome: 'revision-mismatch'; readonly revision: number }
  | { readonly outcome: 'not-pending'; readonly state: TimerStateName };

const noBytes = new Uint8Array(0);

const contentChanged = rescheduleChanged.target | rescheduleChanged.queue | rescheduleChanged.payload | rescheduleChanged.headers | rescheduleChanged.callbacks;

/** Reschedules timer `id`; resolves once the change is durable and applied. */
export function reschedule(s: EngineState, id: string, patch: TimerPatch, condition: RevisionCondition): Promise<RescheduleOutcome> {
  const parts = decodeTimerId(id);
  if (parts === undefined) return Promise.resolve({ outcome: 'not-found' });
  const name = `${parts.seq}:${parts.row}`;
  // Another PATCH, or a cancel of it on disk, is being synced: decide on what it leaves.
  const busy = s.rescheduling.get(name) ?? s.cancellingSpilled.get(name);
  if (busy !== undefined) {
    const again = (): Promise<RescheduleOutcome> => reschedule(s, id, patch, condition);
    return busy.then(again, again);
  }
  const slot = s.slotOfId(id);
  // On disk, it lies in the bucket of its fire time: the id's, or the one a PATCH gave it.
  const placeMs = s.rescheduled.placeOf(parts.seq, parts.row, parts.fireAtMs);
  let outcome: Promise<RescheduleOutcome>;
  if (slot >= 0) outcome = rescheduleResident(s, id, slot, patch, condition);
  else if (placeMs >= s.spill.watermarkMs) outcome = rescheduleSpilled(s, id, parts.seq, parts.row, placeMs, patch, condition);
  else return Promise.resolve({ outcome: 'not-found' });
  s.rescheduling.set(name, outcome);
  const forget = (): void => void s.rescheduling.delete(name);
  outcome.then(forget, forget);
  return outcome;
}

/** The timer's current values a PATCH is checked against; `callbacks` is its callbacks run (callback-bytes.ts). */
interface Current {
  readonly fireAtMs: number;
  readonly target: string;
  readonly queue: string;
  readonly callbacks: Uint8Array;
}

/**
 * The change as a record, checked by admit()'s rules: the timer with the patch applied is
 * validated as an added one would be. Its callbacks are checked with it when the PATCH sets one
 * or moves the timer to another queue (a queue delivering by "arrow" or "pull" refuses them).
 */
function recordOf(s: EngineState, seq: number, row: number, bucketAtMs: number, revision: number, current: Current, patch: TimerPatch): RescheduleRecord {
  const spec: { -readonly [K in keyof TimerSpec]: TimerSpec[K] } = { fireAtMs: patch.fireAtMs ?? current.fireAtMs, target: patch.target ?? current.target };
  if (patch.payload !== undefined) spec.payload = patch.payload;
  if (patch.headers !== undefined) spec.headers = patch.headers;
  if (patch.queue !== undefined) spec.queue = patch.queue;
  const callbacksChange = patch.callback !== undefined || patch.failureCallback !== undefined;
  if (callbacksChange || patch.queue !== undefined) {
    spec.queue = patch.queue ?? current.queue;
    const callback = patch.callback === undefined ? urlOrNull(callbackBytesOf(current.callbacks)) : patch.callback;
    const failureCallback = patch.failureCallback === undefined ? urlOrNull(failureCallbackBytesOf(current.callbacks)) : patch.failureCallback;
    if (callback !== null) spec.callback = callback;
    if (failureCallback !== null) spec.failureCallback = failureCallback;
  }
  const batch = batchFromSpecs([spec]);
  validate(s, batch);
  let changed = 0;
  if (patch.fireAtMs !== undefined) changed |= rescheduleChanged.fireAt;
  if (patch.target !== undefined) changed |= rescheduleChanged.target;
  if (patch.queue !== undefined) changed |= rescheduleChanged.queue;
  if (patch.payload !== undefined) changed |= rescheduleChanged.payload;
  if (patch.headers !== undefined) changed |= rescheduleChanged.headers;
  if (callbacksChange) changed |= rescheduleChanged.callbacks;
  if (changed === 0) throw new FermataError(errorCodes.batchInvalid, 'a PATCH needs at least one field to change', { field: '' });
  const record: { -readonly [K in keyof RescheduleRecord]: RescheduleRecord[K] } = { seq, row, bucketAtMs, revision: revision + 1, changed, fireAtMs: batch.fireAtMs[0] as number };
  if (patch.target !== undefined) record.target = batch.targets[0] as string;
  if (patch.queue !== undefined) record.queue = batch.queues[0] as string;
  if (patch.payload !== undefined) record.payload = bytesAt(batch.payload, 0);
  if (patch.headers !== undefined) record.headers = bytesAt(batch.headers, 0);
  if (callbacksChange) record.callbacks = batch.callback === undefined || batch.failureCallback === undefined ? noBytes : packCallbacks(bytesAt(batch.callback, 0), bytesAt(batch.failureCallback, 0));
  return record;
}

async function rescheduleResident(s: EngineState, id: string, slot: number, patch: TimerPatch, condition: RevisionCondition): Promise<RescheduleOutcome> {
  const store = s.store;
  const seq = store.logSeq[slot] as number;
  const row = store.row[slot] as number;
  const patched = s.rescheduled.get(seq, row);
  const revision = patched?.revision ?? 1;
  if (!matches(condition, revision)) return { outcome: 'revision-mismatch', revision };
  const state = store.state[slot] as TimerStateCode;
  // Being cancelled or settled: its record decides, not this PATCH.
  if (s.cancelling.has(slot) || s.settling.get(slot) !== undefined) return { outcome: 'not-pending', state: s.cancelling.has(slot) ? 'cancelled' : (timerStateNames[state] as TimerStateName) };
  if (state !== timerState.pending && state !== timerState.retrying && state !== timerState.delivering) return { outcome: 'not-pending', state: timerStateNames[state] as TimerStateName };
  // Its current fire time also names the bucket it is in on disk, should a checkpoint under way spill it.
  const fireAtMs = patched?.fireAtMs ?? (store.fireAt[slot] as number);
  const record = recordOf(s, seq, row, fireAtMs, revision, { fireAtMs, target: store.targetOf(slot), queue: s.queueNames[store.queueIndex[slot] as number] as string, callbacks: store.callbacksOf(slot) }, patch);
  // A content change (or a checkpoint's copy) takes a new slot: room for it now, not after the record is durable.
  const moves = (record.changed & contentChanged) !== 0 || s.spilling?.[slot] === 1;
  if (moves) reserveRows(s, 1);
  // Handed out but not sent yet: the dispatcher gives it back, or it has started (too late).
  const withdrawn = state === timerState.delivering && s.withdraw(seq, row);
  if (state === timerState.delivering && !withdrawn) {
    if (moves) s.reservedRows--;
    return { outcome: 'not-pending', state: 'delivering' };
  }
  // Out of the heap now: the old fire time cannot start a delivery while the record is synced.
  s.heap.remove(slot);
  try {
    failpoint('reschedule.before-append');
    await s.log.append(recordType.reschedule, encodeReschedule(record));
    failpoint('reschedule.after-append');
  } catch (err) {
    // Not changed: back to waiting as it was (a withdrawn timer too, from "delivering").
    if (withdrawn) s.setState(slot, (store.attempts[slot] as number) > 0 ? timerState.retrying : timerState.pending);
    s.heap.push(slot);
    s.onDueChanged();
    throw err;
  } finally {
    if (moves) s.reservedRows--;
  }
  if (withdrawn) s.setState(slot, (store.attempts[slot] as number) > 0 ? timerState.retrying : timerState.pending);
  const now = applyReschedule(s, slot, record);
  s.heap.push(now);
  s.rescheduled.applied++;
  s.onDueChanged();
  return { outcome: 'rescheduled', view: getTimer(s, id) as TimerView };
}

async function rescheduleSpilled(s: EngineState, id: string, seq: number, row: number, fireAtMs: number, patch: TimerPatch, condition: RevisionCondition): Promise<RescheduleOutcome> {
  const found = await s.spill.find(seq, row, fireAtMs);
  // Promoted while its bucket was read: it is in memory now, if it exists.
  if (s.index.get(seq, row) >= 0 || fireAtMs < s.spill.watermarkMs) {
    const slot = s.slotOfId(id);
    return slot < 0 ? { outcome: 'not-found' } : rescheduleResident(s, id, slot, patch, condition);
  }
  if (found === undefined) return { outcome: 'not-found' };
  const revision = s.rescheduled.revisionOf(seq, row);
  if (!matches(condition, revision)) return { outcome: 'revision-mismatch', revision };
  const { rows, index } = found;
  const callbacks = rows.callbacks === undefined ? noBytes : bytesOf(rows.callbacks, index);
  const record = recordOf(s, seq, row, fireAtMs, revision, { fireAtMs, target: rows.targets[rows.targetIndex[index] as number] as string, queue: rows.queues[rows.queueIndex[index] as number] as string, callbacks }, patch);
  // Its slot, and a second one when the content moves it.
  const slots = (record.changed & contentChanged) !== 0 ? 2 : 1;
  reserveRows(s, slots);
  // Tombstoned before its record is written, so a promotion meanwhile skips it: the old copy
  // can never fire, nor be loaded as pending. A checkpoint meanwhile leaves this tombstone out
  // (the record is not durable yet): replay then finds the timer on disk again.
  const name = `${seq}:${row}`;
  s.spill.tombstone(seq, row, fireAtMs);
  s.reschedulingSpilled.add(name);
  try {
    failpoint('reschedule.before-append');
    await s.log.append(recordType.reschedule, encodeReschedule(record));
    failpoint('reschedule.after-append');
  } catch (err) {
    s.spill.untombstone(seq, row);
    throw err;
  } finally {
    s.reschedulingSpilled.delete(name);
    s.reservedRows -= slots;
  }
  insertRescheduled(s, found, record);
  s.rescheduled.applied++;
  s.onDueChanged();
  return { outcome: 'rescheduled', view: getTimer(s, id) as TimerView };
}

/** Promises `rows` slots to a change whose record is about to be written, all or none (CAPACITY_FULL when they are not left). */
function reserveRows(s: EngineState, rows: number): void {
  if (!s.store.canAllocate(s.reservedRows + rows)) throw new FermataError(errorCodes.capacityFull, `the resident store is full (${s.store.count} timers)`, { rows });
  s.reservedRows += rows;
}

/** A spilled timer (already tombstoned) into memory with its change applied. */
function insertRescheduled(s: EngineState, found: SpilledRow, record: RescheduleRecord): void {
  const slot = insertRunRow(s, found.rows, found.index, timerState.pending, found.rows.dueAtMs[found.index] as number);
  s.heap.remove(slot);
  s.heap.push(applyReschedule(s, slot, record));
}

/**
 * Applies a durable RESCHEDULE to the timer in `slot` (out of the due heap): its new content,
 * fire time and revision. Returns its slot afterwards (a new one when its content changed);
 * the caller puts that into the heap.
 */
export function applyReschedule(s: EngineState, slot: number, record: RescheduleRecord): number {
  // A timer a checkpoint under way has copied into its spilled run moves too, so that its eviction
  // finds the old slot gone and tombstones that copy (checkpoint.ts, evictSlice).
  const moves = (record.changed & contentChanged) !== 0 || s.spilling?.[slot] === 1;
  const now = moves ? moveWithContent(s, slot, record) : slot;
  // A retrying timer's next attempt is the new fire time; its attempts are kept.
  if ((record.changed & rescheduleChanged.fireAt) !== 0) s.store.setDueAt(now, record.fireAtMs);
  s.rescheduled.set(record.seq, record.row, record.revision, record.fireAtMs);
  return now;
}

/** The timer in `old` into a new slot holding its new content (its own where the record changes none); `old` is released. Indexes and failures follow it. */
function moveWithContent(s: EngineState, old: number, record: RescheduleRecord): number {
  const store = s.store;
  const { seq, row } = record;
  let queueIndex = store.queueIndex[old] as number;
  if (record.queue !== undefined) {
    queueIndex = s.queueIndex(record.queue);
    queueNamed(s, record.queue);
  }
  const target = store.internTarget(record.target ?? store.targetOf(old));
  const key = store.keyOf(old);
  const slot = store.allocateRaw(store.fireAt[old] as number, seq, row, queueIndex, target, record.payload ?? store.payloadOf(old), record.headers ?? store.headersOf(old), key, record.callbacks ?? store.callbacksOf(old));
  store.releaseTarget(target);
  assert.ok(slot >= 0, 'a slot was reserved before the RESCHEDULE was logged');
  store.setState(slot, store.state[old] as TimerStateCode);
  store.setAttempts(slot, store.attempts[old] as number);
  store.setLastStatus(slot, store.lastStatus[old] as number);
  store.setDueAt(slot, store.dueAt[old] as number);
  const error = s.failures.errorOf(old);
  if (error !== null) s.failures.set(slot, error, s.failures.attemptedAtOf(old) as number);
  s.failures.clear(old);
  s.index.delete(seq, row);
  s.index.insert(slot);
  if (key.length > 0) {
    const hash = keyHash(key);
    s.keys.delete(old, hash);
    s.keys.insert(slot, hash);
  }
  // A checkpoint in progress that copied the old slot into its spilled run finds it gone at its
  // eviction and tombstones that copy (checkpoint.ts, evictSlice).
  if (s.spilling !== undefined) s.spilling[old] = 0;
  store.release(old);
  return slot;
}

/** Replays a RESCHEDULE: the timer resident, or on disk in the bucket its id's fire time names. */
export function replayReschedule(s: EngineState, body: Uint8Array): boolean | Promise<boolean> {
  const record = decodeReschedule(body);
  if (record === undefined) return false;
  const slot = s.index.get(record.seq, record.row);
  if (slot >= 0) {
    const state = s.store.state[slot];
    // Only pending and retrying timers were patched; anything else is a timer already gone.
    if (state === timerState.pending || state === timerState.retrying) {
      s.heap.remove(slot);
      s.heap.push(applyReschedule(s, slot, record));
    }
    return true;
  }
  // Its byte fields are views of the body, which the log may reuse once this returns: a copy.
  const owned = decodeReschedule(body.slice()) as RescheduleRecord;
  return s.spill.find(owned.seq, owned.row, owned.bucketAtMs).then((found) => {
    if (found === undefined) return true;
    s.spill.tombstone(owned.seq, owned.row, owned.bucketAtMs);
    insertRescheduled(s, found, owned);
    return true;
  });
}
