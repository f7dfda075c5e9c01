// When a refused request is sent again: a 429 or 503 (the server's conditions that pass by
// themselves: a full log queue, full memory, a partition moving, a stopping stream) is retried
// after the `Retry-After` the server gave, else after a doubling backoff, a bounded number of
// times and never after a wait longer than the bound. Anything else is the caller's to handle.

export interface RetryPolicy {
  /** Retries after the first try, at most (0: none). */
  readonly retries: number;
  /** Backoff of the first retry when the server gave no Retry-After; it doubles each time. */
  readonly baseDelayMs: number;
  /** A wait longer than this (the server's or the backoff's) is not made: the error is thrown instead. */
  readonly maxDelayMs: number;
}

export const defaultRetryPolicy: RetryPolicy = { retries: 5, baseDelayMs: 100, maxDelayMs: 30_000 };

/** Whether an answer with this status may be retried (the server did nothing for it). */
export function isRetryable(status: number): boolean {
  return status === 429 || status === 503;
}

/** How long to wait before retry number `retry` (0-based), or undefined when it is not to be made. */
export function retryDelayMs(policy: RetryPolicy, retry: number, retryAfterS: number | undefined): number | undefined {
  if (retry >= policy.retries) return undefined;
  const delay = retryAfterS !== undefined ? retryAfterS * 1000 : policy.baseDelayMs * 2 ** retry * (0.5 + Math.random() / 2);
  return delay <= policy.maxDelayMs ? delay : undefined;
}

/** `Retry-After` in seconds (the delta form fermata sends); undefined when absent or a date. */
export function retryAfterOf(header: string | string[] | undefined): number | undefined {
  const value = Array.isArray(header) ? header[0] : header;
  if (value === undefined || !/^\d+$/.test(value.trim())) return undefined;
  return Number(value);
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
