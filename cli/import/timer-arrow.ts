// TimerRows → an Arrow IPC stream in the schema POST /v1/timers takes (docs/api.md, "Adding
// timers"), sent by the client's addArrow: fire_at Timestamp(ms) or delay_ms Int64, target as a
// Dictionary<Utf8> (a file's rows mostly share a few targets: each is sent once a batch),
// payload Utf8 (Binary when any row's is bytes), headers (JSON text), key, queue, callback and
// failure_callback Utf8 (null for none). Built a column at a time into whole buffers: strings
// are encoded into one growing byte buffer, with no object and no allocation a row
// (decision 0023 measured the row-object path at twice the CPU).
import { Binary, type Data, type DataType, Dictionary, Field, Int32, Int64, makeData, makeVector, RecordBatch, Schema, Struct, Table, tableToIPC, Timestamp, TimeUnit, Utf8 } from 'apache-arrow';
import type { TimerRows } from './mapping.ts';

const encoder = new TextEncoder();

/** Bytes of strings (or byte arrays) back to back, with their offsets and a validity bitmap when any is null. */
function packed(values: readonly (string | Uint8Array | null)[]): { offsets: Int32Array; bytes: Uint8Array; nullBitmap: Uint8Array | undefined; nullCount: number } {
  const offsets = new Int32Array(values.length + 1);
  let bytes = new Uint8Array(Math.max(64, values.length * 16));
  let end = 0;
  let nullBitmap: Uint8Array | undefined;
  let nullCount = 0;
  for (let i = 0; i < values.length; i++) {
    const value = values[i] ?? null;
    if (value === null) {
      nullBitmap ??= new Uint8Array((values.length + 7) >> 3).fill(0xff);
      nullBitmap[i >> 3] = (nullBitmap[i >> 3] as number) & ~(1 << (i & 7));
      nullCount++;
    } else {
      // A UTF-16 code unit is at most 3 bytes of UTF-8.
      const most = typeof value === 'string' ? value.length * 3 : value.length;
      if (end + most > bytes.length) {
        const grown = new Uint8Array(Math.max(bytes.length * 2, end + most));
        grown.set(bytes.subarray(0, end));
        bytes = grown;
      }
      if (typeof value === 'string') end += encoder.encodeInto(value, bytes.subarray(end)).written;
      else {
        bytes.set(value, end);
        end += value.length;
      }
    }
    offsets[i + 1] = end;
  }
  return { offsets, bytes: bytes.subarray(0, end), nullBitmap, nullCount };
}

function utf8Data(values: readonly (string | null)[]): Data<Utf8> {
  const { offsets, bytes, nullBitmap, nullCount } = packed(values);
  return makeData({ type: new Utf8(), length: values.length, valueOffsets: offsets, data: bytes, nullBitmap, nullCount });
}

function binaryData(values: readonly (string | Uint8Array)[]): Data<Binary> {
  const { offsets, bytes } = packed(values);
  return makeData({ type: new Binary(), length: values.length, valueOffsets: offsets, data: bytes });
}

function dictionaryData(values: readonly string[]): Data<Dictionary<Utf8, Int32>> {
  const indexOf = new Map<string, number>();
  const words: string[] = [];
  const indices = new Int32Array(values.length);
  for (let i = 0; i < values.length; i++) {
    const value = values[i] as string;
    let index = indexOf.get(value);
    if (index === undefined) {
      index = words.push(value) - 1;
      indexOf.set(value, index);
    }
    indices[i] = index;
  }
  return makeData({ type: new Dictionary(new Utf8(), new Int32()), length: values.length, data: indices, dictionary: makeVector(utf8Data(words)) });
}

function int64Data(values: Float64Array, type: Timestamp | Int64): Data<DataType> {
  const data = new BigInt64Array(values.length);
  for (let i = 0; i < values.length; i++) data[i] = BigInt(values[i] as number);
  return makeData({ type, length: values.length, data } as never);
}

/** The rows as one Arrow IPC stream (one record batch). */
export function timerArrowStream(rows: TimerRows): Uint8Array {
  const columns: [string, Data<DataType>][] = [];
  if (rows.fireAtMs !== undefined) columns.push(['fire_at', int64Data(rows.fireAtMs, new Timestamp(TimeUnit.MILLISECOND, 'UTC'))]);
  if (rows.delayMs !== undefined) columns.push(['delay_ms', int64Data(rows.delayMs, new Int64())]);
  columns.push(['target', dictionaryData(rows.target)]);
  if (rows.payload !== undefined) {
    const bytes = rows.payload.some((value) => typeof value !== 'string');
    columns.push(['payload', bytes ? binaryData(rows.payload) : utf8Data(rows.payload as readonly string[])]);
  }
  if (rows.headers !== undefined) columns.push(['headers', utf8Data(rows.headers.map((headers) => (headers === null ? null : JSON.stringify(headers))))]);
  columns.push(['key', utf8Data(rows.key)]);
  if (rows.queue !== undefined) columns.push(['queue', utf8Data(rows.queue)]);
  if (rows.callback !== undefined) columns.push(['callback', utf8Data(rows.callback)]);
  if (rows.failureCallback !== undefined) columns.push(['failure_callback', utf8Data(rows.failureCallback)]);
  const schema = new Schema(columns.map(([name, data]) => new Field(name, data.type, data.nullCount > 0)));
  const struct = makeData({ type: new Struct(schema.fields), length: rows.rows, children: columns.map(([, data]) => data) });
  return tableToIPC(new Table([new RecordBatch(schema, struct)]), 'stream');
}
