// The retry policy as data: what one delivery attempt comes to (delivered, retry at T', or
// dead with a reason), decided from the attempt number, what the target answered, the queue's
// config, the time and a random draw, all passed in, so every rule is testable without a
// clock or a network. Pure, so either thread calls it: a delivery worker per attempt, the main
// thread for an "arrow" batch's rows (outcome-recorder.ts) and for pull leases (pull-queues.ts).
//
//   2xx                                   delivered
//   410 Gone                              dead (gone), whatever the attempt
//   refused by the target guard           dead (target_refused), whatever the attempt
//   other status, timeout, network error  dead (attempts_exhausted) if attempt ≥ max_attempts,
//                                         else retry at now + max(backoff, Retry-After)
//
// Backoff, after failed attempt n (1-based), with m = min_backoff_ms and d = max_doublings:
//
//   f          = n − 1                              (failures before this one)
//   ceiling(n) = min(max_backoff_ms, m·2^f)            while f ≤ d
//              = min(max_backoff_ms, m·2^d·(f−d+1))    after: it grows linearly by m·2^d
//   delay      = uniform whole ms in [min_backoff_ms, ceiling(n)]
//
// The delay is "full jitter between min_backoff_ms and max_backoff_ms" (issue 5): full jitter
// spread over the whole window, but floored at min_backoff_ms rather than 0, so a queue's
// minimum is a promise to the target. Growth after max_doublings is linear, as the queue
// config's contract says ("How many times the backoff doubles before it grows linearly").
// e.g. m = 10 s, d = 3, max = 300 s: ceilings 10, 20, 40, 80, 160, 240, 300, 300 … s.
import assert from 'node:assert/strict';
import { errorCodes } from '../engine/errors.ts';
import { deliveryLimits } from '../engine/limits.ts';
import type { QueueConfig } from '../engine/queues.ts';
import { deadReason, outcomeKind } from '../engine/records.ts';

/** How an attempt ended when no HTTP status came back. */
export const attemptFailure = {
  timeout: 'timeout',
  networkError: 'network_error',
  targetRefused: 'target_refused',
} as const;
export type AttemptFailure = (typeof attemptFailure)[keyof typeof attemptFailure];

/** An HTTP status (100–999), or why there was none. */
export type AttemptResult = number | AttemptFailure;

/** The part of a queue's config the policy reads. */
export type RetryConfig = Pick<QueueConfig, 'max_attempts' | 'min_backoff_ms' | 'max_backoff_ms' | 'max_doublings'>;

const timeoutCodes = new Set(['ETIMEDOUT', 'UND_ERR_CONNECT_TIMEOUT', 'UND_ERR_HEADERS_TIMEOUT', 'UND_ERR_BODY_TIMEOUT']);
// HTTP clients wrap the error that failed a request (fetch: TypeError "fetch failed" with a
// cause), so the guard's refusal may sit a few causes deep.
const causeDepthMax = 4;

/** What a delivery's thrown error means for its outcome. */
export function attemptFailureOf(err: unknown): AttemptFailure {
  let timedOut = false;
  let current: unknown = err;
  for (let depth = 0; depth <= causeDepthMax && typeof current === 'object' && current !== null; depth++) {
    const { code, name } = current as { code?: unknown; name?: unknown };
    if (code === errorCodes.targetRefused) return attemptFailure.targetRefused;
    if (name === 'TimeoutError' || (typeof code === 'string' && timeoutCodes.has(code))) timedOut = true;
    current = (current as { cause?: unknown }).cause;
  }
  return timedOut ? attemptFailure.timeout : attemptFailure.networkError;
}

/**
 * The backoff after failed attempt `attempt` (1-based), whole ms, given `random01` in [0, 1):
 * see the module comment for the formula.
 */
export function backoffMs(attempt: number, config: RetryConfig, random01: number): number {
  assert.ok(Number.isInteger(attempt) && attempt >= 1, `attempt ${attempt} must be a whole number from 1`);
  assert.ok(random01 >= 0 && random01 < 1, `random01 ${random01} must be in [0, 1)`);
  const min = config.min_backoff_ms;
  const failures = attempt - 1;
  const doublings = Math.min(failures, config.max_doublings);
  const grown = min * 2 ** doublings * (failures - doublings + 1);
  const ceiling = Math.min(config.max_backoff_ms, grown);
  assert.ok(ceiling >= min, 'a validated queue config has max_backoff_ms ≥ min_backoff_ms');
  return min + Math.floor(random01 * (ceiling - min + 1));
}

// RFC 9110 §10.2.3: Retry-After = HTTP-date / delay-seconds; §5.6.7: a recipient accepts all
// three date forms. Date.parse is far looser (it takes "120" as the year 120 and local time
// zones), so the forms are matched exactly.
const monthIndex: Readonly<Record<string, number>> = { Jan: 0, Feb: 1, Mar: 2, Apr: 3, May: 4, Jun: 5, Jul: 6, Aug: 7, Sep: 8, Oct: 9, Nov: 10, Dec: 11 };
const day = '(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)';
const month = '(Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)';
const clock = '(\\d{2}):(\\d{2}):(\\d{2})';
const imfFixdate = new RegExp(`^${day}, (\\d{2}) ${month} (\\d{4}) ${clock} GMT$`);
const rfc850Date = new RegExp(`^(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday), (\\d{2})-${month}-(\\d{2}) ${clock} GMT$`);
const asctimeDate = new RegExp(`^${day} ${month} ([ \\d]\\d) ${clock} (\\d{4})$`);
const delaySeconds = /^\d+$/;

function utcMs(year: number, monthName: string, dayOfMonth: string, hour: string, minute: string, second: string): number | undefined {
  const monthNumber = monthIndex[monthName] as number;
  const dayNumber = Number(dayOfMonth);
  const hourNumber = Number(hour);
  const minuteNumber = Number(minute);
  const secondNumber = Number(second);
  if (secondNumber > 60) return undefined;
  // A leap second (:60) is taken as :59; Date.UTC would roll it into the next minute.
  const ms = Date.UTC(year, monthNumber, dayNumber, hourNumber, minuteNumber, Math.min(secondNumber, 59));
  const date = new Date(ms);
  // Date.UTC rolls 31 Feb over into March and 25:00 into the next day, and reads years below
  // 100 as 19xx: refuse such dates instead.
  const exact =
    date.getUTCFullYear() === year && date.getUTCMonth() === monthNumber && date.getUTCDate() === dayNumber && date.getUTCHours() === hourNumber && date.getUTCMinutes() === minuteNumber;
  return exact ? ms : undefined;
}

function httpDateMs(value: string, nowMs: number): number | undefined {
  let match = imfFixdate.exec(value);
  if (match !== null) return utcMs(Number(match[3]), match[2] as string, match[1] as string, match[4] as string, match[5] as string, match[6] as string);
  match = rfc850Date.exec(value);
  if (match !== null) {
    // A two-digit year more than 50 years ahead is the most recent such year in the past.
    const nowYear = new Date(nowMs).getUTCFullYear();
    let year = Math.floor(nowYear / 100) * 100 + Number(match[3]);
    if (year > nowYear + 50) year -= 100;
    return utcMs(year, match[2] as string, match[1] as string, match[4] as string, match[5] as string, match[6] as string);
  }
  match = asctimeDate.exec(value);
  if (match !== null) return utcMs(Number(match[6]), match[1] as string, (match[2] as string).trim(), match[3] as string, match[4] as string, match[5] as string);
  return undefined;
}

/**
 * A Retry-After header as ms from `nowMs` (0 for a date already past), at most
 * deliveryLimits.retryAfterMsMax; undefined when absent or not one of the RFC 9110 forms.
 */
export function parseRetryAfter(value: string | undefined, nowMs: number): number | undefined {
  if (value === undefined) return undefined;
  const text = value.trim();
  let delayMs: number | undefined;
  if (delaySeconds.test(text)) delayMs = Number(text) * 1000;
  else {
    const atMs = httpDateMs(text, nowMs);
    if (atMs !== undefined) delayMs = Math.max(0, atMs - nowMs);
  }
  return delayMs === undefined ? undefined : Math.min(delayMs, deliveryLimits.retryAfterMsMax);
}

export type DeadReasonOfPolicy = typeof deadReason.gone | typeof deadReason.targetRefused | typeof deadReason.attemptsExhausted;

/** An attempt's outcome; `reason` is the dead reason byte of the OUTCOME record (0 unless dead). */
export type Decision =
  | { readonly kind: typeof outcomeKind.delivered; readonly reason: typeof deadReason.none }
  | { readonly kind: typeof outcomeKind.retry; readonly retryAtMs: number; readonly reason: typeof deadReason.none }
  | { readonly kind: typeof outcomeKind.dead; readonly reason: DeadReasonOfPolicy };

// Every outcome but a retry is one of four constants: most attempts allocate nothing.
export const delivered: Decision = Object.freeze({ kind: outcomeKind.delivered, reason: deadReason.none });
const gone: Decision = Object.freeze({ kind: outcomeKind.dead, reason: deadReason.gone });
const targetRefused: Decision = Object.freeze({ kind: outcomeKind.dead, reason: deadReason.targetRefused });
const attemptsExhausted: Decision = Object.freeze({ kind: outcomeKind.dead, reason: deadReason.attemptsExhausted });

/** A 2xx answer: delivered, whatever the attempt and the policy (so a caller may skip both). */
export function isSuccess(result: AttemptResult): boolean {
  return typeof result === 'number' && result >= 200 && result <= 299;
}

/**
 * The outcome of attempt `attempt` (1-based) that ended with `result`; `retryAfter` is the
 * response's Retry-After header, if any. The retry time counts from `nowMs`, the service's
 * clock (a manual one under test: engine/clock.ts); an HTTP-date Retry-After is the target's
 * real time, so it is turned into a wait against `realNowMs` (the same as `nowMs` on the real clock).
 */
export function decideOutcome(attempt: number, result: AttemptResult, retryAfter: string | undefined, config: RetryConfig, nowMs: number, random01: number, realNowMs: number = nowMs): Decision {
  // Plain conditions, assert only on failure (a template message would be built per timer).
  if (!(Number.isInteger(attempt) && attempt >= 1)) assert.fail(`attempt ${attempt} must be a whole number from 1`);
  if (typeof result === 'number') {
    if (!(Number.isInteger(result) && result >= 100 && result <= 999)) assert.fail(`HTTP status ${result} out of range`);
    if (isSuccess(result)) return delivered;
    if (result === 410) return gone;
  } else if (result === attemptFailure.targetRefused) {
    return targetRefused;
  }
  if (attempt >= config.max_attempts) return attemptsExhausted;
  const waitMs = Math.max(backoffMs(attempt, config, random01), (typeof result === 'number' ? parseRetryAfter(retryAfter, realNowMs) : undefined) ?? 0);
  return { kind: outcomeKind.retry, retryAtMs: nowMs + waitMs, reason: deadReason.none };
}
