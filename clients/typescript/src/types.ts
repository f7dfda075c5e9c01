// The shapes the HTTP API takes and answers, as docs/openapi.json states them (field names as on
// the wire, snake_case). test/unit/client-types.test.ts holds each type's fields, and which of
// them are required, to the OpenAPI document's schemas, so the two cannot drift apart.

/** A time as the API takes it: an RFC 3339 string, epoch ms (≥ 10^12), or a Date. */
export type TimeInput = string | number | Date;

/** A timer to add (`TimerInput`): exactly one of `fire_at` and `delay_ms`. */
export interface TimerInput {
  fire_at?: TimeInput;
  delay_ms?: number;
  target: string;
  payload?: string;
  payload_base64?: string;
  headers?: Record<string, string>;
  key?: string;
  queue?: string;
  callback?: string;
  failure_callback?: string;
}

export type TimerState = 'pending' | 'delivering' | 'retrying' | 'delivered' | 'dead' | 'cancelled';

/** The answer to one add (`TimerAdded`). `state` and `differs` only when `duplicate`. */
export interface TimerAdded {
  id: string;
  fire_at: string;
  revision: number;
  duplicate: boolean;
  state?: TimerState;
  differs?: string[];
}

/** A row of a batch whose key was known (`DuplicateRow`). */
export interface DuplicateRow {
  row: number;
  state: TimerState;
  differs: string[];
}

/** The answer to a batch (`BatchAdded`): `ids` and `revisions` row-aligned with the input. */
export interface BatchAdded {
  accepted: number;
  duplicates: number;
  ids: string[];
  revisions: number[];
  duplicate_rows: DuplicateRow[];
}

/** A timer as `GET /v1/timers/{id}` shows it (`Timer`). */
export interface Timer {
  id: string;
  state: TimerState;
  revision: number;
  fire_at: string;
  attempts: number;
  queue: string;
  key: string | null;
  last_status: number | null;
  last_error: string | null;
  last_attempt_at: string | null;
  next_attempt_at: string | null;
  callback: string | null;
  failure_callback: string | null;
  target: string;
  headers: Record<string, string>;
  payload: string | null;
  payload_base64: string | null;
  created_at: string | null;
}

/** What a PATCH changes (any of them; `null` removes a callback). */
export interface TimerChanges {
  fire_at?: TimeInput;
  delay_ms?: number;
  payload?: string;
  payload_base64?: string;
  headers?: Record<string, string>;
  target?: string;
  queue?: string;
  callback?: string | null;
  failure_callback?: string | null;
}

/** The answer to a cancel. */
export interface Cancelled {
  id: string;
  state: 'cancelled';
  revision: number;
}

/** Filters of `GET /v1/timers`, combined with "and". */
export interface TimerFilter {
  queue?: string;
  state?: TimerState;
  key_prefix?: string;
  key?: string;
  due_after?: TimeInput;
  due_before?: TimeInput;
}

/** What `POST /v1/timers/cancel` takes: a filter, or `ids` alone. */
export interface BulkCancelFilter {
  queue?: string;
  key_prefix?: string;
  due_after?: TimeInput;
  due_before?: TimeInput;
  ids?: string[];
}

export interface BulkCancelled {
  cancelled: number;
  in_flight: number;
}

/** A queue's config (`QueueConfig`); a `PUT` leaves out what takes its default. */
export interface QueueConfig {
  max_attempts?: number;
  min_backoff_ms?: number;
  max_backoff_ms?: number;
  max_doublings?: number;
  rate_per_s?: number | null;
  max_concurrent?: number | null;
  timeout_ms?: number;
  batch_rows_max?: number;
  linger_ms?: number;
  delivery?: 'request' | 'arrow' | 'pull';
  sink?: string | null;
  retention_ms?: number | null;
  dead_retention_ms?: number | null;
  max_pending?: number | null;
}

/** A queue as `GET /v1/queues/{name}` shows it: its whole config, and whether it is paused. */
export interface Queue extends Required<QueueConfig> {
  name: string;
  paused: boolean;
}

/** A queue as `GET /v1/queues` lists it: as `Queue`, with its counts now. */
export interface QueueWithCounts extends Queue {
  /** Timers waiting in it (pending, retrying, held) that are in memory; spilled ones are not counted. */
  pending: number;
  /** Its deliveries under way. */
  in_flight: number;
  /** Deliveries a second over the last minute. */
  delivered_per_s: number;
}

export interface QueueDeleted {
  name: string;
  deleted: true;
}

export type DeadReason = 'attempts_exhausted' | 'gone' | 'target_refused' | 'unknown';

/** A dead timer as `GET /v1/dead` lists it. */
export interface DeadTimer {
  id: string;
  revision: number;
  queue: string;
  fire_at: string;
  attempts: number;
  last_status: number | null;
  reason: DeadReason;
  last_error: string | null;
  last_attempt_at: string | null;
  target: string;
  headers: Record<string, string>;
  payload: string | null;
  payload_base64: string | null;
  created_at: string | null;
}

export interface DeadFilter {
  queue?: string;
}

/** A schedule to create or replace: `cron` (with `time_zone`) or `every_ms`, and its timer. */
export interface ScheduleInput {
  cron?: string;
  time_zone?: string;
  every_ms?: number;
  start_at?: TimeInput;
  end_at?: TimeInput;
  jitter_ms?: number;
  catch_up?: 'latest' | 'all' | 'none';
  target: string;
  payload?: string;
  payload_base64?: string;
  headers?: Record<string, string>;
  queue?: string;
}

/** A schedule as the API shows it, with its next five occurrences. */
export interface Schedule {
  name: string;
  cron?: string;
  time_zone?: string;
  every_ms?: number;
  start_at?: string;
  end_at?: string;
  jitter_ms: number;
  catch_up: 'latest' | 'all' | 'none';
  target: string;
  queue: string;
  payload: string | null;
  payload_base64: string | null;
  headers: Record<string, string>;
  paused: boolean;
  created_at: string;
  updated_at: string;
  next: Array<{ occurrence: string; fire_at: string }>;
}

export interface ScheduleDeleted {
  name: string;
  deleted: true;
}

/** `GET /v1/stats` (`Stats`): counts from memory. */
export interface Stats {
  pending: number;
  resident: number;
  spilled: number;
  in_flight: number;
  delivered: number;
  dead: number;
  cancelled: number;
  bulk_cancels: number;
  cancelled_in_bulk: number;
  horizon: number | null;
  memory: { budget_bytes: number | null; resident_bytes: number; spill_metadata_bytes: number; add_times_bytes: number };
  /** `last_sync_at`: when the last durable write ended (RFC 3339), null before the first since start. */
  wal: { last_seq: number; syncs: number; appends: number; poisoned: boolean; last_sync_at: string | null };
  /** The data directory's disk; absent where the service runs without a disk check. */
  disk?: { data_bytes: number | null; free_bytes: number | null; free_bytes_min: number };
  paused_queues: number;
  held: number;
  held_released: number;
  reschedules: { applied: number; redirects: number; redirect_bytes: number };
  schedules: { count: number; paused: number; occurrences_created: number; catch_up_created: number; skipped: number; catch_up_cancelled: number; occurrences_fired: number };
}

/** `GET /v1/limits`: the bounds the client splits its requests at. */
export interface Limits {
  json_body_bytes_max: number;
  batch_body_bytes_max: number;
  batch_logged_bytes_max: number;
  batch_rows_max: number;
  payload_bytes_max: number;
  key_bytes_max: number;
  headers_count_max: number;
  headers_bytes_max: number;
  target_bytes_max: number;
  stream_lines_in_flight_max: number;
  stream_bytes_in_flight_max: number;
  list_limit_max: number;
  bulk_cancel_ids_max: number;
}

/** One answer line of `POST /v1/timers/stream` (`StreamAnswer`). */
export interface StreamAnswer {
  line?: number;
  status: number;
  id?: string;
  fire_at?: string;
  revision?: number;
  duplicate?: boolean;
  state?: TimerState;
  differs?: string[];
  retry_after_s?: number;
  error?: { code: string; message: string; [field: string]: unknown };
}

/** The test clock of a service started with `--clock manual` (`GET /v1/clock`). */
export interface TestClock {
  now: string;
  now_ms: number;
  mode: 'manual';
}

/** A move of the test clock: `advance_ms` forward, or to `set` (never backwards). */
export type ClockMove = { advance_ms: number } | { set: TimeInput };
