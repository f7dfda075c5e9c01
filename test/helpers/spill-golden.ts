// The timers and the checkpoint of the spill format's golden files (test/fixtures/spill/v1 to
// v4, README.md there): a resident run holding one timer of each state a run holds, two of them
// with a failed last attempt, and a spilled run of two far-future pending timers. Version 1
// was written from these by the release before version 2 (commit eda3f58), without the
// failures, which version 1 has no columns for; version 2 by the release before version 3
// (commit c980692), without the callbacks, which version 2 has no columns for; version 3 by the
// release before version 4 (commit f6ba5d3), without the spilled timers' created_at (its
// RunRowFields.createdAtMs), which version 3 has no column for. Plain data, any thread.
import type { Manifest } from '../../engine/spill/manifest.ts';
import type { RunMeta } from '../../engine/spill/run-meta.ts';
import type { RunRowFields } from '../../engine/spill/run-rows.ts';

const hour = 3_600_000;
const day = 24 * hour;
/** A bucket start: the runs' timers fall in the buckets after it. */
export const goldenT0 = 1_800_000_000_000;
export const goldenBucketWidthMs = hour;

/** RunRowFields (timerState and deadReason codes), with the strings and bytes of a row. */
export interface GoldenTimer extends RunRowFields {
  readonly queue: string;
  readonly target: string;
  /** Empty: none. */
  readonly key: string;
  readonly payload: Uint8Array;
  /** JSON object text of delivery headers; empty: none. */
  readonly headers: string;
  /** Written from version 2 on. */
  readonly failure?: { readonly error: string; readonly attemptedAtMs: number };
  /** Written from version 3 on; an empty URL is none. */
  readonly callbacks?: { readonly callback: string; readonly failureCallback: string };
}

const text = (value: string): Uint8Array => new TextEncoder().encode(value);

/** The resident run's timers, in run order (due time, then log position). */
export const goldenResident: readonly GoldenTimer[] = [
  { seq: 3, row: 0, fireAtMs: goldenT0 + 1_000, dueAtMs: goldenT0 + 1_000, state: 1, attempts: 0, lastStatus: 0, deadReason: 0, queue: 'default', target: 'https://a.example/hook', key: 'order-1', payload: text('hello'), headers: '{"x-trace":"abc"}', callbacks: { callback: 'https://cb.example/ok', failureCallback: 'https://cb.example/dead' } },
  {
    seq: 3,
    row: 1,
    fireAtMs: goldenT0 + 2_000,
    dueAtMs: goldenT0 + 61_000,
    state: 3,
    attempts: 2,
    lastStatus: 503,
    deadReason: 0,
    queue: 'slow',
    target: 'https://b.example/x?token=s3cr3t',
    key: '',
    payload: new Uint8Array(0),
    headers: '',
    failure: { error: 'HTTP 503', attemptedAtMs: goldenT0 + 31_000 },
  },
  { seq: 6, row: 0, fireAtMs: goldenT0 + 5_000, dueAtMs: goldenT0 + 5_000 + hour, state: 6, attempts: 0, lastStatus: 0, deadReason: 0, queue: 'default', target: 'https://a.example/hook', key: '', payload: text('never'), headers: '' },
  { seq: 5, row: 2, fireAtMs: goldenT0 + 4_000, dueAtMs: goldenT0 + 4_000 + day, state: 4, attempts: 1, lastStatus: 200, deadReason: 0, queue: 'default', target: 'https://a.example/hook', key: '', payload: text('done'), headers: '' },
  {
    seq: 4,
    row: 0,
    fireAtMs: goldenT0 + 3_000,
    dueAtMs: goldenT0 + 3_000 + 7 * day,
    state: 5,
    attempts: 5,
    lastStatus: 0,
    deadReason: 1,
    queue: 'slow',
    target: 'https://b.example/x?token=s3cr3t',
    key: 'order-3',
    payload: Uint8Array.of(0, 255, 1),
    headers: '',
    failure: { error: 'connection refused', attemptedAtMs: goldenT0 + 40_000 },
  },
];

/** The spilled run's timers: pending, never attempted, due at their fire time past the watermark. */
export const goldenSpilled: readonly GoldenTimer[] = [
  { seq: 7, row: 0, fireAtMs: goldenT0 + 10 * day, dueAtMs: goldenT0 + 10 * day, state: 1, attempts: 0, lastStatus: 0, deadReason: 0, createdAtMs: goldenT0 - 2_000, queue: 'default', target: 'https://c.example/far', key: 'far-1', payload: text('far away'), headers: '', callbacks: { callback: '', failureCallback: 'https://cb.example/far-dead' } },
  { seq: 8, row: 1, fireAtMs: goldenT0 + 11 * day, dueAtMs: goldenT0 + 11 * day, state: 1, attempts: 0, lastStatus: 0, deadReason: 0, createdAtMs: goldenT0 - 1_000, queue: 'slow', target: 'https://c.example/far', key: '', payload: text('further'), headers: '{"x-n":"2"}' },
];

/** Pending timers due before it are in the resident run. */
export const goldenWatermarkMs = goldenT0 + 5 * day;

/** The checkpoint naming the two runs (ids 1 and 2), with queue `slow` configured. */
export function goldenManifest(residentRun: RunMeta, spilledRun: RunMeta): Manifest {
  return {
    checkpointSeq: 9,
    watermarkMs: goldenWatermarkMs,
    releasedExpiryMaxMs: -Infinity,
    nextRunId: 3,
    residentRun,
    spilledRuns: [{ ...spilledRun, validFromMs: goldenWatermarkMs }],
    // As the QUEUE record of that release wrote it (a checkpoint copies it).
    queues: [
      {
        name: 'slow',
        config: { max_attempts: 5, min_backoff_ms: 30000, max_backoff_ms: 3600000, max_doublings: 16, rate_per_s: null, max_concurrent: null, timeout_ms: 30000, delivery: 'request', sink: null, batch_rows_max: 10000, linger_ms: 50 },
      },
    ],
    tombstones: { seqs: new Float64Array(0), rows: new Uint32Array(0), fireAtMs: new Float64Array(0) },
  };
}
