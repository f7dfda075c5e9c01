// Rows → Arrow IPC streams for `POST /v1/timers`, cut so each one fits the server's limits
// (`GET /v1/limits`: rows a batch, body bytes, bytes as logged). A cut also falls where rows
// change from `fire_at` to `delay_ms` (a batch has one of the two columns) or where a payload
// given as base64 needs a Binary column. Each piece remembers the first row it holds, so the
// answers' ids are put back in the caller's order and an error's `row` is the caller's row.
//
// Columns (docs/api.md, "Adding timers"): fire_at Timestamp(ms, UTC) or delay_ms Int64, target
// Utf8, payload Utf8 (Binary when a row gives payload_base64), headers Utf8 JSON, key, queue,
// callback, failure_callback Utf8; a column no row uses is left out, an absent value is null.
import { Binary, type Data, type DataType, Field, Int64, makeData, RecordBatch, Schema, Struct, Table, tableToIPC, TimestampMillisecond, Utf8 } from 'apache-arrow';
import { FermataError } from './errors.ts';
import type { Limits, TimeInput, TimerInput } from './types.ts';

/** One request's worth of rows: rows [start, start + rows) of the caller's. */
export interface ArrowPiece {
  readonly start: number;
  readonly rows: number;
  readonly body: Uint8Array;
}

/** Per-row overhead beyond its strings' bytes: offsets (4 bytes each of 7 columns), the time (8), validity bits. */
const rowOverheadBytes = 40;
/** Room kept for the schema message and padding of one stream. */
const streamOverheadBytes = 16 * 1024;

const encoder = new TextEncoder();

type Kind = 'fire_at' | 'delay_ms';

/** Cuts `rows` into Arrow streams within `limits`, in order. */
export function* arrowPieces(rows: readonly TimerInput[], limits: Pick<Limits, 'batch_rows_max' | 'batch_body_bytes_max' | 'batch_logged_bytes_max'>): Generator<ArrowPiece> {
  const bytesMax = Math.min(limits.batch_body_bytes_max, limits.batch_logged_bytes_max) - streamOverheadBytes;
  let start = 0;
  while (start < rows.length) {
    const kind = kindOf(rows[start] as TimerInput, start);
    let end = start;
    let bytes = 0;
    while (end < rows.length && end - start < limits.batch_rows_max) {
      const row = rows[end] as TimerInput;
      if (kindOf(row, end) !== kind) break;
      const rowBytes = estimateBytes(row);
      if (end > start && bytes + rowBytes > bytesMax) break;
      bytes += rowBytes;
      end++;
    }
    yield { start, rows: end - start, body: encode(rows, start, end, kind) };
    start = end;
  }
}

function kindOf(row: TimerInput, index: number): Kind {
  if (row.delay_ms !== undefined && row.fire_at !== undefined) throw new FermataError(400, { code: 'BATCH_INVALID', message: 'give fire_at or delay_ms, not both', field: 'delay_ms', row: index });
  return row.delay_ms !== undefined ? 'delay_ms' : 'fire_at';
}

function estimateBytes(row: TimerInput): number {
  let bytes = rowOverheadBytes + Buffer.byteLength(row.target);
  if (row.payload !== undefined) bytes += Buffer.byteLength(row.payload);
  if (row.payload_base64 !== undefined) bytes += Math.ceil((row.payload_base64.length * 3) / 4);
  if (row.headers !== undefined) bytes += Buffer.byteLength(JSON.stringify(row.headers));
  for (const text of [row.key, row.queue, row.callback, row.failure_callback]) if (text !== undefined) bytes += Buffer.byteLength(text);
  return bytes;
}

function epochMs(time: TimeInput | undefined, row: number): bigint | null {
  if (time === undefined) return null;
  const ms = time instanceof Date ? time.getTime() : typeof time === 'number' ? time : Date.parse(time);
  if (!Number.isSafeInteger(ms)) throw new FermataError(400, { code: 'BATCH_INVALID', message: `fire_at ${JSON.stringify(time)} is not a time (RFC 3339, epoch ms or a Date)`, field: 'fire_at', row });
  return BigInt(ms);
}

function encode(rows: readonly TimerInput[], start: number, end: number, kind: Kind): Uint8Array {
  const slice = rows.slice(start, end);
  const length = slice.length;
  const columns: Array<[string, Data<DataType>]> = [];
  const times = new BigInt64Array(length);
  const timeValid: boolean[] = [];
  slice.forEach((row, i) => {
    const value = kind === 'fire_at' ? epochMs(row.fire_at, start + i) : row.delay_ms === undefined ? null : BigInt(row.delay_ms);
    timeValid.push(value !== null);
    times[i] = value ?? 0n;
  });
  const [timeBitmap, timeNulls] = validity(timeValid);
  const nulls = timeBitmap === undefined ? {} : { nullBitmap: timeBitmap, nullCount: timeNulls };
  columns.push([kind, kind === 'fire_at' ? makeData({ type: new TimestampMillisecond('UTC'), length, data: times, ...nulls }) : makeData({ type: new Int64(), length, data: times, ...nulls })]);
  columns.push(['target', bytesData(new Utf8(), slice.map((row) => encoder.encode(row.target)))]);
  if (slice.some((row) => row.payload !== undefined || row.payload_base64 !== undefined)) {
    const binary = slice.some((row) => row.payload_base64 !== undefined);
    const payloads = slice.map((row) => (row.payload_base64 !== undefined ? Buffer.from(row.payload_base64, 'base64') : row.payload !== undefined ? encoder.encode(row.payload) : null));
    columns.push(['payload', bytesData(binary ? new Binary() : new Utf8(), payloads)]);
  }
  const optional: Array<[string, (row: TimerInput) => string | undefined]> = [
    ['headers', (row) => (row.headers === undefined ? undefined : JSON.stringify(row.headers))],
    ['key', (row) => row.key],
    ['queue', (row) => row.queue],
    ['callback', (row) => row.callback],
    ['failure_callback', (row) => row.failure_callback],
  ];
  for (const [name, read] of optional) {
    const values = slice.map(read);
    if (values.some((value) => value !== undefined)) columns.push([name, bytesData(new Utf8(), values.map((value) => (value === undefined ? null : encoder.encode(value))))]);
  }
  const schema = new Schema(columns.map(([name, data]) => new Field(name, data.type, data.nullCount > 0)));
  const struct = makeData({ type: new Struct(schema.fields), length, children: columns.map(([, data]) => data) });
  return tableToIPC(new Table([new RecordBatch(schema, struct)]), 'stream');
}

/** A Utf8 or Binary column from each row's bytes, null where a row has none. */
function bytesData(type: Utf8 | Binary, values: ReadonlyArray<Uint8Array | null>): Data<DataType> {
  const valueOffsets = new Int32Array(values.length + 1);
  let total = 0;
  values.forEach((value, i) => {
    total += value?.length ?? 0;
    valueOffsets[i + 1] = total;
  });
  const data = new Uint8Array(total);
  values.forEach((value, i) => {
    if (value !== null) data.set(value, valueOffsets[i] as number);
  });
  const [nullBitmap, nullCount] = validity(values.map((value) => value !== null));
  const props = { length: values.length, valueOffsets, data, ...(nullBitmap === undefined ? {} : { nullBitmap, nullCount }) };
  return type instanceof Utf8 ? makeData({ type, ...props }) : makeData({ type, ...props });
}

/** Arrow's validity bitmap (bit set = valid), or none when every value is valid. */
function validity(valid: readonly boolean[]): [Uint8Array | undefined, number] {
  const nulls = valid.filter((ok) => !ok).length;
  if (nulls === 0) return [undefined, 0];
  const bitmap = new Uint8Array(Math.ceil(valid.length / 8));
  valid.forEach((ok, i) => {
    if (ok) bitmap[i >> 3] = (bitmap[i >> 3] as number) | (1 << (i & 7));
  });
  return [bitmap, nulls];
}
