// The retry policy as data: jitter bounds over many seeds, the doubling-then-linear ceiling,
// Retry-After in both forms and as garbage, every outcome rule, and the exact attempt at
// which attempts run out.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { attemptFailure, attemptFailureOf, backoffMs, decideOutcome, parseRetryAfter } from '../../dispatch/retry-policy.ts';
import { deliveryLimits } from '../../engine/limits.ts';
import { defaultQueueConfig, type QueueConfig } from '../../engine/queues.ts';
import { deadReason, decodeOutcomes, emptyOutcomes, encodeOutcomes, outcomeKind } from '../../engine/records.ts';
import { Prng } from '../helpers/prng.ts';

const queue = (overrides: Partial<QueueConfig>): QueueConfig => ({ ...defaultQueueConfig, ...overrides });
const random01 = (prng: Prng): number => prng.uint32() / 2 ** 32;
/** The largest double below 1: the top of the jitter window. */
const top = 1 - 2 ** -53;
const nowMs = Date.UTC(2026, 0, 1); // a Thursday

test('the ceiling doubles max_doublings times, then grows linearly, then stops at max_backoff_ms', () => {
  // The example of the module comment (and of Cloud Tasks' max_doublings): 10, 20, 40, 80, then +80.
  const config = queue({ min_backoff_ms: 10_000, max_backoff_ms: 300_000, max_doublings: 3 });
  const ceilings = Array.from({ length: 9 }, (_, i) => backoffMs(i + 1, config, top));
  assert.deepEqual(ceilings, [10_000, 20_000, 40_000, 80_000, 160_000, 240_000, 300_000, 300_000, 300_000]);
  assert.deepEqual(
    Array.from({ length: 5 }, (_, i) => backoffMs(i + 1, queue({ min_backoff_ms: 1_000, max_backoff_ms: 60_000, max_doublings: 0 }), top)),
    [1_000, 2_000, 3_000, 4_000, 5_000],
    'no doublings: linear from the first retry',
  );
  const unbounded = queue({ min_backoff_ms: 1_000, max_backoff_ms: 30 * 24 * 3_600_000, max_doublings: 62 });
  assert.equal(backoffMs(1_000, unbounded, top), unbounded.max_backoff_ms, 'attempt 1000 with 62 doublings is finite and capped');
  assert.equal(backoffMs(20, unbounded, top), 1_000 * 2 ** 19);
});

test('jitter: over many seeds, never below min_backoff_ms, never above the ceiling, and spread across the window', () => {
  const config = queue({ min_backoff_ms: 1_000, max_backoff_ms: 600_000, max_doublings: 5 });
  for (let attempt = 1; attempt <= 30; attempt++) {
    const ceiling = backoffMs(attempt, config, top);
    assert.equal(backoffMs(attempt, config, 0), config.min_backoff_ms, `attempt ${attempt}: the window opens at min_backoff_ms`);
    let low = Infinity;
    let high = -Infinity;
    let sum = 0;
    const draws = 2_000;
    for (let seed = 1; seed <= draws; seed++) {
      const delay = backoffMs(attempt, config, random01(new Prng(seed * 7919 + attempt)));
      assert.ok(Number.isInteger(delay), `whole ms: ${delay}`);
      assert.ok(delay >= config.min_backoff_ms && delay <= ceiling, `attempt ${attempt}: ${delay} outside [${config.min_backoff_ms}, ${ceiling}]`);
      low = Math.min(low, delay);
      high = Math.max(high, delay);
      sum += delay;
    }
    if (attempt === 1) {
      assert.equal(high, config.min_backoff_ms, 'the first window is a point');
      continue;
    }
    const width = ceiling - config.min_backoff_ms;
    assert.ok(low - config.min_backoff_ms < width * 0.01 && ceiling - high < width * 0.01, `attempt ${attempt}: draws reach both ends (${low}..${high} of ${config.min_backoff_ms}..${ceiling})`);
    const mean = sum / draws;
    assert.ok(Math.abs(mean - (config.min_backoff_ms + ceiling) / 2) < width * 0.03, `attempt ${attempt}: uniform, mean ${mean}`);
  }
  // 1 s doubles to 32 s by attempt 6, then grows by 32 s an attempt: 576 s at attempt 23, capped from 24 on.
  assert.equal(backoffMs(7, config, top), 32_000 * 2, 'past 5 doublings: 32 s × 2');
  assert.equal(backoffMs(23, config, top), 32_000 * 18);
  assert.equal(backoffMs(24, config, top), config.max_backoff_ms, 'the ceiling reaches max_backoff_ms');
});

test('backoffMs asserts its inputs', () => {
  assert.throws(() => backoffMs(0, defaultQueueConfig, 0.5), assert.AssertionError);
  assert.throws(() => backoffMs(1.5, defaultQueueConfig, 0.5), assert.AssertionError);
  assert.throws(() => backoffMs(1, defaultQueueConfig, 1), assert.AssertionError);
  assert.throws(() => backoffMs(1, defaultQueueConfig, -0.1), assert.AssertionError);
  assert.throws(() => backoffMs(1, defaultQueueConfig, Number.NaN), assert.AssertionError);
});

test('Retry-After: delay-seconds and the three HTTP-date forms, relative to now', () => {
  assert.equal(parseRetryAfter('120', nowMs), 120_000);
  assert.equal(parseRetryAfter('0', nowMs), 0);
  assert.equal(parseRetryAfter(' 7 ', nowMs), 7_000);
  assert.equal(parseRetryAfter('Thu, 01 Jan 2026 00:00:30 GMT', nowMs), 30_000, 'IMF-fixdate');
  assert.equal(parseRetryAfter('Thursday, 01-Jan-26 00:01:00 GMT', nowMs), 60_000, 'RFC 850, two-digit year in this century');
  assert.equal(parseRetryAfter('Thu Jan  1 00:00:45 2026', nowMs), 45_000, 'asctime, space-padded day');
  assert.equal(parseRetryAfter('Thu Jan 01 00:00:09 2026', nowMs), 9_000, 'asctime, two-digit day');
  assert.equal(parseRetryAfter('Thu, 31 Dec 2025 23:59:60 GMT', nowMs), 0, 'a leap second, taken as :59 (past)');
  assert.equal(parseRetryAfter('Sun, 06 Nov 1994 08:49:37 GMT', nowMs), 0, 'a date in the past: now');
  assert.equal(parseRetryAfter('Sunday, 06-Nov-94 08:49:37 GMT', nowMs), 0, 'RFC 850 year 94 more than 50 years ahead is 1994');
  assert.equal(parseRetryAfter('Wednesday, 01-Jan-76 00:00:00 GMT', nowMs), deliveryLimits.retryAfterMsMax, '76 is 2076: 50 years ahead, not more');
  assert.equal(parseRetryAfter('Friday, 01-Jan-77 00:00:00 GMT', nowMs), 0, '77 is 1977');
});

test('Retry-After is capped by deliveryLimits.retryAfterMsMax', () => {
  assert.equal(parseRetryAfter(String(deliveryLimits.retryAfterMsMax / 1000), nowMs), deliveryLimits.retryAfterMsMax);
  assert.equal(parseRetryAfter(String(deliveryLimits.retryAfterMsMax / 1000 + 1), nowMs), deliveryLimits.retryAfterMsMax);
  assert.equal(parseRetryAfter('99999999999999999999999', nowMs), deliveryLimits.retryAfterMsMax);
  assert.equal(parseRetryAfter('Fri, 01 Jan 2100 00:00:00 GMT', nowMs), deliveryLimits.retryAfterMsMax);
});

test('Retry-After that is absent or garbage is undefined', () => {
  const garbage = [
    '',
    ' ',
    '-5',
    '+5',
    '1.5',
    '1e3',
    '0x10',
    '5s',
    'soon',
    '2026-01-01T00:01:00Z',
    'Thu, 01 Jan 2026 00:00:30 PST',
    'Thu, 01 Jan 2026 00:00:30',
    'thu, 01 jan 2026 00:00:30 gmt',
    'Thu, 1 Jan 2026 00:00:30 GMT',
    'Thu, 31 Feb 2026 00:00:30 GMT',
    'Thu, 01 Jan 2026 24:00:00 GMT',
    'Thu, 01 Jan 2026 00:60:00 GMT',
    'Thu, 01 Jan 2026 00:00:61 GMT',
    'Thu, 01 Jan 0026 00:00:30 GMT',
    'Thursday, 01-Jan-2026 00:00:30 GMT',
    'Thu Jan 1 00:00:45 2026',
    'Thu Jan  1 00:00:45 2026 GMT',
  ];
  assert.equal(parseRetryAfter(undefined, nowMs), undefined);
  for (const value of garbage) assert.equal(parseRetryAfter(value, nowMs), undefined, JSON.stringify(value));
});

const config = queue({ max_attempts: 3, min_backoff_ms: 1_000, max_backoff_ms: 60_000, max_doublings: 4 });

test('2xx is delivered, at any attempt, even past max_attempts', () => {
  for (const status of [200, 201, 204, 299]) {
    for (const attempt of [1, 3, 4]) assert.deepEqual(decideOutcome(attempt, status, '60', config, nowMs, 0.5), { kind: outcomeKind.delivered, reason: deadReason.none }, `${status} at ${attempt}`);
  }
});

test('410 and a refused target are dead at once', () => {
  for (const attempt of [1, 2, 3, 7]) {
    assert.deepEqual(decideOutcome(attempt, 410, '5', config, nowMs, 0.5), { kind: outcomeKind.dead, reason: deadReason.gone }, `410 at ${attempt}`);
    assert.deepEqual(decideOutcome(attempt, attemptFailure.targetRefused, undefined, config, nowMs, 0.5), { kind: outcomeKind.dead, reason: deadReason.targetRefused });
  }
});

test('other statuses, timeouts and network errors retry at now + backoff', () => {
  for (const result of [100, 199, 300, 301, 400, 404, 409, 429, 500, 502, 503, 504, 999, attemptFailure.timeout, attemptFailure.networkError]) {
    assert.deepEqual(decideOutcome(1, result, undefined, config, nowMs, 0), { kind: outcomeKind.retry, retryAtMs: nowMs + 1_000, reason: deadReason.none }, String(result));
    assert.deepEqual(decideOutcome(2, result, undefined, config, nowMs, top), { kind: outcomeKind.retry, retryAtMs: nowMs + 2_000, reason: deadReason.none }, String(result));
  }
  const draw = 0.37;
  assert.deepEqual(decideOutcome(2, 503, undefined, config, nowMs, draw), { kind: outcomeKind.retry, retryAtMs: nowMs + backoffMs(2, config, draw), reason: deadReason.none });
});

test('Retry-After is honoured when it asks for longer than the backoff, and only then', () => {
  const retryAt = (status: number, retryAfter: string | undefined): number => {
    const decision = decideOutcome(1, status, retryAfter, config, nowMs, 0);
    assert.equal(decision.kind, outcomeKind.retry);
    return decision.kind === outcomeKind.retry ? decision.retryAtMs : Number.NaN;
  };
  assert.equal(retryAt(429, '120'), nowMs + 120_000);
  assert.equal(retryAt(503, 'Thu, 01 Jan 2026 00:00:30 GMT'), nowMs + 30_000);
  assert.equal(retryAt(503, '0'), nowMs + 1_000, 'the backoff is longer');
  assert.equal(retryAt(429, 'garbage'), nowMs + 1_000, 'an unreadable Retry-After is ignored');
  assert.equal(retryAt(429, '999999999'), nowMs + deliveryLimits.retryAfterMsMax, 'capped');
  const timedOut = decideOutcome(1, attemptFailure.timeout, '120', config, nowMs, 0);
  assert.deepEqual(timedOut, { kind: outcomeKind.retry, retryAtMs: nowMs + 1_000, reason: deadReason.none }, 'no response, no Retry-After');
});

test('attempts run out exactly at max_attempts', () => {
  for (const result of [500, 429, attemptFailure.timeout, attemptFailure.networkError]) {
    assert.equal(decideOutcome(2, result, undefined, config, nowMs, 0.5).kind, outcomeKind.retry, `${result}: attempt 2 of 3 retries`);
    assert.deepEqual(decideOutcome(3, result, '5', config, nowMs, 0.5), { kind: outcomeKind.dead, reason: deadReason.attemptsExhausted }, `${result}: attempt 3 of 3 is the last`);
    assert.deepEqual(decideOutcome(4, result, undefined, config, nowMs, 0.5), { kind: outcomeKind.dead, reason: deadReason.attemptsExhausted }, `${result}: past max_attempts (lowered since)`);
  }
  assert.deepEqual(decideOutcome(1, 500, undefined, queue({ max_attempts: 1 }), nowMs, 0.5), { kind: outcomeKind.dead, reason: deadReason.attemptsExhausted }, 'max_attempts 1: no retry');
});

test('decideOutcome asserts its inputs', () => {
  assert.throws(() => decideOutcome(0, 500, undefined, config, nowMs, 0.5), assert.AssertionError);
  for (const status of [0, 99, 1000, 200.5, Number.NaN]) assert.throws(() => decideOutcome(1, status, undefined, config, nowMs, 0.5), assert.AssertionError, String(status));
});

test('decisions go into an OUTCOME record and come back unchanged', () => {
  const decisions = [
    decideOutcome(1, 200, undefined, config, nowMs, 0.5),
    decideOutcome(1, 500, undefined, config, nowMs, 0.5),
    decideOutcome(3, 500, undefined, config, nowMs, 0.5),
    decideOutcome(1, 410, undefined, config, nowMs, 0.5),
    decideOutcome(1, attemptFailure.targetRefused, undefined, config, nowMs, 0.5),
  ];
  const outcomes = emptyOutcomes(decisions.length);
  decisions.forEach((decision, i) => {
    outcomes.kinds[i] = decision.kind;
    outcomes.reasons[i] = decision.reason;
    outcomes.retryAtMs[i] = decision.kind === outcomeKind.retry ? decision.retryAtMs : 0;
  });
  outcomes.count = decisions.length;
  const decoded = decodeOutcomes(encodeOutcomes(outcomes));
  assert.ok(decoded !== undefined);
  assert.deepEqual([...decoded.kinds], [outcomeKind.delivered, outcomeKind.retry, outcomeKind.dead, outcomeKind.dead, outcomeKind.dead]);
  assert.deepEqual([...decoded.reasons], [deadReason.none, deadReason.none, deadReason.attemptsExhausted, deadReason.gone, deadReason.targetRefused]);
  assert.ok((decoded.retryAtMs[1] as number) > nowMs);
});

test('attemptFailureOf: the guard refusal at any depth of causes, timeouts, everything else a network error', () => {
  const refused = Object.assign(new Error('target refused'), { code: 'TARGET_REFUSED' });
  assert.equal(attemptFailureOf(refused), attemptFailure.targetRefused);
  assert.equal(attemptFailureOf(new TypeError('fetch failed', { cause: refused })), attemptFailure.targetRefused);
  assert.equal(attemptFailureOf(new Error('a', { cause: new Error('b', { cause: refused }) })), attemptFailure.targetRefused);
  assert.equal(attemptFailureOf(new Error('timed out', { cause: refused })), attemptFailure.targetRefused, 'refusal outranks a timeout');
  assert.equal(attemptFailureOf(new DOMException('The operation timed out.', 'TimeoutError')), attemptFailure.timeout, 'AbortSignal.timeout()');
  assert.equal(attemptFailureOf(new TypeError('fetch failed', { cause: Object.assign(new Error('x'), { code: 'UND_ERR_HEADERS_TIMEOUT' }) })), attemptFailure.timeout);
  assert.equal(attemptFailureOf(Object.assign(new Error('x'), { code: 'ETIMEDOUT' })), attemptFailure.timeout);
  assert.equal(attemptFailureOf(Object.assign(new Error('x'), { code: 'ECONNRESET' })), attemptFailure.networkError);
  assert.equal(attemptFailureOf(Object.assign(new Error('x'), { code: 'ERR_HTTP2_GOAWAY_SESSION' })), attemptFailure.networkError);
  assert.equal(attemptFailureOf('a string'), attemptFailure.networkError);
  assert.equal(attemptFailureOf(undefined), attemptFailure.networkError);
});
