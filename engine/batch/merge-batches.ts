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
  const offsets = new Int32Array(rows + 1);
  // A column empty in every part (headers, keys of most batches): all offsets are 0.
  if (total === 0) return { values: new Uint8Array(0), offsets };
  const values = new Uint8Array(total);
  let row = 0;
  let at = 0;
  for (const part of parts) {
    const source = column(part);
    const first = source.offsets[0] as number;
    const end = source.offsets[part.rows] as number;
    // The coalescer's parts are one row each, their values usually exactly that row: copied
    // without a subarray view (most of this function's cost when there are hundreds of parts).
    if (first === 0 && end === source.values.length) values.set(source.values, at);
    else if (end > first) values.set(source.values.subarray(first, end), at);
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
  // The last entry looked up, and where it went: consecutive parts mostly name the same one.
  let lastEntry: string | undefined;
  let lastPosition = -1;
  const positionOf = (entry: string): number => {
    if (entry === lastEntry) return lastPosition;
    let position = positions.get(entry);
    if (position === undefined) {
      position = entries.push(entry) - 1;
      positions.set(entry, position);
    }
    lastEntry = entry;
    lastPosition = position;
    return position;
  };
  let row = 0;
  for (const part of parts) {
    const partEntries = entriesOf(part);
    const partIndex = indexOf(part);
    if (partEntries.length === 1) {
      // One entry: every in-range index is 0; anything else stays out of range (-1).
      const position = positionOf(partEntries[0] as string);
      for (let r = 0; r < part.rows; r++) index[row + r] = partIndex[r] === 0 ? position : -1;
    } else {
      const remap = new Int32Array(partEntries.length);
      for (let e = 0; e < partEntries.length; e++) remap[e] = positionOf(partEntries[e] as string);
      // An index out of its part's range stays out of range (-1), so validation still refuses it.
      for (let r = 0; r < part.rows; r++) index[row + r] = remap[partIndex[r] as number] ?? -1;
    }
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
