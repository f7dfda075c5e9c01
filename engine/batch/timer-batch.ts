// TimerBatch: the struct-of-arrays form every transport produces and the engine admits. One
// batch is one WAL record and is accepted or refused whole. No object per timer: numbers in
// typed arrays, byte strings in Arrow's layout (one values buffer + row offsets), and
// strings that repeat across rows (targets, queues) as a small dictionary plus an index
// column, so each distinct target is parsed and checked once per batch.
//
//   rows = 3          fireAtMs    targetIndex  queueIndex   payload.offsets  payload.values
//                     [t0,t1,t2]  [0, 1, 0]    [0, 0, 0]    [0, 5, 5, 9]     "hello" "" "abcd"
//   targets = ["https://a.example/hook", "https://b.example/x"]     queues = ["default"]

/** Row i is `values[offsets[i] .. offsets[i + 1])`; an empty string means "none" where a column allows it. */
export interface BytesColumn {
  readonly values: Uint8Array;
  readonly offsets: Int32Array;
}

export interface TimerBatch {
  readonly rows: number;
  /** Absolute fire time of each row, epoch milliseconds (integers). */
  readonly fireAtMs: Float64Array;
  readonly targets: readonly string[];
  readonly targetIndex: Int32Array;
  readonly queues: readonly string[];
  readonly queueIndex: Int32Array;
  readonly payload: BytesColumn;
  /** JSON object text of extra delivery headers; empty = none. */
  readonly headers: BytesColumn;
  /** Idempotency key; empty = none. */
  readonly keys: BytesColumn;
  /**
   * Where the outcome of a delivered timer is POSTed (callbacks.ts); empty = none. Present only
   * when some row has a callback or a failure callback (then both columns are), so a batch
   * without callbacks carries nothing for them.
   */
  readonly callback?: BytesColumn;
  /** Where the outcome of a dead timer is POSTed; empty = none. Present exactly when `callback` is. */
  readonly failureCallback?: BytesColumn;
}

export function bytesAt(column: BytesColumn, row: number): Uint8Array {
  return column.values.subarray(column.offsets[row] as number, column.offsets[row + 1] as number);
}

export function byteLengthAt(column: BytesColumn, row: number): number {
  return (column.offsets[row + 1] as number) - (column.offsets[row] as number);
}

/** Bytes of a batch's payloads, headers and keys, all rows: what its timers take in the store's arena. */
export function stringBytesOf(batch: TimerBatch): number {
  const { rows, payload, headers, keys, callback, failureCallback } = batch;
  const bytes =
    (payload.offsets[rows] as number) -
    (payload.offsets[0] as number) +
    (headers.offsets[rows] as number) -
    (headers.offsets[0] as number) +
    (keys.offsets[rows] as number) -
    (keys.offsets[0] as number);
  if (callback === undefined || failureCallback === undefined) return bytes;
  // Each row's callbacks take a 2-byte length besides their URLs in the arena (callback-bytes.ts).
  return bytes + 2 * rows + (callback.offsets[rows] as number) - (callback.offsets[0] as number) + (failureCallback.offsets[rows] as number) - (failureCallback.offsets[0] as number);
}

export const defaultQueue = 'default';

/** One timer as a caller of the in-process API or a JSON client describes it. */
export interface TimerSpec {
  readonly fireAtMs: number;
  readonly target: string;
  readonly payload?: Uint8Array | string;
  readonly headers?: Readonly<Record<string, string>>;
  readonly key?: string;
  readonly queue?: string;
  readonly callback?: string;
  readonly failureCallback?: string;
}

const encoder = new TextEncoder();

type RowValue = Uint8Array | string | undefined;

/**
 * One bytes column from a value a row (strings UTF-8 encoded), written straight into one values
 * buffer: no intermediate encoding per row, which at hundreds of rows (a turn of coalesced
 * single adds) was most of the cost of building their batch.
 */
function bytesColumn(rows: number, valueOf: (row: number) => RowValue): BytesColumn {
  const offsets = new Int32Array(rows + 1);
  const values: RowValue[] = new Array(rows);
  let total = 0;
  for (let row = 0; row < rows; row++) {
    const value = valueOf(row);
    values[row] = value;
    if (value !== undefined) total += typeof value === 'string' ? Buffer.byteLength(value) : value.length;
    offsets[row + 1] = total;
  }
  const bytes = new Uint8Array(total);
  if (total === 0) return { values: bytes, offsets };
  // A Buffer over the same memory, to encode strings in place.
  const writer = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  for (let row = 0; row < rows; row++) {
    const value = values[row];
    if (value === undefined) continue;
    if (typeof value === 'string') writer.write(value, offsets[row] as number, 'utf8');
    else bytes.set(value, offsets[row] as number);
  }
  return { values: bytes, offsets };
}

function dictionary(values: readonly string[]): { entries: string[]; index: Int32Array } {
  const entries: string[] = [];
  const positions = new Map<string, number>();
  const index = new Int32Array(values.length);
  for (let i = 0; i < values.length; i++) {
    const value = values[i] as string;
    let position = positions.get(value);
    if (position === undefined) {
      position = entries.push(value) - 1;
      positions.set(value, position);
    }
    index[i] = position;
  }
  return { entries, index };
}

/** One row's bytes as a column: a string's encoding as it comes, a caller's bytes copied (a batch never shares memory with its specs). */
function oneRowBytes(value: Uint8Array | string | undefined): BytesColumn {
  const values = value === undefined ? new Uint8Array(0) : typeof value === 'string' ? encoder.encode(value) : value.slice();
  const offsets = new Int32Array(2);
  offsets[1] = values.length;
  return { values, offsets };
}

/**
 * Builds a batch from timer descriptions: the row-oriented edge of the system (JSON bodies,
 * tests). Arrow input never comes this way; it is read column by column (arrow-codec.ts).
 */
export function batchFromSpecs(specs: readonly TimerSpec[]): TimerBatch {
  const only = specs.length === 1 ? (specs[0] as TimerSpec) : undefined;
  if (only !== undefined) {
    // One timer (every single-timer JSON add): its columns directly, without the dictionaries'
    // maps and the copies into joined values a batch of many needs.
    const fireAtMs = new Float64Array(1);
    fireAtMs[0] = only.fireAtMs;
    const batch: { -readonly [K in keyof TimerBatch]: TimerBatch[K] } = {
      rows: 1,
      fireAtMs,
      targets: [only.target],
      targetIndex: new Int32Array(1),
      queues: [only.queue ?? defaultQueue],
      queueIndex: new Int32Array(1),
      payload: oneRowBytes(only.payload),
      headers: oneRowBytes(only.headers === undefined ? undefined : JSON.stringify(only.headers)),
      keys: oneRowBytes(only.key),
    };
    // Set only when given: a timer without callbacks makes nothing for them.
    if (only.callback !== undefined || only.failureCallback !== undefined) {
      batch.callback = oneRowBytes(only.callback);
      batch.failureCallback = oneRowBytes(only.failureCallback);
    }
    return batch;
  }
  const targets = dictionary(specs.map((spec) => spec.target));
  const queues = dictionary(specs.map((spec) => spec.queue ?? defaultQueue));
  return {
    rows: specs.length,
    fireAtMs: Float64Array.from(specs, (spec) => spec.fireAtMs),
    targets: targets.entries,
    targetIndex: targets.index,
    queues: queues.entries,
    queueIndex: queues.index,
    payload: bytesColumn(specs.length, (row) => (specs[row] as TimerSpec).payload),
    headers: bytesColumn(specs.length, (row) => {
      const headers = (specs[row] as TimerSpec).headers;
      return headers === undefined ? undefined : JSON.stringify(headers);
    }),
    keys: bytesColumn(specs.length, (row) => (specs[row] as TimerSpec).key),
    ...(specs.some((spec) => spec.callback !== undefined || spec.failureCallback !== undefined)
      ? {
          callback: bytesColumn(specs.length, (row) => (specs[row] as TimerSpec).callback),
          failureCallback: bytesColumn(specs.length, (row) => (specs[row] as TimerSpec).failureCallback),
        }
      : {}),
  };
}
