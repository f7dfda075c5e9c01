// Concatenates TimerBatches column by column into one: row r of part p is row
// (rows of parts before p) + r of the result. Byte columns are copied once into one values
// buffer with shifted offsets; target and queue dictionaries are merged so each distinct
// string appears once. Pure and synchronous; the admit coalescer calls it on the main thread.
import type { BytesColumn, TimerBatch } from './timer-batch.ts';

type BytesOf = (batch: TimerBatch) => BytesColumn;

function mergeBytes(parts: readonly TimerBatch[], rows: number, column: BytesOf): BytesColumn {
  let total = 0;
  for (const part of parts) {
    const { offsets } = column(part);
    total += (offsets[part.rows] as number) - (offsets[0] as number);
  }
  const values = new Uint8Array(total);
  const offsets = new Int32Array(rows + 1);
  let row = 0;
  let at = 0;
  for (const part of parts) {
    const source = column(part);
    const first = source.offsets[0] as number;
    values.set(source.values.subarray(first, source.offsets[part.rows] as number), at);
    for (let r = 1; r <= part.rows; r++) offsets[row + r] = at + (source.offsets[r] as number) - first;
    row += part.rows;
    at = offsets[row] as number;
  }
  return { values, offsets };
}

/** Merges each part's dictionary into one; the index column is rewritten to point into it. */
function mergeDictionary(parts: readonly TimerBatch[], rows: number, entriesOf: (batch: TimerBatch) => readonly string[], indexOf: (batch: TimerBatch) => Int32Array): { entries: string[]; index: Int32Array } {
  const entries: string[] = [];
  const positions = new Map<string, number>();
  const index = new Int32Array(rows);
  let row = 0;
  for (const part of parts) {
    const partEntries = entriesOf(part);
    const remap = new Int32Array(partEntries.length);
    for (let e = 0; e < partEntries.length; e++) {
      const entry = partEntries[e] as string;
      let position = positions.get(entry);
      if (position === undefined) {
        position = entries.push(entry) - 1;
        positions.set(entry, position);
      }
      remap[e] = position;
    }
    const partIndex = indexOf(part);
    // An index out of its part's range stays out of range (-1), so validation still refuses it.
    for (let r = 0; r < part.rows; r++) index[row + r] = remap[partIndex[r] as number] ?? -1;
    row += part.rows;
  }
  return { entries, index };
}

export function mergeBatches(parts: readonly TimerBatch[]): TimerBatch {
  let rows = 0;
  for (const part of parts) rows += part.rows;
  const fireAtMs = new Float64Array(rows);
  let row = 0;
  for (const part of parts) {
    fireAtMs.set(part.fireAtMs.subarray(0, part.rows), row);
    row += part.rows;
  }
  const targets = mergeDictionary(parts, rows, (batch) => batch.targets, (batch) => batch.targetIndex);
  const queues = mergeDictionary(parts, rows, (batch) => batch.queues, (batch) => batch.queueIndex);
  return {
    rows,
    fireAtMs,
    targets: targets.entries,
    targetIndex: targets.index,
    queues: queues.entries,
    queueIndex: queues.index,
    payload: mergeBytes(parts, rows, (batch) => batch.payload),
    headers: mergeBytes(parts, rows, (batch) => batch.headers),
    keys: mergeBytes(parts, rows, (batch) => batch.keys),
  };
}
