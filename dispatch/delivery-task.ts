// The unit of work between the dispatcher (main thread) and a delivery worker: many timers in
// transferable arrays one way, their outcomes as transferable columns the other way (the
// worker applies the retry policy, so it gets each timer's queue policy with it). Nothing per
// timer crosses the thread boundary as an object. This module is the format, read on both
// threads; the main thread writes tasks with task-builder.ts, a worker writes the results.
//
//   DeliveryTask  count
//                 meta     Float64Array   [fireAtMs, attempt, timeoutMs, max_attempts,
//                                         min_backoff_ms, max_backoff_ms, max_doublings,
//                                         notBeforeMs, seq, row, responseBytesMax,
//                                         signer] × count
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
// main thread, dispatch/dispatcher.ts): whichever compareExchange comes first wins. In cluster
// mode a worker that finds the partition's lease deadline passed moves it held → refused: not
// sent, retried without counting an attempt (by the next owner, once the partition moved).
//
//   DeliveryResults  kinds, reasons   Uint8Array    outcome kind and dead reason (engine/records.ts)
//                    statuses         Uint16Array   the HTTP status; 0 when none came back
//                    retryAtMs        Float64Array  a retry's time (0 otherwise)
//                    startedAtMs      Float64Array  the service's clock when the request was sent
//                    durationMs       Float64Array  until the answer's head arrived, or the failure
//                    failureKinds     Uint8Array    how it failed (failure-description.ts; 0: it did not)
//                    errors           Uint16Array   n > 0: errorTexts[n − 1] says why (no status came back)
//                    errorTexts       string[]      each failure's words once a task (failures only)
//                    responses        Uint8Array[]  by timer: the answer's first responseBytesMax bytes,
//                                   (sparse, absent)   only for timers whose meta asked (a callback's)
import { clusterIdLength, clusterIdOf } from '../cluster/partitioning.ts';
import { encodeTimerId, encodeTimerIdInto, idLength } from '../engine/ids.ts';
import type { QueueConfig } from '../engine/queues.ts';
import type { AttemptResult } from './retry-policy.ts';

export const metaFields = 12;
/** What a delivery worker posts on its parent port once its code has loaded (the pool's 'message' event). */
export const workerLoadedMessage = 'fermata.delivery-worker.loaded';
/** A timer's claim (DeliveryTask.claims). */
export const claimState = { held: 0, sent: 1, withdrawn: 2, refused: 3 } as const;
/** meta[at · metaFields + notBeforeField]: the worker's wall clock (Date.now) must reach it before timer `at` is sent. */
export const notBeforeField = 7;
/** meta[at · metaFields + seqField] and the next: the timer's ADD sequence and row (its id, with its fire time). */
export const seqField = 8;
export const rowField = 9;
/** meta[at · metaFields + responseBytesField]: bytes of the answer's body to bring back (0: none; a timer with a callback: engine/callbacks.ts). */
export const responseBytesField = 10;
/** meta[at · metaFields + signerField]: which signing secrets sign timer `at` (dispatch/signing-config.ts: 0 the service's, k ≥ 1 a queue's own). */
export const signerField = 11;
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
  /**
   * Cluster mode: the partition whose engine the timers are from. The worker asks the
   * partition's local lease deadline before each send and sends none once it has passed
   * (claimState.refused; an Arrow batch answers RefusedTask). Its timers are delivered under
   * their cluster ids, this partition's prefix before the engine's id (taskId, taskIdColumn).
   */
  readonly partition?: number;
}

/** An "arrow" task not sent: its partition's local lease deadline had passed (cluster mode). */
export interface RefusedTask {
  readonly refused: true;
}

export interface DeliveryResults {
  readonly kinds: Uint8Array;
  readonly reasons: Uint8Array;
  readonly statuses: Uint16Array;
  readonly retryAtMs: Float64Array;
  readonly startedAtMs: Float64Array;
  readonly durationMs: Float64Array;
  readonly failureKinds: Uint8Array;
  readonly errors: Uint16Array;
  readonly errorTexts: string[];
  /** The answers' bodies kept for callbacks, by timer; made at the first one (most tasks have none). */
  responses?: Array<Uint8Array | undefined>;
}

/** The distinct buffers under a task's arrays: what goes to the worker with it, and what it may hand back. */
export function taskBuffers(task: DeliveryTask): ArrayBuffer[] {
  return [...new Set([task.meta.buffer, task.offsets.buffer, ...task.values.map((column) => column.buffer)] as ArrayBuffer[])];
}

/**
 * An "arrow" task's answer, one for all its rows: the status (or why there was none) and when
 * the POST started and how long it took. The outcome recorder applies each row's retry policy to it.
 */
export interface BatchAnswer {
  readonly batch: {
    /** An HTTP status from 100 to 599, or why none came back. */
    readonly result: AttemptResult;
    readonly retryAfter: string | undefined;
    readonly startedAtMs: number;
    readonly durationMs: number;
    /** Why no status came back (failure-description.ts), when none did. */
    readonly failure: { readonly kind: number; readonly text: string } | undefined;
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

/**
 * The pool's word to every worker at once, on the BroadcastChannel its DeliveryWorkerData names:
 * warm up (dispatch/delivery-warm-up.ts) and open sessions to these origins.
 */
export interface WarmUpRequest {
  /** Where a worker that has not run its delivery path yet sends its made-up deliveries (warm-up-target.ts). */
  readonly exerciseTarget: string;
  readonly origins: readonly string[];
  /** How long the worker waits for those sessions before it says it is warm (the rest connect meanwhile). */
  readonly connectWaitMs: number;
}

/** What a worker posts on its parent port once warm: how many sessions it opened, and why any failed (one line each). */
export interface WarmedUpMessage {
  readonly kind: typeof warmedUpKind;
  readonly sessionsOpened: number;
  readonly failures: readonly string[];
}

export const warmedUpKind = 'fermata.delivery-worker.warmed-up';

export function isWarmedUpMessage(message: unknown): message is WarmedUpMessage {
  return typeof message === 'object' && message !== null && (message as { kind?: unknown }).kind === warmedUpKind;
}

/** Column `field` (a taskField) of the task: its count + 1 offsets and its values, as views. */
export function taskColumn(task: DeliveryTask, field: number): { offsets: Int32Array; values: Uint8Array } {
  const start = field * (task.count + 1);
  return { offsets: task.offsets.subarray(start, start + task.count + 1), values: task.values[field] as Uint8Array };
}

/** Timer `at`'s id: the engine's, or in cluster mode the cluster id the API answered for it. */
export function taskId(task: DeliveryTask, at: number): string {
  const base = at * metaFields;
  const id = encodeTimerId(task.meta[base + seqField] as number, task.meta[base + rowField] as number, task.meta[base] as number);
  return task.partition === undefined ? id : clusterIdOf(task.partition, id);
}

/** The task's ids (taskId's) as an Arrow Utf8 column's buffers: all of one length, in order. */
export function taskIdColumn(task: DeliveryTask): { offsets: Int32Array; values: Uint8Array } {
  const count = task.count;
  const meta = task.meta;
  // The partition's characters, ASCII, before each engine id in cluster mode (none on a single node).
  const prefix = task.partition === undefined ? '' : clusterIdOf(task.partition, '');
  const width = task.partition === undefined ? idLength : clusterIdLength;
  const values = new Uint8Array(count * width);
  const offsets = new Int32Array(count + 1);
  for (let at = 0; at < count; at++) {
    const base = at * metaFields;
    const start = at * width;
    for (let i = 0; i < prefix.length; i++) values[start + i] = prefix.charCodeAt(i);
    encodeTimerIdInto(values, start + prefix.length, meta[base + seqField] as number, meta[base + rowField] as number, meta[base] as number);
    offsets[at + 1] = start + width;
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
    failureKinds: new Uint8Array(count),
    errors: new Uint16Array(count),
    errorTexts: [],
  };
}

/** Row `at` failed with `text`: its index in the task's texts, each text held once (`indexOf` is the task's own, made on its first failure). */
export function setResultError(results: DeliveryResults, at: number, kind: number, text: string, indexOf: Map<string, number>): void {
  let index = indexOf.get(text);
  if (index === undefined) {
    index = results.errorTexts.push(text);
    indexOf.set(text, index);
  }
  results.failureKinds[at] = kind;
  // A task holds at most 65,535 distinct texts; past that a row keeps its kind and no words.
  results.errors[at] = index <= 0xffff ? index : 0;
}

export function resultsTransfer(results: DeliveryResults): ArrayBuffer[] {
  return [results.kinds, results.reasons, results.statuses, results.retryAtMs, results.startedAtMs, results.durationMs, results.failureKinds, results.errors].map(
    (column) => column.buffer as ArrayBuffer,
  );
}
