// The unit of work between the dispatcher (main thread) and a delivery worker: many timers in
// transferable arrays one way, their outcomes as transferable columns the other way (the
// worker applies the retry policy, so it gets each timer's queue policy with it). Nothing per
// timer crosses the thread boundary as an object.
//
//   DeliveryTask  count
//                 meta     Float64Array   [fireAtMs, attempt, timeoutMs, max_attempts,
//                                         min_backoff_ms, max_backoff_ms, max_doublings,
//                                         notBeforeMs, seq, row] × count
//                 offsets  Int32Array     byteFields columns of count + 1 offsets each, every
//                                         column from 0: [target …][payload …][headers …][key …]
//                 values   Uint8Array × byteFields
//                                         each column's values back to back: targets |
//                                         payloads | headers JSON | keys
//
//                 claims   Int32Array     single deliveries only: over a SharedArrayBuffer (not
//                                         transferred: both threads keep it), claimState × count
//
// The byte fields are laid out as Arrow's variable-width columns (Int32 offsets from 0, values
// back to back), so an "arrow" delivery's record batch is made of them as they are, with no copy
// per value on the worker. A timer's id is written by the worker from its seq, row and fire time
// (taskId, taskIdColumn): the main thread, the dispatch path's busiest, does not spell it out.
// A timer's claim decides, once, between the worker sending it
// (held → sent, when its time has come) and a cancel withdrawing it (held → withdrawn, on the
// main thread, dispatch/dispatcher.ts): whichever compareExchange comes first wins.
//
//   DeliveryResults  kinds, reasons   Uint8Array    outcome kind and dead reason (engine/records.ts)
//                    statuses         Uint16Array   the HTTP status; 0 when none came back
//                    retryAtMs        Float64Array  a retry's time (0 otherwise)
//                    startedAtMs      Float64Array  wall clock when the request was sent
//                    durationMs       Float64Array  until the answer's head arrived, or the failure
import assert from 'node:assert/strict';
import { encodeTimerId, encodeTimerIdInto, idLength } from '../engine/ids.ts';
import type { QueueConfig } from '../engine/queues.ts';
import type { AttemptResult } from './retry-policy.ts';

export const metaFields = 10;
/** What a delivery worker posts on its parent port once its code has loaded (the pool's 'message' event). */
export const workerLoadedMessage = 'fermata.delivery-worker.loaded';
/** A timer's claim (DeliveryTask.claims). */
export const claimState = { held: 0, sent: 1, withdrawn: 2 } as const;
/** meta[at · metaFields + notBeforeField]: the worker's wall clock (Date.now) must reach it before timer `at` is sent. */
export const notBeforeField = 7;
/** meta[at · metaFields + seqField] and the next: the timer's ADD sequence and row (its id, with its fire time). */
const seqField = 8;
const rowField = 9;
export const byteFields = 4;
/** Which of a timer's byte columns (taskColumn, taskBytes). */
export const taskField = { target: 0, payload: 1, headers: 2, key: 3 } as const;

export interface DeliveryTask {
  readonly count: number;
  /** "arrow" delivery: every timer goes in one Arrow record batch POSTed here; else each to its target. */
  readonly sink: string | undefined;
  readonly meta: Float64Array;
  /** byteFields columns of count + 1 offsets each (taskColumn). */
  readonly offsets: Int32Array;
  /** Each byte field's values, back to back (taskColumn). */
  readonly values: readonly Uint8Array[];
  /** Each timer's claimState, shared by the dispatcher and the worker (tasks of single deliveries; an Arrow batch goes whole). */
  readonly claims?: Int32Array;
  /** The latest notBeforeMs and the longest timeoutMs of its timers (an Arrow batch waits for the one and allows the other). */
  readonly notBeforeMsMax: number;
  readonly timeoutMsMax: number;
}

export interface DeliveryResults {
  readonly kinds: Uint8Array;
  readonly reasons: Uint8Array;
  readonly statuses: Uint16Array;
  readonly retryAtMs: Float64Array;
  readonly startedAtMs: Float64Array;
  readonly durationMs: Float64Array;
}

/**
 * One timer as the dispatcher adds it to a task. Its bytes may be the store's own: the builder
 * copies them by finish() or flush(), and until then they must not change (the dispatcher adds
 * a slice's timers and flushes in one synchronous turn).
 */
export interface TaskTimer {
  /** The timer's ADD sequence and row: its id, with fireAtMs (the worker writes it out). */
  readonly seq: number;
  readonly row: number;
  readonly target: string;
  /** The payload, headers (JSON; empty: none) and key (empty: none), back to back from bytesStart on (the store's arena layout). */
  readonly bytes: Uint8Array;
  readonly bytesStart: number;
  readonly payloadLength: number;
  readonly headersLength: number;
  readonly keyLength: number;
  readonly fireAtMs: number;
  /** Not sent before this, by the worker's Date.now(): the timer's due time (its fire time, or a retry's); absent: at once. */
  readonly notBeforeMs?: number;
  readonly attempt: number;
  readonly timeoutMs: number;
  readonly policy: QueueConfig;
}

const utf8 = new TextEncoder();

/** Where a builder gets its buffers, and gives back those it has outgrown (dispatch/buffer-pool.ts keeps them). */
export interface TaskBuffers {
  /** A buffer of at least `bytes` bytes; its contents are not relied on. */
  take(bytes: number): ArrayBuffer;
  give(buffer: ArrayBuffer): void;
}

/** New buffers each time, none kept. */
export const freshBuffers: TaskBuffers = { take: (bytes) => new ArrayBuffer(bytes), give: () => undefined };

/** The distinct buffers under a task's arrays: what goes to the worker with it, and what it may hand back. */
export function taskBuffers(task: DeliveryTask): ArrayBuffer[] {
  return [...new Set([task.meta.buffer, task.offsets.buffer, ...task.values.map((column) => column.buffer)] as ArrayBuffer[])];
}

/**
 * An "arrow" task's answer, one for all its rows: the status (or why there was none) and when
 * the POST started and how long it took. The dispatcher applies each row's retry policy to it.
 */
export interface BatchAnswer {
  readonly batch: {
    /** An HTTP status from 100 to 599, or why none came back. */
    readonly result: AttemptResult;
    readonly retryAfter: string | undefined;
    readonly startedAtMs: number;
    readonly durationMs: number;
  };
}

/**
 * What a delivery worker posts on its parent port (the pool's 'message' event) with an "arrow"
 * task's buffers once the task's body is encoded (the body is a copy, and the answer needs none
 * of them), so that the dispatcher builds the next tasks in them while the body is still on its
 * way.
 */
export interface SpareBuffersMessage {
  readonly kind: typeof spareBuffersKind;
  readonly buffers: readonly ArrayBuffer[];
}

export const spareBuffersKind = 'fermata.delivery-worker.spare-buffers';

export function isSpareBuffersMessage(message: unknown): message is SpareBuffersMessage {
  return typeof message === 'object' && message !== null && (message as { kind?: unknown }).kind === spareBuffersKind && Array.isArray((message as { buffers?: unknown }).buffers);
}

/** A column's value buffer starts this large when nothing says how much it will hold; it grows by doubling. */
const columnBytesInitial = 4 * 1024;

/**
 * Builds a task timer by timer, each byte field into its own column. The payload column starts
 * at the caller's estimate of what the task will hold and grows by doubling past it (every copy
 * and page touched is per timer, so a good estimate saves both); the target column is sized by
 * the first target (the timers of a task mostly share it), headers and keys start small when
 * the first comes. `finish` hands out views of the buffers, not copies (they are transferred).
 *
 * Copies are deferred and joined: payloads that lie back to back in one buffer (a batch's rows
 * in the store's arena, handed out in order) are copied with one set() when the run ends, and a
 * target repeated by the timers after it is copied by doubling, in a few copyWithin() calls.
 */
export class DeliveryTaskBuilder {
  readonly #capacity: number;
  readonly #meta: Float64Array;
  /** Column f's offsets at f · (capacity + 1) until finish() closes the gaps. */
  readonly #offsets: Int32Array;
  readonly #values: Uint8Array[];
  /** Bytes written into each column. */
  readonly #used = new Int32Array(byteFields);
  readonly #sink: string | undefined;
  readonly #buffers: TaskBuffers;
  #count = 0;
  #notBeforeMsMax = -Infinity;
  #timeoutMsMax = 0;
  /** The last target written, and where its bytes are: timers of a task mostly share it, and a copy is cheaper than encoding. */
  #lastTarget: string | undefined;
  #lastTargetStart = 0;
  #lastTargetEnd = 0;
  /** Times the last target is owed after its first copy: offsets written, bytes not yet. */
  #targetRepeats = 0;
  /** Payloads owed: source[#pendingStart, #pendingEnd) goes to the payload column at #pendingAt. */
  #pendingSource: Uint8Array | undefined;
  #pendingStart = 0;
  #pendingEnd = 0;
  #pendingAt = 0;

  constructor(capacity: number, sink: string | undefined, payloadBytesInitial = 64 * 1024, buffers: TaskBuffers = freshBuffers) {
    this.#capacity = capacity;
    this.#sink = sink;
    this.#buffers = buffers;
    this.#meta = new Float64Array(buffers.take(capacity * metaFields * Float64Array.BYTES_PER_ELEMENT), 0, capacity * metaFields);
    this.#offsets = new Int32Array(buffers.take(byteFields * (capacity + 1) * Int32Array.BYTES_PER_ELEMENT), 0, byteFields * (capacity + 1));
    // Every column starts at 0 (a buffer taken again holds an older task's offsets).
    for (let field = 0; field < byteFields; field++) this.#offsets[field * (capacity + 1)] = 0;
    const column = (bytes: number): Uint8Array => (bytes === 0 ? new Uint8Array(0) : new Uint8Array(buffers.take(bytes)));
    this.#values = [column(0), column(payloadBytesInitial), column(0), column(0)];
  }

  get count(): number {
    return this.#count;
  }

  add(timer: TaskTimer): void {
    if (this.#count >= this.#capacity) assert.fail('task is full');
    const at = this.#count++;
    const meta = this.#meta;
    const base = at * metaFields;
    meta[base] = timer.fireAtMs;
    meta[base + 1] = timer.attempt;
    meta[base + 2] = timer.timeoutMs;
    meta[base + 3] = timer.policy.max_attempts;
    meta[base + 4] = timer.policy.min_backoff_ms;
    meta[base + 5] = timer.policy.max_backoff_ms;
    meta[base + 6] = timer.policy.max_doublings;
    meta[base + notBeforeField] = timer.notBeforeMs ?? 0;
    this.#notBeforeMsMax = Math.max(this.#notBeforeMsMax, timer.notBeforeMs ?? 0);
    this.#timeoutMsMax = Math.max(this.#timeoutMsMax, timer.timeoutMs);
    meta[base + seqField] = timer.seq;
    meta[base + rowField] = timer.row;
    this.#putTarget(at, timer.target);
    const bytes = timer.bytes;
    const payloadStart = timer.bytesStart;
    const headersStart = payloadStart + timer.payloadLength;
    const keyStart = headersStart + timer.headersLength;
    const keyEnd = keyStart + timer.keyLength;
    // A plain condition, assert only on failure: this runs once per timer (assert.ok's rest arguments cost an array per call).
    if (!(payloadStart >= 0 && payloadStart <= headersStart && headersStart <= keyStart && keyStart <= keyEnd && keyEnd <= bytes.length)) {
      assert.fail('payload, headers and key lengths exceed the bytes');
    }
    this.#putPayload(at, bytes, payloadStart, headersStart);
    // Most timers have neither: no view is made of them then.
    this.#put(taskField.headers, at, keyStart === headersStart ? undefined : bytes.subarray(headersStart, keyStart));
    this.#put(taskField.key, at, keyEnd === keyStart ? undefined : bytes.subarray(keyStart, keyEnd));
  }

  /** Copies what the timers added so far still owe (their bytes may change after this). */
  flush(): void {
    this.#flushPayloads();
    this.#flushTargets();
  }

  /**
   * The finished task (views of the builder's buffers, which the task now owns), the buffers to
   * transfer with it, and their whole size in bytes (what the task holds in memory: the views
   * plus the room left in them).
   */
  finish(): { task: DeliveryTask; transfer: ArrayBuffer[]; heldBytes: number } {
    this.flush();
    const count = this.#count;
    const stride = this.#capacity + 1;
    // Columns next to each other, count + 1 offsets each.
    for (let field = 1; field < byteFields; field++) this.#offsets.copyWithin(field * (count + 1), field * stride, field * stride + count + 1);
    const meta = this.#meta.subarray(0, count * metaFields);
    const offsets = this.#offsets.subarray(0, byteFields * (count + 1));
    const values = this.#values.map((column, field) => column.subarray(0, this.#used[field] as number));
    const task: DeliveryTask = { count, sink: this.#sink, meta, offsets, values, notBeforeMsMax: this.#notBeforeMsMax, timeoutMsMax: this.#timeoutMsMax };
    const transfer = taskBuffers(task);
    const heldBytes = transfer.reduce((sum, buffer) => sum + buffer.byteLength, 0);
    return { task, transfer, heldBytes };
  }

  /** Payload bytes written into the task so far. */
  get payloadBytes(): number {
    return this.#used[taskField.payload] as number;
  }

  /** Bytes written into the task's columns so far (targets, payloads, headers, keys). */
  get usedBytes(): number {
    let used = 0;
    for (let field = 0; field < byteFields; field++) used += this.#used[field] as number;
    return used;
  }

  /** Appends `bytes` (none: an empty value) as timer `at`'s value of column `field`. */
  #put(field: number, at: number, bytes: Uint8Array | undefined): void {
    let used = this.#used[field] as number;
    if (bytes !== undefined && bytes.length > 0) {
      this.#reserve(field, bytes.length, columnBytesInitial);
      (this.#values[field] as Uint8Array).set(bytes, used);
      used += bytes.length;
      this.#used[field] = used;
    }
    this.#offsets[field * (this.#capacity + 1) + at + 1] = used;
  }

  /** Timer `at`'s payload, source[start, end): owed, and joined with the payloads owed before it when it follows them in the same buffer. */
  #putPayload(at: number, source: Uint8Array, start: number, end: number): void {
    const field = taskField.payload;
    let used = this.#used[field] as number;
    if (end > start) {
      if (source !== this.#pendingSource || start !== this.#pendingEnd) {
        this.#flushPayloads();
        this.#pendingSource = source;
        this.#pendingStart = start;
        this.#pendingAt = used;
      }
      this.#pendingEnd = end;
      // A growth copies the column's bytes so far, the owed ones too (still garbage): they are written into the grown column.
      this.#reserve(field, end - start, columnBytesInitial);
      used += end - start;
      this.#used[field] = used;
    }
    this.#offsets[field * (this.#capacity + 1) + at + 1] = used;
  }

  #flushPayloads(): void {
    const source = this.#pendingSource;
    if (source === undefined) return;
    (this.#values[taskField.payload] as Uint8Array).set(source.subarray(this.#pendingStart, this.#pendingEnd), this.#pendingAt);
    this.#pendingSource = undefined;
  }

  #putTarget(at: number, target: string): void {
    const field = taskField.target;
    let end: number;
    if (target === this.#lastTarget) {
      const length = this.#lastTargetEnd - this.#lastTargetStart;
      this.#reserve(field, length, length * this.#capacity);
      end = (this.#used[field] as number) + length;
      this.#targetRepeats++;
    } else {
      this.#flushTargets();
      const start = this.#used[field] as number;
      // Sized for every timer of the task to have a target this long (in ASCII), the first time.
      this.#reserve(field, target.length * 3, target.length * this.#capacity);
      end = start + utf8.encodeInto(target, (this.#values[field] as Uint8Array).subarray(start)).written;
      this.#lastTarget = target;
      this.#lastTargetStart = start;
      this.#lastTargetEnd = end;
    }
    this.#used[field] = end;
    this.#offsets[field * (this.#capacity + 1) + at + 1] = end;
  }

  /** Writes the owed repeats of the last target right after its first copy, doubling what each copyWithin takes. */
  #flushTargets(): void {
    const total = this.#targetRepeats + 1;
    if (total === 1) return;
    this.#targetRepeats = 0;
    const values = this.#values[taskField.target] as Uint8Array;
    const start = this.#lastTargetStart;
    const length = this.#lastTargetEnd - start;
    for (let written = 1; written < total; ) {
      const copies = Math.min(written, total - written);
      values.copyWithin(start + written * length, start, start + copies * length);
      written += copies;
    }
    // Repeats owed after this are written after the last copy, where their rows are.
    this.#lastTargetStart = start + (total - 1) * length;
    this.#lastTargetEnd = this.#lastTargetStart + length;
  }

  /** Room for `bytes` more in column `field`: a first buffer of at least `first` bytes, else doubling. */
  #reserve(field: number, bytes: number, first: number): void {
    const column = this.#values[field] as Uint8Array;
    const used = this.#used[field] as number;
    if (used + bytes <= column.length) return;
    const next = new Uint8Array(this.#buffers.take(Math.max(column.length === 0 ? first : column.length * 2, used + bytes)));
    next.set(column.subarray(0, used));
    this.#values[field] = next;
    this.#buffers.give(column.buffer as ArrayBuffer);
  }
}

/** Column `field` (a taskField) of the task: its count + 1 offsets and its values, as views. */
export function taskColumn(task: DeliveryTask, field: number): { offsets: Int32Array; values: Uint8Array } {
  const start = field * (task.count + 1);
  return { offsets: task.offsets.subarray(start, start + task.count + 1), values: task.values[field] as Uint8Array };
}

/** Timer `at`'s id. */
export function taskId(task: DeliveryTask, at: number): string {
  const base = at * metaFields;
  return encodeTimerId(task.meta[base + seqField] as number, task.meta[base + rowField] as number, task.meta[base] as number);
}

/** The task's ids as an Arrow Utf8 column's buffers: idLength bytes each, in order. */
export function taskIdColumn(task: DeliveryTask): { offsets: Int32Array; values: Uint8Array } {
  const count = task.count;
  const meta = task.meta;
  const values = new Uint8Array(count * idLength);
  const offsets = new Int32Array(count + 1);
  for (let at = 0; at < count; at++) {
    const base = at * metaFields;
    encodeTimerIdInto(values, at * idLength, meta[base + seqField] as number, meta[base + rowField] as number, meta[base] as number);
    offsets[at + 1] = (at + 1) * idLength;
  }
  return { offsets, values };
}

/** Field `field` (a taskField) of timer `at`, as a view. */
export function taskBytes(task: DeliveryTask, at: number, field: number): Uint8Array {
  const index = field * (task.count + 1) + at;
  return (task.values[field] as Uint8Array).subarray(task.offsets[index] as number, task.offsets[index + 1] as number);
}

/** The retry policy fields of timer `at` (the rest of a QueueConfig does not reach workers). */
export function taskPolicy(task: DeliveryTask, at: number): Pick<QueueConfig, 'max_attempts' | 'min_backoff_ms' | 'max_backoff_ms' | 'max_doublings'> {
  const base = at * metaFields;
  const meta = task.meta;
  return { max_attempts: meta[base + 3] as number, min_backoff_ms: meta[base + 4] as number, max_backoff_ms: meta[base + 5] as number, max_doublings: meta[base + 6] as number };
}

export function emptyResults(count: number): DeliveryResults {
  return {
    kinds: new Uint8Array(count),
    reasons: new Uint8Array(count),
    statuses: new Uint16Array(count),
    retryAtMs: new Float64Array(count),
    startedAtMs: new Float64Array(count),
    durationMs: new Float64Array(count),
  };
}

export function resultsTransfer(results: DeliveryResults): ArrayBuffer[] {
  return [results.kinds, results.reasons, results.statuses, results.retryAtMs, results.startedAtMs, results.durationMs].map((column) => column.buffer as ArrayBuffer);
}
