// The export: every timer matching a filter as one Arrow IPC stream, in the list's (due, id)
// order, a record batch at a time (GET /v1/timers with Accept: Arrow). Main thread. A batch is
// made only when the reader asks for the next one (an async generator: Readable.from pulls it
// when the response has room), and the generator yields to the event loop between batches, so
// an export of millions of timers holds a few batches and never stalls deliveries.
//
//   HitQuery.find(after, window) ─► columns (no object per row) ─► record batch ─►
//   IPC bytes (the schema message once, first) ─► … ─► end-of-stream marker
//
// Columns are named as the JSON view's fields:
//   id Utf8 · state Utf8 · fire_at Timestamp(ms, UTC) · next_attempt_at Timestamp(ms, UTC)? ·
//   attempts Uint32 · queue Utf8 · key Utf8? · target Utf8 · headers Utf8 (JSON)? · payload Binary ·
//   last_status Uint16? · last_error Utf8? · last_attempt_at Timestamp(ms, UTC)? · revision Uint32 ·
//   callback Utf8? · failure_callback Utf8? · created_at Timestamp(ms, UTC)?            (? nullable)
import { setImmediate as nextTurn } from 'node:timers/promises';
import { Binary, type DataType, Field, Schema, Table, tableToIPC, Timestamp, TimeUnit, Uint16, Uint32, Utf8 } from 'apache-arrow';
import { type ColumnBuffers, recordBatchMessage } from './arrow-batch-message.ts';
import { encodeTimerIdInto } from './ids.ts';
import type { BytesColumn as BytesColumnOf } from './batch/timer-batch.ts';
import type { EngineState } from './state.ts';
import { callbackBytesOf, failureCallbackBytesOf } from './store/callback-bytes.ts';
import { timerState } from './store/resident-store.ts';
import { timerStateNames } from './store/timer-state.ts';
import type { HitList } from './timer-hits.ts';
import { HitQuery, type QueryPosition, queryStart, type TimerFilter } from './timer-query.ts';
import { createdAtOf, type RunRows } from './spill/run-rows.ts';
import { ScanReads } from './spill/scan-reads.ts';

const timestamp = (): DataType => new Timestamp(TimeUnit.MILLISECOND, 'UTC');

/** The export's schema: the JSON view's fields (nullable where the view may say null). */
export const exportSchema = new Schema([
  new Field('id', new Utf8(), false),
  new Field('state', new Utf8(), false),
  new Field('fire_at', timestamp(), false),
  new Field('next_attempt_at', timestamp(), true),
  new Field('attempts', new Uint32(), false),
  new Field('queue', new Utf8(), false),
  new Field('key', new Utf8(), true),
  new Field('target', new Utf8(), false),
  new Field('headers', new Utf8(), true),
  new Field('payload', new Binary(), false),
  new Field('last_status', new Uint16(), true),
  new Field('last_error', new Utf8(), true),
  new Field('last_attempt_at', timestamp(), true),
  new Field('revision', new Uint32(), false),
  new Field('callback', new Utf8(), true),
  new Field('failure_callback', new Utf8(), true),
  new Field('created_at', timestamp(), true),
]);

/** Batches found in one pass over the store. */
const exportWindowBatches = 4;
/** The IPC stream's end: a continuation marker and a zero length. */
const endOfStream = Uint8Array.of(0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0);
/** The schema message as an IPC stream writes it: what every batch's stream starts with. */
const schemaMessage = ((): Uint8Array => {
  const empty = tableToIPC(new Table(exportSchema), 'stream');
  return empty.subarray(0, empty.length - endOfStream.length);
})();

/**
 * Every timer matching `filter` after `from`, as the bytes of one Arrow IPC stream, `batchRows`
 * timers a record batch. The timers are found a window of a few batches at a time (one pass over
 * the store per window, not per batch); a resident timer of the window is looked up again when
 * its batch is made, and left out if it is gone by then. `idPrefix` (ASCII) is written before
 * every id: a cluster partition's engine exports the cluster ids the API answers with.
 */
export async function* exportTimers(s: EngineState, filter: TimerFilter, batchRows: number, from: QueryPosition = queryStart, idPrefix = ''): AsyncGenerator<Uint8Array> {
  yield schemaMessage;
  const windowRows = batchRows * exportWindowBatches;
  const encoder = new BatchEncoder(batchRows, Buffer.from(idPrefix, 'latin1'));
  // Each resident timer is looked up again when its batch is made; spilled batches are read
  // through run files held open for the export, into memory it reuses (spill/scan-reads.ts).
  const reads = new ScanReads(s);
  const query = new HitQuery(windowRows, { liveSlots: false, reads });
  try {
    let after = from;
    for (;;) {
      const window = await query.find(s, filter, after, windowRows, (hits) => hits);
      for (let at = 0; at < window.length; at += batchRows) {
        // Deliveries and requests get the loop between finding a window and each of its batches.
        await nextTurn();
        const bytes = encoder.encode(s, window, at, Math.min(at + batchRows, window.length));
        if (bytes !== undefined) yield bytes;
      }
      const last = window.length - 1;
      if (window.length < windowRows || last < 0) break;
      after = { dueMs: window.dueMs[last] as number, seq: window.seq[last] as number, row: window.row[last] as number };
    }
  } finally {
    await reads.close();
  }
  yield endOfStream;
}

/**
 * Makes the record batches of one export. Its columns are made once and filled again for each
 * batch (the IPC writer copies them into the batch's bytes), so an export leaves one buffer a
 * batch behind it, not one a column.
 */
class BatchEncoder {
  readonly #ids: Uint8Array;
  readonly #idOffsets: Int32Array;
  /** Each id's bytes: the prefix's, then the engine id's 24. */
  readonly #idLength: number;
  readonly #idPrefix: Uint8Array;
  readonly #fireAt: MsColumn;
  readonly #nextAttempt: MsColumn;
  readonly #attempts: Uint32Array;
  readonly #states: BytesColumn;
  readonly #queues: BytesColumn;
  readonly #keys: BytesColumn;
  readonly #targets: BytesColumn;
  readonly #headers: BytesColumn;
  readonly #payloads: BytesColumn;
  readonly #lastStatus: Uint16Array;
  readonly #lastStatusValid: Validity;
  readonly #lastError: BytesColumn;
  readonly #lastAttempt: MsColumn;
  readonly #revisions: Uint32Array;
  readonly #callbacks: BytesColumn;
  readonly #failureCallbacks: BytesColumn;
  readonly #createdAt: MsColumn;
  readonly #slots: Int32Array;
  /** The entries of the found list that a batch holds, in order. */
  readonly #entries: Int32Array;

  constructor(rows: number, idPrefix: Uint8Array) {
    const idLength = idPrefix.length + engineIdLength;
    this.#idLength = idLength;
    this.#idPrefix = idPrefix;
    this.#ids = new Uint8Array(rows * idLength);
    // The prefix is the same on every row: written once, and each engine id after it.
    for (let i = 0; i < rows; i++) this.#ids.set(idPrefix, i * idLength);
    this.#idOffsets = Int32Array.from({ length: rows + 1 }, (_, i) => i * idLength);
    this.#fireAt = new MsColumn(rows);
    this.#nextAttempt = new MsColumn(rows);
    this.#attempts = new Uint32Array(rows);
    this.#states = new BytesColumn(rows, rows * 8);
    this.#queues = new BytesColumn(rows, rows * 16);
    this.#keys = new BytesColumn(rows, rows * 32);
    this.#targets = new BytesColumn(rows, rows * 48);
    this.#headers = new BytesColumn(rows, rows * 16);
    this.#payloads = new BytesColumn(rows, rows * 128);
    this.#lastStatus = new Uint16Array(rows);
    this.#lastStatusValid = new Validity(rows);
    this.#lastError = new BytesColumn(rows, 256);
    this.#lastAttempt = new MsColumn(rows);
    this.#revisions = new Uint32Array(rows);
    this.#callbacks = new BytesColumn(rows, 256);
    this.#failureCallbacks = new BytesColumn(rows, 256);
    this.#createdAt = new MsColumn(rows);
    this.#slots = new Int32Array(rows);
    this.#entries = new Int32Array(rows);
  }

  /** One record batch's IPC message of entries [from, to) of `found`; undefined when none of its timers is left. */
  encode(s: EngineState, found: HitList, from: number, to: number): Uint8Array | undefined {
    const store = s.store;
    // A resident timer's slot as of now (released since: left out).
    let count = 0;
    for (let h = from; h < to; h++) {
      const spilled = (found.source[h] as number) >= 0;
      const slot = spilled ? -1 : s.index.get(found.seq[h] as number, found.row[h] as number);
      if (!spilled && slot < 0) continue;
      this.#slots[count] = slot;
      this.#entries[count++] = h;
    }
    if (count === 0) return undefined;
    for (const column of [this.#states, this.#queues, this.#keys, this.#targets, this.#headers, this.#payloads, this.#lastError, this.#callbacks, this.#failureCallbacks]) column.reset();
    for (const column of [this.#fireAt, this.#nextAttempt, this.#lastAttempt, this.#createdAt]) column.reset();
    this.#lastStatusValid.reset();
    for (let i = 0; i < count; i++) {
      const h = this.#entries[i] as number;
      const seq = found.seq[h] as number;
      const row = found.row[h] as number;
      const fireAtMs = found.fireAtMs[h] as number;
      const rows = found.rowsOf(h);
      const index = found.index[h] as number;
      encodeTimerIdInto(this.#ids, i * this.#idLength + this.#idPrefix.length, seq, row, fireAtMs);
      this.#fireAt.set(i, fireAtMs);
      this.#revisions[i] = s.rescheduled.revisionOf(seq, row);
      // A spilled timer's is in its run row (add-times.ts).
      this.#createdAt.set(i, (rows === undefined ? null : createdAtOf(rows, index)) ?? s.addTimes.acceptedAtOf(seq));
      if (rows === undefined) {
        const slot = this.#slots[i] as number;
        const code = store.state[slot] as number;
        this.#states.addText(timerStateNames[code] as string);
        this.#nextAttempt.set(i, code === timerState.retrying ? (store.dueAt[slot] as number) : null);
        this.#attempts[i] = store.attempts[slot] as number;
        this.#queues.addText(s.queueNames[store.queueIndex[slot] as number] as string);
        this.#targets.addText(store.targetOf(slot));
        const status = store.lastStatus[slot] as number;
        this.#lastStatus[i] = status;
        this.#lastStatusValid.set(i, status !== 0);
        this.#lastError.addText(s.failures.errorOf(slot));
        this.#lastAttempt.set(i, s.failures.attemptedAtOf(slot));
        this.#addCallbacks(store.hasCallbacks(slot) ? store.callbacksOf(slot) : noBytes);
      } else {
        // A spilled timer: pending, never attempted.
        this.#states.addText('pending');
        this.#nextAttempt.set(i, null);
        this.#attempts[i] = 0;
        this.#queues.addText(rows.queues[rows.queueIndex[index] as number] as string);
        this.#targets.addText(rows.targets[rows.targetIndex[index] as number] as string);
        this.#lastStatus[i] = 0;
        this.#lastStatusValid.set(i, false);
        this.#lastError.addText(null);
        this.#lastAttempt.set(i, null);
        this.#addCallbacks(rows.callbacks === undefined ? noBytes : callbacksRunOf(rows.callbacks, index));
      }
    }
    this.#addKeysHeadersPayloads(s, found, count);
    return recordBatchMessage(count, [
      notNull(bytesOf(this.#idOffsets, count + 1), this.#ids.subarray(0, count * this.#idLength)),
      this.#states.buffers(count),
      this.#fireAt.buffers(count),
      this.#nextAttempt.buffers(count),
      notNull(bytesOf(this.#attempts, count)),
      this.#queues.buffers(count),
      this.#keys.buffers(count),
      this.#targets.buffers(count),
      this.#headers.buffers(count),
      this.#payloads.buffers(count),
      this.#lastStatusValid.column(count, bytesOf(this.#lastStatus, count)),
      this.#lastError.buffers(count),
      this.#lastAttempt.buffers(count),
      notNull(bytesOf(this.#revisions, count)),
      this.#callbacks.buffers(count),
      this.#failureCallbacks.buffers(count),
      this.#createdAt.buffers(count),
    ]);
  }

  /**
   * The batch's keys, headers and payloads: the consecutive rows of a decoded spilled batch (a
   * bucket read in order is mostly such runs) in one copy a column, a resident timer's alone.
   */
  #addKeysHeadersPayloads(s: EngineState, found: HitList, count: number): void {
    const store = s.store;
    for (let i = 0; i < count; ) {
      const h = this.#entries[i] as number;
      const source = found.source[h] as number;
      if (source < 0) {
        const slot = this.#slots[i] as number;
        this.#keys.add(store.keyOf(slot), true);
        this.#headers.add(store.headersOf(slot), true);
        this.#payloads.add(store.payloadOf(slot), false);
        i++;
        continue;
      }
      const first = found.index[h] as number;
      let end = i + 1;
      for (; end < count; end++) {
        const next = this.#entries[end] as number;
        if (found.source[next] !== source || found.index[next] !== first + (end - i)) break;
      }
      const rows = found.sources[source] as RunRows;
      this.#keys.addRows(rows.keys, first, first + (end - i), true);
      this.#headers.addRows(rows.headers, first, first + (end - i), true);
      this.#payloads.addRows(rows.payload, first, first + (end - i), false);
      i = end;
    }
  }

  /** A timer's callback URLs from its callbacks run (empty: neither), nulls where none. */
  #addCallbacks(run: Uint8Array): void {
    this.#callbacks.add(callbackBytesOf(run), true);
    this.#failureCallbacks.add(failureCallbackBytesOf(run), true);
  }
}

/** Row `row`'s callbacks run of a decoded spilled column: empty (no view made) when it has none. */
function callbacksRunOf(column: BytesColumnOf, row: number): Uint8Array {
  const start = column.offsets[row] as number;
  const end = column.offsets[row + 1] as number;
  return start === end ? noBytes : column.values.subarray(start, end);
}

const engineIdLength = 24;

/** A validity bitmap: a set bit is a value, a clear one a null. */
class Validity {
  readonly #bitmap: Uint8Array;
  #nulls = 0;

  constructor(count: number) {
    this.#bitmap = new Uint8Array((count + 7) >> 3);
  }

  reset(): void {
    this.#bitmap.fill(0);
    this.#nulls = 0;
  }

  set(i: number, valid: boolean): void {
    if (valid) this.#bitmap[i >> 3] = (this.#bitmap[i >> 3] as number) | (1 << (i & 7));
    else this.#nulls++;
  }

  /** The first `count` rows' column: this validity (empty when no row is null), then `values`. */
  column(count: number, ...values: Uint8Array[]): ColumnBuffers {
    return { nullCount: this.#nulls, buffers: [this.#nulls === 0 ? noBytes : this.#bitmap.subarray(0, (count + 7) >> 3), ...values] };
  }
}

const textBytes = new Map<string, Uint8Array>();
const noBytes = new Uint8Array(0);
const utf8 = new TextEncoder();

/** A Utf8 or Binary column filled row by row; an empty value may stand for null. */
class BytesColumn {
  readonly #offsets: Int32Array;
  readonly #validity: Validity;
  #values: Uint8Array;
  #length = 0;
  #row = 0;
  #lastText: string | undefined;
  #lastTextBytes: Uint8Array = noBytes;

  constructor(rows: number, bytesInitial: number) {
    this.#offsets = new Int32Array(rows + 1);
    this.#validity = new Validity(rows);
    this.#values = new Uint8Array(bytesInitial);
  }

  reset(): void {
    this.#length = 0;
    this.#row = 0;
    this.#validity.reset();
  }

  /** `bytes`, or a null when they are empty and `emptyIsNull`. */
  add(bytes: Uint8Array, emptyIsNull: boolean): void {
    this.#addRange(bytes, 0, bytes.length, emptyIsNull);
  }

  /** Rows [from, to) of a decoded spilled column: their bytes in one copy. */
  addRows(column: BytesColumnOf, from: number, to: number, emptyIsNull: boolean): void {
    const start = column.offsets[from] as number;
    const end = column.offsets[to] as number;
    this.#reserve(this.#length + end - start);
    if (end > start) this.#values.set(column.values.subarray(start, end), this.#length);
    const shift = this.#length - start;
    for (let r = from; r < to; r++) {
      const next = column.offsets[r + 1] as number;
      this.#validity.set(this.#row, !(emptyIsNull && next === column.offsets[r]));
      this.#offsets[++this.#row] = next + shift;
    }
    this.#length += end - start;
  }

  #reserve(bytes: number): void {
    if (bytes <= this.#values.length) return;
    const grown = new Uint8Array(Math.max(this.#values.length * 2, bytes));
    grown.set(this.#values.subarray(0, this.#length));
    this.#values = grown;
  }

  #addRange(source: Uint8Array, start: number, end: number, emptyIsNull: boolean): void {
    const length = end - start;
    this.#validity.set(this.#row, !(emptyIsNull && length === 0));
    const to = this.#length + length;
    this.#reserve(to);
    // Short values (keys, states, small payloads) by hand: a view and a set() cost more than their bytes.
    if (length <= 64) for (let i = 0; i < length; i++) this.#values[this.#length + i] = source[start + i] as number;
    else this.#values.set(source.subarray(start, end), this.#length);
    this.#length = to;
    this.#offsets[++this.#row] = to;
  }

  /** A text (the few distinct queues, targets and states are encoded once), or a null. */
  addText(text: string | null): void {
    if (text === null) {
      this.add(noBytes, true);
      return;
    }
    // Rows in a row mostly share their queue, target and state: the same string, no hashing.
    if (text === this.#lastText) {
      this.add(this.#lastTextBytes, false);
      return;
    }
    let bytes = textBytes.get(text);
    if (bytes === undefined) {
      bytes = utf8.encode(text);
      // Targets are the only texts with many values: a bound keeps the cache small.
      if (textBytes.size >= 4096) textBytes.clear();
      textBytes.set(text, bytes);
    }
    this.#lastText = text;
    this.#lastTextBytes = bytes;
    this.add(bytes, false);
  }

  /** The first `count` rows (all there are since the reset). */
  buffers(count: number): ColumnBuffers {
    return this.#validity.column(count, bytesOf(this.#offsets, count + 1), this.#values.subarray(0, this.#length));
  }
}

const twoTo32 = 2 ** 32;

/** A Timestamp(ms) column: int64 written as two 32-bit halves (no BigInt per row), nulls where not given. */
class MsColumn {
  readonly #values: BigInt64Array;
  readonly #halves: Int32Array;
  readonly #validity: Validity;

  constructor(rows: number) {
    this.#values = new BigInt64Array(rows);
    this.#halves = new Int32Array(this.#values.buffer);
    this.#validity = new Validity(rows);
  }

  reset(): void {
    this.#validity.reset();
  }

  set(i: number, ms: number | null): void {
    this.#validity.set(i, ms !== null);
    if (ms === null) return;
    if (ms >= 0 && Number.isSafeInteger(ms) && littleEndian) {
      // The low half by ToUint32 and the high one by an exact division: no floating remainder.
      const low = ms >>> 0;
      this.#halves[2 * i] = low;
      this.#halves[2 * i + 1] = (ms - low) / twoTo32;
    } else this.#values[i] = BigInt(Math.trunc(ms));
  }

  buffers(count: number): ColumnBuffers {
    return this.#validity.column(count, bytesOf(this.#values, count));
  }
}

const littleEndian = new Uint8Array(Uint16Array.of(1).buffer)[0] === 1;

/** The first `count` elements of a typed array, as bytes (no copy). */
function bytesOf(values: Int32Array | Uint32Array | Uint16Array | BigInt64Array, count: number): Uint8Array {
  return new Uint8Array(values.buffer, values.byteOffset, count * values.BYTES_PER_ELEMENT);
}

/** A column that has no nulls: an empty validity, then `values`. */
function notNull(...values: Uint8Array[]): ColumnBuffers {
  return { nullCount: 0, buffers: [noBytes, ...values] };
}
