// RunRows: the timers of a run (or of one of its batches) as columns, the form the spill
// files are written from and read into. No object per timer: numbers in typed arrays, byte
// strings as one values buffer plus row offsets (engine/batch/timer-batch.ts's BytesColumn),
// queues and targets as a small dictionary plus a u32 index per row. Main thread only.
//
//   rows = 3   seq [7, 7, 9]   row [0, 1, 0]   dueAtMs [t0, t1, t2]   …
//              targets ["https://a/hook", "https://b/x"]   targetIndex [0, 1, 0]
//              payload.offsets [0, 5, 5, 9]   payload.values "hello" "" "abcd"
//              failures.rows [1]   failures.errors ["HTTP 503"]   failures.attemptedAtMs [t]
//
// A timer's last failed attempt (last_error, last_attempt_at in the file) is kept apart, by row:
// most timers never fail, so they cost nothing here, and in the file a null bit and the zeroed
// bytes Arrow's layout keeps for a null (a time, a text offset).
// RunRowsBuilder appends rows one field set at a time, growing its columns by doubling, for
// the engine copying slots out of its store and for compaction copying rows between runs.
import assert from 'node:assert/strict';
import type { BytesColumn } from '../batch/timer-batch.ts';

export interface RunRows {
  readonly rows: number;
  /** WAL sequence of the timer's ADD record. */
  readonly seq: Float64Array;
  /** Row in that record's batch. */
  readonly row: Uint32Array;
  readonly fireAtMs: Float64Array;
  /** When the timer is next due; runs are sorted by (dueAtMs, seq, row). */
  readonly dueAtMs: Float64Array;
  /** timerState codes (engine/store/resident-store.ts). */
  readonly state: Uint8Array;
  readonly attempts: Uint16Array;
  readonly lastStatus: Uint16Array;
  /** 0 = none. */
  readonly deadReason: Uint8Array;
  readonly queues: readonly string[];
  readonly queueIndex: Uint32Array;
  readonly targets: readonly string[];
  readonly targetIndex: Uint32Array;
  /** Idempotency key; empty = none (null in the file). */
  readonly keys: BytesColumn;
  readonly payload: BytesColumn;
  /** The engine's header bytes, opaque here; empty = none (null in the file). */
  readonly headers: BytesColumn;
  /** The rows whose timer's last attempt failed; the others have no last error (null in the file). */
  readonly failures: RunFailures;
  /**
   * Each row's callbacks run (engine/store/callback-bytes.ts: both URLs, empty = none); the file
   * holds them as the `callback` and `failure_callback` columns. Absent when no row has one.
   */
  readonly callbacks?: BytesColumn;
  /**
   * When each row's ADD record was accepted (epoch ms; NaN = unknown, null in the file): a spilled
   * timer's `created_at`, which the engine's add-times table keeps for resident timers only.
   * Absent when no row has one (runs of version 3 and before have no such column).
   */
  readonly createdAtMs?: Float64Array;
}

/** Row `i`'s created_at (epoch ms), or null when its run does not know it. */
export function createdAtOf(rows: RunRows, i: number): number | null {
  const ms = rows.createdAtMs?.[i];
  return ms === undefined || Number.isNaN(ms) ? null : ms;
}

/** Why and when the last attempt of a few rows' timers failed, a row's entry at the same index of each. */
export interface RunFailures {
  /** Row indexes, ascending. */
  readonly rows: Uint32Array;
  /** Why it failed ("HTTP 503", "connection refused", …). */
  readonly errors: readonly string[];
  /** When that attempt was made, epoch ms. */
  readonly attemptedAtMs: Float64Array;
}

const noBytes = new Uint8Array(0);

export const noFailures: RunFailures = { rows: new Uint32Array(0), errors: [], attemptedAtMs: new Float64Array(0) };

/** The entry of row `i` in `failures`, or -1 when its timer has no failure. */
export function failureOf(failures: RunFailures, i: number): number {
  return indexInAscending(failures.rows, i);
}

/** Where `value` is in the ascending `values`, or -1. */
export function indexInAscending(values: ArrayLike<number>, value: number): number {
  let low = 0;
  let high = values.length - 1;
  while (low <= high) {
    const mid = (low + high) >>> 1;
    const at = values[mid] as number;
    if (at === value) return mid;
    if (at < value) low = mid + 1;
    else high = mid - 1;
  }
  return -1;
}

/** The first entry of `failures` at row `i` or after it (its length when none). */
export function firstFailureFrom(failures: RunFailures, i: number): number {
  const rows = failures.rows;
  let low = 0;
  let high = rows.length;
  while (low < high) {
    const mid = (low + high) >>> 1;
    if ((rows[mid] as number) < i) low = mid + 1;
    else high = mid;
  }
  return low;
}

/** One timer's fields other than its strings, for RunRowsBuilder.append. */
export interface RunRowFields {
  readonly seq: number;
  readonly row: number;
  readonly fireAtMs: number;
  readonly dueAtMs: number;
  readonly state: number;
  readonly attempts: number;
  readonly lastStatus: number;
  readonly deadReason: number;
  /** When its ADD record was accepted (epoch ms); NaN or absent = unknown. */
  readonly createdAtMs?: number;
}

/** Negative, zero or positive as row `a` of `x` sorts before, with or after row `b` of `y`, by (dueAt, seq, row). */
export function compareRunRows(x: RunRows, a: number, y: RunRows, b: number): number {
  return (
    (x.dueAtMs[a] as number) - (y.dueAtMs[b] as number) ||
    (x.seq[a] as number) - (y.seq[b] as number) ||
    (x.row[a] as number) - (y.row[b] as number)
  );
}

/** The bytes of row `i` of a byte column. */
export function bytesOf(column: BytesColumn, i: number): Uint8Array {
  return column.values.subarray(column.offsets[i] as number, column.offsets[i + 1] as number);
}

class BytesBuilder {
  values: Uint8Array;
  offsets: Int32Array;
  used = 0;

  constructor(capacity: number, bytes: number) {
    this.offsets = new Int32Array(capacity + 1);
    this.values = new Uint8Array(Math.max(256, bytes));
  }

  push(index: number, bytes: Uint8Array): void {
    // Most keys and headers are empty: nothing to copy (a checkpoint pushes three per timer).
    if (bytes.length === 0) {
      this.offsets[index + 1] = this.used;
      return;
    }
    if (this.used + bytes.length > this.values.length) {
      const grown = new Uint8Array(Math.max(this.values.length * 2, this.used + bytes.length));
      grown.set(this.values.subarray(0, this.used));
      this.values = grown;
    }
    this.values.set(bytes, this.used);
    this.used += bytes.length;
    this.offsets[index + 1] = this.used;
  }

  /** Empties the column, keeping its buffers for the next rows. */
  clear(): void {
    this.used = 0;
  }

  grow(capacity: number): void {
    const offsets = new Int32Array(capacity + 1);
    offsets.set(this.offsets);
    this.offsets = offsets;
  }

  finish(rows: number): BytesColumn {
    return { values: this.values.subarray(0, this.used), offsets: this.offsets.subarray(0, rows + 1) };
  }
}

/** Interns strings into a dictionary, with a cache from a source dictionary's indexes to its own. */
class Dictionary {
  readonly entries: string[] = [];
  readonly #positions = new Map<string, number>();
  readonly #remaps = new WeakMap<readonly string[], Int32Array>();

  #lastValue: string | undefined;
  #lastPosition = -1;

  intern(value: string): number {
    // Runs of rows share a queue and a target: the last answer again, without hashing the string.
    if (value === this.#lastValue) return this.#lastPosition;
    let position = this.#positions.get(value);
    if (position === undefined) {
      position = this.entries.push(value) - 1;
      this.#positions.set(value, position);
    }
    this.#lastValue = value;
    this.#lastPosition = position;
    return position;
  }

  /** This dictionary's index for entry `index` of `source`, interned on first use. */
  internFrom(source: readonly string[], index: number): number {
    let remap = this.#remaps.get(source);
    if (remap === undefined) {
      remap = new Int32Array(source.length).fill(-1);
      this.#remaps.set(source, remap);
    }
    let position = remap[index] as number;
    if (position < 0) {
      position = this.intern(source[index] as string);
      remap[index] = position;
    }
    return position;
  }
}

export class RunRowsBuilder {
  #rows = 0;
  #capacity: number;
  #seq: Float64Array;
  #row: Uint32Array;
  #fireAt: Float64Array;
  #dueAt: Float64Array;
  #state: Uint8Array;
  #attempts: Uint16Array;
  #lastStatus: Uint16Array;
  #deadReason: Uint8Array;
  /** NaN where unknown. */
  #createdAt: Float64Array;
  /** Whether any row appended since the last reset has a known created_at. */
  #anyCreatedAt = false;
  #queueIndex: Uint32Array;
  #targetIndex: Uint32Array;
  #queues = new Dictionary();
  #targets = new Dictionary();
  #keys: BytesBuilder;
  #payload: BytesBuilder;
  #headers: BytesBuilder;
  /** Callbacks runs: made at the first row that has one (most runs have none), then one entry a row. */
  #callbacks: BytesBuilder | undefined;
  #variableBytes = 0;
  // Failures are few: plain arrays, empty for most slices.
  #failureRows: number[] = [];
  #failureErrors: string[] = [];
  #failureTimes: number[] = [];

  /**
   * Room for `capacity` rows and, when the caller knows them (a checkpoint does, from the store's
   * length columns), the bytes of their keys, payloads and headers: the columns then never grow
   * (growing by doubling copied every payload about twice more, into freshly faulted pages).
   */
  constructor(capacity = 1024, bytes: Partial<Record<'keys' | 'payload' | 'headers', number>> = {}) {
    assert.ok(Number.isSafeInteger(capacity) && capacity >= 1, 'capacity must be a positive integer');
    this.#capacity = capacity;
    this.#seq = new Float64Array(capacity);
    this.#row = new Uint32Array(capacity);
    this.#fireAt = new Float64Array(capacity);
    this.#dueAt = new Float64Array(capacity);
    this.#state = new Uint8Array(capacity);
    this.#attempts = new Uint16Array(capacity);
    this.#lastStatus = new Uint16Array(capacity);
    this.#deadReason = new Uint8Array(capacity);
    this.#createdAt = new Float64Array(capacity);
    this.#queueIndex = new Uint32Array(capacity);
    this.#targetIndex = new Uint32Array(capacity);
    this.#keys = new BytesBuilder(capacity, bytes.keys ?? 0);
    this.#payload = new BytesBuilder(capacity, bytes.payload ?? 0);
    this.#headers = new BytesBuilder(capacity, bytes.headers ?? 0);
  }

  get rows(): number {
    return this.#rows;
  }

  /** Bytes of keys, payloads, headers, queue and target names appended so far (what a batch's size limit counts). */
  get variableBytes(): number {
    return this.#variableBytes;
  }

  /** Appends one timer; `key`, `headers` and `callbacks` (callback-bytes.ts's run) empty mean none. */
  append(fields: RunRowFields, queue: string, target: string, key: Uint8Array, payload: Uint8Array, headers: Uint8Array, callbacks: Uint8Array = noBytes): void {
    const i = this.#next(fields);
    this.#queueIndex[i] = this.#queues.intern(queue);
    this.#targetIndex[i] = this.#targets.intern(target);
    this.#pushBytes(i, key, payload, headers, queue.length + target.length);
    this.#pushCallbacks(i, callbacks);
  }

  /**
   * Row `row` (appended since the last reset, after every row given a failure before) is a
   * timer whose last attempt failed at `attemptedAtMs` with `error`.
   */
  setFailure(row: number, error: string, attemptedAtMs: number): void {
    assert.ok(row < this.#rows && row > (this.#failureRows[this.#failureRows.length - 1] ?? -1), `failure of row ${row}: rows are given failures in order, once`);
    this.#failureRows.push(row);
    this.#failureErrors.push(error);
    this.#failureTimes.push(attemptedAtMs);
    this.#variableBytes += error.length;
  }

  /** Appends row `i` of `source` (compaction: no string decoded or hashed per row). */
  appendFrom(source: RunRows, i: number): void {
    const at = this.#next({
      seq: source.seq[i] as number,
      row: source.row[i] as number,
      fireAtMs: source.fireAtMs[i] as number,
      dueAtMs: source.dueAtMs[i] as number,
      state: source.state[i] as number,
      attempts: source.attempts[i] as number,
      lastStatus: source.lastStatus[i] as number,
      deadReason: source.deadReason[i] as number,
      createdAtMs: source.createdAtMs?.[i] ?? NaN,
    });
    const queue = source.queueIndex[i] as number;
    const target = source.targetIndex[i] as number;
    this.#queueIndex[at] = this.#queues.internFrom(source.queues, queue);
    this.#targetIndex[at] = this.#targets.internFrom(source.targets, target);
    const names = (source.queues[queue] as string).length + (source.targets[target] as string).length;
    this.#pushBytes(at, bytesOf(source.keys, i), bytesOf(source.payload, i), bytesOf(source.headers, i), names);
    this.#pushCallbacks(at, source.callbacks === undefined ? noBytes : bytesOf(source.callbacks, i));
    if (source.failures.rows.length === 0) return;
    const failure = failureOf(source.failures, i);
    if (failure >= 0) this.setFailure(at, source.failures.errors[failure] as string, source.failures.attemptedAtMs[failure] as number);
  }

  /**
   * Forgets every row appended, keeping the columns' memory: the next rows are written over
   * the same pages (a checkpoint builds its runs a slice at a time this way, instead of a copy
   * of every timer at once in fresh memory). RunRows finish() returned before are invalid from
   * here on. Queue and target names start again from empty dictionaries, as a run's writer
   * caches each dictionary's encoding whole.
   */
  reset(): void {
    this.#rows = 0;
    this.#variableBytes = 0;
    this.#queues = new Dictionary();
    this.#targets = new Dictionary();
    this.#keys.clear();
    this.#payload.clear();
    this.#headers.clear();
    this.#callbacks = undefined;
    this.#anyCreatedAt = false;
    this.#failureRows = [];
    this.#failureErrors = [];
    this.#failureTimes = [];
  }

  /** The rows appended so far, in append order; the builder must not be used afterwards, except to reset() it. */
  finish(): RunRows {
    const n = this.#rows;
    return {
      rows: n,
      seq: this.#seq.subarray(0, n),
      row: this.#row.subarray(0, n),
      fireAtMs: this.#fireAt.subarray(0, n),
      dueAtMs: this.#dueAt.subarray(0, n),
      state: this.#state.subarray(0, n),
      attempts: this.#attempts.subarray(0, n),
      lastStatus: this.#lastStatus.subarray(0, n),
      deadReason: this.#deadReason.subarray(0, n),
      queues: this.#queues.entries,
      queueIndex: this.#queueIndex.subarray(0, n),
      targets: this.#targets.entries,
      targetIndex: this.#targetIndex.subarray(0, n),
      keys: this.#keys.finish(n),
      payload: this.#payload.finish(n),
      headers: this.#headers.finish(n),
      failures:
        this.#failureRows.length === 0
          ? noFailures
          : { rows: Uint32Array.from(this.#failureRows), errors: this.#failureErrors, attemptedAtMs: Float64Array.from(this.#failureTimes) },
      ...(this.#callbacks === undefined ? undefined : { callbacks: this.#callbacks.finish(n) }),
      ...(this.#anyCreatedAt ? { createdAtMs: this.#createdAt.subarray(0, n) } : undefined),
    };
  }

  #pushCallbacks(i: number, callbacks: Uint8Array): void {
    if (this.#callbacks === undefined) {
      if (callbacks.length === 0) return;
      // The rows before this one have none: offsets of zero, as a new builder's are.
      this.#callbacks = new BytesBuilder(this.#capacity, 0);
    }
    this.#callbacks.push(i, callbacks);
    this.#variableBytes += callbacks.length;
  }

  #next(fields: RunRowFields): number {
    if (this.#rows === this.#capacity) this.#grow(this.#capacity * 2);
    const i = this.#rows++;
    this.#seq[i] = fields.seq;
    this.#row[i] = fields.row;
    this.#fireAt[i] = fields.fireAtMs;
    this.#dueAt[i] = fields.dueAtMs;
    this.#state[i] = fields.state;
    this.#attempts[i] = fields.attempts;
    this.#lastStatus[i] = fields.lastStatus;
    this.#deadReason[i] = fields.deadReason;
    const createdAtMs = fields.createdAtMs ?? NaN;
    this.#createdAt[i] = createdAtMs;
    if (!Number.isNaN(createdAtMs)) this.#anyCreatedAt = true;
    return i;
  }

  #pushBytes(i: number, key: Uint8Array, payload: Uint8Array, headers: Uint8Array, nameChars: number): void {
    this.#keys.push(i, key);
    this.#payload.push(i, payload);
    this.#headers.push(i, headers);
    // Names are counted in UTF-16 units, close enough for a size limit (they are mostly ASCII).
    this.#variableBytes += key.length + payload.length + headers.length + nameChars;
  }

  #grow(capacity: number): void {
    const grow = <C extends Float64Array | Uint32Array | Uint16Array | Uint8Array>(old: C, make: (n: number) => C): C => {
      const next = make(capacity);
      next.set(old);
      return next;
    };
    this.#seq = grow(this.#seq, (n) => new Float64Array(n));
    this.#row = grow(this.#row, (n) => new Uint32Array(n));
    this.#fireAt = grow(this.#fireAt, (n) => new Float64Array(n));
    this.#dueAt = grow(this.#dueAt, (n) => new Float64Array(n));
    this.#state = grow(this.#state, (n) => new Uint8Array(n));
    this.#attempts = grow(this.#attempts, (n) => new Uint16Array(n));
    this.#lastStatus = grow(this.#lastStatus, (n) => new Uint16Array(n));
    this.#deadReason = grow(this.#deadReason, (n) => new Uint8Array(n));
    this.#createdAt = grow(this.#createdAt, (n) => new Float64Array(n));
    this.#queueIndex = grow(this.#queueIndex, (n) => new Uint32Array(n));
    this.#targetIndex = grow(this.#targetIndex, (n) => new Uint32Array(n));
    this.#keys.grow(capacity);
    this.#payload.grow(capacity);
    this.#headers.grow(capacity);
    this.#callbacks?.grow(capacity);
    this.#capacity = capacity;
  }
}

/** `rows` in (dueAt, seq, row) order: `rows` itself when already sorted, else a sorted copy. */
export function sortRunRows(rows: RunRows): RunRows {
  let sorted = true;
  for (let i = 1; i < rows.rows && sorted; i++) sorted = compareRunRows(rows, i - 1, rows, i) < 0;
  if (sorted) return rows;
  const order = new Uint32Array(rows.rows);
  for (let i = 0; i < order.length; i++) order[i] = i;
  order.sort((a, b) => compareRunRows(rows, a, rows, b));
  const builder = new RunRowsBuilder(Math.max(1, rows.rows));
  for (const i of order) builder.appendFrom(rows, i);
  return builder.finish();
}
