// The export: every timer matching a filter as one Arrow IPC stream, in the list's (due, id)
// order, a record batch at a time (GET /v1/timers with Accept: Arrow). Main thread. A batch is
// made only when the reader asks for the next one (an async generator: Readable.from pulls it
// when the response has room), and the generator yields to the event loop between batches, so
// an export of millions of timers holds a few batches and never stalls deliveries.
//
//   queryHits(after, batchRows) ─► columns (no object per row but the hit) ─► record batch ─►
//   IPC bytes (the schema message once, first) ─► … ─► end-of-stream marker
//
// Columns are named as the JSON view's fields:
//   id Utf8 · state Utf8 · fire_at Timestamp(ms, UTC) · next_attempt_at Timestamp(ms, UTC)? ·
//   attempts Uint32 · queue Utf8 · key Utf8? · target Utf8 · headers Utf8 (JSON)? · payload Binary ·
//   last_status Uint16? · last_error Utf8? · last_attempt_at Timestamp(ms, UTC)?      (? nullable)
import assert from 'node:assert/strict';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { Binary, type Data, type DataType, Field, makeData, RecordBatch, Schema, Struct, Table, tableToIPC, Timestamp, TimeUnit, Uint16, Uint32, Utf8 } from 'apache-arrow';
import { encodeTimerIdInto } from './ids.ts';
import { bytesOf } from './spill/run-rows.ts';
import type { EngineState } from './state.ts';
import { timerState } from './store/resident-store.ts';
import { timerStateNames } from './store/timer-state.ts';
import { type QueryPosition, queryHits, queryStart, type TimerFilter, type TimerHit } from './timer-query.ts';

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
]);

/** The IPC stream's end: a continuation marker and a zero length. */
const endOfStream = Uint8Array.of(0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0);
/** The schema message as an IPC stream writes it: what every batch's stream starts with. */
const schemaMessage = ((): Uint8Array => {
  const empty = tableToIPC(new Table(exportSchema), 'stream');
  return empty.subarray(0, empty.length - endOfStream.length);
})();

/** Every timer matching `filter` after `from`, as the bytes of one Arrow IPC stream, `batchRows` timers a record batch. */
export async function* exportTimers(s: EngineState, filter: TimerFilter, batchRows: number, from: QueryPosition = queryStart): AsyncGenerator<Uint8Array> {
  yield schemaMessage;
  let after = from;
  for (;;) {
    const { bytes, last, rows } = await queryHits(s, filter, after, batchRows, (hits) => ({ bytes: hits.length === 0 ? undefined : encodeBatch(s, hits), last: hits[hits.length - 1], rows: hits.length }));
    if (bytes !== undefined) yield bytes;
    if (rows < batchRows || last === undefined) break;
    after = last;
    // Deliveries and requests get the loop before the next batch is made.
    await nextTurn();
  }
  yield endOfStream;
}

/** One record batch's IPC message (its stream's schema message and end cut off). */
function encodeBatch(s: EngineState, hits: readonly TimerHit[]): Uint8Array {
  const count = hits.length;
  const ids = new Uint8Array(count * 24);
  const idOffsets = new Int32Array(count + 1);
  const fireAt = new MsColumn(count);
  const nextAttempt = new MsColumn(count);
  const attempts = new Uint32Array(count);
  const states = new BytesColumn(count);
  const queues = new BytesColumn(count);
  const keys = new BytesColumn(count);
  const targets = new BytesColumn(count);
  const headers = new BytesColumn(count);
  const payloads = new BytesColumn(count);
  const lastStatus = new Uint16Array(count);
  const lastStatusValid = new Validity(count);
  const lastError = new BytesColumn(count);
  const lastAttempt = new MsColumn(count);
  const store = s.store;
  for (let i = 0; i < count; i++) {
    const hit = hits[i] as TimerHit;
    encodeTimerIdInto(ids, i * 24, hit.seq, hit.row, hit.fireAtMs);
    idOffsets[i + 1] = (i + 1) * 24;
    fireAt.set(i, hit.fireAtMs);
    const { rows, index, slot } = hit;
    if (rows === undefined) {
      const code = store.state[slot] as number;
      states.addText(timerStateNames[code] as string);
      nextAttempt.set(i, code === timerState.retrying ? (store.dueAt[slot] as number) : null);
      attempts[i] = store.attempts[slot] as number;
      queues.addText(s.queueNames[store.queueIndex[slot] as number] as string);
      keys.add(store.keyOf(slot), true);
      targets.addText(store.targetOf(slot));
      headers.add(store.headersOf(slot), true);
      payloads.add(store.payloadOf(slot), false);
      const status = store.lastStatus[slot] as number;
      lastStatus[i] = status;
      lastStatusValid.set(i, status !== 0);
      const error = s.failures.errorOf(slot);
      lastError.addText(error);
      lastAttempt.set(i, s.failures.attemptedAtOf(slot));
    } else {
      // A spilled timer: pending, never attempted.
      states.addText('pending');
      nextAttempt.set(i, null);
      queues.addText(rows.queues[rows.queueIndex[index] as number] as string);
      keys.add(bytesOf(rows.keys, index), true);
      targets.addText(rows.targets[rows.targetIndex[index] as number] as string);
      headers.add(bytesOf(rows.headers, index), true);
      payloads.add(bytesOf(rows.payload, index), false);
      lastStatusValid.set(i, false);
      lastError.addText(null);
      lastAttempt.set(i, null);
    }
  }
  const children = [
    makeData({ type: new Utf8(), length: count, valueOffsets: idOffsets, data: ids }),
    states.data(new Utf8()),
    fireAt.data(),
    nextAttempt.data(),
    makeData({ type: new Uint32(), length: count, data: attempts }),
    queues.data(new Utf8()),
    keys.data(new Utf8()),
    targets.data(new Utf8()),
    headers.data(new Utf8()),
    payloads.data(new Binary()),
    makeData({ type: new Uint16(), length: count, data: lastStatus, nullBitmap: lastStatusValid.bitmap, nullCount: lastStatusValid.nulls }),
    lastError.data(new Utf8()),
    lastAttempt.data(),
  ];
  const batch = new RecordBatch(exportSchema, makeData({ type: new Struct(exportSchema.fields), length: count, nullCount: 0, children }));
  const stream = tableToIPC(new Table([batch]), 'stream');
  assert.ok(stream.length > schemaMessage.length + endOfStream.length, 'a batch\'s stream holds the schema, the batch and the end');
  return stream.subarray(schemaMessage.length, stream.length - endOfStream.length);
}

/** A validity bitmap: a set bit is a value, a clear one a null. */
class Validity {
  readonly bitmap: Uint8Array;
  nulls = 0;

  constructor(count: number) {
    this.bitmap = new Uint8Array((count + 7) >> 3);
  }

  set(i: number, valid: boolean): void {
    if (valid) this.bitmap[i >> 3] = (this.bitmap[i >> 3] as number) | (1 << (i & 7));
    else this.nulls++;
  }
}

const textBytes = new Map<string, Uint8Array>();
const noBytes = new Uint8Array(0);
const utf8 = new TextEncoder();

/** A Utf8 or Binary column filled row by row; an empty value may stand for null. */
class BytesColumn {
  readonly #offsets: Int32Array;
  readonly #validity: Validity;
  #values = new Uint8Array(4096);
  #length = 0;
  #row = 0;

  constructor(count: number) {
    this.#offsets = new Int32Array(count + 1);
    this.#validity = new Validity(count);
  }

  /** `bytes`, or a null when they are empty and `emptyIsNull`. */
  add(bytes: Uint8Array, emptyIsNull: boolean): void {
    this.#validity.set(this.#row, !(emptyIsNull && bytes.length === 0));
    if (this.#length + bytes.length > this.#values.length) {
      const grown = new Uint8Array(Math.max(this.#values.length * 2, this.#length + bytes.length));
      grown.set(this.#values.subarray(0, this.#length));
      this.#values = grown;
    }
    this.#values.set(bytes, this.#length);
    this.#length += bytes.length;
    this.#offsets[++this.#row] = this.#length;
  }

  /** A text (the few distinct queues, targets and states are encoded once), or a null. */
  addText(text: string | null): void {
    if (text === null) {
      this.add(noBytes, true);
      return;
    }
    let bytes = textBytes.get(text);
    if (bytes === undefined) {
      bytes = utf8.encode(text);
      // Targets are the only texts with many values: a bound keeps the cache small.
      if (textBytes.size >= 4096) textBytes.clear();
      textBytes.set(text, bytes);
    }
    this.add(bytes, false);
  }

  data<T extends Utf8 | Binary>(type: T): Data<T> {
    const validity = this.#validity;
    const props = { length: this.#row, valueOffsets: this.#offsets, data: this.#values.subarray(0, this.#length), nullBitmap: validity.bitmap, nullCount: validity.nulls };
    return (type instanceof Utf8 ? makeData({ type, ...props }) : makeData({ type: type as Binary, ...props })) as Data<T>;
  }
}

const twoTo32 = 2 ** 32;

/** A Timestamp(ms) column: int64 written as two 32-bit halves (no BigInt per row), nulls where not given. */
class MsColumn {
  readonly #values: BigInt64Array;
  readonly #halves: Int32Array;
  readonly #validity: Validity;

  constructor(count: number) {
    this.#values = new BigInt64Array(count);
    this.#halves = new Int32Array(this.#values.buffer);
    this.#validity = new Validity(count);
  }

  set(i: number, ms: number | null): void {
    this.#validity.set(i, ms !== null);
    if (ms === null) return;
    if (ms >= 0 && Number.isSafeInteger(ms) && littleEndian) {
      this.#halves[2 * i] = ms % twoTo32 | 0;
      this.#halves[2 * i + 1] = Math.floor(ms / twoTo32);
    } else this.#values[i] = BigInt(Math.trunc(ms));
  }

  data(): Data<Timestamp> {
    return makeData({ type: timestamp() as Timestamp, length: this.#values.length, data: this.#values, nullBitmap: this.#validity.bitmap, nullCount: this.#validity.nulls });
  }
}

const littleEndian = new Uint8Array(Uint16Array.of(1).buffer)[0] === 1;
