// `.parquet`: read with hyparquet a row group at a time (docs/decisions/0023), so the file is
// never in memory whole: the import holds one row group's columns, and the row group after it
// is read only when the pipeline asks. Timestamps come as epoch ms numbers (hyparquet would make
// a Date a row), INT64 as bigints, UTF8 byte arrays as strings, other byte arrays as bytes.
import { asyncBufferFromFile, type ColumnData, type DecodedArray, parquetMetadataAsync, parquetRead, parquetSchema } from 'hyparquet';
import { compressors } from 'hyparquet-compressors';
import { ImportError } from './import-error.ts';
import type { Source, SourceBatch, SourceColumn } from './source.ts';

const parsers = {
  timestampFromMilliseconds: (ms: bigint): number => Number(ms),
  timestampFromMicroseconds: (us: bigint): number => Number(us) / 1e3,
  timestampFromNanoseconds: (ns: bigint): number => Number(ns) / 1e6,
  dateFromDays: (days: number): number => days * 86_400_000,
};

type TypedArray = Exclude<DecodedArray, unknown[]>;

/** One column's rows [from, to) out of the chunks hyparquet gave (which may reach outside the range). */
function assemble(chunks: readonly ColumnData[], from: number, to: number): SourceColumn {
  const sorted = [...chunks].sort((a, b) => a.rowStart - b.rowStart);
  const first = sorted[0]?.columnData;
  const typed = first !== undefined && !Array.isArray(first) && sorted.every((chunk) => chunk.columnData.constructor === first.constructor);
  if (typed) {
    const out = new (first.constructor as new (length: number) => TypedArray)(to - from);
    for (const chunk of sorted) {
      const start = Math.max(from, chunk.rowStart);
      const end = Math.min(to, chunk.rowEnd);
      if (start < end) out.set((chunk.columnData as TypedArray).subarray(start - chunk.rowStart, end - chunk.rowStart) as never, start - from);
    }
    return out;
  }
  const out = new Array<unknown>(to - from).fill(null);
  for (const chunk of sorted) {
    const start = Math.max(from, chunk.rowStart);
    const end = Math.min(to, chunk.rowEnd);
    for (let row = start; row < end; row++) out[row - from] = chunk.columnData[row - chunk.rowStart];
  }
  return out;
}

function slice(column: SourceColumn, from: number, to: number): SourceColumn {
  return Array.isArray(column) ? column.slice(from, to) : (column as TypedArray).subarray(from, to);
}

export async function openParquet(path: string): Promise<Source> {
  const file = await asyncBufferFromFile(path);
  let metadata: Awaited<ReturnType<typeof parquetMetadataAsync>>;
  try {
    metadata = await parquetMetadataAsync(file);
  } catch (err) {
    throw new ImportError(`${path}: not a Parquet file (${(err as Error).message})`);
  }
  const columnNames = parquetSchema(metadata).children.map((child) => child.element.name);

  async function* batches(skipRows: number, batchRows: number): AsyncGenerator<SourceBatch> {
    let groupStart = 0;
    let byte = 4; // the leading magic
    for (const group of metadata.row_groups) {
      const groupRows = Number(group.num_rows);
      const groupEnd = groupStart + groupRows;
      byte = Math.min(file.byteLength, byte + Number(group.total_compressed_size ?? group.total_byte_size));
      const readFrom = Math.max(groupStart, skipRows);
      if (readFrom < groupEnd) {
        const chunks = new Map<string, ColumnData[]>();
        await parquetRead({
          file,
          metadata,
          compressors,
          parsers,
          rowStart: readFrom,
          rowEnd: groupEnd,
          onChunk: (chunk) => {
            const list = chunks.get(chunk.columnName);
            if (list === undefined) chunks.set(chunk.columnName, [chunk]);
            else list.push(chunk);
          },
        });
        const whole = new Map<string, SourceColumn>();
        for (const [name, list] of chunks) whole.set(name, assemble(list, readFrom, groupEnd));
        for (let at = readFrom; at < groupEnd; at += batchRows) {
          const end = Math.min(groupEnd, at + batchRows);
          const columns = new Map<string, SourceColumn>();
          for (const [name, values] of whole) columns.set(name, at === readFrom && end === groupEnd ? values : slice(values, at - readFrom, end - readFrom));
          yield { firstRow: at, rows: end - at, columns, endByte: end === groupEnd ? byte : byte - Math.round(((groupEnd - end) / groupRows) * Number(group.total_compressed_size ?? 0)) };
        }
      }
      groupStart = groupEnd;
    }
  }

  return {
    format: 'parquet',
    sizeBytes: file.byteLength,
    totalRows: Number(metadata.num_rows),
    columnNames,
    batches,
    close: async () => undefined,
  };
}
