// The pieces the OpenAPI document is built of (openapi.ts puts the paths together,
// openapi-components.ts the schemas, responses and headers they refer to): references, the
// error response, and the fragments both use, each read from the module that enforces it.
// Built once when the module loads; any thread.
import { deliveryLimits, ingestLimits, retentionDefaults, timerLimits } from '../../../engine/limits.ts';
import { differingFields } from '../../../engine/duplicate-answers.ts';
import { defaultQueueConfig, deliveryModes } from '../../../engine/queues.ts';
import { mediaTypes } from '../media-types.ts';

const MiB = 1024 * 1024;
export const sizeText = (bytes: number): string => (bytes % MiB === 0 ? `${bytes / MiB} MiB` : bytes % 1024 === 0 ? `${bytes / 1024} KiB` : `${bytes} bytes`);

export const ref = (kind: 'schemas' | 'responses' | 'parameters' | 'headers', name: string): { $ref: string } => ({ $ref: `#/components/${kind}/${name}` });
export const jsonOf = (schema: object): { [mediaTypes.json]: { schema: object } } => ({ [mediaTypes.json]: { schema } });

/** Headers fermata sets on every delivery itself (engine/batch/validate.ts): a timer may not give them. */
export const reservedHeaders = ['host', 'content-length', 'transfer-encoding', 'connection', 'idempotency-key', 'fermata-timer-id', 'fermata-attempt', 'fermata-fire-at', 'webhook-id', 'webhook-timestamp', 'webhook-signature', 'fermata-callback-for'];
const queueNamePattern = '^[A-Za-z0-9][A-Za-z0-9._-]*$';
export const queueNameSchema = { type: 'string', pattern: queueNamePattern, minLength: 1, maxLength: timerLimits.queueNameBytesMax } as const;

/** Ranges engine/queues.ts enforces (its table is private; the test PUTs every bound). */
export const queueFields = {
  max_attempts: { min: 1, max: 1_000, nullable: false, text: 'Attempts before a timer is dead (the first delivery counts).' },
  min_backoff_ms: { min: 0, max: 30 * 24 * 3_600_000, nullable: false, text: 'Backoff after the first failed attempt.' },
  max_backoff_ms: { min: 0, max: 30 * 24 * 3_600_000, nullable: false, text: 'Longest backoff; must not be below min_backoff_ms.' },
  max_doublings: { min: 0, max: 62, nullable: false, text: 'How many times the backoff doubles before it grows linearly.' },
  rate_per_s: { min: 1, max: 10_000_000, nullable: true, text: 'Deliveries per second at most; null = no limit.' },
  max_concurrent: { min: 1, max: 1_000_000, nullable: true, text: 'Deliveries in flight at most; null = no limit ("pull" delivery: due timers waiting for a DoGet and leased, at most; null = 100,000).' },
  timeout_ms: { min: 1, max: 600_000, nullable: false, text: 'How long one delivery attempt waits for the answer before it counts as failed ("pull" delivery: how long a lease lasts before its timers count a failed attempt).' },
  batch_rows_max: { min: 1, max: 100_000, nullable: false, text: 'Rows in one Arrow batch at most ("arrow" delivery; "pull": rows one DoGet leases at most).' },
  linger_ms: { min: 0, max: 60_000, nullable: false, text: 'How long due timers wait for more to fill an Arrow batch ("arrow" delivery).' },
  retention_ms: {
    min: 1,
    max: timerLimits.horizonMsMax,
    nullable: true,
    text: `How long a delivered or cancelled timer is kept after it finished (GET answers, its idempotency key deduplicates); then its id answers 404 and its key is free. null = the service's (${retentionDefaults.finishedMs / 3_600_000} h).`,
  },
  dead_retention_ms: {
    min: 1,
    max: timerLimits.horizonMsMax,
    nullable: true,
    text: `How long a dead timer is kept (listed in /v1/dead, redrivable, its key deduplicates). null = the service's (${retentionDefaults.deadMs / 86_400_000} days).`,
  },
  max_pending: {
    min: 1,
    max: 1_000_000_000,
    nullable: true,
    text: 'Timers of the queue not finished (pending, retrying, held, being delivered) that are in memory, at most: an add that would pass it is refused whole, 429 QUEUE_FULL with Retry-After. Timers spilled to disk (far in the future) are not counted. null = no cap.',
  },
} as const;
/** The queue config's fields that are not whole numbers (for "arrow" and "pull" delivery). */
export const queueOtherFields = {
  delivery: {
    enum: [...deliveryModes],
    default: defaultQueueConfig.delivery,
    description: '"request": one POST per timer to its own target. "arrow": due timers are POSTed to `sink` as Arrow IPC record batches (columns id, fire_at, attempt, target, key, payload, headers), one 2xx settling the whole batch. "pull": no POST; due timers wait for an Arrow Flight DoGet naming the queue, which streams them in the same columns under a lease that a DoAction "ack" (or the next DoGet) settles; an unacknowledged lease expires after timeout_ms and its timers are retried with backoff (docs/ARCHITECTURE.md, "Pull delivery").',
  },
  sink: {
    type: ['string', 'null'],
    format: 'uri',
    default: defaultQueueConfig.sink,
    description: 'Where "arrow" delivery POSTs its batches (an absolute http or https URL, required for "arrow"); not used by "request" and "pull" (null, or ignored).',
  },
} as const;
export const queueFieldNames = [...Object.keys(queueFields), ...Object.keys(queueOtherFields)];

/** An error answer whose `error.code` is one of `codes`, with these response headers. */
export const lastErrorSchema = {
  type: ['string', 'null'],
  maxLength: deliveryLimits.lastErrorBytesMax,
  description:
    'Why its last attempt failed: `HTTP 503`, `timeout after 10000 ms`, `connection refused`, `TLS: …`, `refused by the SSRF guard: …`. Null when it has not failed, or was delivered since.',
} as const;

export const lastAttemptAtSchema = { type: ['string', 'null'], format: 'date-time', description: 'When that failed attempt was sent; null with `last_error`.' } as const;

/** What a timer carries to its target and when it was accepted, as its views show it (the Timer and a dead entry): the fields and their schemas. */
export const timerContentSchemas = {
  target: { type: 'string', format: 'uri', description: 'Where it is delivered.' },
  headers: { type: 'object', additionalProperties: { type: 'string' }, description: 'The extra headers its delivery sends, as its add or latest PATCH gave them; `{}` when none.' },
  payload: { type: ['string', 'null'], description: 'Its payload when the bytes are UTF-8 text; null when they are not (then `payload_base64` has them). Exactly one of the two is a string, so either can be sent back to an add as it is.' },
  payload_base64: { type: ['string', 'null'], description: 'Its payload in standard base64 when the bytes are not UTF-8; null when `payload` has them.' },
  created_at: {
    type: ['string', 'null'],
    format: 'date-time',
    description: 'When it was accepted: the time its add (or, for a callback\'s timer, the outcome that made it) was taken. Null for a timer whose add a checkpoint written by an earlier release dropped.',
  },
} as const;
export const timerContentFields = Object.keys(timerContentSchemas) as (keyof typeof timerContentSchemas)[];

export function errorResponse(description: string, codes: readonly string[], headers: Record<string, object> = {}): object {
  return {
    description,
    ...(Object.keys(headers).length > 0 ? { headers } : {}),
    content: jsonOf({ allOf: [ref('schemas', 'Error')], properties: { error: { properties: { code: { enum: codes } } } } }),
  };
}

export const timerStates = {
  pending: 'waiting for its fire time',
  delivering: 'handed to delivery: an attempt is in flight; or a worker holds it until its time (taken up to 20 ms ahead) or its turn, and a cancel still withdraws it; or it waits in an Arrow batch or for a pull',
  retrying: 'waiting out a backoff after a failed attempt',
  delivered: 'a target answered 2xx',
  dead: 'out of attempts, or the target answered 410',
  cancelled: 'cancelled before delivery',
};

export const arrowColumns = [
  `\`fire_at\`: Timestamp (any unit; finer than 1 ms rounds up) or Int64 epoch ms ≥ ${ingestLimits.fireAtEpochMsMin} (10^12: a smaller value looks like epoch seconds and is refused, naming its row), no nulls`,
  '`delay_ms`: Int64 or Int32 ≥ 0, ms after the server accepted the request, no nulls (exactly one of `fire_at` and `delay_ms`)',
  '`target`: Utf8 or Dictionary<Utf8>, required, no nulls',
  '`payload`: Utf8 or Binary, optional (null = empty body)',
  '`headers`: Utf8 holding a JSON object of string → string, optional (null or empty = none)',
  '`key`: Utf8, optional (null or empty = none)',
  '`queue`: Utf8 or Dictionary<Utf8>, optional (null = `default`)',
];

export const metricNames = [
  'fermata_timers{state}',
  'fermata_wal_last_sequence',
  'fermata_wal_poisoned',
  'fermata_wal_appends_total',
  'fermata_wal_fdatasyncs_total',
  'fermata_wal_bytes_written_total',
  'fermata_wal_slow_fdatasyncs_total',
  'fermata_queues_paused',
  'fermata_timers_held',
  'fermata_timers_held_released_total',
  'fermata_reschedules_total',
  'fermata_rescheduled_timers',
  'fermata_bulk_cancels_total',
  'fermata_bulk_cancelled_timers_total',
  'fermata_schedules',
  'fermata_schedules_paused',
  'fermata_schedule_occurrences_created_total',
  'fermata_schedule_catch_up_occurrences_total',
  'fermata_schedule_occurrences_fired_total',
  'fermata_http_abusive_connections_total',
  'fermata_http_peer_penalties_total',
  'fermata_http_refused_connections_total',
  'fermata_http_penalty_table_peers',
  'fermata_audit_actions_total{action}',
];

/** A duplicate's original state and differing fields (DuplicateRow, TimerAdded, StreamAnswer). */
export const duplicateStateSchema = { enum: Object.keys(timerStates) };
export const duplicateDiffersSchema = { type: 'array', items: { enum: [...differingFields] }, uniqueItems: true };

export const queueNameParameter = {
  name: 'name',
  in: 'path',
  required: true,
  description: `Queue name: 1 to ${timerLimits.queueNameBytesMax} characters of A–Z, a–z, 0–9, \`.\`, \`_\`, \`-\`, starting with a letter or digit (else 400 QUEUE_INVALID, field \`name\`).`,
  schema: queueNameSchema,
};

/** A queue with its name and pause, as GET /v1/queues lists it and GET /v1/queues/{name} and pause/resume answer it. */
export const namedQueueSchema = {
  allOf: [ref('schemas', 'QueueConfig')],
  properties: { name: queueNameSchema, paused: { type: 'boolean', description: 'Whether the queue is paused: it accepts timers and delivers none (POST /v1/queues/{name}/pause, /resume).' } },
  required: ['name', ...queueFieldNames, 'paused'],
  unevaluatedProperties: false,
};

export const retryAfter = { 'Retry-After': ref('headers', 'RetryAfter') };

export const bearer = [{ bearerAuth: [] }];
export const open: never[] = [];

/** Answers of an operation that appends to the log: it waits for the record to be durable. */
export const logResponses = {
  '429': ref('responses', 'LogQueueFull'),
  '503': ref('responses', 'LogUnavailable'),
  '507': ref('responses', 'DiskFull'),
};
