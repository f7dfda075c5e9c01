// What an admit answers about its duplicate rows, on the main thread, once its record is
// durable: the state of the timer each one's key named, and the fields in which the row
// differs from that timer as it is now, so a client can tell a retry (no field differs) from a
// key collision without a retry ever failing. Runs only for a batch with duplicates: the path
// of new timers does none of it.
//
//   duplicate row ─► original resident? ─► compare with its slot (state: the store's)
//                 └► spilled ─► compare with its row in the run file (state: pending)
import { bytesAt, type TimerBatch } from './batch/timer-batch.ts';
import type { KeyPlan } from './key-plan.ts';
import { bytesOf, type RunRows } from './spill/run-rows.ts';
import type { EngineState } from './state.ts';
import { callbackBytesOf, failureCallbackBytesOf } from './store/callback-bytes.ts';
import { sameBytes } from './store/key-index.ts';
import { timerState, type TimerStateCode } from './store/resident-store.ts';
import type { DifferingField } from './types.ts';

/** The fields compared, one bit each in a row's mask, in the order answers list them. */
export const differingFields: readonly DifferingField[] = ['target', 'payload', 'headers', 'queue', 'fire_at', 'callback', 'failure_callback'];
const differsBit = { target: 1, payload: 2, headers: 4, queue: 8, fire_at: 16, callback: 32, failure_callback: 64 } as const satisfies Record<DifferingField, number>;

/** Per row of a batch with duplicates: the original's state code and the differing fields' bits (both 0 for a new row). */
export interface DuplicateColumns {
  readonly states: Uint8Array;
  readonly differs: Uint8Array;
}

/** The names of the fields a mask holds, in differingFields' order. */
export function differingNames(mask: number): DifferingField[] {
  const names: DifferingField[] = [];
  for (const field of differingFields) if ((mask & differsBit[field]) !== 0) names.push(field);
  return names;
}

/**
 * Compares each duplicate row of a durable batch (inserted already: an original of the same
 * batch is resident) with the timer its key named. A spilled original is read from its run
 * (a promise then); one promoted meanwhile is found in memory.
 */
export function compareDuplicates(s: EngineState, batch: TimerBatch, seq: number, plan: KeyPlan): DuplicateColumns | Promise<DuplicateColumns> {
  const columns = { states: new Uint8Array(batch.rows), differs: new Uint8Array(batch.rows) };
  const reads: Array<Promise<void>> = [];
  for (let row = 0; row < batch.rows; row++) {
    const originalSeq = plan.originalSeq[row] as number;
    if (Number.isNaN(originalSeq)) continue;
    const holderSeq = originalSeq === 0 ? seq : originalSeq;
    const holderRow = plan.originalRow[row] as number;
    if (compareResident(s, batch, row, holderSeq, holderRow, columns)) continue;
    reads.push(compareSpilled(s, batch, row, holderSeq, holderRow, plan.originalFireAt[row] as number, columns));
  }
  if (reads.length === 0) return columns;
  return Promise.all(reads).then(() => columns);
}

/** False when the original is not in memory. */
function compareResident(s: EngineState, batch: TimerBatch, row: number, holderSeq: number, holderRow: number, into: DuplicateColumns): boolean {
  const slot = s.index.get(holderSeq, holderRow);
  if (slot < 0) return false;
  const store = s.store;
  let mask = 0;
  if (store.targetOf(slot) !== batch.targets[batch.targetIndex[row] as number]) mask |= differsBit.target;
  if (!sameBytes(store.payloadOf(slot), bytesAt(batch.payload, row))) mask |= differsBit.payload;
  if (!sameHeaders(store.headersOf(slot), bytesAt(batch.headers, row))) mask |= differsBit.headers;
  if (s.queueNames[store.queueIndex[slot] as number] !== batch.queues[batch.queueIndex[row] as number]) mask |= differsBit.queue;
  // A PATCH may have moved it: compared with the time it fires at now.
  if ((s.rescheduled.get(holderSeq, holderRow)?.fireAtMs ?? store.fireAt[slot]) !== batch.fireAtMs[row]) mask |= differsBit.fire_at;
  mask |= callbacksDiffer(store.callbacksOf(slot), batch, row);
  into.states[row] = store.state[slot] as TimerStateCode;
  into.differs[row] = mask;
  return true;
}

async function compareSpilled(s: EngineState, batch: TimerBatch, row: number, holderSeq: number, holderRow: number, fireAtMs: number, into: DuplicateColumns): Promise<void> {
  // A PATCHed original lies in the bucket of the fire time it was given, not of its id's.
  const found = await s.spill.find(holderSeq, holderRow, s.rescheduled.placeOf(holderSeq, holderRow, fireAtMs));
  if (found === undefined) {
    // Promoted (or cancelled) while its bucket was read: it is in memory now.
    if (!compareResident(s, batch, row, holderSeq, holderRow, into)) into.states[row] = timerState.pending;
    return;
  }
  const { rows, index } = found;
  into.states[row] = timerState.pending;
  into.differs[row] = spilledDiffers(rows, index, batch, row);
}

function spilledDiffers(rows: RunRows, index: number, batch: TimerBatch, row: number): number {
  let mask = 0;
  if (rows.targets[rows.targetIndex[index] as number] !== batch.targets[batch.targetIndex[row] as number]) mask |= differsBit.target;
  if (!sameBytes(bytesOf(rows.payload, index), bytesAt(batch.payload, row))) mask |= differsBit.payload;
  if (!sameHeaders(bytesOf(rows.headers, index), bytesAt(batch.headers, row))) mask |= differsBit.headers;
  if (rows.queues[rows.queueIndex[index] as number] !== batch.queues[batch.queueIndex[row] as number]) mask |= differsBit.queue;
  // Its due time: the fire time it was added with, or the one a PATCH gave it (a spilled timer was never attempted).
  if (rows.dueAtMs[index] !== batch.fireAtMs[row]) mask |= differsBit.fire_at;
  return mask | callbacksDiffer(rows.callbacks === undefined ? noBytes : bytesOf(rows.callbacks, index), batch, row);
}

/** The callback bits of a row whose URLs are not the original's (`run`: its callbacks run, callback-bytes.ts). */
function callbacksDiffer(run: Uint8Array, batch: TimerBatch, row: number): number {
  const asked = (column: TimerBatch['callback']): Uint8Array => (column === undefined ? noBytes : bytesAt(column, row));
  let mask = 0;
  if (!sameBytes(callbackBytesOf(run), asked(batch.callback))) mask |= differsBit.callback;
  if (!sameBytes(failureCallbackBytesOf(run), asked(batch.failureCallback))) mask |= differsBit.failure_callback;
  return mask;
}

const utf8 = new TextDecoder();
const noBytes = new Uint8Array(0);

/**
 * Headers are a JSON object's text (empty: none). The same bytes are the same headers; so are
 * the same names (any case) with the same values in another order or spacing, which a client
 * library may well produce on a retry.
 */
function sameHeaders(stored: Uint8Array, asked: Uint8Array): boolean {
  if (sameBytes(stored, asked)) return true;
  const a = headerEntries(stored);
  const b = headerEntries(asked);
  if (a === undefined || b === undefined || a.length !== b.length) return false;
  return a.every(([name, value], i) => name === b[i]?.[0] && value === b[i]?.[1]);
}

/** [lower-case name, value] pairs sorted by name; undefined when the text is not a JSON object. */
function headerEntries(bytes: Uint8Array): Array<[string, unknown]> | undefined {
  if (bytes.length === 0) return [];
  let value: unknown;
  try {
    value = JSON.parse(utf8.decode(bytes));
  } catch {
    return undefined;
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  return Object.entries(value)
    .map(([name, v]): [string, unknown] => [name.toLowerCase(), v])
    .sort(([x], [y]) => (x < y ? -1 : x > y ? 1 : 0));
}
