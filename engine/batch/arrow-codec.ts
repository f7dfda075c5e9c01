// Arrow IPC → TimerBatch. Reading is column by column (`getChild(name)`, whole buffers, one
// BigInt conversion pass per batch for 64-bit times), never row objects; byte columns that are
// one chunk without nulls are used in place.
//
// Accepted columns (docs/api.md, "Timers"; names are snake_case):
//   fire_at   Timestamp (any unit) or Int64 epoch ms     } exactly one of the two
//             (from a client, Int64 values below 10^12 look like seconds: refused)
//   delay_ms  Int64 or Int32, ≥ 0, from `acceptedAtMs`   }
//   target    Utf8 or Dictionary<Utf8>                   required
//   payload   Utf8 or Binary                             optional (null = empty)
//   headers   Utf8 holding a JSON object                 optional
//   key       Utf8                                       optional
//   queue     Utf8 or Dictionary<Utf8>                   optional (null = "default")
//   callback, failure_callback   Utf8 URLs               optional (null = none)
// Anything else is refused with an error naming the column.
import {
  type Data,
  type DataType,
  type Dictionary,
  type Int,
  Table,
  type Timestamp,
  tableFromIPC,
  TimeUnit,
  Type,
} from 'apache-arrow';
import { errorCodes, FermataError } from '../errors.ts';
import { timerLimits } from '../limits.ts';
import { secondsLikeFireAt } from './validate.ts';
import { checkFooter, headerTypes, messageFacts } from './arrow-message.ts';
import { type BytesColumn, defaultQueue, type TimerBatch } from './timer-batch.ts';

const knownColumns = new Set(['fire_at', 'delay_ms', 'target', 'payload', 'headers', 'key', 'queue', 'callback', 'failure_callback']);
const decoder = new TextDecoder('utf-8', { fatal: true });

function invalid(message: string, column: string, row?: number): FermataError {
  return new FermataError(errorCodes.batchInvalid, message, row === undefined ? { column } : { column, row });
}

type Chunks = readonly Data<DataType>[];

function chunksOf(table: Table, name: string): Chunks | undefined {
  return table.getChild(name)?.data;
}

/**
 * Checks a Utf8 or Binary chunk's offsets against its values: apache-arrow takes them as they
 * came, and a forged offset would otherwise pass into the log and fail (or read the wrong
 * bytes) only when the batch is put into memory, after it is durable.
 */
function checkOffsets(chunk: Data<DataType>, column: string): void {
  const offsets = chunk.valueOffsets as Int32Array | undefined;
  const valuesLength = (chunk.values as Uint8Array | undefined)?.length ?? 0;
  if (offsets === undefined || offsets.length < chunk.offset + chunk.length + 1) throw invalid(`${column}: its offsets buffer is shorter than the column`, column);
  let previous = offsets[chunk.offset] as number;
  if (previous < 0 || previous > valuesLength) throw invalid(`${column}: an offset (${previous}) lies outside its ${valuesLength} bytes of values`, column, 0);
  for (let i = 1; i <= chunk.length; i++) {
    const next = offsets[chunk.offset + i] as number;
    if (next < previous || next > valuesLength) throw invalid(`${column}: row ${i - 1}'s offsets (${previous}, ${next}) do not lie within its ${valuesLength} bytes of values`, column, i - 1);
    previous = next;
  }
}

/**
 * Walks the IPC stream's message frames and checks each message's counts and buffer bounds
 * (engine/batch/arrow-message.ts) before apache-arrow reads it: a forged count made the
 * reader allocate gigabytes for a few hundred bytes. An Arrow file's stream part is walked
 * the same way, after its magic.
 */
function checkIpcFrames(ipc: Uint8Array, rowsMax: number): void {
  const bytes = Buffer.from(ipc.buffer, ipc.byteOffset, ipc.byteLength);
  const malformed = (what: string): FermataError => new FermataError(errorCodes.batchInvalid, `not a readable Arrow IPC stream: ${what}`, { column: '' });
  const file = bytes.length >= 8 && bytes.toString('latin1', 0, 6) === fileMagic;
  let at = file ? 8 : 0;
  let rows = 0;
  let first = true;
  const frameStarts = new Set<number>();
  while (at + 4 <= bytes.length) {
    let length = bytes.readInt32LE(at);
    let headerAt = at + 4;
    if (length === -1) {
      if (at + 8 > bytes.length) throw malformed(`a message prefix cut off at byte ${at}`);
      length = bytes.readInt32LE(at + 4);
      headerAt = at + 8;
    }
    if (length === 0) {
      checkAfterEnd(bytes, headerAt, file, frameStarts, malformed);
      return;
    }
    frameStarts.add(at);
    if (length < 0 || headerAt + length > bytes.length) throw malformed(`a message at byte ${at} announces ${length} bytes of metadata, past the end`);
    const facts = messageFacts(bytes.subarray(headerAt, headerAt + length), malformed);
    // A file's reader takes the schema from the footer (checked there); apache-arrow writes files without a schema message.
    if (first && !file && facts.headerType !== headerTypes.schema) throw malformed(`the stream starts with a message of header type ${facts.headerType}, not a Schema`);
    first = false;
    const next = headerAt + length + facts.bodyLength;
    if (next > bytes.length) throw malformed(`a message at byte ${at} announces a ${facts.bodyLength}-byte body, past the end`);
    if (facts.headerType === headerTypes.recordBatch) {
      rows += facts.rows;
      if (rows > rowsMax) throw invalid(`a batch holds at most ${rowsMax} timers, this stream more`, 'fire_at');
    }
    at = next;
  }
  // A file's reader goes to its footer whatever the walk saw: without the marker the footer may
  // lie inside a message's claimed body, and would go unchecked.
  if (file) throw malformed('an Arrow file without the end-of-stream marker before its footer');
}

const fileMagic = 'ARROW1';
/** An Arrow file ends: footer, its length (int32), "ARROW1". */
const fileTailBytes = 4 + fileMagic.length;

/**
 * What may follow a stream's end-of-stream marker at `end`: nothing but zero bytes in a stream
 * (apache-arrow reads on after the marker, as if another stream began: forged bytes there went
 * unchecked, B13), and in a file its footer, whose blocks must point at the checked messages.
 */
function checkAfterEnd(bytes: Buffer, end: number, file: boolean, frameStarts: ReadonlySet<number>, malformed: (what: string) => FermataError): void {
  if (!file) {
    const stray = bytes.subarray(end).findIndex((byte) => byte !== 0);
    if (stray >= 0) throw malformed(`byte ${end + stray} follows the end-of-stream marker: a body holds one stream`);
    return;
  }
  if (bytes.length < end + fileTailBytes || bytes.toString('latin1', bytes.length - fileMagic.length) !== fileMagic) throw malformed('an Arrow file without its closing magic');
  const footerLength = bytes.readInt32LE(bytes.length - fileTailBytes);
  const footerAt = bytes.length - fileTailBytes - footerLength;
  if (footerLength <= 0 || footerAt < end) throw malformed(`an Arrow file footer of ${footerLength} bytes that does not fit after its messages`);
  checkFooter(bytes.subarray(footerAt, footerAt + footerLength), frameStarts, malformed);
}

function isNull(chunk: Data<DataType>, i: number): boolean {
  return chunk.nullCount > 0 && !chunk.getValid(i);
}

const nsPerUnit: Record<number, bigint> = {
  [TimeUnit.SECOND]: 1_000_000_000n,
  [TimeUnit.MILLISECOND]: 1_000_000n,
  [TimeUnit.MICROSECOND]: 1_000n,
  [TimeUnit.NANOSECOND]: 1n,
};

const twoTo32 = 2 ** 32;
/** Typed arrays use the platform's byte order; Arrow IPC data is little-endian. */
const littleEndian = new Uint8Array(Uint32Array.of(1).buffer)[0] === 1;

/** Values with a high half in [−2^21, 2^21) are below 2^53 in magnitude: exact as numbers. */
const exactHighLimit = 2 ** 21;

/**
 * Row `i` of a 64-bit integer chunk times `scale`, as a number: from the value's two 32-bit
 * halves when the value is exact as a number (the product is then rounded as Number() rounds
 * the exact BigInt product), else from the BigInt by `wide`. Reading a BigInt64Array element
 * allocates a BigInt: at 10,000 rows a batch, the halves cost a fraction of that.
 */
function int64At(values: BigInt64Array, halves: Int32Array | undefined, i: number, scale: number, wide: (raw: bigint) => number): number {
  if (halves !== undefined) {
    const high = halves[2 * i + 1] as number;
    if (high >= -exactHighLimit && high < exactHighLimit) return (high * twoTo32 + ((halves[2 * i] as number) >>> 0)) * scale;
  }
  return wide(values[i] as bigint);
}

/** The two 32-bit halves of each value of a 64-bit chunk (undefined on a big-endian platform). */
function halvesOf(values: BigInt64Array): Int32Array | undefined {
  return littleEndian ? new Int32Array(values.buffer, values.byteOffset, values.length * 2) : undefined;
}

/**
 * Epoch ms from a 64-bit time column: value × `scale` (1 for ms, 1000 for s), or each value
 * converted by `toMs` (finer units, which round up; values beyond 2^53).
 */
function readTimes(chunks: Chunks, column: string, rows: number, scale: number | undefined, toMs: (raw: bigint) => number): Float64Array {
  const out = new Float64Array(rows);
  let row = 0;
  for (const chunk of chunks) {
    const values = chunk.values as BigInt64Array;
    const halves = scale === undefined ? undefined : halvesOf(values);
    for (let i = 0; i < chunk.length; i++, row++) {
      if (isNull(chunk, i)) throw invalid(`${column} is null in row ${row}`, column, row);
      out[row] = int64At(values, halves, chunk.offset + i, scale ?? 1, toMs);
    }
  }
  return out;
}

/** Refuses the first Int64 fire_at that looks like epoch seconds, naming its row. */
function checkNotSeconds(fireAtMs: Float64Array): void {
  for (let row = 0; row < fireAtMs.length; row++) {
    const secondsLike = secondsLikeFireAt(fireAtMs[row] as number);
    if (secondsLike !== undefined) throw invalid(`${secondsLike} in row ${row}`, 'fire_at', row);
  }
}

function readFireAt(chunks: Chunks, rows: number, source: ArrowSource): Float64Array {
  const type = (chunks[0] as Data<DataType>).type;
  if (type.typeId === Type.Timestamp) {
    const perMs = 1_000_000n;
    const unit = (type as Timestamp).unit;
    const unitNs = nsPerUnit[unit];
    if (unitNs === undefined) throw invalid(`fire_at has an unknown time unit (${unit})`, 'fire_at');
    const scale = unit === TimeUnit.MILLISECOND ? 1 : unit === TimeUnit.SECOND ? 1000 : undefined;
    // Round up to the next millisecond: a timer must never fire before its time.
    return readTimes(chunks, 'fire_at', rows, scale, (raw) => {
      const ns = raw * unitNs;
      return Number(ns / perMs + (ns % perMs > 0n ? 1n : 0n));
    });
  }
  if (type.typeId === Type.Int && (type as Int).bitWidth === 64 && (type as Int).isSigned) {
    const fireAtMs = readTimes(chunks, 'fire_at', rows, 1, Number);
    if (source === 'client') checkNotSeconds(fireAtMs);
    return fireAtMs;
  }
  throw invalid(`fire_at must be Timestamp or Int64 (epoch ms), not ${type}`, 'fire_at');
}

function readDelays(chunks: Chunks, rows: number, acceptedAtMs: number): Float64Array {
  const type = (chunks[0] as Data<DataType>).type;
  if (type.typeId !== Type.Int || !(type as Int).isSigned || ((type as Int).bitWidth !== 64 && (type as Int).bitWidth !== 32)) {
    throw invalid(`delay_ms must be Int64 or Int32, not ${type}`, 'delay_ms');
  }
  const wide = (type as Int).bitWidth === 64;
  const out = new Float64Array(rows);
  let row = 0;
  for (const chunk of chunks) {
    const halves = wide ? halvesOf(chunk.values as BigInt64Array) : undefined;
    for (let i = 0; i < chunk.length; i++, row++) {
      if (isNull(chunk, i)) throw invalid(`delay_ms is null in row ${row}`, 'delay_ms', row);
      const at = chunk.offset + i;
      const delay = wide ? int64At(chunk.values as BigInt64Array, halves, at, 1, Number) : ((chunk.values as Int32Array)[at] as number);
      if (delay < 0) throw invalid(`delay_ms is negative in row ${row}`, 'delay_ms', row);
      out[row] = acceptedAtMs + delay;
    }
  }
  return out;
}

/**
 * A Utf8 or Binary column as one BytesColumn (nulls become empty). A column that is one chunk
 * without nulls is used as it lies (Arrow's layout is the BytesColumn layout): no copy.
 */
function readBytes(chunks: Chunks | undefined, column: string, rows: number, allowBinary: boolean): BytesColumn {
  if (chunks === undefined) return { values: new Uint8Array(0), offsets: new Int32Array(rows + 1) };
  const type = (chunks[0] as Data<DataType>).type;
  if (type.typeId !== Type.Utf8 && !(allowBinary && type.typeId === Type.Binary)) {
    throw invalid(`${column} must be Utf8${allowBinary ? ' or Binary' : ''}, not ${type}`, column);
  }
  for (const chunk of chunks) checkOffsets(chunk, column);
  const only = chunks[0] as Data<DataType>;
  if (chunks.length === 1 && only.nullCount === 0) {
    const offsets = (only.valueOffsets as Int32Array).subarray(only.offset, only.offset + rows + 1);
    if (offsets[0] === 0) return { values: only.values as Uint8Array, offsets };
  }
  return copyBytes(chunks, rows);
}

/** Joins several chunks (or skips nulls) into one fresh BytesColumn. */
function copyBytes(chunks: Chunks, rows: number): BytesColumn {
  const offsets = new Int32Array(rows + 1);
  let total = 0;
  let row = 0;
  for (const chunk of chunks) {
    const chunkOffsets = chunk.valueOffsets as Int32Array;
    for (let i = 0; i < chunk.length; i++, row++) {
      if (!isNull(chunk, i)) total += (chunkOffsets[chunk.offset + i + 1] as number) - (chunkOffsets[chunk.offset + i] as number);
      offsets[row + 1] = total;
    }
  }
  const values = new Uint8Array(total);
  row = 0;
  for (const chunk of chunks) {
    const chunkOffsets = chunk.valueOffsets as Int32Array;
    const chunkValues = chunk.values as Uint8Array;
    for (let i = 0; i < chunk.length; i++, row++) {
      if (isNull(chunk, i)) continue;
      values.set(chunkValues.subarray(chunkOffsets[chunk.offset + i] as number, chunkOffsets[chunk.offset + i + 1] as number), offsets[row] as number);
    }
  }
  return { values, offsets };
}

/** Whether values[aStart, aEnd) and values[bStart, bEnd) hold the same bytes. */
function sameRange(values: Uint8Array, aStart: number, aEnd: number, bStart: number, bEnd: number): boolean {
  if (aEnd - aStart !== bEnd - bStart) return false;
  for (let i = 0; i < aEnd - aStart; i++) if (values[aStart + i] !== values[bStart + i]) return false;
  return true;
}

/**
 * Whether rows [first, first + count) of a Utf8 chunk all hold the same bytes: every row as
 * long as the first, and the values shifted by one row equal to themselves (one native
 * comparison, where comparing row by row cost 30 ns a row).
 */
function oneValueRepeated(values: Uint8Array, offsets: Int32Array, first: number, count: number): boolean {
  const start = offsets[first] as number;
  const length = (offsets[first + 1] as number) - start;
  for (let i = 2; i <= count; i++) if ((offsets[first + i] as number) !== start + i * length) return false;
  const shifted = (count - 1) * length;
  if (shifted === 0) return true;
  const base = values.byteOffset + start;
  return Buffer.from(values.buffer, base, shifted).equals(Buffer.from(values.buffer, base + length, shifted));
}

/** A Utf8 or Dictionary<Utf8> column as distinct strings plus a row → string index. */
function readDictionary(chunks: Chunks | undefined, column: string, rows: number, fallback: string | undefined): { entries: string[]; index: Int32Array } {
  const entries: string[] = [];
  const positions = new Map<string, number>();
  const index = new Int32Array(rows);
  const intern = (value: string): number => {
    let position = positions.get(value);
    if (position === undefined) {
      position = entries.push(value) - 1;
      positions.set(value, position);
    }
    return position;
  };
  if (chunks === undefined) {
    if (fallback === undefined) throw invalid(`column ${column} is required`, column);
    index.fill(intern(fallback));
    return { entries, index };
  }
  let row = 0;
  for (const chunk of chunks) {
    const type = chunk.type;
    const isDictionary = type.typeId === Type.Dictionary && (type as Dictionary).dictionary.typeId === Type.Utf8;
    if (!isDictionary && type.typeId !== Type.Utf8) throw invalid(`${column} must be Utf8 or Dictionary<Utf8>, not ${type}`, column);
    // A forged dictionary's offsets could point anywhere: its entries are checked before any is read.
    if (!isDictionary) checkOffsets(chunk, column);
    else for (const entries of chunk.dictionary?.data ?? []) checkOffsets(entries, column);
    // Each distinct dictionary entry is decoded once, not once per row.
    const dictionaryPositions = new Map<number, number>();
    // Plain Utf8: rows come in runs of one target or queue, so a row with the same bytes as the
    // row before it takes its index without being decoded and hashed again. -1: no such row.
    let previousStart = -1;
    let previousEnd = -1;
    // The commonest plain column: one target (or queue) for the whole chunk.
    if (!isDictionary && chunk.nullCount === 0 && chunk.length > 0 && oneValueRepeated(chunk.values as Uint8Array, chunk.valueOffsets as Int32Array, chunk.offset, chunk.length)) {
      const offsets = chunk.valueOffsets as Int32Array;
      let text: string;
      try {
        text = decoder.decode((chunk.values as Uint8Array).subarray(offsets[chunk.offset] as number, offsets[chunk.offset + 1] as number));
      } catch {
        throw invalid(`${column} is not valid UTF-8 in row ${row}`, column, row);
      }
      index.fill(intern(text), row, row + chunk.length);
      row += chunk.length;
      continue;
    }
    for (let i = 0; i < chunk.length; i++, row++) {
      if (isNull(chunk, i)) {
        if (fallback === undefined) throw invalid(`${column} is null in row ${row}`, column, row);
        index[row] = intern(fallback);
        previousStart = -1;
        continue;
      }
      if (isDictionary) {
        const key = Number((chunk.values as Int32Array)[chunk.offset + i]);
        let position = dictionaryPositions.get(key);
        if (position === undefined) {
          let text: unknown;
          try {
            text = chunk.dictionary?.get(key);
          } catch {
            throw invalid(`${column} dictionary entry ${key} does not decode in row ${row}`, column, row);
          }
          if (typeof text !== 'string') throw invalid(`${column} dictionary index ${key} out of range in row ${row}`, column, row);
          position = intern(text);
          dictionaryPositions.set(key, position);
        }
        index[row] = position;
      } else {
        const offsets = chunk.valueOffsets as Int32Array;
        const values = chunk.values as Uint8Array;
        const start = offsets[chunk.offset + i] as number;
        const end = offsets[chunk.offset + i + 1] as number;
        if (previousStart >= 0 && sameRange(values, previousStart, previousEnd, start, end)) {
          index[row] = index[row - 1] as number;
          continue;
        }
        try {
          index[row] = intern(decoder.decode(values.subarray(start, end)));
        } catch {
          throw invalid(`${column} is not valid UTF-8 in row ${row}`, column, row);
        }
        previousStart = start;
        previousEnd = end;
      }
    }
  }
  return { entries, index };
}

/**
 * Where a stream comes from. `client`: an add (HTTP, Flight), held to the rules of today, such
 * as an Int64 fire_at that looks like seconds. `log`: a record replayed from the log, read as
 * it was accepted, whatever rule was added since (a refusal there would stop the service).
 */
export type ArrowSource = 'client' | 'log';

/**
 * Decodes an Arrow IPC stream into one batch (all its record batches together). Structural
 * errors name the column (and row); malformed IPC bytes are refused as a whole.
 */
export function batchFromArrow(ipc: Uint8Array, acceptedAtMs: number, rowsMax: number = timerLimits.rowsPerBatchMax, source: ArrowSource = 'log'): TimerBatch {
  try {
    return readBatch(ipc, acceptedAtMs, rowsMax, source);
  } catch (err) {
    if (err instanceof FermataError) throw err;
    // What the checks above did not foresee in forged bytes is still the client's bad stream, never a 500.
    throw new FermataError(errorCodes.batchInvalid, `not a readable Arrow IPC stream: ${err instanceof Error ? err.message : String(err)}`, { column: '' }, err);
  }
}

function readBatch(ipc: Uint8Array, acceptedAtMs: number, rowsMax: number, source: ArrowSource): TimerBatch {
  checkIpcFrames(ipc, rowsMax);
  let table: Table;
  try {
    table = tableFromIPC(ipc);
  } catch (err) {
    const reason = err instanceof Error ? err.message : String(err);
    const message = /compressed/i.test(reason)
      ? 'compressed Arrow record batches (LZ4, ZSTD) are not supported: send the stream uncompressed'
      : `not a readable Arrow IPC stream: ${reason}`;
    throw new FermataError(errorCodes.batchInvalid, message, { column: '' }, err);
  }
  // Before any column is read: a forged row count must not make the reader allocate for it.
  if (table.numRows > rowsMax) throw invalid(`a batch holds at most ${rowsMax} timers, this stream ${table.numRows}`, 'fire_at');
  for (const field of table.schema.fields) {
    if (!knownColumns.has(field.name)) throw invalid(`unknown column ${field.name}`, field.name);
  }
  const names = table.schema.fields.map((field) => field.name);
  const duplicate = names.find((name, i) => names.indexOf(name) !== i);
  if (duplicate !== undefined) throw invalid(`column ${duplicate} appears twice`, duplicate);
  const rows = table.numRows;
  const fireAt = chunksOf(table, 'fire_at');
  const delay = chunksOf(table, 'delay_ms');
  if ((fireAt === undefined) === (delay === undefined)) throw invalid('exactly one of fire_at and delay_ms is required', fireAt === undefined ? 'fire_at' : 'delay_ms');
  const targets = readDictionary(chunksOf(table, 'target'), 'target', rows, undefined);
  const queues = readDictionary(chunksOf(table, 'queue'), 'queue', rows, defaultQueue);
  // Callback columns only when the stream has either (a batch without them carries none).
  const callback = chunksOf(table, 'callback');
  const failureCallback = chunksOf(table, 'failure_callback');
  const callbacks =
    callback === undefined && failureCallback === undefined
      ? undefined
      : { callback: readBytes(callback, 'callback', rows, false), failureCallback: readBytes(failureCallback, 'failure_callback', rows, false) };
  return {
    rows,
    fireAtMs: rows === 0 ? new Float64Array(0) : fireAt !== undefined ? readFireAt(fireAt, rows, source) : readDelays(delay as Chunks, rows, acceptedAtMs),
    targets: targets.entries,
    targetIndex: targets.index,
    queues: queues.entries,
    queueIndex: queues.index,
    payload: readBytes(chunksOf(table, 'payload'), 'payload', rows, true),
    headers: readBytes(chunksOf(table, 'headers'), 'headers', rows, false),
    keys: readBytes(chunksOf(table, 'key'), 'key', rows, false),
    ...callbacks,
  };
}
