// The engine's own binary form of a TimerBatch, for batches that did not arrive as Arrow
// (JSON, NDJSON, the in-process API). It is the batch's columns laid end to end, so encoding
// is a list of views over the batch's own buffers (the WAL writes them without a join) and
// decoding copies only the fixed-width columns (for alignment); byte strings stay views.
// docs/format/engine-records.md has the layout.
//
//   rows u32 | n u32 { len u32, target } | m u32 { len u32, queue }
//   fire_at f64[rows] | target_index i32[rows] | queue_index i32[rows]
//   payload offsets i32[rows+1], values | headers offsets, values | key offsets, values
//   [callback offsets, values | failure_callback offsets, values]   (ADD encoding 3 only)
import assert from 'node:assert/strict';
import { endianness } from 'node:os';
import type { BytesColumn, TimerBatch } from './timer-batch.ts';

// Typed arrays are written in the machine's byte order; the format is little-endian.
assert.equal(endianness(), 'LE', 'fermata runs on little-endian machines only');

const decoder = new TextDecoder('utf-8', { fatal: true });

/** Byte runs at least this long are written where they lie, as parts of their own; shorter ones are copied. */
const inlineBytesMax = 4096;

/** Arrays up to this many elements are written element by element: no view object for a one-timer batch. */
const elementwiseMax = 16;
/**
 * UTF-8 bytes of targets and queue names seen lately: the same few recur in batch after batch.
 * Cleared whenever it reaches this size.
 */
const encodedStringsMax = 1024;
const encodedStrings = new Map<string, Uint8Array>();
const utf8Encoder = new TextEncoder();

function utf8Of(text: string): Uint8Array {
  let bytes = encodedStrings.get(text);
  if (bytes === undefined) {
    if (encodedStrings.size >= encodedStringsMax) encodedStrings.clear();
    bytes = utf8Encoder.encode(text);
    encodedStrings.set(text, bytes);
  }
  return bytes;
}

/**
 * Writes the fixed-width fields and short byte runs into one buffer, and hands long byte runs
 * over as parts of their own in between, so a one-timer batch is one part and a batch of
 * large payloads is never copied.
 */
class PartsWriter {
  readonly parts: Uint8Array[] = [];
  readonly #buffer: Uint8Array;
  readonly #view: DataView;
  #at = 0;
  #runStart = 0;

  constructor(capacity: number) {
    this.#buffer = Buffer.allocUnsafe(capacity);
    this.#view = new DataView(this.#buffer.buffer, this.#buffer.byteOffset, this.#buffer.byteLength);
  }

  u32(value: number): void {
    this.#view.setUint32(this.#at, value, true);
    this.#at += 4;
  }

  /** Length-prefixed bytes, always copied (targets and queue names). */
  string(bytes: Uint8Array): void {
    this.u32(bytes.length);
    this.#buffer.set(bytes, this.#at);
    this.#at += bytes.length;
  }

  f64s(values: Float64Array, count: number): void {
    if (count > elementwiseMax) return this.#copy(values, count * 8);
    for (let i = 0; i < count; i++, this.#at += 8) this.#view.setFloat64(this.#at, values[i] as number, true);
  }

  /** `count` values, each less `base` (offsets rebased to 0). */
  i32s(values: Int32Array, count: number, base = 0): void {
    if (count > elementwiseMax || base !== 0) {
      if (base === 0) return this.#copy(values, count * 4);
      for (let i = 0; i < count; i++, this.#at += 4) this.#view.setInt32(this.#at, (values[i] as number) - base, true);
      return;
    }
    for (let i = 0; i < count; i++, this.#at += 4) this.#view.setInt32(this.#at, values[i] as number, true);
  }

  /** Bytes [start, end) of `values`: copied when short, a part of their own when long. */
  bytes(values: Uint8Array, start: number, end: number): void {
    if (end - start >= inlineBytesMax) {
      this.#flush();
      this.parts.push(values.subarray(start, end));
      return;
    }
    if (end === start) return;
    this.#buffer.set(start === 0 && end === values.length ? values : values.subarray(start, end), this.#at);
    this.#at += end - start;
  }

  finish(): Uint8Array[] {
    this.#flush();
    return this.parts;
  }

  #copy(values: Float64Array | Int32Array, byteLength: number): void {
    this.#buffer.set(new Uint8Array(values.buffer, values.byteOffset, byteLength), this.#at);
    this.#at += byteLength;
  }

  #flush(): void {
    if (this.#at > this.#runStart) this.parts.push(this.#buffer.subarray(this.#runStart, this.#at));
    this.#runStart = this.#at;
  }
}

function stringsBytes(strings: readonly string[]): number {
  let bytes = 4;
  for (const text of strings) bytes += 4 + utf8Of(text).length;
  return bytes;
}

/** Bytes the column adds to the writer's own buffer: its offsets, and its byte run if short. */
function columnBytes(column: BytesColumn, rows: number): number {
  const run = (column.offsets[rows] as number) - (column.offsets[0] as number);
  return 4 * (rows + 1) + (run < inlineBytesMax ? run : 0);
}

/** The column's offsets rebased to start at 0 (a slice of a larger column may not), then its byte run. */
function writeColumn(writer: PartsWriter, column: BytesColumn, rows: number): void {
  const start = column.offsets[0] as number;
  writer.i32s(column.offsets, rows + 1, start);
  writer.bytes(column.values, start, column.offsets[rows] as number);
}

/** The batch as parts to append in order: one buffer of its small fields, long byte runs as they lie. */
export function encodeBatch(batch: TimerBatch): Uint8Array[] {
  const rows = batch.rows;
  const capacity =
    4 +
    stringsBytes(batch.targets) +
    stringsBytes(batch.queues) +
    16 * rows +
    columnBytes(batch.payload, rows) +
    columnBytes(batch.headers, rows) +
    columnBytes(batch.keys, rows) +
    (batch.callback === undefined ? 0 : columnBytes(batch.callback, rows)) +
    (batch.failureCallback === undefined ? 0 : columnBytes(batch.failureCallback, rows));
  const writer = new PartsWriter(capacity);
  writer.u32(rows);
  writer.u32(batch.targets.length);
  for (const target of batch.targets) writer.string(utf8Of(target));
  writer.u32(batch.queues.length);
  for (const queue of batch.queues) writer.string(utf8Of(queue));
  writer.f64s(batch.fireAtMs, rows);
  writer.i32s(batch.targetIndex, rows);
  writer.i32s(batch.queueIndex, rows);
  writeColumn(writer, batch.payload, rows);
  writeColumn(writer, batch.headers, rows);
  writeColumn(writer, batch.keys, rows);
  // ADD encoding 3: the callbacks follow as two more columns (hasCallbacks tells which encoding).
  if (batch.callback !== undefined && batch.failureCallback !== undefined) {
    writeColumn(writer, batch.callback, rows);
    writeColumn(writer, batch.failureCallback, rows);
  }
  return writer.finish();
}

class Reader {
  readonly #bytes: Uint8Array;
  readonly #view: DataView;
  at = 0;

  constructor(bytes: Uint8Array) {
    this.#bytes = bytes;
    this.#view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }

  #need(length: number): void {
    if (length < 0 || this.at + length > this.#bytes.length) throw new RangeError(`batch body ends at ${this.#bytes.length}, needed ${this.at + length}`);
  }

  u32(): number {
    this.#need(4);
    const value = this.#view.getUint32(this.at, true);
    this.at += 4;
    return value;
  }

  bytes(length: number): Uint8Array {
    this.#need(length);
    const out = this.#bytes.subarray(this.at, this.at + length);
    this.at += length;
    return out;
  }

  /** A copy, so the typed array that views it is aligned. */
  aligned(length: number): ArrayBuffer {
    return this.bytes(length).slice().buffer;
  }

  strings(): string[] {
    const count = this.u32();
    const out: string[] = [];
    for (let i = 0; i < count; i++) out.push(decoder.decode(this.bytes(this.u32())));
    return out;
  }

  column(rows: number): BytesColumn {
    const offsets = new Int32Array(this.aligned(4 * (rows + 1)));
    for (let row = 0; row < rows; row++) {
      if ((offsets[row] as number) > (offsets[row + 1] as number)) throw new RangeError(`offsets decrease at row ${row}`);
    }
    if (offsets[0] !== 0) throw new RangeError('offsets do not start at 0');
    return { offsets, values: this.bytes(offsets[rows] as number) };
  }
}

function checkIndex(index: Int32Array, size: number, what: string): void {
  for (let row = 0; row < index.length; row++) {
    const value = index[row] as number;
    if (value < 0 || value >= size) throw new RangeError(`${what} index ${value} out of range at row ${row}`);
  }
}

/** Whether encodeBatch writes the callback columns (the ADD record's encoding 3, not 2). */
export function hasCallbacks(batch: TimerBatch): boolean {
  return batch.callback !== undefined && batch.failureCallback !== undefined;
}

/**
 * Reads a batch back; throws RangeError (or a UTF-8 TypeError) on bytes it did not write.
 * `withCallbacks`: the body has the two callback columns after the keys (encoding 3).
 */
export function decodeBatch(body: Uint8Array, withCallbacks = false): TimerBatch {
  const reader = new Reader(body);
  const rows = reader.u32();
  const targets = reader.strings();
  const queues = reader.strings();
  const fireAtMs = new Float64Array(reader.aligned(8 * rows));
  const targetIndex = new Int32Array(reader.aligned(4 * rows));
  const queueIndex = new Int32Array(reader.aligned(4 * rows));
  checkIndex(targetIndex, targets.length, 'target');
  checkIndex(queueIndex, queues.length, 'queue');
  const payload = reader.column(rows);
  const headers = reader.column(rows);
  const keys = reader.column(rows);
  const callbacks = withCallbacks ? { callback: reader.column(rows), failureCallback: reader.column(rows) } : undefined;
  if (reader.at !== body.length) throw new RangeError(`${body.length - reader.at} bytes after the batch`);
  return { rows, fireAtMs, targets, targetIndex, queues, queueIndex, payload, headers, keys, ...callbacks };
}
