// The engine's own binary form of a TimerBatch, for batches that did not arrive as Arrow
// (JSON, NDJSON, the in-process API). It is the batch's columns laid end to end, so encoding
// is a list of views over the batch's own buffers (the WAL writes them without a join) and
// decoding copies only the fixed-width columns (for alignment); byte strings stay views.
// docs/format/engine-records.md has the layout.
//
//   rows u32 | n u32 { len u32, target } | m u32 { len u32, queue }
//   fire_at f64[rows] | target_index i32[rows] | queue_index i32[rows]
//   payload offsets i32[rows+1], values | headers offsets, values | key offsets, values
import assert from 'node:assert/strict';
import { endianness } from 'node:os';
import type { BytesColumn, TimerBatch } from './timer-batch.ts';

// Typed arrays are written in the machine's byte order; the format is little-endian.
assert.equal(endianness(), 'LE', 'fermata runs on little-endian machines only');

const decoder = new TextDecoder('utf-8', { fatal: true });

/** Byte runs at least this long are written where they lie, as parts of their own; shorter ones are copied. */
const inlineBytesMax = 4096;

/**
 * Writes the fixed-width fields and short byte runs into one buffer, and hands long byte runs
 * over as parts of their own in between, so a one-timer batch is one part and a batch of
 * large payloads is never copied.
 */
class PartsWriter {
  readonly parts: Uint8Array[] = [];
  readonly #buffer: Buffer;
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

  string(text: string): void {
    const length = this.#buffer.write(text, this.#at + 4, 'utf8');
    this.u32(length);
    this.#at += length;
  }

  array(values: Float64Array | Int32Array): void {
    this.#buffer.set(new Uint8Array(values.buffer, values.byteOffset, values.byteLength), this.#at);
    this.#at += values.byteLength;
  }

  bytes(run: Uint8Array): void {
    if (run.length < inlineBytesMax) {
      this.#buffer.set(run, this.#at);
      this.#at += run.length;
      return;
    }
    this.#flush();
    this.parts.push(run);
  }

  finish(): Uint8Array[] {
    this.#flush();
    return this.parts;
  }

  #flush(): void {
    if (this.#at > this.#runStart) this.parts.push(this.#buffer.subarray(this.#runStart, this.#at));
    this.#runStart = this.#at;
  }
}

function stringsBytes(strings: readonly string[]): number {
  let bytes = 4;
  for (const text of strings) bytes += 4 + Buffer.byteLength(text, 'utf8');
  return bytes;
}

/** The column's byte run and offsets rebased to start at 0 (a slice of a larger column may not). */
function columnOf(column: BytesColumn, rows: number): { offsets: Int32Array; run: Uint8Array } {
  const offsets = column.offsets.subarray(0, rows + 1);
  const start = offsets[0] as number;
  const run = column.values.subarray(start, offsets[rows] as number);
  return { offsets: start === 0 ? offsets : Int32Array.from(offsets, (offset) => offset - start), run };
}

/** The batch as parts to append in order: one buffer of its small fields, long byte runs as they lie. */
export function encodeBatch(batch: TimerBatch): Uint8Array[] {
  const rows = batch.rows;
  const columns = [columnOf(batch.payload, rows), columnOf(batch.headers, rows), columnOf(batch.keys, rows)];
  let capacity = 4 + stringsBytes(batch.targets) + stringsBytes(batch.queues) + 16 * rows;
  for (const { offsets, run } of columns) capacity += offsets.byteLength + (run.length < inlineBytesMax ? run.length : 0);
  const writer = new PartsWriter(capacity);
  writer.u32(rows);
  writer.u32(batch.targets.length);
  for (const target of batch.targets) writer.string(target);
  writer.u32(batch.queues.length);
  for (const queue of batch.queues) writer.string(queue);
  writer.array(batch.fireAtMs.subarray(0, rows));
  writer.array(batch.targetIndex.subarray(0, rows));
  writer.array(batch.queueIndex.subarray(0, rows));
  for (const { offsets, run } of columns) {
    writer.array(offsets);
    writer.bytes(run);
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

/** Reads a batch back; throws RangeError (or a UTF-8 TypeError) on bytes it did not write. */
export function decodeBatch(body: Uint8Array): TimerBatch {
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
  if (reader.at !== body.length) throw new RangeError(`${body.length - reader.at} bytes after the batch`);
  return { rows, fireAtMs, targets, targetIndex, queues, queueIndex, payload, headers, keys };
}
