// The unit of work between the dispatcher (main thread) and a delivery worker: many timers in
// three transferable arrays one way, their outcomes as transferable columns the other way (the
// worker applies the retry policy, so it gets each timer's queue policy with it). Nothing per
// timer crosses the thread boundary as an object.
//
//   DeliveryTask  count
//                 meta    Float64Array  [fireAtMs, attempt, timeoutMs, max_attempts,
//                                        min_backoff_ms, max_backoff_ms, max_doublings,
//                                        notBeforeMs] × count
//                 offsets Uint32Array   [id, target, payload, headers, key] starts × count, + end
//                 bytes   Uint8Array    id | target | payload | headers JSON | key | id | …
//
//                 claims  Int32Array    single deliveries only: over a SharedArrayBuffer (not
//                                        transferred: both threads keep it), claimState × count
//
// Payload, headers and key lie back to back as the resident store's arena keeps them, so a
// timer's three are one copy. A timer's claim decides, once, between the worker sending it
// (held → sent, when its time has come) and a cancel withdrawing it (held → withdrawn, on the
// main thread, dispatch/dispatcher.ts): whichever compareExchange comes first wins.
//
//   DeliveryResults  kinds, reasons   Uint8Array    outcome kind and dead reason (engine/records.ts)
//                    statuses         Uint16Array   the HTTP status; 0 when none came back
//                    retryAtMs        Float64Array  a retry's time (0 otherwise)
//                    startedAtMs      Float64Array  wall clock when the request was sent
//                    durationMs       Float64Array  until the answer's head arrived, or the failure
import assert from 'node:assert/strict';
import { encodeTimerIdInto, idLength } from '../engine/ids.ts';
import type { QueueConfig } from '../engine/queues.ts';

export const metaFields = 8;
/** What a delivery worker posts on its parent port once its code has loaded (the pool's 'message' event). */
export const workerLoadedMessage = 'fermata.delivery-worker.loaded';
/** A timer's claim (DeliveryTask.claims). */
export const claimState = { held: 0, sent: 1, withdrawn: 2 } as const;
/** meta[at · metaFields + notBeforeField]: the worker's wall clock (Date.now) must reach it before timer `at` is sent. */
export const notBeforeField = 7;
export const byteFields = 5;
/** Which of a timer's byte fields: field f of timer `at` is offsets[at · byteFields + f] up to the next offset. */
export const taskField = { id: 0, target: 1, payload: 2, headers: 3, key: 4 } as const;

export interface DeliveryTask {
  readonly count: number;
  /** "arrow" delivery: every timer goes in one Arrow record batch POSTed here; else each to its target. */
  readonly sink: string | undefined;
  readonly meta: Float64Array;
  readonly offsets: Uint32Array;
  readonly bytes: Uint8Array;
  /** Each timer's claimState, shared by the dispatcher and the worker (tasks of single deliveries; an Arrow batch goes whole). */
  readonly claims?: Int32Array;
}

export interface DeliveryResults {
  readonly kinds: Uint8Array;
  readonly reasons: Uint8Array;
  readonly statuses: Uint16Array;
  readonly retryAtMs: Float64Array;
  readonly startedAtMs: Float64Array;
  readonly durationMs: Float64Array;
}

/** One timer as the dispatcher adds it to a task (views into the store are fine: they are copied). */
export interface TaskTimer {
  /** The timer's ADD sequence and row: its id is written from them (and fireAtMs) as bytes, never as a string. */
  readonly seq: number;
  readonly row: number;
  readonly target: string;
  /** The payload, headers (JSON; empty: none) and key (empty: none), back to back (the store's arena layout). */
  readonly bytes: Uint8Array;
  readonly payloadLength: number;
  readonly headersLength: number;
  readonly fireAtMs: number;
  /** Not sent before this, by the worker's Date.now(): the timer's due time (its fire time, or a retry's); absent: at once. */
  readonly notBeforeMs?: number;
  readonly attempt: number;
  readonly timeoutMs: number;
  readonly policy: QueueConfig;
}

const utf8 = new TextEncoder();

/**
 * Builds a task timer by timer. The byte buffer starts at the caller's estimate of what the task
 * will hold and grows by doubling past it; every copy and page touched is per timer, so a good
 * estimate saves both. `finish` hands out views of the buffers, not copies (they are transferred).
 */
export class DeliveryTaskBuilder {
  readonly #capacity: number;
  readonly #meta: Float64Array;
  readonly #offsets: Uint32Array;
  #bytes: Uint8Array;
  readonly #sink: string | undefined;
  #used = 0;
  #count = 0;
  /** The last target written, and where its bytes are: timers of a task mostly share it, and a copy is cheaper than encoding. */
  #lastTarget: string | undefined;
  #lastTargetStart = 0;
  #lastTargetEnd = 0;

  constructor(capacity: number, sink: string | undefined, bytesInitial = 64 * 1024) {
    this.#capacity = capacity;
    this.#sink = sink;
    this.#meta = new Float64Array(capacity * metaFields);
    this.#offsets = new Uint32Array(capacity * byteFields + 1);
    this.#bytes = new Uint8Array(bytesInitial);
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
    const fields = at * byteFields;
    this.#putId(fields + taskField.id, timer.seq, timer.row, timer.fireAtMs);
    this.#putTarget(fields + taskField.target, timer.target);
    const bytes = timer.bytes;
    // A plain condition, assert only on failure: this runs once per timer (assert.ok's rest arguments cost an array per call).
    if (!(timer.payloadLength >= 0 && timer.headersLength >= 0 && timer.payloadLength + timer.headersLength <= bytes.length)) assert.fail('payload and headers lengths exceed the bytes');
    this.#reserve(bytes.length);
    const start = this.#used;
    this.#bytes.set(bytes, start);
    this.#offsets[fields + taskField.payload] = start;
    this.#offsets[fields + taskField.headers] = start + timer.payloadLength;
    this.#offsets[fields + taskField.key] = start + timer.payloadLength + timer.headersLength;
    this.#used = start + bytes.length;
    this.#offsets[fields + byteFields] = this.#used;
  }

  /**
   * The finished task (views of the builder's buffers, which the task now owns), the buffers to
   * transfer with it, and their whole size in bytes (what the task holds in memory: the views
   * plus the room left in them).
   */
  finish(): { task: DeliveryTask; transfer: ArrayBuffer[]; heldBytes: number } {
    const count = this.#count;
    const meta = this.#meta.subarray(0, count * metaFields);
    const offsets = this.#offsets.subarray(0, count * byteFields + 1);
    const bytes = this.#bytes.subarray(0, this.#used);
    const transfer = [meta.buffer, offsets.buffer, bytes.buffer] as ArrayBuffer[];
    const heldBytes = transfer.reduce((sum, buffer) => sum + buffer.byteLength, 0);
    return { task: { count, sink: this.#sink, meta, offsets, bytes }, transfer, heldBytes };
  }

  /** Bytes written into the task so far (ids, targets, headers, keys, payloads). */
  get usedBytes(): number {
    return this.#used;
  }

  #putTarget(field: number, target: string): void {
    const start = this.#used;
    this.#offsets[field] = start;
    if (target === this.#lastTarget) {
      const length = this.#lastTargetEnd - this.#lastTargetStart;
      this.#reserve(length);
      this.#bytes.copyWithin(start, this.#lastTargetStart, this.#lastTargetEnd);
      this.#used = start + length;
    } else {
      this.#reserve(target.length * 3);
      this.#used = start + utf8.encodeInto(target, this.#bytes.subarray(start)).written;
    }
    this.#lastTarget = target;
    this.#lastTargetStart = start;
    this.#lastTargetEnd = this.#used;
  }

  #putId(field: number, seq: number, row: number, fireAtMs: number): void {
    this.#reserve(idLength);
    this.#offsets[field] = this.#used;
    encodeTimerIdInto(this.#bytes, this.#used, seq, row, fireAtMs);
    this.#used += idLength;
  }

  #reserve(bytes: number): void {
    if (this.#used + bytes <= this.#bytes.length) return;
    const next = new Uint8Array(Math.max(this.#bytes.length * 2, this.#used + bytes));
    next.set(this.#bytes.subarray(0, this.#used));
    this.#bytes = next;
  }
}

/** Field `field` (a taskField) of timer `at`, as a view. */
export function taskBytes(task: DeliveryTask, at: number, field: number): Uint8Array {
  const index = at * byteFields + field;
  return task.bytes.subarray(task.offsets[index] as number, task.offsets[index + 1] as number);
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
