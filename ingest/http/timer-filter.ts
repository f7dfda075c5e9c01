// A timer filter as clients write it (GET /v1/timers's query, POST /v1/timers/cancel's body)
// turned into the engine's TimerFilter, each bad value refused with a 400 naming its parameter.
// Times are taken as `fire_at` is: an RFC 3339 date-time, or epoch ms (a number, or in a query
// a string of digits) of at least 10^12. Any thread.
import { secondsLikeFireAt } from '../../engine/batch/validate.ts';
import type { TimerFilter, TimerStateName } from '../../engine/engine.ts';
import { timerLimits } from '../../engine/limits.ts';
import { parseRfc3339 } from './body/json-batch.ts';
import { httpErrorCodes, HttpProblem } from './error-map.ts';

/** The states a list may ask for. */
export const timerStateNames: readonly TimerStateName[] = ['pending', 'retrying', 'delivering', 'delivered', 'dead', 'cancelled'];

/** The filter's fields as they came (query strings, or JSON values). */
export interface FilterFields {
  readonly queue?: unknown;
  readonly state?: unknown;
  readonly key_prefix?: unknown;
  readonly key?: unknown;
  readonly due_after?: unknown;
  readonly due_before?: unknown;
}

const utf8 = new TextEncoder();

const refuse = (field: string, message: string): HttpProblem => new HttpProblem(httpErrorCodes.requestInvalid, message, field);

function text(fields: FilterFields, field: keyof FilterFields): string | undefined {
  const value = fields[field];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string' || value === '') throw refuse(field, `${field} must be a non-empty string`);
  return value;
}

function keyBytes(fields: FilterFields, field: 'key' | 'key_prefix'): Uint8Array | undefined {
  const value = text(fields, field);
  if (value === undefined) return undefined;
  const bytes = utf8.encode(value);
  if (bytes.length > timerLimits.keyBytesMax) throw refuse(field, `${field} is ${bytes.length} bytes; a key is at most ${timerLimits.keyBytesMax}`);
  return bytes;
}

/** A time as `fire_at` takes it; undefined when not given. */
export function timeOf(value: unknown, field: string): number | undefined {
  if (value === undefined || value === null) return undefined;
  const number = typeof value === 'number' ? value : typeof value === 'string' && /^\d{1,16}$/.test(value) ? Number(value) : undefined;
  if (number !== undefined) {
    if (!Number.isSafeInteger(number)) throw refuse(field, `${field} must be a whole number of epoch ms`);
    const secondsLike = secondsLikeFireAt(number);
    if (secondsLike !== undefined) throw refuse(field, secondsLike.replace(/^fire_at/, field));
    return number;
  }
  const ms = typeof value === 'string' ? parseRfc3339(value) : undefined;
  // A '+' of an offset that was not percent-encoded arrives as a space.
  const plus = typeof value === 'string' && / \d\d:\d\d$/.test(value) ? ': a + in a query string must be written %2B' : '';
  if (ms === undefined) throw refuse(field, `${field} ${JSON.stringify(value)} is not an RFC 3339 date-time (such as 2030-01-31T09:00:00Z) nor epoch ms${plus}`);
  return ms;
}

/** The engine's filter of `fields`; a field that is not good is a 400 naming it. */
export function timerFilterOf(fields: FilterFields): TimerFilter {
  const state = text(fields, 'state');
  if (state !== undefined && !timerStateNames.includes(state as TimerStateName)) throw refuse('state', `state must be one of ${timerStateNames.join(', ')}`);
  const queue = text(fields, 'queue');
  const keyPrefix = keyBytes(fields, 'key_prefix');
  const key = keyBytes(fields, 'key');
  const dueAfterMs = timeOf(fields.due_after, 'due_after');
  const dueBeforeMs = timeOf(fields.due_before, 'due_before');
  return {
    ...(queue === undefined ? {} : { queue }),
    ...(state === undefined ? {} : { state: state as TimerStateName }),
    ...(keyPrefix === undefined ? {} : { keyPrefix }),
    ...(key === undefined ? {} : { key }),
    ...(dueAfterMs === undefined ? {} : { dueAfterMs }),
    ...(dueBeforeMs === undefined ? {} : { dueBeforeMs }),
  };
}
