// The components of the OpenAPI document (openapi.ts): the security scheme, parameters, headers,
// responses and schemas its paths refer to with $ref. Built once when the module loads; any thread.
import { errorCodes } from '../../../engine/errors.ts';
import { ingestLimits, timerLimits } from '../../../engine/limits.ts';
import { defaultQueueConfig } from '../../../engine/queues.ts';
import { httpErrorCodes } from '../error-map.ts';
import { sizeText, ref, reservedHeaders, queueNameSchema, queueFields, queueOtherFields, lastErrorSchema, lastAttemptAtSchema, timerContentSchemas, timerContentFields, errorResponse, timerStates, duplicateStateSchema, duplicateDiffersSchema, retryAfter } from './openapi-parts.ts';

export const openApiComponents = {
  securitySchemes: {
    bearerAuth: {
      type: 'http',
      scheme: 'bearer',
      description:
        'Enforced only when the service is configured with tokens (`"tokens"` in the config file, or FERMATA_TOKENS): then every route but /healthz, /readyz and /v1/limits needs `Authorization: Bearer <token>`, else 401 UNAUTHORIZED with `WWW-Authenticate: Bearer`. Each token has scopes (`read`, `write`, `admin`; each operation says which it needs) and may be limited to queues: a token without what a request needs is answered 403 FORBIDDEN naming the `scope` or `queue`. Without tokens no route asks for one, and the service refuses to listen on a non-loopback address unless started with --insecure.',
    },
  },
  parameters: {
    TimerId: { name: 'id', in: 'path', required: true, description: 'A timer id. Anything that is not one is answered 404, like an unknown id.', schema: ref('schemas', 'TimerId') },
  },
  headers: {
    RetryAfter: { description: 'Seconds to wait before trying again; sent only for the codes that pass by themselves (CAPACITY_FULL, WAL_QUEUE_FULL, QUEUE_FULL, WAL_CLOSED).', schema: { type: 'integer', minimum: 1 } },
    WwwAuthenticate: { description: 'Always `Bearer`.', schema: { const: 'Bearer' } },
    Allow: { description: 'The methods the routes at this path take, comma-separated (HEAD wherever GET).', schema: { type: 'string' }, example: 'DELETE, GET, HEAD' },
  },
  responses: {
    Unauthorized: errorResponse('UNAUTHORIZED: tokens are configured and the request has no `Authorization: Bearer` header with one of them.', [errorCodes.unauthorized], {
      'WWW-Authenticate': ref('headers', 'WwwAuthenticate'),
    }),
    NotFound: errorResponse('NOT_FOUND: no timer has this id (or it was forgotten after its retention).', [httpErrorCodes.notFound]),
    RouteNotFound: errorResponse('ROUTE_NOT_FOUND: no route serves this path (any path not in this document).', [httpErrorCodes.routeNotFound]),
    MethodNotAllowed: errorResponse('METHOD_NOT_ALLOWED: a route serves this path, but none with this method.', [httpErrorCodes.methodNotAllowed], { Allow: ref('headers', 'Allow') }),
    UnsupportedMediaType: errorResponse('UNSUPPORTED_MEDIA_TYPE: a body with a Content-Type this route does not take, or none.', [httpErrorCodes.unsupportedMediaType]),
    LogQueueFull: errorResponse('WAL_QUEUE_FULL: too many bytes are waiting to be written to the log. QUEUE_FULL (an add): a queue of the batch is at its max_pending; nothing was added (`queue` names it, `pending` its count).', [errorCodes.walQueueFull, errorCodes.queueFull], retryAfter),
    LogUnavailable: errorResponse(
      'WAL_CLOSED: the service is stopping. WAL_POISONED: a failed write or fsync stopped the log from acknowledging; the service opens its data directory again by itself (recovery re-reads the disk), so try again after Retry-After.',
      [errorCodes.walClosed, errorCodes.walPoisoned],
      retryAfter,
    ),
    DiskFull: errorResponse(
      'The disk is full. DISK_FULL: fewer bytes are free than the configured minimum, so adds are refused before anything is written (cancels and delivery outcomes are not). WAL_POISONED (its cause ENOSPC): a write found no space; the service opens its data directory again by itself. Retry-After says when to ask again.',
      [errorCodes.walPoisoned, errorCodes.diskFull],
      retryAfter,
    ),
  },
  schemas: {
    TimerId: {
      type: 'string',
      pattern: '^[0-9a-hjkmnp-tv-z]{24}$',
      description: '24 characters of lowercase Crockford base32 (no i, l, o, u): the log sequence, the row in its batch and the fire time it was added with. Ids sort by creation.',
      examples: ['0000000004000001m8vgw5r0'],
    },
    TimerInput: {
      type: 'object',
      description: 'One timer as JSON. Exactly one of `fire_at` and `delay_ms`; at most one of `payload` and `payload_base64`. Unknown fields are refused.',
      properties: {
        fire_at: {
          description: `When to deliver: an RFC 3339 date-time (a fraction finer than 1 ms rounds up) or epoch ms ≥ 10^12 (a smaller number looks like epoch seconds and is refused: multiply seconds by 1000). A time past means now; at most ${timerLimits.horizonMsMax} ms (10 years) ahead.`,
          oneOf: [{ type: 'string', format: 'date-time' }, { type: 'integer', minimum: ingestLimits.fireAtEpochMsMin }],
        },
        delay_ms: { type: 'integer', minimum: 0, maximum: timerLimits.horizonMsMax, description: 'Instead of `fire_at`: ms after the server accepted the request.' },
        target: { type: 'string', format: 'uri', maxLength: timerLimits.targetBytesMax, description: 'Absolute http or https URL the payload is POSTed to, without user or password.' },
        payload: { type: 'string', description: `The delivery body, sent byte for byte (UTF-8); at most ${sizeText(timerLimits.payloadBytesMax)}.` },
        payload_base64: {
          type: 'string',
          contentEncoding: 'base64',
          pattern: '^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}(?:==)?|[A-Za-z0-9+/]{3}=?)?$',
          description: `Instead of \`payload\` (JSON only): a binary body in standard base64; at most ${sizeText(timerLimits.payloadBytesMax)} decoded.`,
        },
        headers: {
          type: 'object',
          maxProperties: timerLimits.headerCountMax,
          propertyNames: { pattern: "^[!#$%&'*+.^_`|~0-9A-Za-z-]+$" },
          additionalProperties: { type: 'string', pattern: '^[^\\r\\n\\u0000]*$' },
          description: `Added to the delivery; at most ${sizeText(timerLimits.headersBytesMax)} as JSON. These are set by fermata and refused here (any case): ${reservedHeaders.join(', ')}.`,
        },
        key: {
          type: 'string',
          minLength: 1,
          description: `Idempotency key, at most ${timerLimits.keyBytesMax} bytes (UTF-8). Adding a key already known adds nothing and answers with the original timer, for as long as it exists plus its retention; a key repeated within one batch counts from its second row on.`,
        },
        queue: { ...queueNameSchema, default: 'default', description: 'The queue whose retry policy and limits apply.' },
        callback: {
          type: 'string',
          format: 'uri',
          maxLength: timerLimits.targetBytesMax,
          description: 'Absolute http or https URL (the rules of `target`) that fermata POSTs the outcome summary to once the timer is delivered, as a timer of its own in the same queue. Refused on queues that deliver by `arrow` or `pull`.',
        },
        failure_callback: {
          type: 'string',
          format: 'uri',
          maxLength: timerLimits.targetBytesMax,
          description: 'As `callback`, once the timer is dead (attempts exhausted, 410 Gone, or refused by the address guard).',
        },
      },
      required: ['target'],
      oneOf: [{ required: ['fire_at'] }, { required: ['delay_ms'] }],
      not: { required: ['payload', 'payload_base64'] },
      additionalProperties: false,
    },
    TimerAdded: {
      type: 'object',
      properties: {
        id: ref('schemas', 'TimerId'),
        fire_at: { type: 'string', format: 'date-time', description: 'The fire time (UTC, ms precision); a duplicate\'s is the original\'s.' },
        revision: { type: 'integer', minimum: 1, description: 'The timer\'s revision: 1 for a new timer; a duplicate\'s is the original\'s now.' },
        duplicate: { type: 'boolean', description: 'True when the key was already known: `id` is the original\'s.' },
        state: { ...duplicateStateSchema, description: 'A duplicate only: the original\'s state now.' },
        differs: { ...duplicateDiffersSchema, description: 'A duplicate only: the fields this request differs from the original in (empty: an exact retry).' },
      },
      required: ['id', 'fire_at', 'revision', 'duplicate'],
      additionalProperties: false,
    },
    DuplicateRow: {
      type: 'object',
      description: 'A row whose idempotency key was already known, as a batch\'s JSON answer lists it.',
      properties: {
        row: { type: 'integer', minimum: 0, description: 'The 0-based row among the timers of the batch.' },
        state: { ...duplicateStateSchema, description: 'The state of the timer its key names, now (`cancelled`: a retry of an add that was cancelled since, which adds nothing).' },
        differs: {
          ...duplicateDiffersSchema,
          description: 'The fields in which this request differs from the original as it is now, in this order; empty for an exact retry. `payload` (given as `payload` or `payload_base64`) by its bytes; `headers` by names (any case) and values; `fire_at` only when the request gives `fire_at` rather than `delay_ms`.',
        },
      },
      required: ['row', 'state', 'differs'],
      additionalProperties: false,
    },
    StreamAnswer: {
      type: 'object',
      description: 'The answer to one line of `POST /v1/timers/stream`: `status` 201 (added) or 200 (its key was known: the original\'s id and fire time, and `state` and `differs` as in `DuplicateRow`) with `id`, `fire_at` and `duplicate`; or the status of an error with `error` (the `Error` shape\'s object) and, for the conditions that pass by themselves, `retry_after_s`. The last line of a stream the service stopped reading has no `line`.',
      properties: {
        line: { type: 'integer', minimum: 1, description: '1-based line of the request body this answers.' },
        status: { type: 'integer', description: 'What a one-timer POST /v1/timers would have been answered with.' },
        id: ref('schemas', 'TimerId'),
        fire_at: { type: 'string', format: 'date-time' },
        revision: { type: 'integer', minimum: 1 },
        duplicate: { type: 'boolean' },
        state: { ...duplicateStateSchema, description: 'Status 200 only: the original\'s state now.' },
        differs: { ...duplicateDiffersSchema, description: 'Status 200 only: the fields this line differs from the original in.' },
        retry_after_s: { type: 'integer', minimum: 1 },
        error: { type: 'object', description: 'As `Error.error`.' },
      },
      required: ['status'],
      additionalProperties: false,
    },
    BatchAdded: {
      type: 'object',
      properties: {
        accepted: { type: 'integer', minimum: 1, description: 'Rows of the batch; each is now durable, new or the original its key names.' },
        duplicates: { type: 'integer', minimum: 0, description: 'How many of those repeated a known key.' },
        ids: { type: 'array', items: ref('schemas', 'TimerId'), description: 'Every row\'s id in input order (a duplicate\'s is its original\'s).' },
        revisions: { type: 'array', items: { type: 'integer', minimum: 1 }, description: 'Every row\'s timer\'s revision in input order: 1 for a new timer, the original\'s now for a duplicate.' },
        duplicate_rows: { type: 'array', items: ref('schemas', 'DuplicateRow'), description: 'The duplicate rows, in input order.' },
      },
      required: ['accepted', 'duplicates', 'ids', 'revisions', 'duplicate_rows'],
      additionalProperties: false,
    },
    Timer: {
      type: 'object',
      properties: {
        id: ref('schemas', 'TimerId'),
        state: { enum: Object.keys(timerStates), description: Object.entries(timerStates).map(([state, text]) => `\`${state}\`: ${text}`).join('; ') },
        revision: {
          type: 'integer',
          minimum: 1,
          description: 'Grows by one with each change of the timer\'s content (a PATCH): 1 when added. A cancel and delivery outcomes change `state`, not the revision. `GET` sends it as the strong `ETag` `"<revision>"` that `If-Match` takes.',
        },
        fire_at: { type: 'string', format: 'date-time', description: 'When it fires (UTC, ms precision): the time it was added with, or the one its latest PATCH gave it.' },
        attempts: { type: 'integer', minimum: 0, description: 'Delivery attempts so far.' },
        queue: queueNameSchema,
        key: { type: ['string', 'null'], description: 'Its idempotency key, or null.' },
        last_status: { type: ['integer', 'null'], description: 'The HTTP status of its latest delivery attempt, or null.' },
        last_error: lastErrorSchema,
        last_attempt_at: lastAttemptAtSchema,
        next_attempt_at: {
          type: ['string', 'null'],
          format: 'date-time',
          description: 'When it is tried again, while it is `retrying`; null otherwise.',
        },
        callback: { type: ['string', 'null'], description: 'Where its outcome is POSTed once delivered, or null.' },
        failure_callback: { type: ['string', 'null'], description: 'Where its outcome is POSTed once dead, or null.' },
        ...timerContentSchemas,
      },
      required: ['id', 'state', 'revision', 'fire_at', 'attempts', 'queue', 'key', 'last_status', 'last_error', 'last_attempt_at', 'next_attempt_at', 'callback', 'failure_callback', ...timerContentFields],
      additionalProperties: false,
    },
    QueueConfig: {
      type: 'object',
      description: 'A queue\'s retry policy (exponential backoff with jitter) and flow limits, and how its timers are delivered. Unknown fields are refused.',
      properties: {
        ...Object.fromEntries(
          (Object.keys(queueFields) as (keyof typeof queueFields)[]).map((name) => {
            const { min, max, nullable, text } = queueFields[name];
            return [name, { type: nullable ? ['integer', 'null'] : 'integer', minimum: min, maximum: max, default: defaultQueueConfig[name], description: text }];
          }),
        ),
        ...queueOtherFields,
      },
    },
    Stats: {
      type: 'object',
      description: 'Counts read from memory. Finished timers are counted until their retention ends.',
      properties: {
        pending: { type: 'integer', minimum: 0, description: 'Timers waiting to be delivered (pending or retrying), spilled ones included.' },
        resident: { type: 'integer', minimum: 0, description: 'Timers held in memory, finished ones included.' },
        spilled: { type: 'integer', minimum: 0, description: 'Pending timers kept on disk only: due at or after the horizon.' },
        in_flight: { type: 'integer', minimum: 0, description: 'Timers being delivered (state delivering).' },
        delivered: { type: 'integer', minimum: 0 },
        dead: { type: 'integer', minimum: 0 },
        cancelled: { type: 'integer', minimum: 0 },
        bulk_cancels: { type: 'integer', minimum: 0, description: 'Bulk cancels and queue purges that cancelled timers since start.' },
        cancelled_in_bulk: { type: 'integer', minimum: 0, description: 'Timers those cancelled.' },
        horizon: {
          type: ['integer', 'null'],
          description: 'Epoch ms: pending timers due before it are in memory, later ones on disk (brought in well before they are due). Null while nothing was ever spilled.',
        },
        memory: {
          type: 'object',
          properties: {
            budget_bytes: { type: ['integer', 'null'], description: 'What resident timers are kept under: a share of the smallest of the cgroup limit, the machine\'s RAM and --memory-budget.' },
            resident_bytes: { type: 'integer', minimum: 0, description: 'Live bytes of the timers in memory.' },
            spill_metadata_bytes: { type: 'integer', minimum: 0, description: 'Memory the spilled timers take (bucket metadata and key hashes).' },
            add_times_bytes: { type: 'integer', minimum: 0, description: 'Memory the table of when each add still holding a resident timer was accepted takes (a resident timer\'s `created_at`; a spilled timer keeps its own in its run): 16 bytes of room per add, not per timer, and about 56 for one brought back from disk until the next checkpoint.' },
          },
          required: ['budget_bytes', 'resident_bytes', 'spill_metadata_bytes', 'add_times_bytes'],
          additionalProperties: false,
        },
        wal: {
          type: 'object',
          properties: {
            last_seq: { type: 'integer', minimum: 0, description: 'Sequence of the newest durable record.' },
            syncs: { type: 'integer', minimum: 0, description: 'Group commits (fdatasyncs) since start.' },
            appends: { type: 'integer', minimum: 0, description: 'Records appended since start.' },
            poisoned: { type: 'boolean', description: 'True once a failed write or fsync stopped the log from acknowledging.' },
            last_sync_at: { type: ['string', 'null'], format: 'date-time', description: 'When the last group commit ended (the last durable write); null before the first since start.' },
          },
          required: ['last_seq', 'syncs', 'appends', 'poisoned', 'last_sync_at'],
          additionalProperties: false,
        },
        disk: {
          type: 'object',
          description: "The data directory's file system. Absent where the service runs without a disk check (cluster mode's /v1/stats has no such field).",
          properties: {
            data_bytes: { type: ['integer', 'null'], description: "Bytes the data directory's files take (log segments, spill runs, manifest), measured at most every 10 s; null until first measured or when it cannot be read." },
            free_bytes: { type: ['integer', 'null'], description: 'Bytes free on its file system for an unprivileged writer, as last read for /readyz (at most a second old); null until first read or when it cannot be read.' },
            free_bytes_min: { type: 'integer', minimum: 0, description: 'The free-space minimum ("readiness"."disk_free_bytes_min"): below it /readyz is red and adds get 507 DISK_FULL.' },
          },
          required: ['data_bytes', 'free_bytes', 'free_bytes_min'],
          additionalProperties: false,
        },
        paused_queues: { type: 'integer', minimum: 0, description: 'Queues paused now (POST /v1/queues/{name}/pause).' },
        held: { type: 'integer', minimum: 0, description: 'Due timers of paused queues waiting for the resume (pending or retrying: also counted in pending).' },
        held_released: { type: 'integer', minimum: 0, description: 'Timers handed out for delivery since start that fell due while their queue was paused (late by the pause; their lateness is in the delivery lateness figures).' },
        reschedules: {
          type: 'object',
          properties: {
            applied: { type: 'integer', minimum: 0, description: 'PATCHes applied since start.' },
            redirects: { type: 'integer', minimum: 0, description: 'Timers a PATCH changed, in memory or on disk: each has a redirect in memory, its revision and the fire time its id no longer tells.' },
            redirect_bytes: { type: 'integer', minimum: 0, description: 'Memory those entries take (estimated).' },
          },
          required: ['applied', 'redirects', 'redirect_bytes'],
          additionalProperties: false,
        },
        schedules: {
          type: 'object',
          properties: {
            count: { type: 'integer', minimum: 0, description: 'Schedules (PUT /v1/schedules/{name}).' },
            paused: { type: 'integer', minimum: 0, description: 'Of them, paused now.' },
            occurrences_created: { type: 'integer', minimum: 0, description: 'Occurrences created as timers since start.' },
            catch_up_created: { type: 'integer', minimum: 0, description: 'Of them, missed occurrences created late by catch_up latest or all (after downtime or a clock step).' },
            skipped: { type: 'integer', minimum: 0, description: 'Passes over missed occurrences that catch_up did not create (one per schedule and pass).' },
            catch_up_cancelled: { type: 'integer', minimum: 0, description: 'Occurrences created ahead, found overdue after downtime or a clock step, and cancelled by their catch_up.' },
            occurrences_fired: { type: 'integer', minimum: 0, description: 'Occurrences delivered since start (outcomes replayed at start count too).' },
          },
          required: ['count', 'paused', 'occurrences_created', 'catch_up_created', 'skipped', 'catch_up_cancelled', 'occurrences_fired'],
          additionalProperties: false,
        },
      },
      required: ['pending', 'resident', 'spilled', 'in_flight', 'delivered', 'dead', 'cancelled', 'bulk_cancels', 'cancelled_in_bulk', 'horizon', 'memory', 'wal', 'paused_queues', 'held', 'held_released', 'reschedules', 'schedules'],
      additionalProperties: false,
    },
    Health: {
      type: 'object',
      properties: {
        status: { type: 'string' },
        reason: { type: 'string' },
        free_bytes: { type: 'integer', minimum: 0, description: 'Bytes free for the data directory, when a nearly full disk is the reason.' },
      },
      required: ['status'],
      additionalProperties: false,
    },
    Error: {
      type: 'object',
      properties: {
        error: {
          type: 'object',
          properties: {
            code: { enum: [...Object.values(errorCodes), ...Object.values(httpErrorCodes)], description: 'Stable: clients key on it. INTERNAL is a bug (logged on the server).' },
            message: { type: 'string' },
            field: { type: 'string', description: 'The JSON field at fault.' },
            column: { type: 'string', description: 'The Arrow column at fault.' },
            row: { type: 'integer', minimum: 0, description: 'The 0-based row among the timers of a batch.' },
            line: { type: 'integer', minimum: 1, description: 'The 1-based line of an NDJSON body.' },
            pending: { type: 'integer', minimum: 1, description: 'QUEUE_NOT_EMPTY: the timers waiting in the queue.' },
          },
          required: ['code', 'message'],
          additionalProperties: false,
        },
      },
      required: ['error'],
      additionalProperties: false,
    },
  },
} as const;
