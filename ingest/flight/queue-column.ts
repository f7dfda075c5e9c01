// The queue a DoPut descriptor names (["timers", QUEUE]) applied to a batch. A batch without a
// queue column gets one (Utf8, QUEUE on every row) and is re-encoded; a batch with one must name
// QUEUE on every row (a null would mean "default", which the descriptor contradicts) and goes
// through unchanged. Either way the engine's Arrow reader then checks the whole batch.
// Main thread, once per record batch of such a stream.
import { makeData, makeVector, Table, tableFromIPC, tableToIPC, Utf8, type Vector } from 'apache-arrow';
import { errorCodes, FermataError } from '../../engine/errors.ts';

export const queueColumn = 'queue';

function readTable(ipc: Uint8Array): Table {
  try {
    return tableFromIPC(ipc);
  } catch (err) {
    throw new FermataError(errorCodes.batchInvalid, `not a readable Arrow IPC record batch: ${err instanceof Error ? err.message : String(err)}`, { column: '' }, err);
  }
}

/** Whether a schema (as a schema-only IPC stream) has a queue column. */
export function schemaHasQueue(schemaStream: Uint8Array): boolean {
  return readTable(schemaStream).schema.fields.some((field) => field.name === queueColumn);
}

/** `ipc` with every row in `queue`: a column added when `hasQueue` is false, else checked. */
export function applyQueue(ipc: Uint8Array, queue: string, hasQueue: boolean): Uint8Array {
  const table = readTable(ipc);
  const rows = table.numRows;
  if (hasQueue) {
    const column = table.getChild(queueColumn);
    for (let row = 0; row < rows; row++) {
      const value: unknown = column?.get(row);
      if (value !== queue) {
        throw new FermataError(errorCodes.batchInvalid, `queue is ${JSON.stringify(value ?? null)} in row ${row}, but the descriptor names queue ${JSON.stringify(queue)}`, { column: queueColumn, row });
      }
    }
    return ipc;
  }
  const name = Buffer.from(queue, 'utf8');
  const offsets = new Int32Array(rows + 1);
  for (let row = 1; row <= rows; row++) offsets[row] = row * name.length;
  const values = Buffer.alloc(rows * name.length, name);
  const columns: Record<string, Vector> = {};
  for (const field of table.schema.fields) columns[field.name] = table.getChild(field.name) as Vector;
  columns[queueColumn] = makeVector(makeData({ type: new Utf8(), length: rows, valueOffsets: offsets, data: values }));
  return tableToIPC(new Table(columns), 'stream');
}
