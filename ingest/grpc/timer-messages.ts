// fermata.v1's messages as the handlers read and write them (proto-files.ts's loader options:
// .proto field names, numbers for 64-bit integers, enum names, defaults filled in, a oneof's
// name set to the field it holds), and their conversions to and from the engine's terms. A
// timer's fields are checked by the engine as an HTTP add's are; what only gRPC can get wrong
// (no fire time, a negative delay, a Timestamp out of range) is refused here as BATCH_INVALID
// naming the field, as the JSON reader refuses its own. Any thread.
import type { TimerSpec } from '../../engine/batch/timer-batch.ts';
import type { DeadTimer, TimerPatch, TimerStateName, TimerView } from '../../engine/engine.ts';
import type { DeadReasonName } from '../../engine/types.ts';
import { errorCodes, FermataError } from '../../engine/errors.ts';

/** google.protobuf.Timestamp and Duration. */
export interface Seconds {
  readonly seconds: number;
  readonly nanos: number;
}

export interface NewTimer {
  readonly when?: 'fire_at' | 'delay';
  readonly fire_at?: Seconds | null;
  readonly delay?: Seconds | null;
  readonly target: string;
  readonly payload: Buffer;
  readonly headers: Record<string, string>;
  readonly key: string;
  readonly queue: string;
  readonly callback: string;
  readonly failure_callback: string;
}

export type TimerStateEnum = `TIMER_STATE_${Uppercase<TimerStateName>}` | 'TIMER_STATE_UNSPECIFIED';

export interface TimerMessage {
  readonly id: string;
  readonly state: TimerStateEnum;
  readonly revision: number;
  readonly fire_at: Seconds;
  readonly attempts: number;
  readonly queue: string;
  readonly key: string | null;
  readonly last_status: number | null;
  readonly last_error: string | null;
  readonly last_attempt_at: Seconds | null;
  readonly next_attempt_at: Seconds | null;
  readonly callback: string | null;
  readonly failure_callback: string | null;
  readonly target: string;
  readonly headers: Readonly<Record<string, string>>;
  readonly payload: Uint8Array;
  readonly created_at: Seconds | null;
}

export interface DeadTimerMessage {
  readonly id: string;
  readonly revision: number;
  readonly queue: string;
  readonly target: string;
  readonly fire_at: Seconds;
  readonly attempts: number;
  readonly last_status: number | null;
  readonly reason: `DEAD_REASON_${Uppercase<DeadReasonName>}`;
  readonly last_error: string | null;
  readonly last_attempt_at: Seconds | null;
  readonly headers: Readonly<Record<string, string>>;
  readonly payload: Uint8Array;
  readonly created_at: Seconds | null;
}

export interface TimerFilterMessage {
  readonly queue: string;
  readonly state: TimerStateEnum;
  readonly key_prefix: string;
  readonly key: string;
  readonly due_after: Seconds | null;
  readonly due_before: Seconds | null;
}

export interface RescheduleRequest {
  readonly id: string;
  readonly revision?: number;
  readonly when?: 'fire_at' | 'delay';
  readonly fire_at?: Seconds | null;
  readonly delay?: Seconds | null;
  readonly target?: string;
  readonly payload?: Buffer;
  readonly headers: { readonly headers: Record<string, string> } | null;
  readonly queue?: string;
  readonly callback?: string;
  readonly failure_callback?: string;
}

const refuse = (message: string, field: string): FermataError => new FermataError(errorCodes.batchInvalid, message, { field });

/** Epoch ms → Timestamp (and a span of ms → Duration). */
export function secondsOf(ms: number): Seconds {
  const seconds = Math.floor(ms / 1000);
  return { seconds, nanos: (ms - seconds * 1000) * 1_000_000 };
}

export const secondsOrNull = (ms: number | null): Seconds | null => (ms === null ? null : secondsOf(ms));

/** Timestamp or Duration → ms; a part of a ms rounds up, as an RFC 3339 fire_at's does (late, never early). */
export function msOf(value: Seconds, field: string): number {
  const { seconds, nanos } = value;
  if (!Number.isSafeInteger(seconds) || !Number.isInteger(nanos) || nanos < 0 || nanos > 999_999_999) throw refuse(`${field} must have whole seconds and nanos from 0 to 999999999`, field);
  const ms = seconds * 1000 + Math.ceil(nanos / 1_000_000);
  if (!Number.isSafeInteger(ms)) throw refuse(`${field} is out of range`, field);
  return ms;
}

/** The fire time a NewTimer or a RescheduleTimerRequest gives (undefined: none given). */
function fireAtOf(message: { readonly when?: 'fire_at' | 'delay'; readonly fire_at?: Seconds | null; readonly delay?: Seconds | null }, nowMs: number): number | undefined {
  if (message.when === 'fire_at' && message.fire_at != null) return msOf(message.fire_at, 'fire_at');
  if (message.when === 'delay' && message.delay != null) {
    const delayMs = msOf(message.delay, 'delay');
    if (delayMs < 0) throw refuse('delay must be at least 0', 'delay');
    return nowMs + delayMs;
  }
  return undefined;
}

/** A NewTimer → the engine's TimerSpec; empty strings and bytes are "none", as proto3 writes an unset field. */
export function specOf(timer: NewTimer | null | undefined, nowMs: number): TimerSpec {
  if (timer == null) throw refuse('timer is required', 'timer');
  const fireAtMs = fireAtOf(timer, nowMs);
  if (fireAtMs === undefined) throw refuse('one of fire_at and delay is required', 'fire_at');
  // Built field by field, as the JSON reader builds it: one object per single add.
  const spec: { -readonly [K in keyof TimerSpec]: TimerSpec[K] } = { fireAtMs, target: timer.target };
  if (timer.payload.length > 0) spec.payload = timer.payload;
  if (Object.keys(timer.headers).length > 0) spec.headers = timer.headers;
  if (timer.key !== '') spec.key = timer.key;
  if (timer.queue !== '') spec.queue = timer.queue;
  if (timer.callback !== '') spec.callback = timer.callback;
  if (timer.failure_callback !== '') spec.failureCallback = timer.failure_callback;
  return spec;
}

/**
 * An AddTimers batch's timers, each made what `convert` makes of it; an empty batch is refused,
 * and a timer refused is refused as its row (the status names timers[ROW].FIELD).
 */
export function eachTimer<T>(timers: readonly NewTimer[], convert: (timer: NewTimer) => T): T[] {
  if (timers.length === 0) throw new FermataError(errorCodes.batchInvalid, 'timers must hold at least one timer', { field: 'timers' });
  return timers.map((timer, row) => {
    try {
      return convert(timer);
    } catch (err) {
      if (!(err instanceof FermataError)) throw err;
      throw new FermataError(err.code, `${err.message} (row ${row})`, { ...err.details, row }, err);
    }
  });
}

/** The change a RescheduleTimerRequest asks for; no field at all is refused, as an empty PATCH is. */
export function patchOf(request: RescheduleRequest, nowMs: number): TimerPatch {
  const patch: { -readonly [K in keyof TimerPatch]: TimerPatch[K] } = {};
  const fireAtMs = fireAtOf(request, nowMs);
  if (fireAtMs !== undefined) patch.fireAtMs = fireAtMs;
  if (request.target !== undefined) patch.target = request.target;
  if (request.payload !== undefined) patch.payload = request.payload;
  if (request.headers !== null) patch.headers = request.headers.headers;
  if (request.queue !== undefined) patch.queue = request.queue;
  if (request.callback !== undefined) patch.callback = request.callback === '' ? null : request.callback;
  if (request.failure_callback !== undefined) patch.failureCallback = request.failure_callback === '' ? null : request.failure_callback;
  if (Object.keys(patch).length === 0) throw refuse('a RescheduleTimer needs at least one of fire_at, delay, target, payload, headers, queue, callback, failure_callback', '');
  return patch;
}

export const stateEnumOf = (state: TimerStateName): TimerStateEnum => `TIMER_STATE_${state.toUpperCase() as Uppercase<TimerStateName>}`;

/** A state enum → its name; UNSPECIFIED is none. */
export function stateNameOf(state: TimerStateEnum): TimerStateName | undefined {
  return state === 'TIMER_STATE_UNSPECIFIED' ? undefined : (state.slice('TIMER_STATE_'.length).toLowerCase() as TimerStateName);
}

export function timerMessage(view: TimerView): TimerMessage {
  return {
    id: view.id,
    state: stateEnumOf(view.state),
    revision: view.revision,
    fire_at: secondsOf(view.fireAtMs),
    attempts: view.attempts,
    queue: view.queue,
    key: view.key,
    last_status: view.lastStatus,
    last_error: view.lastError,
    last_attempt_at: secondsOrNull(view.lastAttemptAtMs),
    next_attempt_at: secondsOrNull(view.nextAttemptAtMs),
    callback: view.callback,
    failure_callback: view.failureCallback,
    target: view.target,
    headers: view.headers,
    payload: view.payload,
    created_at: secondsOrNull(view.createdAtMs),
  };
}

export function deadTimerMessage(dead: DeadTimer): DeadTimerMessage {
  return {
    id: dead.id,
    revision: dead.revision,
    queue: dead.queue,
    target: dead.target,
    fire_at: secondsOf(dead.fireAtMs),
    attempts: dead.attempts,
    last_status: dead.lastStatus,
    reason: `DEAD_REASON_${dead.reason.toUpperCase() as Uppercase<DeadReasonName>}`,
    last_error: dead.lastError,
    last_attempt_at: secondsOrNull(dead.lastAttemptAtMs),
    headers: dead.headers,
    payload: dead.payload,
    created_at: secondsOrNull(dead.createdAtMs),
  };
}

/**
 * A TimerFilter message as the HTTP API's filter fields (timer-filter.ts reads them): empty
 * fields left out, times as epoch ms.
 */
export function filterFields(filter: TimerFilterMessage | null): Record<string, string | number> {
  if (filter === null) return {};
  const fields: Record<string, string | number> = {};
  if (filter.queue !== '') fields.queue = filter.queue;
  const state = stateNameOf(filter.state);
  if (state !== undefined) fields.state = state;
  if (filter.key_prefix !== '') fields.key_prefix = filter.key_prefix;
  if (filter.key !== '') fields.key = filter.key;
  if (filter.due_after !== null) fields.due_after = msOf(filter.due_after, 'due_after');
  if (filter.due_before !== null) fields.due_before = msOf(filter.due_before, 'due_before');
  return fields;
}

/** The QueueConfig message's fields, as PUT /v1/queues/{name}'s body and GET's answer name them. */
export const queueConfigFields = ['max_attempts', 'min_backoff_ms', 'max_backoff_ms', 'max_doublings', 'rate_per_s', 'max_concurrent', 'timeout_ms', 'delivery', 'sink', 'batch_rows_max', 'linger_ms', 'retention_ms', 'dead_retention_ms', 'max_pending'] as const;

/**
 * The QueueConfig fields `source` gives (neither undefined nor null): a QueueConfig message as
 * PUT /v1/queues/{name}'s body, whose fields the engine checks, or a queue as the HTTP API
 * writes it as the message's config.
 */
export function queueConfigOf(source: Readonly<Record<string, unknown>> | null): Record<string, unknown> {
  const config: Record<string, unknown> = {};
  if (source === null) return config;
  for (const field of queueConfigFields) if (source[field] !== undefined && source[field] !== null) config[field] = source[field];
  return config;
}
