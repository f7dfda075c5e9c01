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
import { errorCodes, FermataError } from './errors.ts';
import { finishedRetentionOf } from './queue-limits.ts';
import { decodeTimerId } from './ids.ts';
import { type BulkCancel, encodeCancelBulk, recordType } from './records.ts';
import { insertRunRow } from './spill/restore.ts';
import { type RunRows, RunRowsBuilder } from './spill/run-rows.ts';
import { type EngineState, settlingWork } from './state.ts';
import { timerState } from './store/resident-store.ts';
import { forEachResidentMatch, forEachSpilledMatch, queryStart, type TimerFilter } from './timer-query.ts';
import type { CancelOutcome } from './types.ts';

/** What a bulk cancel did: timers cancelled, and matching timers left alone because a delivery of theirs had started. */
export interface BulkCancelOutcome {
  readonly cancelled: number;
  readonly inFlight: number;
}

/** What a bulk cancel names: the timers matching a filter (its state aside), or these ids. */
export type BulkCancelTarget = { readonly filter: Omit<TimerFilter, 'state'> } | { readonly ids: readonly string[]; readonly releaseAtOnce?: boolean };

/**
 * The spilled timers a bulk cancel takes, copied out of their buckets (so that holding them keeps
 * no decoded bucket alive): what brings each into memory as cancelled once the record is durable.
 */
interface SpilledTaken {
  readonly rows: RunRows;
  /** Those to take: not promoted, cancelled or claimed since they were read, each once. */
  readonly take: number[];
}

/** Tries before a cancel that keeps meeting a moving spill tier (checkpoint, promotion) reads it once more. */
const spillMovesMax = 3;

/** Cancels every waiting timer `what` names; resolves once the one record is durable. */
export async function bulkCancel(s: EngineState, what: BulkCancelTarget): Promise<BulkCancelOutcome> {
  let copied: RunRows | undefined;
  for (let tries = 1; ; tries++) {
    const watermarkMs = s.spill.watermarkMs;
    const runs = s.spill.runs;
    copied = 'ids' in what ? await spilledOfIds(s, what.ids) : await spilledOfFilter(s, what.filter);
    if ((s.spill.watermarkMs === watermarkMs && s.spill.runs === runs) || tries >= spillMovesMax) break;
  }
  // A PATCH being synced moves its timer to another slot once durable: decide on what it leaves,
  // as a single cancel does (the loop ends with none in flight, in the turn the pass is made).
  while (s.rescheduling.size > 0) await Promise.allSettled(s.rescheduling.values());
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
  const unique = [...new Set(slots)];
  const spilled = spilledStillThere(s, copied);
  const taking = unique.length + spilled.take.length;
  if (taking === 0) return { cancelled: 0, inFlight };
  if (taking > s.limits.bulkCancelTimersMax) throw tooMany(s);
  // The spilled ones come into memory as cancelled: their room is held while the record is synced, as an admit's is.
  const room = spilled.take.length;
  if (!s.store.canAllocate(s.reservedRows + room)) throw new FermataError(errorCodes.capacityFull, `the resident store is full (${s.store.count} timers): the ${room} cancelled timers on disk do not fit`, { rows: room });
  // A schedule's occurrences cancelled by a change of it are released at once: the rule may
  // create an occurrence at the same instant again, under the same key (engine/schedules/).
  const expiresAtMs = s.clock.now() + ('ids' in what && what.releaseAtOnce === true ? 0 : retentionOfTaken(s, unique, spilled));
  const body = encodeCancelBulk(bodyOf(s, unique, spilled, expiresAtMs));
  // Out of the heap and tombstoned now: nothing of it can fire while the record is synced.
  const { seq, row, fireAtMs } = spilled.rows;
  for (const slot of unique) s.heap.remove(slot);
  for (const i of spilled.take) s.spill.tombstone(seq[i] as number, row[i] as number, placeOf(s, seq[i] as number, row[i] as number, fireAtMs[i] as number));
  const appended = s.log.append(recordType.cancelBulk, body, settlingWork);
  const claim: Promise<CancelOutcome> = appended.then(() => 'cancelled' as const);
  claim.catch(() => undefined);
  for (const slot of unique) s.cancelling.set(slot, claim);
  for (const i of spilled.take) s.cancellingSpilled.set(`${seq[i]}:${row[i]}`, claim);
  s.reservedRows += room;
  try {
    await appended;
  } catch (err) {
    for (const slot of unique) s.heap.push(slot);
    for (const i of spilled.take) s.spill.untombstone(seq[i] as number, row[i] as number);
    s.onDueChanged();
    throw err;
  } finally {
    s.reservedRows -= room;
    for (const slot of unique) if (s.cancelling.get(slot) === claim) s.cancelling.delete(slot);
    for (const i of spilled.take) s.cancellingSpilled.delete(`${seq[i]}:${row[i]}`);
  }
  for (const slot of unique) s.finishCancelled(slot, expiresAtMs);
  for (const i of spilled.take) insertRunRow(s, spilled.rows, i, timerState.cancelled, expiresAtMs);
  s.bulkCancels++;
  s.timersCancelledInBulk += taking;
  return { cancelled: taking, inFlight };
}

/**
 * The retention of a bulk cancel's one record (it holds one expiry): the longest of the queues
 * its timers are in, so none is released before its queue's retention (a purge, or a filter on
 * one queue, has exactly its queue's).
 */
function retentionOfTaken(s: EngineState, slots: readonly number[], spilled: SpilledTaken): number {
  const queues = new Set<number>();
  for (const slot of slots) queues.add(s.store.queueIndex[slot] as number);
  let longest = 0;
  for (const index of queues) longest = Math.max(longest, s.queueLimits.finishedMs[index] ?? s.retention.finishedMs);
  const { rows, take } = spilled;
  const names = new Set<string>();
  for (const i of take) names.add(rows.queues[rows.queueIndex[i] as number] as string);
  for (const name of names) longest = Math.max(longest, finishedRetentionOf(s, name));
  return longest;
}

const tooMany = (s: EngineState): FermataError =>
  new FermataError(errorCodes.walRecordTooLarge, `the filter matches more than ${s.limits.bulkCancelTimersMax} timers, the most one bulk cancel takes (its one record): narrow it, with due_before for instance`);

/**
 * The copied spilled timers still to take: a timer promoted or cancelled while its bucket was read
 * is resident now (the resident pass had it) or gone; one named twice is taken once.
 */
function spilledStillThere(s: EngineState, rows: RunRows): SpilledTaken {
  const take: number[] = [];
  const named = new Set<string>();
  for (let i = 0; i < rows.rows; i++) {
    const seq = rows.seq[i] as number;
    const row = rows.row[i] as number;
    const name = `${seq}:${row}`;
    if (named.has(name) || s.index.get(seq, row) >= 0 || placeOf(s, seq, row, rows.fireAtMs[i] as number) < s.spill.watermarkMs || s.spill.isTombstoned(seq, row) || s.cancellingSpilled.has(name)) continue;
    named.add(name);
    take.push(i);
  }
  return { rows, take };
}

/**
 * The record's refs: resident timers by (seq, row); spilled ones with their fire time, and so
 * are resident timers that a checkpoint under way has copied into its spilled run (after a
 * restart from it they are on disk, as for a single cancel).
 */
function bodyOf(s: EngineState, slots: readonly number[], spilled: SpilledTaken, expiresAtMs: number): BulkCancel {
  const store = s.store;
  const copying = s.spilling === undefined ? [] : slots.filter((slot) => s.spilling?.[slot] === 1);
  const plain = copying.length === 0 ? slots : slots.filter((slot) => s.spilling?.[slot] !== 1);
  const { take, rows } = spilled;
  const spilledCount = take.length + copying.length;
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
  take.forEach((at, i) => {
    body.spilledSeqs[i] = rows.seq[at] as number;
    body.spilledRows[i] = rows.row[at] as number;
    body.spilledFireAtMs[i] = placeOf(s, rows.seq[at] as number, rows.row[at] as number, rows.fireAtMs[at] as number);
  });
  copying.forEach((slot, i) => {
    body.spilledSeqs[take.length + i] = store.logSeq[slot] as number;
    body.spilledRows[take.length + i] = store.row[slot] as number;
    body.spilledFireAtMs[take.length + i] = placeOf(s, store.logSeq[slot] as number, store.row[slot] as number, store.fireAt[slot] as number);
  });
  return body;
}

/** The spilled timers matching `filter`, copied (up to one more than a bulk cancel takes, which is then refused). */
async function spilledOfFilter(s: EngineState, filter: Omit<TimerFilter, 'state'>): Promise<RunRows> {
  const copy = new RunRowsBuilder();
  await forEachSpilledMatch(s, filter, (rows, i) => {
    copy.appendFrom(rows, i);
    return copy.rows <= s.limits.bulkCancelTimersMax;
  });
  if (copy.rows > s.limits.bulkCancelTimersMax) throw tooMany(s);
  return copy.finish();
}

async function spilledOfIds(s: EngineState, ids: readonly string[]): Promise<RunRows> {
  const copy = new RunRowsBuilder();
  for (const id of ids) {
    if (s.slotOfId(id) >= 0) continue;
    const parts = decodeTimerId(id);
    if (parts === undefined) continue;
    const placeMs = placeOf(s, parts.seq, parts.row, parts.fireAtMs);
    if (placeMs < s.spill.watermarkMs) continue;
    const found = await s.spill.find(parts.seq, parts.row, placeMs);
    if (found !== undefined) copy.appendFrom(found.rows, found.index);
  }
  return copy.finish();
}

/** The fire time that names a spilled timer's bucket: the one its id or row carries, or the one a PATCH gave it (rescheduled-timers.ts). */
const placeOf = (s: EngineState, seq: number, row: number, fireAtMs: number): number => s.rescheduled.placeOf(seq, row, fireAtMs);
