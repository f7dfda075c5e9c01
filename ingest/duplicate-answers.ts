// How ingest answers a duplicate row (a row whose idempotency key was already known): the
// original's state and the fields in which the row differs from it (engine.DuplicateAnswer),
// less `fire_at` for a row that gave `delay_ms`: a retry a moment later asks for another
// instant by construction, and is still the same request. Shared by the one-timer route, the
// stream's lines, the batch answers (JSON and Arrow) and Flight's PutResults. Main thread.
import { RecordBatchReader } from 'apache-arrow';
import type { Admitted, DifferingField, DuplicateAnswer, TimerStateName } from '../engine/engine.ts';

/** Which rows gave `delay_ms` rather than `fire_at`: one flag a row (1: delay_ms), or one answer for all. */
export type DelayRows = boolean | Uint8Array;

/** One duplicate row in a batch's JSON answer. */
export interface DuplicateRowJson {
  readonly row: number;
  readonly state: TimerStateName;
  readonly differs: readonly DifferingField[];
}

/** Whether a parsed JSON timer object gave delay_ms (null counts as not given, as the parser reads it). */
export function gaveDelayMs(value: unknown): boolean {
  if (typeof value !== 'object' || value === null) return false;
  const delay = (value as Record<string, unknown>).delay_ms;
  return delay !== undefined && delay !== null;
}

export function gaveDelay(delayRows: DelayRows, row: number): boolean {
  return typeof delayRows === 'boolean' ? delayRows : delayRows[row] === 1;
}

/** The fields a duplicate differs in, as its request asked: `fire_at` only when it gave fire_at. */
export function differsAsAsked(original: DuplicateAnswer, delay: boolean): readonly DifferingField[] {
  return delay ? original.differs.filter((field) => field !== 'fire_at') : original.differs;
}

/** The duplicate rows of a batch in input order (none: an empty list; nothing is built for a batch without duplicates). */
export function duplicateRowsJson(admitted: Admitted, delayRows: DelayRows): DuplicateRowJson[] {
  const out: DuplicateRowJson[] = [];
  if (admitted.duplicates === 0) return out;
  for (let row = 0; row < admitted.rows; row++) {
    const original = admitted.duplicateOf(row);
    if (original !== undefined) out.push({ row, state: original.state, differs: differsAsAsked(original, gaveDelay(delayRows, row)) });
  }
  return out;
}

/** Whether an Arrow IPC stream gives delay_ms (a stream gives delay_ms or fire_at, for every row): its schema message only is read. */
export function arrowGaveDelay(ipc: Uint8Array): boolean {
  const reader = RecordBatchReader.from(ipc).open();
  return reader.schema.fields.some((field) => field.name === 'delay_ms');
}
