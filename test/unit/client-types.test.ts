// @fermata/client's request and answer types held to the OpenAPI document (docs/openapi.json,
// which test/unit/openapi.test.ts holds to the routes): for each type, a table of its fields
// saying which are required, checked against the type by the compiler (`satisfies
// Requiredness<T>`: a field missing from the table, one too many, or a wrong required flag does
// not compile) and against the schema here (the same names, the same required ones). A field
// added to the API and not to the client, or the other way round, fails one of the two.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import type {
  BatchAdded,
  BulkCancelFilter,
  BulkCancelled,
  Cancelled,
  DeadTimer,
  DuplicateRow,
  Limits,
  Queue,
  QueueWithCounts,
  QueueConfig,
  Schedule,
  ScheduleInput,
  Stats,
  StreamAnswer,
  Timer,
  TimerAdded,
  TimerChanges,
  TimerFilter,
  TestClock,
  TimerInput,
} from '@fermata/client';

/** Each field of T, true where T requires it. */
type Requiredness<T> = { [K in keyof T]-?: object extends Pick<T, K> ? false : true };

type Json = Record<string, unknown>;
const doc = JSON.parse(readFileSync(new URL('../../docs/openapi.json', import.meta.url), 'utf8')) as Json;

function at(value: unknown, ...path: string[]): Json {
  let node = value;
  for (const part of path) node = (node as Json)[part];
  assert.ok(typeof node === 'object' && node !== null, path.join('/'));
  return resolve(node as Json);
}

/** Follows a local $ref, and folds allOf parts into one object schema. */
function resolve(schema: Json): Json {
  if (typeof schema.$ref === 'string') return resolve(at(doc, ...schema.$ref.slice(2).split('/')));
  if (!Array.isArray(schema.allOf)) return schema;
  const parts = [...(schema.allOf as Json[]).map(resolve), schema];
  return {
    properties: Object.assign({}, ...parts.map((part) => part.properties ?? {})),
    required: parts.flatMap((part) => (part.required as string[] | undefined) ?? []),
  };
}

const json = ['content', 'application/json', 'schema'];
const ok = (path: string, method: string, status = '200'): Json => at(doc, 'paths', path, method, 'responses', status, ...json);
const body = (path: string, method: string): Json => at(doc, 'paths', path, method, 'requestBody', ...json);

function sameFields(name: string, table: Record<string, boolean>, schema: Json, checkRequired = true): void {
  assert.deepEqual(Object.keys(table).sort(), Object.keys(schema.properties as Json).sort(), `${name}: the fields`);
  if (!checkRequired) return;
  const required = Object.entries(table).filter(([, needed]) => needed).map(([field]) => field);
  assert.deepEqual(required.sort(), [...new Set((schema.required as string[] | undefined) ?? [])].sort(), `${name}: the required fields`);
}

test('the client\'s types have the OpenAPI document\'s fields, required where it requires them', () => {
  const timerInput = { fire_at: false, delay_ms: false, target: true, payload: false, payload_base64: false, headers: false, key: false, queue: false, callback: false, failure_callback: false } as const satisfies Requiredness<TimerInput>;
  sameFields('TimerInput', timerInput, at(doc, 'components', 'schemas', 'TimerInput'));

  const timerAdded = { id: true, fire_at: true, revision: true, duplicate: true, state: false, differs: false } as const satisfies Requiredness<TimerAdded>;
  sameFields('TimerAdded', timerAdded, at(doc, 'components', 'schemas', 'TimerAdded'));

  const duplicateRow = { row: true, state: true, differs: true } as const satisfies Requiredness<DuplicateRow>;
  sameFields('DuplicateRow', duplicateRow, at(doc, 'components', 'schemas', 'DuplicateRow'));

  const batchAdded = { accepted: true, duplicates: true, ids: true, revisions: true, duplicate_rows: true } as const satisfies Requiredness<BatchAdded>;
  sameFields('BatchAdded', batchAdded, at(doc, 'components', 'schemas', 'BatchAdded'));

  const streamAnswer = { line: false, status: true, id: false, fire_at: false, revision: false, duplicate: false, state: false, differs: false, retry_after_s: false, error: false } as const satisfies Requiredness<StreamAnswer>;
  sameFields('StreamAnswer', streamAnswer, at(doc, 'components', 'schemas', 'StreamAnswer'));

  const timer = {
    id: true, state: true, revision: true, fire_at: true, attempts: true, queue: true, key: true, last_status: true, last_error: true, last_attempt_at: true,
    next_attempt_at: true, callback: true, failure_callback: true, target: true, headers: true, payload: true, payload_base64: true, created_at: true,
  } as const satisfies Requiredness<Timer>;
  sameFields('Timer', timer, at(doc, 'components', 'schemas', 'Timer'));
  sameFields('Timer (GET /v1/timers/{id})', timer, ok('/v1/timers/{id}', 'get'));

  const changes = { fire_at: false, delay_ms: false, payload: false, payload_base64: false, headers: false, target: false, queue: false, callback: false, failure_callback: false } as const satisfies Requiredness<TimerChanges>;
  sameFields('TimerChanges (PATCH)', changes, body('/v1/timers/{id}', 'patch'));

  const cancelled = { id: true, state: true, revision: true } as const satisfies Requiredness<Cancelled>;
  sameFields('Cancelled', cancelled, ok('/v1/timers/{id}', 'delete'));

  const bulk = { queue: false, key_prefix: false, due_after: false, due_before: false, ids: false } as const satisfies Requiredness<BulkCancelFilter>;
  sameFields('BulkCancelFilter', bulk, body('/v1/timers/cancel', 'post'));
  const bulkCancelled = { cancelled: true, in_flight: true } as const satisfies Requiredness<BulkCancelled>;
  sameFields('BulkCancelled', bulkCancelled, ok('/v1/timers/cancel', 'post'));

  const filter = { queue: false, state: false, key_prefix: false, key: false, due_after: false, due_before: false } as const satisfies Requiredness<TimerFilter>;
  const parameters = (at(doc, 'paths', '/v1/timers', 'get').parameters as Json[]).map((parameter) => String(resolve(parameter).name));
  assert.deepEqual(Object.keys(filter).sort(), parameters.filter((name) => name !== 'limit' && name !== 'cursor').sort(), 'TimerFilter: the list\'s filters');

  const queueConfig = {
    max_attempts: false, min_backoff_ms: false, max_backoff_ms: false, max_doublings: false, rate_per_s: false, max_concurrent: false, timeout_ms: false,
    batch_rows_max: false, linger_ms: false, delivery: false, sink: false, retention_ms: false, dead_retention_ms: false, max_pending: false,
  } as const satisfies Requiredness<QueueConfig>;
  sameFields('QueueConfig', queueConfig, at(doc, 'components', 'schemas', 'QueueConfig'));
  const queue = { ...queueConfig, name: true, paused: true } as const;
  const queueRequired = Object.fromEntries(Object.keys(queue).map((field) => [field, true])) as { [K in keyof typeof queue]: true } satisfies Requiredness<Queue>;
  sameFields('Queue', queueRequired, ok('/v1/queues/{name}', 'get'));
  const listedQueue = { ...queueRequired, pending: true, in_flight: true, delivered_per_s: true } as const satisfies Requiredness<QueueWithCounts>;
  sameFields('QueueWithCounts (GET /v1/queues)', listedQueue, at(ok('/v1/queues', 'get'), 'properties', 'queues', 'items'));

  const dead = {
    id: true, revision: true, queue: true, fire_at: true, attempts: true, last_status: true, reason: true, last_error: true, last_attempt_at: true,
    target: true, headers: true, payload: true, payload_base64: true, created_at: true,
  } as const satisfies Requiredness<DeadTimer>;
  sameFields('DeadTimer', dead, at(ok('/v1/dead', 'get'), 'properties', 'dead', 'items'));

  const scheduleInput = {
    cron: false, time_zone: false, every_ms: false, start_at: false, end_at: false, jitter_ms: false, catch_up: false, target: true, payload: false, payload_base64: false,
    headers: false, queue: false,
  } as const satisfies Requiredness<ScheduleInput>;
  sameFields('ScheduleInput', scheduleInput, body('/v1/schedules/{name}', 'put'));
  const schedule = {
    name: true, cron: false, time_zone: false, every_ms: false, start_at: false, end_at: false, jitter_ms: true, catch_up: true, target: true, queue: true,
    payload: true, payload_base64: true, headers: true, paused: true, created_at: true, updated_at: true, next: true,
  } as const satisfies Requiredness<Schedule>;
  sameFields('Schedule', schedule, ok('/v1/schedules/{name}', 'put'));
  sameFields('Schedule (GET)', schedule, ok('/v1/schedules/{name}', 'get'));

  const stats = {
    pending: true, resident: true, spilled: true, in_flight: true, delivered: true, dead: true, cancelled: true, bulk_cancels: true, cancelled_in_bulk: true,
    horizon: true, memory: true, wal: true, disk: false, paused_queues: true, held: true, held_released: true, reschedules: true, schedules: true,
  } as const satisfies Requiredness<Stats>;
  sameFields('Stats', stats, at(doc, 'components', 'schemas', 'Stats'));

  const limits = {
    json_body_bytes_max: true, batch_body_bytes_max: true, batch_logged_bytes_max: true, batch_rows_max: true, payload_bytes_max: true, key_bytes_max: true,
    headers_count_max: true, headers_bytes_max: true, target_bytes_max: true, stream_lines_in_flight_max: true, stream_bytes_in_flight_max: true,
    list_limit_max: true, bulk_cancel_ids_max: true,
  } as const satisfies Requiredness<Limits>;
  sameFields('Limits', limits, ok('/v1/limits', 'get'));

  const clock = { now: true, now_ms: true, mode: true } as const satisfies Requiredness<TestClock>;
  sameFields('TestClock', clock, ok('/v1/clock', 'get'));
  sameFields('TestClock (POST)', clock, ok('/v1/clock', 'post'));
  const moves = (at(doc, 'paths', '/v1/clock', 'post', 'requestBody', ...json).oneOf as Json[]).map((move) => Object.keys(move.properties as Json));
  assert.deepEqual(moves, [['advance_ms'], ['set']], 'ClockMove: advance_ms or set');
});
