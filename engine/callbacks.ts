// Callbacks, on the main thread: a timer may carry `callback` (told of its delivery) and
// `failure_callback` (told of its death). This module checks them at admit (the address guard,
// and a queue that delivers one POST per timer) and builds the follow-up timers a settle logs
// with its outcomes in one OUTCOME_FOLLOWED record (records.ts, docs/format/engine-records.md):
// a crash cannot keep the outcome and lose its callback.
//
//   settle ─► followUpsOf(outcomes) ─► OUTCOME_FOLLOWED { outcomes , ADD body of follow-ups }
//                                       └► replay: applyOutcomes, then the follow-ups inserted
//                                          as an ADD of the record's sequence
//
// A follow-up is an ordinary timer of the same queue: due at once, POSTing the outcome summary
// (JSON) to the URL with a `fermata-callback-for` header naming the original, under the queue's
// signing, address guard and retry policy, in the original's trace (its stored traceparent
// and tracestate: trace-context.ts; each attempt a new span). It has no callback of its own
// (no loop) and the key `callback:{id}`, `{id}` naming the timer as the API outside does (EngineOptions.idPrefix
// first); while an earlier follow-up of the same timer holds that key (a dead timer redriven
// and dead again within its retention) no second one is made, nor one for a timer whose queue
// was set to "arrow" or "pull" delivery after it was added.
import { batchFromSpecs, bytesAt, type TimerBatch, type TimerSpec } from './batch/timer-batch.ts';
import { errorCodes, FermataError } from './errors.ts';
import { encodeTimerId } from './ids.ts';
import type { KeyPlan } from './key-plan.ts';
import { queueConfig } from './queue-registry.ts';
import { outcomeKind, type Outcomes } from './records.ts';
import type { EngineState } from './state.ts';
import { callbackBytesOf, failureCallbackBytesOf, urlOrNull } from './store/callback-bytes.ts';
import { keyHash } from './store/key-index.ts';
import { storedTraceOf, type TraceHeaders } from './trace-context.ts';

const callbackColumns = [
  ['callback', 'callback'],
  ['failure_callback', 'failureCallback'],
] as const;

/** The header a follow-up's delivery carries, naming the timer whose outcome it reports. */
export const callbackForHeader = 'fermata-callback-for';

/** Bytes of a target's answer a follow-up reports at most (`response_base64`). */
export const callbackResponseBytesMax = 64 * 1024;

const utf8 = new TextDecoder();
const utf8Encoder = new TextEncoder();

/**
 * Refuses callbacks the dispatcher would refuse (the address guard, as targets are), and any
 * callback on a queue that does not deliver one request per timer ("arrow" and "pull" have no
 * single answer to report): 400, naming the column and row.
 */
export function checkCallbacks(s: EngineState, batch: TimerBatch): void {
  for (const [column, field] of callbackColumns) {
    const urls = batch[field];
    if (urls === undefined) continue;
    for (let row = 0; row < batch.rows; row++) {
      const start = urls.offsets[row] as number;
      const end = urls.offsets[row + 1] as number;
      if (start === end) continue;
      const queue = batch.queues[batch.queueIndex[row] as number] as string;
      const delivery = queueConfig(s, queue).delivery;
      if (delivery !== 'request') {
        throw new FermataError(errorCodes.batchInvalid, `${column} needs a queue that delivers one request per timer; queue ${queue} delivers by ${delivery} (row ${row})`, { column, row });
      }
      const refusal = s.checkTarget?.(utf8.decode(urls.values.subarray(start, end)));
      if (refusal !== undefined) throw new FermataError(errorCodes.targetRefused, `${column}: ${refusal} (row ${row})`, { column, row });
    }
  }
}

/** What a delivery worker reports of a timer that has a callback, beside its outcome. */
export interface CallbackReport {
  /** The first callbackResponseBytesMax bytes of the target's answer; undefined when there was none. */
  readonly response: Uint8Array | undefined;
}

/** Follow-ups of a batch of outcomes: the timers they become, and the keys they claim. */
export interface FollowUps {
  readonly batch: TimerBatch;
  readonly keyHashes: number[];
}

/**
 * The follow-up timers of the outcomes whose timer is now final and has the matching callback
 * (`slots[i]` is outcome i's slot), due at `nowMs`; undefined when none. `responses[i]` is the
 * body the target answered outcome i with (undefined: none, or not kept). A follow-up whose key
 * a live timer holds already is not made.
 */
export function followUpsOf(s: EngineState, outcomes: Outcomes, slots: Int32Array, responses: ReadonlyArray<Uint8Array | undefined> | undefined, nowMs: number): FollowUps | undefined {
  const store = s.store;
  let specs: TimerSpec[] | undefined;
  let keyHashes: number[] | undefined;
  for (let i = 0; i < outcomes.count; i++) {
    const slot = slots[i] as number;
    if (!store.hasCallbacks(slot)) continue;
    const kind = outcomes.kinds[i];
    if (kind !== outcomeKind.delivered && kind !== outcomeKind.dead) continue;
    const run = store.callbacksOf(slot);
    const url = urlOrNull(kind === outcomeKind.delivered ? callbackBytesOf(run) : failureCallbackBytesOf(run));
    if (url === null) continue;
    const queue = s.queueNames[store.queueIndex[slot] as number] as string;
    // Its queue was set to "arrow" or "pull" since the timer was added: a follow-up there would go to a sink or a lease, not its URL.
    if (queueConfig(s, queue).delivery !== 'request') continue;
    // The id the API outside names the timer by (a cluster partition's prefix first): the record keeps these bytes, so replay needs no prefix.
    const id = s.idPrefix + encodeTimerId(store.logSeq[slot] as number, store.row[slot] as number, store.fireAt[slot] as number);
    const key = `callback:${id}`;
    const keyBytes = utf8Encoder.encode(key);
    const hash = keyHash(keyBytes);
    if (s.keys.find(keyBytes, 0, keyBytes.length, hash) >= 0 || s.keysInFlight.get(hash) !== undefined) continue;
    const status = outcomes.statuses[i] as number;
    const error = outcomes.errors[i] as number;
    const response = responses?.[i];
    const summary = {
      id,
      state: kind === outcomeKind.delivered ? 'delivered' : 'dead',
      attempts: outcomes.attempts[i] as number,
      status: status === 0 ? null : status,
      // Why, beside a status that did not come back; an answered status says it itself.
      error: status === 0 && error > 0 ? (outcomes.errorTexts[error - 1] as string) : null,
      response_base64: response === undefined ? null : Buffer.from(response.buffer, response.byteOffset, response.byteLength).toString('base64'),
      // The time it fired at: the one it was added with, or the one its latest PATCH gave it.
      fire_at: new Date(s.rescheduled.placeOf(store.logSeq[slot] as number, store.row[slot] as number, store.fireAt[slot] as number)).toISOString(),
      delivered_at: kind === outcomeKind.delivered ? new Date(nowMs).toISOString() : null,
    };
    (specs ??= []).push({
      fireAtMs: nowMs,
      target: url,
      payload: JSON.stringify(summary),
      headers: { 'content-type': 'application/json', [callbackForHeader]: id, ...traceOf(store.headersOf(slot)) },
      key,
      queue,
    });
    (keyHashes ??= []).push(hash);
  }
  if (specs === undefined || keyHashes === undefined) return undefined;
  return { batch: batchFromSpecs(specs), keyHashes };
}

/** The trace a timer's stored headers (JSON; empty: none) carry, for its follow-up to continue. */
function traceOf(headers: Uint8Array): TraceHeaders | undefined {
  return headers.length === 0 ? undefined : storedTraceOf(JSON.parse(utf8.decode(headers)) as Record<string, string>);
}

/**
 * The key plan a logged follow-up batch goes in with, live and on replay alike: every row new
 * (the keys were decided before the record was written, and only free ones made a row).
 */
export function followUpKeyPlan(batch: TimerBatch): KeyPlan {
  const rows = batch.rows;
  const hashes = new Uint32Array(rows);
  for (let row = 0; row < rows; row++) hashes[row] = keyHash(bytesAt(batch.keys, row));
  return {
    originalSeq: new Float64Array(rows).fill(NaN),
    originalRow: new Int32Array(rows),
    originalFireAt: new Float64Array(rows),
    duplicates: 0,
    hashes,
    introduced: [],
    waitFor: [],
  };
}
