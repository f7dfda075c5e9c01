// `.arrow` / `.arrows`: an Arrow IPC file (random access, footer) or stream, told apart by the
// magic bytes (apache-arrow's RecordBatchReader reads both from a file handle). A record batch
// is read as whole columns: Timestamp columns become epoch milliseconds once per batch (their
// unit is in the type, and `toArray()` alone would lose it), 64-bit integers stay bigints, the
// rest as apache-arrow gives them.
import { open } from 'node:fs/promises';
import { DataType, RecordBatchReader, type RecordBatch, TimeUnit, type Vector } from 'apache-arrow';
import { ImportError } from './import-error.ts';
import type { Source, SourceBatch, SourceColumn } from './source.ts';

const msPerUnit: Readonly<Record<TimeUnit, number>> = {
  [TimeUnit.SECOND]: 1000,
  [TimeUnit.MILLISECOND]: 1,
  [TimeUnit.MICROSECOND]: 1e-3,
  [TimeUnit.NANOSECOND]: 1e-6,
};

/** A Timestamp column as epoch ms (NaN for null), converted once for the whole column. */
function timestampMs(vector: Vector<DataType>, unit: TimeUnit): Float64Array {
  const out = new Float64Array(vector.length);
  if (vector.nullCount > 0) {
    // get() gives epoch ms whatever the unit; only the rare column with nulls pays for it.
    for (let i = 0; i < vector.length; i++) out[i] = vector.isValid(i) ? Number(vector.get(i)) : Number.NaN;
    return out;
  }
  const scale = msPerUnit[unit];
  let at = 0;
  for (const chunk of vector.data) {
    const values = chunk.values as BigInt64Array; // already cut to the chunk's slice
    for (let i = 0; i < chunk.length; i++) out[at + i] = Number(values[i]) * scale;
    at += chunk.length;
  }
  return out;
}

/** Values with nulls kept: `toArray()` drops the validity bitmap of primitive columns. */
function withNulls(vector: Vector<DataType>): unknown[] {
  const out = new Array<unknown>(vector.length);
  for (let i = 0; i < vector.length; i++) out[i] = vector.get(i);
  return out;
}

function columnValues(vector: Vector<DataType>): SourceColumn {
  const type = vector.type;
  if (DataType.isTimestamp(type)) return timestampMs(vector, type.unit);
  if (vector.nullCount > 0) return withNulls(vector);
  return vector.toArray() as SourceColumn;
}

export async function openArrow(path: string): Promise<Source> {
  const handle = await open(path, 'r');
  const sizeBytes = (await handle.stat()).size;
  let reader: Awaited<ReturnType<typeof RecordBatchReader.from>>;
  try {
    reader = await RecordBatchReader.from(handle);
    await reader.open();
  } catch (err) {
    await handle.close();
    throw new ImportError(`${path}: not an Arrow IPC file or stream (${(err as Error).message})`);
  }
  const columnNames = reader.schema.fields.map((field) => field.name);

  async function* batches(skipRows: number, batchRows: number): AsyncGenerator<SourceBatch> {
    let row = 0;
    let byte = 0;
    for await (const whole of reader as AsyncIterable<RecordBatch>) {
      byte = Math.min(sizeBytes, byte + whole.data.byteLength);
      const start = Math.max(0, skipRows - row);
      for (let at = start; at < whole.numRows; at += batchRows) {
        const part = at === 0 && whole.numRows <= batchRows ? whole : whole.slice(at, Math.min(at + batchRows, whole.numRows));
        const columns = new Map<string, SourceColumn>();
        for (const [index, name] of columnNames.entries()) {
          const child = part.getChildAt(index);
          if (child !== null) columns.set(name, columnValues(child));
        }
        yield { firstRow: row + at, rows: part.numRows, columns, endByte: byte };
      }
      row += whole.numRows;
    }
  }

  return {
    format: 'arrow',
    sizeBytes,
    totalRows: undefined,
    columnNames,
    batches,
    close: () => handle.close(),
  };
}
