// RunRows ⇄ Arrow record batches of a run file (docs/format/spill.md, "Run file"). Main thread.
//
// Writing goes through RunIpcWriter, apache-arrow's own file writer with its one byte sink
// (`_write`) redirected into a list the caller takes after each batch: so each batch's exact
// bytes and file offset are known (for its checksum and the manifest), and they go to disk at
// once instead of piling up. The file writer of apache-arrow 21 leaves out the schema message
// the Arrow spec puts after the leading magic; RunIpcWriter writes it, so stream readers that
// skip the magic read a run too.
//
// Reading one batch needs no footer: the batch's encapsulated message, read into a buffer laid
// out as [schema message | batch | eos], is a whole Arrow IPC stream, which the public reader
// decodes; its columns are used in place (views of the read buffer), except times (i64 → f64)
// and queue/target (Utf8 → dictionary). The schema message is the run's version's: a version 1
// run's batches hold the first 13 columns only, and its rows no failures.
//
// last_error and last_attempt_at are null but for the few timers whose last attempt failed: a
// batch without any is written as zeroed buffers (no work a row), and read without a look at
// its rows. callback and failure_callback likewise, null but for timers that have them.
// created_at too: set in a spilled run (its timers' add times, engine/add-times.ts), null in a
// resident one.
import assert from 'node:assert/strict';
import {
  Binary,
  type Data,
  Field,
  Float64,
  makeData,
  RecordBatch,
  RecordBatchFileWriter,
  RecordBatchReader,
  Schema,
  Struct,
  Timestamp,
  TimeUnit,
  Uint16,
  Uint32,
  Uint8,
  Utf8,
} from 'apache-arrow';
import { Message } from 'apache-arrow/ipc/metadata/message';
import type { BytesColumn } from '../batch/timer-batch.ts';
import { timerState } from '../store/resident-store.ts';
import { deliveryLimits } from '../limits.ts';
import { arrowEos, metadataKeys, runColumnCounts, runColumns, spillFormatVersion } from './format.ts';
import { bytesOf, firstFailureFrom, noFailures, type RunFailures, type RunRows } from './run-rows.ts';
import { callbackBytesMax, callbackBytesOf, callbacksRunBytes, failureCallbackBytesOf, packCallbacks } from '../store/callback-bytes.ts';

const timestampMs = (): Timestamp => new Timestamp(TimeUnit.MILLISECOND, 'UTC');

/** The columns of a run of `version`. */
function runFields(version = spillFormatVersion): Field[] {
  const fields = [
    new Field('seq', new Float64(), false),
    new Field('row', new Uint32(), false),
    new Field('fire_at', timestampMs(), false),
    new Field('due_at', timestampMs(), false),
    new Field('state', new Uint8(), false),
    new Field('attempts', new Uint16(), false),
    new Field('last_status', new Uint16(), false),
    new Field('queue', new Utf8(), false),
    new Field('target', new Utf8(), false),
    new Field('key', new Binary(), true),
    new Field('payload', new Binary(), false),
    new Field('headers', new Binary(), true),
    new Field('dead_reason', new Uint8(), false),
    new Field('last_error', new Utf8(), true),
    new Field('last_attempt_at', timestampMs(), true),
    new Field('callback', new Utf8(), true),
    new Field('failure_callback', new Utf8(), true),
    new Field('created_at', timestampMs(), true),
  ];
  return fields.slice(0, runColumnCounts[version]);
}

assert.deepEqual(
  runFields().map((field) => field.name),
  [...runColumns],
  'the run schema has the columns format.ts lists, in its order',
);

export interface RunSchemaStamp {
  readonly runId: number;
  readonly stamp: number;
  readonly bucketWidthMs: number;
}

export function runSchema(stamp: RunSchemaStamp): Schema {
  return new Schema(
    runFields(),
    new Map([
      [metadataKeys.version, String(spillFormatVersion)],
      [metadataKeys.stamp, String(stamp.stamp)],
      [metadataKeys.run, String(stamp.runId)],
      [metadataKeys.bucketWidthMs, String(stamp.bucketWidthMs)],
    ]),
  );
}

/** apache-arrow's file writer, its output captured chunk by chunk instead of queued. */
export class RunIpcWriter extends RecordBatchFileWriter {
  #chunks: Uint8Array[] = [];

  /** The chunks written since the last call, in order (views of the writer's buffers). */
  take(): Uint8Array[] {
    const chunks = this.#chunks;
    this.#chunks = [];
    return chunks;
  }

  protected override _write(chunk: unknown): this {
    if (!this._started) return this;
    if (!ArrayBuffer.isView(chunk)) throw new TypeError('the Arrow writer handed over something other than bytes');
    if (chunk.byteLength > 0) {
      this.#chunks.push(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength));
      this._position += chunk.byteLength;
    }
    return this;
  }

  protected override _writeSchema(schema: Schema): this {
    this._writeMagic()._writePadding(2);
    return this._writeMessage(Message.from(schema));
  }
}

const decodePrefixes = new Map<number, Uint8Array>();

/** The encapsulated schema message (no metadata) that turns one batch message of a run of `version` into a stream. */
function schemaMessage(version: number): Uint8Array {
  let prefix = decodePrefixes.get(version);
  if (prefix === undefined) {
    const writer = new RunIpcWriter();
    writer.reset(undefined, new Schema(runFields(version)));
    const head = joinChunks(writer.take());
    prefix = head.subarray(8); // after "ARROW1\0\0"
    decodePrefixes.set(version, prefix);
  }
  return prefix;
}

function joinChunks(chunks: readonly Uint8Array[]): Uint8Array {
  let length = 0;
  for (const chunk of chunks) length += chunk.length;
  const bytes = new Uint8Array(length);
  let at = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, at);
    at += chunk.length;
  }
  return bytes;
}

// ---- RunRows → batch ----

/** f64 epoch ms → Arrow's i64, without a BigInt per row (two i32 halves, little-endian). */
function timesToI64(ms: Float64Array): BigInt64Array {
  const out = new BigInt64Array(ms.length);
  const halves = new Int32Array(out.buffer);
  for (let i = 0; i < ms.length; i++) {
    const value = ms[i] as number;
    const high = Math.floor(value / 2 ** 32);
    halves[2 * i] = (value - high * 2 ** 32) | 0;
    halves[2 * i + 1] = high;
  }
  return out;
}

/** Arrow's i64 → f64 epoch ms (exact below 2^53), again through i32 halves. */
function timesFromI64(values: BigInt64Array, rows: number): Float64Array {
  const halves = new Int32Array(values.buffer, values.byteOffset, rows * 2);
  const out = new Float64Array(rows);
  for (let i = 0; i < rows; i++) out[i] = (halves[2 * i + 1] as number) * 2 ** 32 + ((halves[2 * i] as number) >>> 0);
  return out;
}

interface VariableWidth {
  readonly valueOffsets: Int32Array;
  readonly data: Uint8Array;
  readonly nullBitmap?: Uint8Array;
  readonly nullCount?: number;
}

/** Rows [from, to) of a byte column as Arrow buffers, offsets rebased to 0; empty rows null when `emptyIsNull`. */
function byteSlice(column: BytesColumn, from: number, to: number, emptyIsNull: boolean): VariableWidth {
  const n = to - from;
  const base = column.offsets[from] as number;
  const offsets = new Int32Array(n + 1);
  for (let i = 1; i <= n; i++) offsets[i] = (column.offsets[from + i] as number) - base;
  const data = column.values.subarray(base, base + (offsets[n] as number));
  if (!emptyIsNull) return { valueOffsets: offsets, data };
  const validity = new Uint8Array((n + 7) >> 3);
  let nulls = 0;
  for (let i = 0; i < n; i++) {
    if ((offsets[i + 1] as number) > (offsets[i] as number)) validity[i >> 3] = (validity[i >> 3] as number) | (1 << (i & 7));
    else nulls++;
  }
  return { valueOffsets: offsets, data, nullBitmap: validity, nullCount: nulls };
}

const encoder = new TextEncoder();

/** A dictionary's entries as UTF-8, encoded once per dictionary and kept in `cache`. */
export function encodedEntries(entries: readonly string[], cache: WeakMap<readonly string[], Uint8Array[]>): Uint8Array[] {
  let bytes = cache.get(entries);
  if (bytes === undefined) {
    bytes = entries.map((entry) => encoder.encode(entry));
    cache.set(entries, bytes);
  }
  return bytes;
}

/** Rows [from, to) of a dictionary-coded string column as Arrow Utf8 buffers. */
function stringSlice(entries: readonly string[], index: Uint32Array, from: number, to: number, encoded: WeakMap<readonly string[], Uint8Array[]>): VariableWidth {
  const bytes = encodedEntries(entries, encoded);
  const n = to - from;
  const offsets = new Int32Array(n + 1);
  for (let i = 0; i < n; i++) offsets[i + 1] = (offsets[i] as number) + (bytes[index[from + i] as number] as Uint8Array).length;
  const data = new Uint8Array(offsets[n] as number);
  for (let i = 0; i < n; i++) data.set(bytes[index[from + i] as number] as Uint8Array, offsets[i] as number);
  return { valueOffsets: offsets, data };
}

/** The failures of rows [from, to) as last_error (Utf8) and last_attempt_at (timestamp) columns: set only at their rows. */
function failureColumns(failures: RunFailures, from: number, to: number): { errors: Data; attemptedAt: Data } {
  const n = to - from;
  const first = firstFailureFrom(failures, from);
  const end = firstFailureFrom(failures, to);
  const validity = new Uint8Array((n + 7) >> 3);
  const offsets = new Int32Array(n + 1);
  const times = new BigInt64Array(n);
  const halves = new Int32Array(times.buffer);
  const texts: Uint8Array[] = [];
  const encodedTexts = new Map<string, Uint8Array>();
  let bytes = 0;
  // offsets[r + 1] is the text bytes of rows ≤ r: it steps at each failure and stays level between.
  let level = 0;
  for (let k = first; k < end; k++) {
    const r = (failures.rows[k] as number) - from;
    const error = failures.errors[k] as string;
    let text = encodedTexts.get(error);
    if (text === undefined) {
      text = encoder.encode(error);
      encodedTexts.set(error, text);
    }
    offsets.fill(bytes, level + 1, r + 1);
    bytes += text.length;
    offsets[r + 1] = bytes;
    level = r + 1;
    texts.push(text);
    validity[r >> 3] = (validity[r >> 3] as number) | (1 << (r & 7));
    const ms = failures.attemptedAtMs[k] as number;
    const high = Math.floor(ms / 2 ** 32);
    halves[2 * r] = (ms - high * 2 ** 32) | 0;
    halves[2 * r + 1] = high;
  }
  if (bytes > 0) offsets.fill(bytes, level + 1);
  const data = new Uint8Array(bytes);
  for (let k = 0, at = 0; k < texts.length; k++) {
    data.set(texts[k] as Uint8Array, at);
    at += (texts[k] as Uint8Array).length;
  }
  const nullCount = n - (end - first);
  return {
    errors: makeData({ type: new Utf8(), length: n, nullCount, nullBitmap: validity, valueOffsets: offsets, data }),
    attemptedAt: makeData({ type: timestampMs(), length: n, nullCount, nullBitmap: validity, data: times }),
  };
}

/** Rows [from, to) of `rows` as a record batch of `schema` (a run schema). */
export function encodeRunBatch(schema: Schema, rows: RunRows, from: number, to: number, encoded: WeakMap<readonly string[], Uint8Array[]>): RecordBatch {
  const length = to - from;
  const children: Data[] = [
    makeData({ type: new Float64(), length, nullCount: 0, data: rows.seq.subarray(from, to) }),
    makeData({ type: new Uint32(), length, nullCount: 0, data: rows.row.subarray(from, to) }),
    makeData({ type: timestampMs(), length, nullCount: 0, data: timesToI64(rows.fireAtMs.subarray(from, to)) }),
    makeData({ type: timestampMs(), length, nullCount: 0, data: timesToI64(rows.dueAtMs.subarray(from, to)) }),
    makeData({ type: new Uint8(), length, nullCount: 0, data: rows.state.subarray(from, to) }),
    makeData({ type: new Uint16(), length, nullCount: 0, data: rows.attempts.subarray(from, to) }),
    makeData({ type: new Uint16(), length, nullCount: 0, data: rows.lastStatus.subarray(from, to) }),
    makeData({ type: new Utf8(), length, ...stringSlice(rows.queues, rows.queueIndex, from, to, encoded) }),
    makeData({ type: new Utf8(), length, ...stringSlice(rows.targets, rows.targetIndex, from, to, encoded) }),
    makeData({ type: new Binary(), length, ...byteSlice(rows.keys, from, to, true) }),
    makeData({ type: new Binary(), length, ...byteSlice(rows.payload, from, to, false) }),
    makeData({ type: new Binary(), length, ...byteSlice(rows.headers, from, to, true) }),
    makeData({ type: new Uint8(), length, nullCount: 0, data: rows.deadReason.subarray(from, to) }),
  ];
  const failures = failureColumns(rows.failures, from, to);
  children.push(failures.errors, failures.attemptedAt);
  const callbacks = callbackColumns(rows.callbacks, from, to);
  children.push(callbacks.callback, callbacks.failureCallback);
  children.push(createdAtColumn(rows.createdAtMs, from, to));
  return new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length, nullCount: 0, children }));
}

// ---- batch → RunRows ----

/**
 * A buffer laid out [schema message | `batchBytes` bytes | eos] for a batch of a run of `version`;
 * read the batch into `batch`. It is the start of `memory` when given (at least
 * batchDecodeBytes long; its batch bytes must then be read in full), else a new buffer.
 */
export function batchDecodeBuffer(batchBytes: number, version: number, memory?: Uint8Array): { readonly whole: Uint8Array; readonly batch: Uint8Array } {
  const prefix = schemaMessage(version);
  const length = batchDecodeBytes(batchBytes, version);
  const whole = memory === undefined ? new Uint8Array(length) : memory.subarray(0, length);
  whole.set(prefix);
  whole.set(arrowEos, prefix.length + batchBytes);
  return { whole, batch: whole.subarray(prefix.length, prefix.length + batchBytes) };
}

/** The bytes batchDecodeBuffer lays a batch of `batchBytes` of a run of `version` out in. */
export function batchDecodeBytes(batchBytes: number, version: number): number {
  return schemaMessage(version).length + batchBytes + arrowEos.length;
}

/** Why a decoded batch is not a run batch; the caller wraps it into SPILL_CORRUPT with file and offset. */
export class BatchShapeError extends Error {}

const liveStates = new Set<number>([timerState.pending, timerState.retrying, timerState.delivered, timerState.dead, timerState.cancelled]);
const decoder = new TextDecoder('utf-8', { fatal: true });

/** Decodes the stream in `whole` (from batchDecodeBuffer for `version`), which must hold one batch of `rows` rows. */
export function decodeRunBatch(whole: Uint8Array, rows: number, version: number): RunRows {
  let batches: RecordBatch[];
  try {
    batches = RecordBatchReader.from(whole).readAll();
  } catch (err) {
    throw new BatchShapeError(`the batch does not decode: ${(err as Error).message}`);
  }
  if (batches.length !== 1) throw new BatchShapeError(`expected one record batch, found ${batches.length}`);
  const batch = batches[0] as RecordBatch;
  if (batch.numRows !== rows) throw new BatchShapeError(`the batch holds ${batch.numRows} rows, the manifest says ${rows}`);
  // The column types are the run schema's (the decode buffer's schema message is ours); what
  // the batch message decides is lengths, nulls and values, checked below.
  const column = (name: string): Data => {
    const data = batch.getChild(name)?.data[0] as Data;
    if (data.offset !== 0 || data.length !== rows) throw new BatchShapeError(`column ${name} is sliced`);
    return data;
  };
  const values = <A>(name: string): A => {
    const data = column(name);
    if (data.nullCount !== 0) throw new BatchShapeError(`column ${name} has nulls`);
    const all = data.values as unknown as { readonly length: number; subarray(a: number, b: number): A };
    if (all.length < rows) throw new BatchShapeError(`column ${name} holds ${all.length} values for ${rows} rows`);
    return all.subarray(0, rows);
  };
  const state = values<Uint8Array>('state');
  for (let i = 0; i < rows; i++) {
    if (!liveStates.has(state[i] as number)) throw new BatchShapeError(`row ${i} has state ${state[i]}`);
  }
  const queues = dictionaryOf(column('queue'), rows);
  const targets = dictionaryOf(column('target'), rows);
  return {
    rows,
    seq: values<Float64Array>('seq'),
    row: values<Uint32Array>('row'),
    fireAtMs: timesFromI64(values<BigInt64Array>('fire_at'), rows),
    dueAtMs: timesFromI64(values<BigInt64Array>('due_at'), rows),
    state,
    attempts: values<Uint16Array>('attempts'),
    lastStatus: values<Uint16Array>('last_status'),
    deadReason: values<Uint8Array>('dead_reason'),
    queues: queues.entries,
    queueIndex: queues.index,
    targets: targets.entries,
    targetIndex: targets.index,
    keys: bytesOfColumn(column('key'), rows, true),
    payload: bytesOfColumn(column('payload'), rows, false),
    headers: bytesOfColumn(column('headers'), rows, true),
    failures: version < 2 ? noFailures : failuresOf(column('last_error'), column('last_attempt_at'), rows),
    ...(version < 3 ? undefined : callbacksOf(column('callback'), column('failure_callback'), rows)),
    ...(version < 4 ? undefined : createdAtsOf(column('created_at'), rows)),
  };
}

/** Rows [from, to) of each row's created_at (NaN = unknown) as a timestamp column, null where unknown; all null when `ms` is absent. */
function createdAtColumn(ms: Float64Array | undefined, from: number, to: number): Data {
  const n = to - from;
  const validity = new Uint8Array((n + 7) >> 3);
  if (ms === undefined) return makeData({ type: timestampMs(), length: n, nullCount: n, nullBitmap: validity, data: new BigInt64Array(n) });
  const slice = ms.slice(from, to);
  let nullCount = 0;
  for (let r = 0; r < n; r++) {
    if (Number.isNaN(slice[r])) {
      slice[r] = 0;
      nullCount++;
    } else validity[r >> 3] = (validity[r >> 3] as number) | (1 << (r & 7));
  }
  return makeData({ type: timestampMs(), length: n, nullCount, nullBitmap: validity, data: timesToI64(slice) });
}

/** The created_at column as epoch ms, NaN where null; nothing when every row is null. */
function createdAtsOf(data: Data, rows: number): { createdAtMs: Float64Array } | undefined {
  if (data.nullCount === rows) return undefined;
  const values = data.values as unknown as BigInt64Array;
  if (values.length < rows) throw new BatchShapeError(`column created_at holds ${values.length} values for ${rows} rows`);
  const ms = timesFromI64(values, rows);
  if (data.nullCount > 0) for (let i = 0; i < rows; i++) if (!data.getValid(i)) ms[i] = NaN;
  return { createdAtMs: ms };
}

/**
 * Rows [from, to) of a run's callbacks runs (engine/store/callback-bytes.ts) as the callback and
 * failure_callback Utf8 columns, null where a timer has none; all null (zeroed buffers, no work
 * a row) when no row of the run has one.
 */
function callbackColumns(runs: BytesColumn | undefined, from: number, to: number): { callback: Data; failureCallback: Data } {
  const any = runs !== undefined && (runs.offsets[to] as number) > (runs.offsets[from] as number);
  return { callback: urlColumn(any ? runs : undefined, from, to, callbackBytesOf), failureCallback: urlColumn(any ? runs : undefined, from, to, failureCallbackBytesOf) };
}

/** One URL of each row's callbacks run, as a Utf8 column null where the row has none. */
function urlColumn(runs: BytesColumn | undefined, from: number, to: number, urlOf: (run: Uint8Array) => Uint8Array): Data {
  const n = to - from;
  const offsets = new Int32Array(n + 1);
  const validity = new Uint8Array((n + 7) >> 3);
  if (runs === undefined) return makeData({ type: new Utf8(), length: n, nullCount: n, nullBitmap: validity, valueOffsets: offsets, data: new Uint8Array(0) });
  let bytes = 0;
  for (let i = 0; i < n; i++) {
    bytes += urlOf(bytesOf(runs, from + i)).length;
    offsets[i + 1] = bytes;
  }
  const data = new Uint8Array(bytes);
  let nulls = 0;
  for (let i = 0; i < n; i++) {
    const url = urlOf(bytesOf(runs, from + i));
    if (url.length === 0) {
      nulls++;
      continue;
    }
    data.set(url, offsets[i] as number);
    validity[i >> 3] = (validity[i >> 3] as number) | (1 << (i & 7));
  }
  return makeData({ type: new Utf8(), length: n, nullCount: nulls, nullBitmap: validity, valueOffsets: offsets, data });
}

/** The callback and failure_callback columns as each row's callbacks run; nothing when every row has neither. */
function callbacksOf(callback: Data, failureCallback: Data, rows: number): { callbacks: BytesColumn } | undefined {
  if (callback.nullCount === rows && failureCallback.nullCount === rows) return undefined;
  const urls = [bytesOfColumn(callback, rows, true), bytesOfColumn(failureCallback, rows, true)] as const;
  const offsets = new Int32Array(rows + 1);
  for (let i = 0; i < rows; i++) {
    const callbackBytes = (urls[0].offsets[i + 1] as number) - (urls[0].offsets[i] as number);
    const failureBytes = (urls[1].offsets[i + 1] as number) - (urls[1].offsets[i] as number);
    if (callbackBytes > callbackBytesMax || failureBytes > callbackBytesMax) throw new BatchShapeError(`row ${i}: a callback URL longer than ${callbackBytesMax} bytes`);
    offsets[i + 1] = (offsets[i] as number) + callbacksRunBytes(callbackBytes, failureBytes);
  }
  const values = new Uint8Array(offsets[rows] as number);
  for (let i = 0; i < rows; i++) {
    if (offsets[i + 1] === offsets[i]) continue;
    values.set(packCallbacks(bytesOf(urls[0], i), bytesOf(urls[1], i)), offsets[i] as number);
  }
  return { callbacks: { values, offsets } };
}

/** The rows the two failure columns say failed, with what they say; the writer sets both at the same rows and no others. */
function failuresOf(errors: Data, attemptedAt: Data, rows: number): RunFailures {
  if (errors.nullCount !== attemptedAt.nullCount) throw new BatchShapeError('last_error and last_attempt_at are null at different rows');
  if (errors.nullCount === rows) return noFailures;
  const failed: number[] = [];
  for (let i = 0; i < rows; i++) {
    const valid = errors.getValid(i);
    if (valid !== attemptedAt.getValid(i)) throw new BatchShapeError(`row ${i}: last_error and last_attempt_at are not both null or both set`);
    if (valid) failed.push(i);
  }
  const offsets = errors.valueOffsets as Int32Array;
  const values = errors.values as Uint8Array;
  if (offsets.length < rows + 1) throw new BatchShapeError('last_error offsets out of range');
  const times = attemptedAt.values as BigInt64Array;
  if (times.length < rows) throw new BatchShapeError(`column last_attempt_at holds ${times.length} values for ${rows} rows`);
  const halves = new Int32Array(times.buffer, times.byteOffset, rows * 2);
  const texts: string[] = [];
  const attemptedAtMs = new Float64Array(failed.length);
  for (let k = 0; k < failed.length; k++) {
    const i = failed[k] as number;
    const start = offsets[i] as number;
    const end = offsets[i + 1] as number;
    if (start > end || end > values.length) throw new BatchShapeError(`last_error offsets out of range at row ${i}`);
    if (end - start > deliveryLimits.lastErrorBytesMax) throw new BatchShapeError(`row ${i}: last_error is ${end - start} bytes, more than ${deliveryLimits.lastErrorBytesMax}`);
    try {
      texts.push(decoder.decode(values.subarray(start, end)));
    } catch {
      throw new BatchShapeError(`row ${i}: last_error is not UTF-8`);
    }
    attemptedAtMs[k] = (halves[2 * i + 1] as number) * 2 ** 32 + ((halves[2 * i] as number) >>> 0);
  }
  return { rows: Uint32Array.from(failed), errors: texts, attemptedAtMs };
}

function bytesOfColumn(data: Data, rows: number, nullable: boolean): BytesColumn {
  const offsets = (data.valueOffsets as Int32Array).subarray(0, rows + 1);
  const values = data.values as Uint8Array;
  if (offsets.length !== rows + 1 || offsets[0] !== 0 || (offsets[rows] as number) > values.length) throw new BatchShapeError('column offsets out of range');
  // Read once, not per row: apache-arrow's getters (nullCount, getValid) cost more than the check.
  const nulls = data.nullCount;
  if (!nullable && nulls > 0) throw new BatchShapeError('a non-nullable column has nulls');
  const validity = nullable && nulls > 0 ? (data.nullBitmap as Uint8Array) : undefined;
  if (validity !== undefined && validity.length < (rows + 7) >> 3) throw new BatchShapeError('column validity out of range');
  for (let i = 0; i < rows; i++) {
    const empty = offsets[i + 1] === offsets[i];
    if ((offsets[i + 1] as number) < (offsets[i] as number)) throw new BatchShapeError(`offsets decrease at row ${i}`);
    // The writer makes exactly the empty values null; anything else is not a run written here.
    if (validity !== undefined && ((((validity[i >> 3] as number) >> (i & 7)) & 1) === 1) === empty) throw new BatchShapeError(`row ${i} has a null that is not empty, or an empty value that is not null`);
  }
  if (nullable && nulls === 0) {
    for (let i = 0; i < rows; i++) if (offsets[i + 1] === offsets[i]) throw new BatchShapeError(`row ${i} is empty but not null`);
  }
  return { values: values.subarray(0, offsets[rows] as number), offsets };
}

/** Distinct values of a string column matched by their bytes before one is decoded: queues and targets are a handful. */
const knownEntriesMax = 8;

/**
 * A Utf8 column as distinct strings plus a u32 index per row. A row equal to the one before, or
 * to one of the first few distinct values (compared as bytes, a word at a time), is not decoded
 * again: rows of a bucket in due order alternate between a few queues.
 */
function dictionaryOf(data: Data, rows: number): { entries: string[]; index: Uint32Array } {
  if (data.nullCount !== 0) throw new BatchShapeError('a string column has nulls');
  const offsets = data.valueOffsets as Int32Array;
  if (offsets.length < rows + 1) throw new BatchShapeError('string offsets out of range');
  const values = data.values as Uint8Array;
  const view = new DataView(values.buffer, values.byteOffset, values.byteLength);
  const entries: string[] = [];
  const positions = new Map<string, number>();
  /** Where the first row of each of the first knownEntriesMax entries starts in `values`. */
  const knownStarts: number[] = [];
  const knownLengths: number[] = [];
  const index = new Uint32Array(rows);
  let previous = -1;
  rowLoop: for (let i = 0; i < rows; i++) {
    const start = offsets[i] as number;
    const end = offsets[i + 1] as number;
    if (start > end || end > values.length) throw new BatchShapeError(`string offsets out of range at row ${i}`);
    const before = offsets[i - 1] as number;
    if (previous >= 0 && start - before === end - start && sameBytes(view, before, start, end)) {
      index[i] = previous;
      continue;
    }
    for (let k = 0; k < knownStarts.length; k++) {
      if (knownLengths[k] === end - start && sameBytes(view, knownStarts[k] as number, start, end)) {
        index[i] = previous = k;
        continue rowLoop;
      }
    }
    let text: string;
    try {
      text = decoder.decode(values.subarray(start, end));
    } catch {
      throw new BatchShapeError(`row ${i} is not UTF-8`);
    }
    let position = positions.get(text);
    if (position === undefined) {
      position = entries.push(text) - 1;
      positions.set(text, position);
      if (position < knownEntriesMax) {
        knownStarts.push(start);
        knownLengths.push(end - start);
      }
    }
    index[i] = position;
    previous = position;
  }
  return { entries, index };
}

/** Whether bytes [a, a + (end - start)) equal bytes [start, end) of `view`: four at a time, then the rest. */
function sameBytes(view: DataView, a: number, start: number, end: number): boolean {
  const length = end - start;
  if (a + length > view.byteLength) return false;
  let k = 0;
  for (; k + 4 <= length; k += 4) if (view.getUint32(a + k) !== view.getUint32(start + k)) return false;
  for (; k < length; k++) if (view.getUint8(a + k) !== view.getUint8(start + k)) return false;
  return true;
}
