// Replay, on the main thread while open() runs: the log's records after the checkpoint, in
// order, applied as the live engine applied them (ADD through key planning and insertBatch,
// OUTCOME through applyOutcomes, CANCEL, CANCEL_SPILLED, PROMOTE, QUEUE, CLOCK, RESCHEDULE,
// SCHEDULE, SCHEDULE_MARK), so that reopening
// arrives at the same state. Each ADD first releases what had expired by the time its keys were
// decided, so keys deduplicate exactly as they did live. The store is sized ahead from the
// log's bytes-to-replay hint instead of doubling its way up.
//
//   DurableLog opener ─► beginReplay(s).record(seq, type, body) ─► replayRecord ─► the parts' apply steps
import { insertBatch } from './admission.ts';
import { batchFromArrow } from './batch/arrow-codec.ts';
import { replayedClockProblem } from './clock-moves.ts';
import { decodeBatch } from './batch/batch-codec.ts';
import type { TimerBatch } from './batch/timer-batch.ts';
import { errorCodes, FermataError } from './errors.ts';
import { type KeyPlan, planKeys } from './key-plan.ts';
import type { LogReplay } from './log.ts';
import { followUpKeyPlan } from './callbacks.ts';
import { applyOutcomes } from './outcomes.ts';
import { applyQueueChange } from './queue-registry.ts';
import { decodeQueueRecord } from './queues.ts';
import { addEncodingArrowStream, addEncodingColumns, addEncodingColumnsWithCallbacks, decodeAddBody, decodeCancelBulk, decodeCancelSpilled, decodeClock, decodeOutcomeFollowed, decodeOutcomes, decodeOutcomesDetailed, decodePromote, forEachCancelled, recordType } from './records.ts';
import { replayReschedule } from './reschedule.ts';
import { replayScheduleRecord } from './schedules/schedules.ts';
import { promote } from './spill/promotion.ts';
import { insertRunRow } from './spill/restore.ts';
import type { SpilledKeyHolder } from './spill/spilled-timers.ts';
import type { EngineState, ReplaySizing } from './state.ts';
import { timerState } from './store/resident-store.ts';

/** reserveForReplay trusts the rows a log byte brought so far once this share of the log (1 / it) is read… */
const replaySizingSampleShare = 32;

/** …and sizes for that many rows over the whole log, times this. */
const replaySizingMargin = 1.05;

/**
 * Once this share (1 / it) of the log is read, and two ADD records (so that the records logged
 * between adds, cancels and outcomes, count in the rate), the store's columns for the rows the
 * whole log will bring at that rate are made ahead, off the main thread, while the replay goes
 * on: the growth at the sample (replaySizingSampleShare) then takes them instead of faulting
 * fresh columns itself.
 */
const replayGuessShare = 256;
const replayGuessAddsMin = 2;

/**
 * Columns made ahead for the guess are waited for and taken at the sample when they hold at
 * most this many times what the sample expects; larger, they are let go (a guess off by more
 * than this would hold their memory for nothing).
 */
const replayGuessSlack = 1.25;

/**
 * What the log's opener replays into (LogReplay): every record after the checkpoint, applied;
 * the ones it covers are in its runs already. The store is sized from the log's hint meanwhile.
 */
export function beginReplay(s: EngineState): LogReplay {
  const coveredSeq = s.checkpointSeq;
  // What the checkpoint's resident run put in is there already; the log's records come on top.
  const sizing: ReplaySizing = { logBytes: 0, bytesSeen: 0, rowsSeen: 0, keyedSeen: 0, addsSeen: 0, guessed: false, slotsBefore: s.store.count, keysBefore: s.keys.size };
  s.replaySizing = sizing;
  return {
    expectBytes: (bytes) => {
      sizing.logBytes = bytes;
    },
    record: (seq, type, body, bytes) => {
      sizing.bytesSeen += bytes;
      return seq <= coveredSeq ? undefined : replayRecord(s, seq, type, body);
    },
  };
}

/** After the last record: the store back to this life's limits, and what expired while the engine was down released. */
export function endReplay(s: EngineState): void {
  s.replaySizing = undefined;
  s.store.endReplay();
  // Slabs and columns made ahead for a log that turned out to hold less (cancels, outcomes) go.
  s.store.dropPrefaulted();
  // Finished timers whose retention ended while the engine was down (or that the live engine
  // had swept before it stopped) go now, as the sweep would have released them.
  s.releaseExpired(s.clock.now(), Infinity);
}

/**
 * Before a replayed ADD goes in: once a little of the log has been read, the store and the
 * key index, when they must grow, grow to what the whole log will bring (rows and keys per
 * log byte so far, times the log's bytes, and a margin) instead of doubling. Recovery spent
 * about a third of its time copying columns into fresh memory, doubling by doubling. When the
 * columns for that growth are being made ahead (guessColumnsAhead), it waits for them: a
 * promise then, and the batch goes in once it settles.
 */
function reserveForReplay(s: EngineState, batch: TimerBatch, plan: KeyPlan | undefined): void | Promise<void> {
  const sizing = s.replaySizing;
  if (sizing === undefined) return;
  // The rest of the log is about what the arena will take (a payload is most of an ADD's
  // bytes): its next slabs are made ahead while this and the next batches go in.
  s.store.arena.prefaultFor(sizing.logBytes - sizing.bytesSeen);
  const rows = batch.rows - (plan?.duplicates ?? 0);
  // The keys this batch adds to the index: its keyed rows that are not duplicates, which is
  // what the plan introduced (a sizing estimate; no per-row pass for it).
  const keyed = plan?.introduced.length ?? 0;
  sizing.rowsSeen += rows;
  sizing.keyedSeen += keyed;
  sizing.addsSeen++;
  // Too little read yet for a rate: let them double (they are small so far).
  if (sizing.bytesSeen * replaySizingSampleShare < sizing.logBytes) return;
  const scale = (sizing.logBytes / sizing.bytesSeen) * replaySizingMargin;
  const expectedSlots = sizing.slotsBefore + sizing.rowsSeen * scale;
  const grow = (): void => {
    s.store.reserveTowards(rows, expectedSlots);
    if (keyed > 0) s.keys.reserveTowards(keyed, sizing.keysBefore + sizing.keyedSeen * scale);
  };
  const ahead = s.store.columnsAheadCapacity;
  if (ahead === 0) return grow();
  if (ahead < expectedSlots || ahead > expectedSlots * replayGuessSlack) {
    s.store.dropColumnsAhead();
    return grow();
  }
  const made = s.store.columnsAheadPending(rows);
  return made === undefined ? grow() : made.then(grow);
}

/**
 * After a replayed ADD went in: the first time a 256th of the log and two ADD records have been
 * read, the store's columns for the rows the whole log will bring at the rate so far are made
 * ahead (see replayGuessShare). After the insert, not before: the timer heap takes its index
 * columns from the store at its first push, and columns made with room for them need not
 * make them at the growth.
 */
function guessColumnsAhead(s: EngineState): void {
  const sizing = s.replaySizing;
  if (sizing === undefined || sizing.guessed || sizing.addsSeen < replayGuessAddsMin || sizing.bytesSeen * replayGuessShare < sizing.logBytes) return;
  sizing.guessed = true;
  s.store.prefaultColumnsForReplay(Math.ceil(sizing.slotsBefore + sizing.rowsSeen * (sizing.logBytes / sizing.bytesSeen) * replaySizingMargin));
}

/** Applies one logged record at open; a promise only when it must read spill files first. */
function replayRecord(s: EngineState, seq: number, type: number, body: Uint8Array): void | Promise<void> {
  if (type === recordType.add) {
    const add = decodeAddBody(body);
    if (add === undefined) throw badRecord(seq, 'ADD record with an unknown header');
    let batch: TimerBatch;
    try {
      batch = add.header.encoding === addEncodingArrowStream ? batchFromArrow(add.batch, add.header.acceptedAtMs, Number.MAX_SAFE_INTEGER) : decodeBatch(add.batch, add.header.encoding === addEncodingColumnsWithCallbacks);
    } catch (err) {
      throw badRecord(seq, `ADD record's batch does not decode: ${err instanceof Error ? err.message : String(err)}`);
    }
    if (batch.rows !== add.header.rows) throw badRecord(seq, `ADD record says ${add.header.rows} rows, its batch has ${batch.rows}`);
    s.addTimes.add(seq, add.header.acceptedAtMs);
    // What the live engine could have released by the time it decided, replay releases now.
    s.releaseExpired(add.header.decidedAtMs, Infinity);
    const spilledAnswers = new Map<number, SpilledKeyHolder | null>();
    // Replay inserts the batch before it plans the next: the plan's arrays can be scratch.
    const plan = planKeys(s, batch, add.header.decidedAtMs, spilledAnswers, true);
    if (plan !== undefined && plan.waitFor.length > 0) return replayAddAfterReads(s, batch, seq, add.header.decidedAtMs, plan, spilledAnswers);
    const reserved = reserveForReplay(s, batch, plan);
    if (reserved !== undefined) return reserved.then(() => insertReplayed(s, batch, seq, plan));
    insertReplayed(s, batch, seq, plan);
    return;
  }
  if (type === recordType.cancel) {
    const ok = forEachCancelled(body, (addSeq, row, expiresAtMs) => {
      const slot = s.index.get(addSeq, row);
      if (slot < 0) return;
      s.heap.remove(slot);
      s.finishCancelled(slot, expiresAtMs);
    });
    if (!ok) throw badRecord(seq, 'CANCEL record of a length that is not a whole number of entries');
    return;
  }
  if (type === recordType.outcome) {
    const outcomes = decodeOutcomes(body);
    if (outcomes === undefined) throw badRecord(seq, 'malformed OUTCOME record');
    applyOutcomes(s, outcomes);
    return;
  }
  if (type === recordType.outcomeDetailed) {
    const outcomes = decodeOutcomesDetailed(body);
    if (outcomes === undefined) throw badRecord(seq, 'malformed OUTCOME_DETAILED record');
    applyOutcomes(s, outcomes);
    return;
  }
  if (type === recordType.outcomeFollowed) return replayOutcomeFollowed(s, seq, body);
  if (type === recordType.cancelSpilled) {
    const cancel = decodeCancelSpilled(body);
    if (cancel === undefined) throw badRecord(seq, 'malformed CANCEL_SPILLED record');
    return replayCancelSpilled(s, cancel.expiresAtMs, cancel.seqs, cancel.rows, cancel.fireAtMs);
  }
  if (type === recordType.cancelBulk) {
    const cancel = decodeCancelBulk(body);
    if (cancel === undefined) throw badRecord(seq, 'malformed CANCEL_BULK record');
    for (let i = 0; i < cancel.seqs.length; i++) {
      const slot = s.index.get(cancel.seqs[i] as number, cancel.rows[i] as number);
      if (slot < 0) continue;
      s.heap.remove(slot);
      s.finishCancelled(slot, cancel.expiresAtMs);
    }
    return cancel.spilledSeqs.length === 0 ? undefined : replayCancelSpilled(s, cancel.expiresAtMs, cancel.spilledSeqs, cancel.spilledRows, cancel.spilledFireAtMs);
  }
  if (type === recordType.promote) {
    const watermarkMs = decodePromote(body);
    if (watermarkMs === undefined) throw badRecord(seq, 'malformed PROMOTE record');
    return promote(s, watermarkMs, false).then(() => undefined);
  }
  if (type === recordType.queue) {
    const queue = decodeQueueRecord(body);
    if (queue === undefined) throw badRecord(seq, 'malformed QUEUE record');
    applyQueueChange(s, queue);
    return;
  }
  if (type === recordType.schedule || type === recordType.scheduleMark) {
    const problem = replayScheduleRecord(s, type, body, seq);
    if (problem !== undefined) throw badRecord(seq, problem);
    return;
  }
  if (type === recordType.clock) {
    const positionMs = decodeClock(body);
    if (positionMs === undefined) throw badRecord(seq, 'malformed CLOCK record');
    const problem = replayedClockProblem(s, positionMs);
    if (problem !== undefined) throw badRecord(seq, problem);
    s.clockPositionMs = positionMs;
    return;
  }
  if (type === recordType.reschedule) {
    const replayed = replayReschedule(s, body);
    if (replayed === false) throw badRecord(seq, 'malformed RESCHEDULE record');
    if (replayed === true) return;
    return replayed.then(() => undefined);
  }
  throw badRecord(seq, `unknown record type ${type}`);
}

function insertReplayed(s: EngineState, batch: TimerBatch, seq: number, plan: KeyPlan | undefined): void {
  insertBatch(s, batch, seq, plan);
  guessColumnsAhead(s);
}

/** An ADD whose keys may be held by spilled timers: their buckets are read, then it is planned again. */
async function replayAddAfterReads(s: EngineState, batch: TimerBatch, seq: number, decidedAtMs: number, plan: KeyPlan, spilledAnswers: Map<number, SpilledKeyHolder | null>): Promise<void> {
  let current: KeyPlan | undefined = plan;
  while (current !== undefined && current.waitFor.length > 0) {
    await Promise.all(current.waitFor);
    current = planKeys(s, batch, decidedAtMs, spilledAnswers);
  }
  insertBatch(s, batch, seq, current);
}

async function replayCancelSpilled(s: EngineState, expiresAtMs: number, seqs: Float64Array, rows: Uint32Array, fireAtMs: Float64Array): Promise<void> {
  for (let i = 0; i < seqs.length; i++) {
    const seq = seqs[i] as number;
    const row = rows[i] as number;
    // A promotion logged before this cancel brought the timer into memory: cancel it there.
    const slot = s.index.get(seq, row);
    if (slot >= 0) {
      const state = s.store.state[slot];
      if (state === timerState.pending || state === timerState.retrying) {
        s.heap.remove(slot);
        s.finishCancelled(slot, expiresAtMs);
      }
      continue;
    }
    const found = await s.spill.find(seq, row, fireAtMs[i] as number);
    if (found === undefined) continue;
    s.spill.tombstone(seq, row, fireAtMs[i] as number);
    insertRunRow(s, found.rows, found.index, timerState.cancelled, expiresAtMs);
  }
}

/** Outcomes and the follow-up timers they made (engine/callbacks.ts): applied as live applied them, the follow-ups as an ADD of this record's sequence. */
function replayOutcomeFollowed(s: EngineState, seq: number, body: Uint8Array): void {
  const followed = decodeOutcomeFollowed(body);
  const add = followed === undefined ? undefined : decodeAddBody(followed.add);
  if (followed === undefined || add === undefined || add.header.encoding !== addEncodingColumns) throw badRecord(seq, 'malformed OUTCOME_FOLLOWED record');
  let batch: TimerBatch;
  try {
    batch = decodeBatch(add.batch);
  } catch (err) {
    throw badRecord(seq, `OUTCOME_FOLLOWED record's follow-ups do not decode: ${err instanceof Error ? err.message : String(err)}`);
  }
  if (batch.rows !== add.header.rows || batch.rows === 0) throw badRecord(seq, `OUTCOME_FOLLOWED record says ${add.header.rows} follow-ups, its batch has ${batch.rows}`);
  // Live released what had expired by the decision time before it decided the follow-ups' keys.
  s.releaseExpired(add.header.decidedAtMs, Infinity);
  applyOutcomes(s, followed.outcomes);
  insertBatch(s, batch, seq, followUpKeyPlan(batch));
  s.addTimes.add(seq, add.header.acceptedAtMs);
}

function badRecord(seq: number, reason: string): FermataError {
  return new FermataError(errorCodes.walCorrupt, `WAL record ${seq}: ${reason}; refusing to start`, { seq, reason });
}
