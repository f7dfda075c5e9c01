// Bulk cancel: every waiting timer that a filter (or a list of ids) names, cancelled by ONE
// CANCEL_BULK record however many they are (POST /v1/timers/cancel, and a queue's purge,
// DELETE /v1/queues/{name}/timers). Main thread. As a single cancel does (cancel-lookup.ts),
// it takes the resident timers out of the due heap and tombstones the spilled ones before the
// record is written, so none can fire while it is synced, and puts them all back if the append
// fails. Pending and retrying timers are cancelled; timers being delivered are counted apart
// (in flight) and left alone. The record names each timer, so replay cancels exactly this set.
//
//   spilled matches read (bucket by bucket) ─► resident pass, same turn ─► out of the heap,
//   tombstoned, claimed (cancelling) ─► log CANCEL_BULK ─► cancelled (expiring) / put back
import { decodeTimerId } from './ids.ts';
import { type BulkCancel, encodeCancelBulk, recordType } from './records.ts';
import { insertRunRow } from './spill/restore.ts';
import type { RunRows } from './spill/run-rows.ts';
import { type EngineState, settlingWork } from './state.ts';
import { timerState } from './store/resident-store.ts';
import { forEachResidentMatch, queryStart, spilledHits, type TimerFilter } from './timer-query.ts';
import type { CancelOutcome } from './types.ts';

/** What a bulk cancel did: timers cancelled, and matching timers left alone because a delivery of theirs had started. */
export interface BulkCancelOutcome {
  readonly cancelled: number;
  readonly inFlight: number;
}

/** What a bulk cancel names: the timers matching a filter (its state aside), or these ids. */
export type BulkCancelTarget = { readonly filter: Omit<TimerFilter, 'state'> } | { readonly ids: readonly string[] };

/** The spilled timers a bulk cancel takes, with the decoded rows that bring each into memory as cancelled. */
interface SpilledTaken {
  readonly seq: number;
  readonly row: number;
  readonly fireAtMs: number;
  readonly rows: RunRows;
  readonly index: number;
}

/** Tries before a cancel that keeps meeting a moving spill tier (checkpoint, promotion) reads it once more. */
const spillMovesMax = 3;

/** Cancels every waiting timer `what` names; resolves once the one record is durable. */
export async function bulkCancel(s: EngineState, what: BulkCancelTarget): Promise<BulkCancelOutcome> {
  let spilled: SpilledTaken[] = [];
  for (let tries = 1; ; tries++) {
    const watermarkMs = s.spill.watermarkMs;
    const runs = s.spill.runs;
    spilled = 'ids' in what ? await spilledOfIds(s, what.ids) : await spilledOfFilter(s, what.filter);
    if ((s.spill.watermarkMs === watermarkMs && s.spill.runs === runs) || tries >= spillMovesMax) break;
  }
  // From here to the append, one turn: the resident pass, the claims and the record.
  const slots: number[] = [];
  let inFlight = 0;
  const take = (slot: number): void => {
    const state = s.store.state[slot];
    if (state === timerState.delivering) inFlight++;
    else if ((state === timerState.pending || state === timerState.retrying) && !s.cancelling.has(slot)) slots.push(slot);
  };
  if ('ids' in what) {
    for (const id of what.ids) {
      const slot = s.slotOfId(id);
      if (slot >= 0) take(slot);
    }
  } else {
    forEachResidentMatch(s, what.filter, queryStart, take);
  }
  // A spilled timer promoted or cancelled while its bucket was read is resident now (the pass
  // above had it) or gone; an id named twice is taken once.
  const spilledLive: SpilledTaken[] = [];
  const named = new Set<string>();
  for (const timer of spilled) {
    const name = `${timer.seq}:${timer.row}`;
    if (named.has(name) || s.index.get(timer.seq, timer.row) >= 0 || timer.fireAtMs < s.spill.watermarkMs || s.spill.isTombstoned(timer.seq, timer.row) || s.cancellingSpilled.has(name)) continue;
    named.add(name);
    spilledLive.push(timer);
  }
  const unique = [...new Set(slots)];
  if (unique.length === 0 && spilledLive.length === 0) return { cancelled: 0, inFlight };
  const expiresAtMs = s.clock.now() + s.retention.finishedMs;
  const body = encodeCancelBulk(bodyOf(s, unique, spilledLive, expiresAtMs));
  // Out of the heap and tombstoned now: nothing of it can fire while the record is synced.
  for (const slot of unique) s.heap.remove(slot);
  for (const timer of spilledLive) s.spill.tombstone(timer.seq, timer.row, timer.fireAtMs);
  const appended = s.log.append(recordType.cancelBulk, body, settlingWork);
  const claim: Promise<CancelOutcome> = appended.then(() => 'cancelled' as const);
  claim.catch(() => undefined);
  for (const slot of unique) s.cancelling.set(slot, claim);
  for (const timer of spilledLive) s.cancellingSpilled.set(`${timer.seq}:${timer.row}`, claim);
  try {
    await appended;
  } catch (err) {
    for (const slot of unique) s.heap.push(slot);
    for (const timer of spilledLive) s.spill.untombstone(timer.seq, timer.row);
    s.onDueChanged();
    throw err;
  } finally {
    for (const slot of unique) if (s.cancelling.get(slot) === claim) s.cancelling.delete(slot);
    for (const timer of spilledLive) s.cancellingSpilled.delete(`${timer.seq}:${timer.row}`);
  }
  for (const slot of unique) s.finishCancelled(slot, expiresAtMs);
  for (const timer of spilledLive) insertRunRow(s, timer.rows, timer.index, timerState.cancelled, expiresAtMs);
  s.bulkCancels++;
  s.timersCancelledInBulk += unique.length + spilledLive.length;
  return { cancelled: unique.length + spilledLive.length, inFlight };
}

/**
 * The record's refs: resident timers by (seq, row); spilled ones with their fire time, and so
 * are resident timers that a checkpoint under way has copied into its spilled run (after a
 * restart from it they are on disk, as for a single cancel).
 */
function bodyOf(s: EngineState, slots: readonly number[], spilled: readonly SpilledTaken[], expiresAtMs: number): BulkCancel {
  const store = s.store;
  const copied = s.spilling === undefined ? [] : slots.filter((slot) => s.spilling?.[slot] === 1);
  const plain = copied.length === 0 ? slots : slots.filter((slot) => s.spilling?.[slot] !== 1);
  const spilledCount = spilled.length + copied.length;
  const body = {
    expiresAtMs,
    seqs: new Float64Array(plain.length),
    rows: new Uint32Array(plain.length),
    spilledSeqs: new Float64Array(spilledCount),
    spilledRows: new Uint32Array(spilledCount),
    spilledFireAtMs: new Float64Array(spilledCount),
  };
  plain.forEach((slot, i) => {
    body.seqs[i] = store.logSeq[slot] as number;
    body.rows[i] = store.row[slot] as number;
  });
  spilled.forEach((timer, i) => {
    body.spilledSeqs[i] = timer.seq;
    body.spilledRows[i] = timer.row;
    body.spilledFireAtMs[i] = timer.fireAtMs;
  });
  copied.forEach((slot, i) => {
    body.spilledSeqs[spilled.length + i] = store.logSeq[slot] as number;
    body.spilledRows[spilled.length + i] = store.row[slot] as number;
    body.spilledFireAtMs[spilled.length + i] = store.fireAt[slot] as number;
  });
  return body;
}

async function spilledOfFilter(s: EngineState, filter: Omit<TimerFilter, 'state'>): Promise<SpilledTaken[]> {
  const { hits } = await spilledHits(s, filter, queryStart, Infinity, undefined);
  return hits.map((hit) => ({ seq: hit.seq, row: hit.row, fireAtMs: hit.fireAtMs, rows: hit.rows as RunRows, index: hit.index }));
}

async function spilledOfIds(s: EngineState, ids: readonly string[]): Promise<SpilledTaken[]> {
  const out: SpilledTaken[] = [];
  for (const id of ids) {
    if (s.slotOfId(id) >= 0) continue;
    const parts = decodeTimerId(id);
    if (parts === undefined || parts.fireAtMs < s.spill.watermarkMs) continue;
    const found = await s.spill.find(parts.seq, parts.row, parts.fireAtMs);
    if (found !== undefined) out.push({ seq: parts.seq, row: parts.row, fireAtMs: parts.fireAtMs, rows: found.rows, index: found.index });
  }
  return out;
}
