// Idempotency keys, on the main thread: how the keyed rows of a batch resolve before it is
// logged. A row whose key a live timer holds (in memory or spilled), or an earlier row of the
// same batch, is a duplicate; a key an admit still in flight holds, or whose holder has a cancel
// or an outcome being logged, makes this admit wait and plan again, so that the log's order
// decides which row is the original, live and on replay alike.
//
//   rows ─► hashes ─► in this batch? ─► in flight? ─► key index (memory) ─► spilled runs ─► new key
import { bytesAt, type TimerBatch } from './batch/timer-batch.ts';
import type { SpilledKeyHolder } from './spill/spilled-timers.ts';
import { type EngineState, isFinished } from './state.ts';
import { keyHashIn, sameBytes } from './store/key-index.ts';

/**
 * How the keyed rows of a batch resolve (undefined for a batch without keys). For a duplicate
 * row, originalSeq/originalRow/originalFireAt name the timer it repeats (originalSeq NaN: not a
 * duplicate; 0: a row of this same batch, whose sequence is not known until it is logged).
 */
export interface KeyPlan {
  readonly originalSeq: Float64Array;
  readonly originalRow: Int32Array;
  readonly originalFireAt: Float64Array;
  readonly duplicates: number;
  /** Each keyed row's key hash (computed once, for the in-flight table and the key index). */
  readonly hashes: Uint32Array;
  /** Hashes of the keys this batch adds (the in-flight table's keys). */
  readonly introduced: number[];
  /** Admits still in flight that hold a key of this batch: wait for them, then plan again. */
  readonly waitFor: Array<Promise<void>>;
}

/**
 * Plans the keyed rows of a batch against the keys known at `decidedAtMs` (undefined: the
 * batch has no keys). A key held by a finished timer whose retention ended by then is free
 * again (that timer is released here if the sweep has not got to it). A key whose holder has a
 * cancel or an outcome being synced waits for it, as a key in flight does: the log must show
 * the holder's change before or after this ADD exactly as it was when the key was decided.
 * `spilledAnswers` keeps, by row, what the spill tier answered in earlier rounds of one plan.
 */
export function planKeys(s: EngineState, batch: TimerBatch, decidedAtMs: number, spilledAnswers: Map<number, SpilledKeyHolder | null>, planInScratch = false): KeyPlan | undefined {
  const { values, offsets } = batch.keys;
  if (values.length === 0) return undefined;
  // A plan kept past this call (an admit's, answered after its record syncs) gets arrays of
  // its own; replay, which inserts each batch before it plans the next, reuses scratch arrays.
  const rows = batch.rows;
  const scratch = planInScratch ? s.scratch : undefined;
  const plan = {
    originalSeq: (scratch === undefined ? new Float64Array(rows) : scratch.float64('plan.originalSeq', rows)).fill(NaN),
    originalRow: scratch === undefined ? new Int32Array(rows) : scratch.int32('plan.originalRow', rows).fill(0),
    originalFireAt: scratch === undefined ? new Float64Array(rows) : scratch.float64('plan.originalFireAt', rows).fill(0),
    duplicates: 0,
    hashes: scratch === undefined ? new Uint32Array(rows) : scratch.uint32('plan.hashes', rows).fill(0),
    introduced: [] as number[],
    waitFor: [] as Array<Promise<void>>,
  };
  // The hashes, then the key index asked about all of them in one pass (see markUnindexed):
  // a key it does not hold is not looked up again below. No view over a key unless it is
  // compared: a replay plans a million keys.
  const words = new DataView(values.buffer, values.byteOffset, values.byteLength);
  for (let row = 0; row < batch.rows; row++) {
    const start = offsets[row] as number;
    const end = offsets[row + 1] as number;
    if (start !== end) plan.hashes[row] = keyHashIn(values, start, end, words);
  }
  // Both used only within this call: scratch arrays (see scratch-arrays.ts).
  const unindexed = s.scratch.uint8('plan.unindexed', batch.rows);
  s.keys.markUnindexed(plan.hashes, batch.rows, unindexed);
  // Keys first seen in this batch, by hash: rows in an open-addressing table (no string per key).
  const firstRows = s.scratch.int32('plan.firstRows', 2 ** Math.ceil(Math.log2(2 * batch.rows + 2))).fill(-1);
  const mask = firstRows.length - 1;
  for (let row = 0; row < batch.rows; row++) {
    const start = offsets[row] as number;
    const end = offsets[row + 1] as number;
    if (start === end) continue;
    const hash = plan.hashes[row] as number;
    let cell = hash & mask;
    let earlierRow = -1;
    for (; firstRows[cell] !== -1; cell = (cell + 1) & mask) {
      const other = firstRows[cell] as number;
      if (plan.hashes[other] === hash && sameBytes(bytesAt(batch.keys, other), values.subarray(start, end))) {
        earlierRow = other;
        break;
      }
    }
    if (earlierRow >= 0) {
      markDuplicate(plan, row, 0, earlierRow, batch.fireAtMs[earlierRow] as number);
      continue;
    }
    const inFlight = s.keysInFlight.get(hash);
    if (inFlight !== undefined) {
      plan.waitFor.push(inFlight);
      continue;
    }
    const slot = unindexed[row] === 1 ? -1 : liveKeyHolder(s, values, start, end, hash, decidedAtMs);
    const holderChanging = slot >= 0 ? (s.cancelling.get(slot) ?? s.settling.get(slot)) : undefined;
    if (holderChanging !== undefined) {
      plan.waitFor.push(holderChanging.then(() => undefined, () => undefined));
      continue;
    }
    if (slot >= 0) {
      markDuplicate(plan, row, s.store.logSeq[slot] as number, s.store.row[slot] as number, s.store.fireAt[slot] as number);
      continue;
    }
    // A spilled holder found in an earlier round of this plan is kept, not asked for again (its
    // buckets may have left the cache since). With no spilled run there is none: no view to make.
    const spilled = spilledAnswers.has(row) ? (spilledAnswers.get(row) as SpilledKeyHolder | null) : s.spill.runs.length === 0 ? null : s.spill.keyHolder(values.subarray(start, end), hash);
    if (spilled instanceof Promise) {
      plan.waitFor.push(spilled.then((answer) => void spilledAnswers.set(row, answer)));
      continue;
    }
    if (spilled !== null) {
      const { seq: holderSeq, row: holderRow } = spilled;
      if (!s.spill.isTombstoned(holderSeq, holderRow)) {
        markDuplicate(plan, row, holderSeq, holderRow, spilled.fireAtMs);
        continue;
      }
      // A spilled holder being cancelled or PATCHed is in memory once that record is durable (and the key index finds it): wait for that.
      const name = `${holderSeq}:${holderRow}`;
      const changing = s.cancellingSpilled.get(name) ?? s.rescheduling.get(name);
      if (changing !== undefined) {
        plan.waitFor.push(changing.then(() => undefined, () => undefined));
        continue;
      }
    }
    firstRows[cell] = row;
    plan.introduced.push(hash);
  }
  return plan;
}

function markDuplicate(plan: KeyPlan & { duplicates: number }, row: number, seq: number, originalRow: number, fireAtMs: number): void {
  plan.originalSeq[row] = seq;
  plan.originalRow[row] = originalRow;
  plan.originalFireAt[row] = fireAtMs;
  plan.duplicates++;
}

/** The slot whose key is values[start, end) and whose retention has not ended at `atMs`, or -1. */
function liveKeyHolder(s: EngineState, values: Uint8Array, start: number, end: number, hash: number, atMs: number): number {
  const slot = s.keys.find(values, start, end, hash);
  if (slot < 0 || !isFinished(s.store.state[slot] as number) || (s.store.dueAt[slot] as number) > atMs) return slot;
  s.release(slot);
  return -1;
}
