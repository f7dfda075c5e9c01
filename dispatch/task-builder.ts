// Builds a DeliveryTask (delivery-task.ts) timer by timer, on the main thread: the dispatcher
// fills one per task it sends, and PullQueues one per DoGet's batch (a delivery worker builds a
// few made-up ones only, to warm its Arrow encoder up). The builder writes the task's columns in
// buffers it takes from a TaskBuffers (fresh ones, or the dispatcher's BufferPool for "arrow"
// tasks) and finish() hands them over as views, to be transferred to a worker, never copied. A
// timer's bytes are copied from the store's arena once, late and in runs (DeliveryTaskBuilder):
// this is the busiest loop of the dispatch path.
import assert from 'node:assert/strict';
import type { QueueConfig } from '../engine/queues.ts';
import { byteFields, type DeliveryTask, metaFields, notBeforeField, responseBytesField, rowField, seqField, signerField, taskBuffers, taskField } from './delivery-task.ts';

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
  /** Bytes of the target's answer the worker brings back (a timer with a callback); absent or 0: none. */
  readonly responseBytesMax?: number;
  readonly fireAtMs: number;
  /** Not sent before this, by the worker's Date.now(): the timer's due time (its fire time, or a retry's); absent: at once. */
  readonly notBeforeMs?: number;
  readonly attempt: number;
  readonly timeoutMs: number;
  readonly policy: QueueConfig;
  /** Which signing secrets sign it (dispatch/signing-config.ts); absent: the service's. */
  readonly signer?: number;
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
    meta[base + responseBytesField] = timer.responseBytesMax ?? 0;
    meta[base + signerField] = timer.signer ?? 0;
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
