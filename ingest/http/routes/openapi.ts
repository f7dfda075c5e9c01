// GET /openapi.json: the OpenAPI 3.1 description of the HTTP API as implemented, and the one
// place it is written. Error codes, limits and queue defaults are read from the modules that
// enforce them; test/unit/openapi.test.ts holds the rest to the code: every route fastify has
// is documented (and nothing else), each documented error code answers with the status it is
// listed under (error-map.ts), live answers match their schemas, queue ranges match the engine.
// Why it is written and not generated from the route schemas:
// docs/decisions/0010-openapi-hand-written.md. Built once when the module loads; any thread.
import { errorCodes } from '../../../engine/errors.ts';
import { deliveryLimits, ingestLimits, retentionDefaults, timerLimits, walLimits } from '../../../engine/limits.ts';
import { differingFields } from '../../../engine/duplicate-answers.ts';
import { defaultQueueConfig, deliveryModes } from '../../../engine/queues.ts';
import { httpErrorCodes } from '../error-map.ts';
import { mediaTypes } from '../media-types.ts';
import { deadListLimits, streamLimits } from '../route-limits.ts';
import type { HttpServer } from '../types.ts';

const MiB = 1024 * 1024;
const sizeText = (bytes: number): string => (bytes % MiB === 0 ? `${bytes / MiB} MiB` : bytes % 1024 === 0 ? `${bytes / 1024} KiB` : `${bytes} bytes`);

const ref = (kind: 'schemas' | 'responses' | 'parameters' | 'headers', name: string): { $ref: string } => ({ $ref: `#/components/${kind}/${name}` });
const jsonOf = (schema: object): { [mediaTypes.json]: { schema: object } } => ({ [mediaTypes.json]: { schema } });

/** Headers fermata sets on every delivery itself (engine/batch/validate.ts): a timer may not give them. */
const reservedHeaders = ['host', 'content-length', 'transfer-encoding', 'connection', 'idempotency-key', 'fermata-timer-id', 'fermata-attempt', 'fermata-fire-at', 'webhook-id', 'webhook-timestamp', 'webhook-signature'];
const queueNamePattern = '^[A-Za-z0-9][A-Za-z0-9._-]*$';
const queueNameSchema = { type: 'string', pattern: queueNamePattern, minLength: 1, maxLength: timerLimits.queueNameBytesMax } as const;

/** Ranges engine/queues.ts enforces (its table is private; the test PUTs every bound). */
const queueFields = {
  max_attempts: { min: 1, max: 1_000, nullable: false, text: 'Attempts before a timer is dead (the first delivery counts).' },
  min_backoff_ms: { min: 0, max: 30 * 24 * 3_600_000, nullable: false, text: 'Backoff after the first failed attempt.' },
  max_backoff_ms: { min: 0, max: 30 * 24 * 3_600_000, nullable: false, text: 'Longest backoff; must not be below min_backoff_ms.' },
  max_doublings: { min: 0, max: 62, nullable: false, text: 'How many times the backoff doubles before it grows linearly.' },
  rate_per_s: { min: 1, max: 10_000_000, nullable: true, text: 'Deliveries per second at most; null = no limit.' },
  max_concurrent: { min: 1, max: 1_000_000, nullable: true, text: 'Deliveries in flight at most; null = no limit ("pull" delivery: due timers waiting for a DoGet and leased, at most; null = 100,000).' },
  timeout_ms: { min: 1, max: 600_000, nullable: false, text: 'How long one delivery attempt waits for the answer before it counts as failed ("pull" delivery: how long a lease lasts before its timers count a failed attempt).' },
  batch_rows_max: { min: 1, max: 100_000, nullable: false, text: 'Rows in one Arrow batch at most ("arrow" delivery; "pull": rows one DoGet leases at most).' },
  linger_ms: { min: 0, max: 60_000, nullable: false, text: 'How long due timers wait for more to fill an Arrow batch ("arrow" delivery).' },
} as const;
/** The queue config's fields that are not whole numbers (for "arrow" and "pull" delivery). */
const queueOtherFields = {
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
const queueFieldNames = [...Object.keys(queueFields), ...Object.keys(queueOtherFields)];

/** An error answer whose `error.code` is one of `codes`, with these response headers. */
const lastErrorSchema = {
  type: ['string', 'null'],
  maxLength: deliveryLimits.lastErrorBytesMax,
  description:
    'Why its last attempt failed: `HTTP 503`, `timeout after 10000 ms`, `connection refused`, `TLS: …`, `refused by the SSRF guard: …`. Null when it has not failed, or was delivered since (and for a timer restored from a checkpoint, until its next failure).',
} as const;

const lastAttemptAtSchema = { type: ['string', 'null'], format: 'date-time', description: 'When that failed attempt was sent; null with `last_error`.' } as const;

function errorResponse(description: string, codes: readonly string[], headers: Record<string, object> = {}): object {
  return {
    description,
    ...(Object.keys(headers).length > 0 ? { headers } : {}),
    content: jsonOf({ allOf: [ref('schemas', 'Error')], properties: { error: { properties: { code: { enum: codes } } } } }),
  };
}

const timerStates = {
  pending: 'waiting for its fire time',
  delivering: 'handed to delivery: an attempt is in flight; or a worker holds it until its time (taken up to 20 ms ahead) or its turn, and a cancel still withdraws it; or it waits in an Arrow batch or for a pull',
  retrying: 'waiting out a backoff after a failed attempt',
  delivered: 'a target answered 2xx',
  dead: 'out of attempts, or the target answered 410',
  cancelled: 'cancelled before delivery',
};

const arrowColumns = [
  `\`fire_at\`: Timestamp (any unit; finer than 1 ms rounds up) or Int64 epoch ms ≥ ${ingestLimits.fireAtEpochMsMin} (10^12: a smaller value looks like epoch seconds and is refused, naming its row), no nulls`,
  '`delay_ms`: Int64 or Int32 ≥ 0, ms after the server accepted the request, no nulls (exactly one of `fire_at` and `delay_ms`)',
  '`target`: Utf8 or Dictionary<Utf8>, required, no nulls',
  '`payload`: Utf8 or Binary, optional (null = empty body)',
  '`headers`: Utf8 holding a JSON object of string → string, optional (null or empty = none)',
  '`key`: Utf8, optional (null or empty = none)',
  '`queue`: Utf8 or Dictionary<Utf8>, optional (null = `default`)',
];

const metricNames = [
  'fermata_timers{state}',
  'fermata_wal_last_sequence',
  'fermata_wal_poisoned',
  'fermata_wal_appends_total',
  'fermata_wal_fdatasyncs_total',
  'fermata_wal_bytes_written_total',
  'fermata_wal_slow_fdatasyncs_total',
  'fermata_http_abusive_connections_total',
  'fermata_http_peer_penalties_total',
  'fermata_http_refused_connections_total',
  'fermata_http_penalty_table_peers',
];

/** A duplicate's original state and differing fields (DuplicateRow, TimerAdded, StreamAnswer). */
const duplicateStateSchema = { enum: Object.keys(timerStates) };
const duplicateDiffersSchema = { type: 'array', items: { enum: [...differingFields] }, uniqueItems: true };

const queueNameParameter = {
  name: 'name',
  in: 'path',
  required: true,
  description: `Queue name: 1 to ${timerLimits.queueNameBytesMax} characters of A–Z, a–z, 0–9, \`.\`, \`_\`, \`-\`, starting with a letter or digit (else 400 QUEUE_INVALID, field \`name\`).`,
  schema: queueNameSchema,
};

/** A queue with its name, as GET /v1/queues lists it and GET /v1/queues/{name} answers it. */
const namedQueueSchema = { allOf: [ref('schemas', 'QueueConfig')], properties: { name: queueNameSchema }, required: ['name', ...queueFieldNames], unevaluatedProperties: false };

const retryAfter = { 'Retry-After': ref('headers', 'RetryAfter') };

const bearer = [{ bearerAuth: [] }];
const open: never[] = [];

/** Answers of an operation that appends to the log: it waits for the record to be durable. */
const logResponses = {
  '429': ref('responses', 'LogQueueFull'),
  '503': ref('responses', 'LogUnavailable'),
  '507': ref('responses', 'DiskFull'),
};

export const openApiDocument = {
  openapi: '3.1.0',
  info: {
    title: 'fermata',
    version: '0.1.0',
    summary: 'A durable timer service: POST this payload to this URL at time T.',
    description: [
      'Timers are kept on disk (every 2xx is sent once the change is durable), fired on time and delivered as an HTTP POST of the payload to the target, retried with backoff under their queue\'s policy.',
      'Every error is answered with the `Error` JSON shape; its `code` is stable. Overload (429, 503) carries `Retry-After` when the condition passes by itself.',
      'A path no route serves is answered 404 ROUTE_NOT_FOUND (`RouteNotFound`); a path a route serves, asked with a method none of its routes takes, 405 METHOD_NOT_ALLOWED with `Allow` listing the methods they take (`MethodNotAllowed`). Neither is listed under each path.',
      'The service speaks HTTP/1.1 and HTTP/2 (prior knowledge) on one cleartext port. Every GET route also answers HEAD.',
    ].join('\n\n'),
    license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
  },
  security: bearer,
  paths: {
    '/v1/timers': {
      post: {
        operationId: 'addTimers',
        summary: 'Add one timer (JSON) or a batch (NDJSON, Arrow)',
        description: `A batch is accepted whole or refused whole; the answer comes once it is durable. A batch holds 1 to ${timerLimits.rowsPerBatchMax} timers. A timer whose \`key\` is already known is not added again: the answer names the original.`,
        requestBody: {
          required: true,
          content: {
            [mediaTypes.json]: {
              schema: ref('schemas', 'TimerInput'),
              example: { fire_at: '2030-01-31T09:00:00Z', target: 'https://example.com/hook', payload: '{"order":42}', headers: { 'content-type': 'application/json' }, key: 'order-42-reminder' },
            },
            [mediaTypes.ndjson]: {
              schema: { type: 'string', description: 'One `TimerInput` JSON object a line (UTF-8; blank lines are skipped).' },
              example: '{"delay_ms":60000,"target":"https://example.com/a"}\n{"delay_ms":120000,"target":"https://example.com/b","queue":"slow"}\n',
            },
            [mediaTypes.arrowStream]: {
              schema: {
                description: [
                  'An Arrow IPC stream: a schema, then one or more uncompressed record batches, one timer a row. Columns, by name (any other column, or one given twice, is refused):',
                  ...arrowColumns.map((line) => `- ${line}`),
                  `Values follow the rules of \`TimerInput\`. The stream is logged as it arrived, so it may be at most ${sizeText(walLimits.recordBodyBytesMax)}. Errors name the \`column\` and 0-based \`row\`.`,
                ].join('\n'),
              },
            },
          },
        },
        responses: {
          '201': {
            description: [
              'Added and durable. One JSON timer: `TimerAdded` with `duplicate: false`. A batch: `BatchAdded`.',
              `A batch whose request has \`Accept: ${mediaTypes.arrowStream}\` is answered with an Arrow IPC stream instead: one row per input row, in input order, with the columns \`id\` (Utf8), \`duplicate\` (Bool), \`state\` (Utf8) and \`differs\` (List<Utf8>), the last two as in \`DuplicateRow\` and null for a new row. A single JSON timer is always answered with JSON.`,
            ].join('\n\n'),
            content: {
              ...jsonOf({ oneOf: [{ allOf: [ref('schemas', 'TimerAdded')], properties: { duplicate: { const: false } } }, ref('schemas', 'BatchAdded')] }),
              [mediaTypes.arrowStream]: {},
            },
          },
          '200': {
            description: 'One JSON timer whose `key` is already known: nothing added; the original timer\'s id and fire time, `duplicate: true`, and what the original is now (`state`, `differs`: see `DuplicateRow`).',
            content: jsonOf({ allOf: [ref('schemas', 'TimerAdded')], properties: { duplicate: { const: true } }, required: ['state', 'differs'] }),
          },
          '400': errorResponse('The body is not valid (BODY_INVALID: malformed or empty JSON) or a timer breaks a rule (BATCH_INVALID, naming the `field` or `column`, and for a batch the `row`, and for NDJSON the `line`; a single JSON timer names only the `field`). TARGET_REFUSED: a target is a literal address the delivery guard refuses (private, loopback, link-local, metadata …) and the configured allow-list does not let through. The message names the fix for the common mistakes: a numeric `fire_at` below 10^12 looks like epoch seconds (multiply by 1000); an NDJSON body sent as application/json (send it as application/x-ndjson); JSON objects back to back on one line, as `curl -d @file` leaves an NDJSON file (send it with `curl --data-binary @file`).', [
            errorCodes.batchInvalid,
            httpErrorCodes.bodyInvalid,
            errorCodes.targetRefused,
          ]),
          '401': ref('responses', 'Unauthorized'),
          '413': errorResponse(
            `BODY_TOO_LARGE: the body is over ${sizeText(ingestLimits.jsonBodyBytesMax)} (application/json) or ${sizeText(ingestLimits.bodyBytesMax)} (NDJSON, Arrow). WAL_RECORD_TOO_LARGE: the batch as logged is over ${sizeText(walLimits.recordBodyBytesMax)}.`,
            [httpErrorCodes.bodyTooLarge, errorCodes.walRecordTooLarge],
          ),
          '415': ref('responses', 'UnsupportedMediaType'),
          ...logResponses,
          '503': errorResponse(
            'CAPACITY_FULL: the resident store holds as many timers as it may. WAL_CLOSED: the service is stopping. WAL_POISONED: a failed write or fsync stopped the log from acknowledging; the service opens its data directory again by itself (recovery re-reads the disk).',
            [errorCodes.capacityFull, errorCodes.walClosed, errorCodes.walPoisoned],
            retryAfter,
          ),
        },
      },
    },
    '/v1/timers/stream': {
      post: {
        operationId: 'streamTimers',
        summary: 'Add timers one by one on one long request, each answered as soon as it is durable',
        description: [
          'For clients that add timers one at a time at high rates. The body is NDJSON, one `TimerInput` a line, read as it arrives; the answer (200, NDJSON) has one line per timer line, in input order, each written once that timer is durable, while the request is still open. A client keeps the request open and has many adds in flight on it: what a request costs (headers, a stream, routing) is paid once per stream instead of once per timer.',
          'Each line is its own add (not a batch: a bad line is refused alone and the lines after it go on), answered with `StreamAnswer`: the status and body a one-timer `POST /v1/timers` of that object would get. Lines read in one event-loop turn share one WAL record with every other single add. Blank lines are skipped and get no answer. A line without an answer was not added.',
          `A line may hold ${sizeText(ingestLimits.jsonBodyBytesMax)} (else 413 BODY_TOO_LARGE for that line). A stream holds at most ${streamLimits.linesInFlightMax} lines (${sizeText(streamLimits.linesBytesInFlightMax)}) waiting for their answer, and reads no more while the client does not read the answer: HTTP/2 flow control then holds the client back.`,
          'When the service stops, an open stream stops reading, answers what it read, writes a last line without `line` (503 WAL_CLOSED, naming the last line read) and ends; on HTTP/2 the request is then reset with NO_ERROR. Over HTTP/1.1 a request may last at most the server\'s request timeout (300 s); use HTTP/2 for long-lived streams.',
        ].join('\n\n'),
        requestBody: {
          required: true,
          content: {
            [mediaTypes.ndjson]: {
              schema: { type: 'string', description: 'One `TimerInput` JSON object a line (UTF-8), sent as the client adds them.' },
              example: '{"delay_ms":60000,"target":"https://example.com/a","key":"a-1"}\n',
            },
          },
        },
        responses: {
          '200': {
            description: 'The stream of answers, one NDJSON line (`StreamAnswer`) per timer line.',
            content: { [mediaTypes.ndjson]: { schema: { type: 'string', description: 'One `StreamAnswer` JSON object a line.' } } },
          },
          '400': errorResponse('BODY_INVALID: the request is malformed before any line is read (as a body fastify refuses).', [httpErrorCodes.bodyInvalid]),
          '401': ref('responses', 'Unauthorized'),
          '415': ref('responses', 'UnsupportedMediaType'),
        },
      },
    },
    '/v1/timers/{id}': {
      parameters: [ref('parameters', 'TimerId')],
      get: {
        operationId: 'getTimer',
        summary: 'Look up a timer',
        description: `Finished timers stay visible for their retention: ${retentionDefaults.finishedMs / 3_600_000} h after they are delivered or cancelled, ${retentionDefaults.deadMs / 86_400_000} days after they are dead (defaults).`,
        responses: {
          '200': { description: 'The timer.', content: jsonOf(ref('schemas', 'Timer')) },
          '401': ref('responses', 'Unauthorized'),
          '404': ref('responses', 'NotFound'),
        },
      },
      delete: {
        operationId: 'cancelTimer',
        summary: 'Cancel a timer',
        description: 'A 200 means the timer will not be delivered (the cancel is durable). Cancelling a cancelled timer answers 200 again.',
        responses: {
          '200': {
            description: 'Cancelled.',
            content: jsonOf({
              type: 'object',
              properties: { id: ref('schemas', 'TimerId'), state: { const: 'cancelled' } },
              required: ['id', 'state'],
              additionalProperties: false,
            }),
          },
          '401': ref('responses', 'Unauthorized'),
          '404': ref('responses', 'NotFound'),
          '409': errorResponse('TOO_LATE: a delivery already started or finished (an attempt was sent, or the timer is delivered or dead).', [httpErrorCodes.tooLate]),
          ...logResponses,
        },
      },
    },
    '/v1/queues/{name}': {
      get: {
        operationId: 'getQueue',
        summary: 'A queue\'s config',
        description: 'A queue that was configured or has held a timer (and was not deleted since), with the config it runs with. `default` always answers.',
        parameters: [queueNameParameter],
        responses: {
          '200': { description: 'The queue.', content: jsonOf(namedQueueSchema) },
          '401': ref('responses', 'Unauthorized'),
          '404': errorResponse('NOT_FOUND: no queue has this name.', [httpErrorCodes.notFound]),
        },
      },
      delete: {
        operationId: 'deleteQueue',
        summary: 'Delete a queue',
        description: 'Deletes a queue in which no timer waits (pending, retrying or being delivered, in memory or on disk), once durable: its config is gone, after a restart too, and it is not listed until a timer names it again (then with the defaults). Finished timers that name it stay for their retention.',
        parameters: [queueNameParameter],
        responses: {
          '200': {
            description: 'Deleted.',
            content: jsonOf({ type: 'object', properties: { name: queueNameSchema, deleted: { const: true } }, required: ['name', 'deleted'], additionalProperties: false }),
          },
          '401': ref('responses', 'Unauthorized'),
          '404': errorResponse('NOT_FOUND: no queue has this name.', [httpErrorCodes.notFound]),
          '409': errorResponse('QUEUE_NOT_EMPTY: timers wait in the queue (`pending` counts them): cancel them or let them finish. QUEUE_PROTECTED: `default` cannot be deleted.', [errorCodes.queueNotEmpty, errorCodes.queueProtected]),
          ...logResponses,
        },
      },
      put: {
        operationId: 'putQueue',
        summary: 'Set a queue\'s config',
        description: 'Replaces the queue\'s whole config (fields left out take their defaults) and answers it once durable. A queue never configured runs with the defaults.',
        parameters: [queueNameParameter],
        requestBody: {
          required: true,
          content: jsonOf({ allOf: [ref('schemas', 'QueueConfig')], unevaluatedProperties: false }),
        },
        responses: {
          '200': { description: 'The config now in force, every field given.', content: jsonOf({ allOf: [ref('schemas', 'QueueConfig')], required: queueFieldNames, unevaluatedProperties: false }) },
          '400': errorResponse('QUEUE_INVALID: a bad name, an unknown field or a value out of range (naming the `field`). BODY_INVALID: malformed or empty JSON.', [errorCodes.queueInvalid, httpErrorCodes.bodyInvalid]),
          '401': ref('responses', 'Unauthorized'),
          '413': errorResponse(`BODY_TOO_LARGE: the body is over ${sizeText(ingestLimits.jsonBodyBytesMax)}.`, [httpErrorCodes.bodyTooLarge]),
          '415': ref('responses', 'UnsupportedMediaType'),
          ...logResponses,
        },
      },
    },
    '/v1/queues': {
      get: {
        operationId: 'listQueues',
        summary: 'List queues',
        description: 'Every queue that was configured or has held a timer, by name, with the config it runs with.',
        responses: {
          '200': {
            description: 'The queues.',
            content: jsonOf({
              type: 'object',
              properties: {
                queues: {
                  type: 'array',
                  items: namedQueueSchema,
                },
              },
              required: ['queues'],
              additionalProperties: false,
            }),
          },
          '401': ref('responses', 'Unauthorized'),
        },
      },
    },
    '/v1/dead': {
      get: {
        operationId: 'listDead',
        summary: 'List dead timers',
        description:
          'Dead timers (a 410 answer, attempts exhausted, or a target refused at delivery), oldest first, until their retention ends or they are discarded, a page at a time: pass a page\'s `next_cursor` as `cursor` for the next page.',
        parameters: [
          { name: 'queue', in: 'query', required: false, description: 'Only this queue\'s dead timers.', schema: { type: 'string', minLength: 1 } },
          { name: 'limit', in: 'query', required: false, description: 'At most this many.', schema: { type: 'integer', minimum: 1, maximum: deadListLimits.max, default: deadListLimits.default } },
          {
            name: 'cursor',
            in: 'query',
            required: false,
            description: 'The `next_cursor` of the page before (opaque). It names a place in the list, so it stays good while timers are redriven, discarded or released.',
            schema: { type: 'string', minLength: 1 },
          },
        ],
        responses: {
          '200': {
            description: 'A page of dead timers.',
            content: jsonOf({
              type: 'object',
              properties: {
                dead: {
                  type: 'array',
                  items: {
                    type: 'object',
                    properties: {
                      id: ref('schemas', 'TimerId'),
                      queue: queueNameSchema,
                      target: { type: 'string', format: 'uri' },
                      fire_at: { type: 'string', format: 'date-time' },
                      attempts: { type: 'integer', minimum: 0 },
                      last_status: { type: ['integer', 'null'], description: 'The last HTTP status the target answered; null when none came back.' },
                      reason: { enum: ['attempts_exhausted', 'gone', 'target_refused', 'unknown'] },
                      last_error: lastErrorSchema,
                      last_attempt_at: lastAttemptAtSchema,
                    },
                    required: ['id', 'queue', 'target', 'fire_at', 'attempts', 'last_status', 'reason', 'last_error', 'last_attempt_at'],
                    additionalProperties: false,
                  },
                },
                next_cursor: { type: ['string', 'null'], description: 'The `cursor` of the next page; null on the last page.' },
              },
              required: ['dead', 'next_cursor'],
              additionalProperties: false,
            }),
          },
          '400': errorResponse('REQUEST_INVALID: a bad `limit` or `cursor`, or an unknown query parameter.', [httpErrorCodes.requestInvalid]),
          '401': ref('responses', 'Unauthorized'),
        },
      },
    },
    '/v1/dead/{id}': {
      parameters: [ref('parameters', 'TimerId')],
      delete: {
        operationId: 'discardDead',
        summary: 'Discard a dead timer',
        description: 'Forgets a dead timer at once, before its retention ends: durable before the answer, and from then on `GET /v1/timers/{id}` answers 404 and its idempotency key is free.',
        responses: {
          '200': {
            description: 'Discarded.',
            content: jsonOf({ type: 'object', properties: { id: ref('schemas', 'TimerId'), state: { const: 'discarded' } }, required: ['id', 'state'], additionalProperties: false }),
          },
          '401': ref('responses', 'Unauthorized'),
          '404': ref('responses', 'NotFound'),
          '409': errorResponse('NOT_DEAD: the timer is not dead (only dead timers are discarded; `DELETE /v1/timers/{id}` cancels a pending one).', [httpErrorCodes.notDead]),
          ...logResponses,
        },
      },
    },
    '/v1/dead/{id}/retry': {
      parameters: [ref('parameters', 'TimerId')],
      post: {
        operationId: 'redriveDead',
        summary: 'Redrive a dead timer',
        description: 'Sends a dead timer round again, due now, with its attempts reset (its queue\'s max_attempts apply afresh). Durable before the answer.',
        responses: {
          '200': {
            description: 'Redriven: pending again.',
            content: jsonOf({ type: 'object', properties: { id: ref('schemas', 'TimerId'), state: { const: 'pending' } }, required: ['id', 'state'], additionalProperties: false }),
          },
          '401': ref('responses', 'Unauthorized'),
          '404': ref('responses', 'NotFound'),
          '409': errorResponse('NOT_DEAD: the timer is not dead (only dead timers are redriven).', [httpErrorCodes.notDead]),
          ...logResponses,
        },
      },
    },
    '/v1/stats': {
      get: {
        operationId: 'getStats',
        summary: 'Counts, from memory',
        responses: { '200': { description: 'The counts.', content: jsonOf(ref('schemas', 'Stats')) }, '401': ref('responses', 'Unauthorized') },
      },
    },
    '/metrics': {
      get: {
        operationId: 'getMetrics',
        summary: 'Prometheus metrics',
        description: `Prometheus text exposition (version 0.0.4), read from the engine and the HTTP peer guard when scraped: ${metricNames.map((name) => `\`${name}\``).join(', ')}.`,
        responses: {
          '200': { description: 'The metrics.', content: { 'text/plain': { schema: { type: 'string' } } } },
          '401': ref('responses', 'Unauthorized'),
        },
      },
    },
    '/healthz': {
      get: {
        operationId: 'healthz',
        summary: 'Liveness: the process serves',
        security: open,
        responses: { '200': { description: 'Serving.', content: jsonOf({ allOf: [ref('schemas', 'Health')], properties: { status: { const: 'ok' } } }) } },
      },
    },
    '/readyz': {
      get: {
        operationId: 'readyz',
        summary: 'Readiness: the log acknowledges writes and the disk has room',
        security: open,
        responses: {
          '200': { description: 'Ready.', content: jsonOf({ allOf: [ref('schemas', 'Health')], properties: { status: { const: 'ready' } } }) },
          '503': {
            description:
              'Not ready: the log is poisoned (a failed write or fsync), or the data directory\'s file system has fewer bytes free than the configured minimum (`free_bytes` then says how many are), or its free space cannot be read; `reason` says which.',
            content: jsonOf({ allOf: [ref('schemas', 'Health')], properties: { status: { const: 'not-ready' } }, required: ['reason'] }),
          },
        },
      },
    },
    '/openapi.json': {
      get: {
        operationId: 'getOpenApi',
        summary: 'This document',
        responses: {
          '200': { description: 'The OpenAPI 3.1 description of this API.', content: jsonOf({ type: 'object' }) },
          '401': ref('responses', 'Unauthorized'),
        },
      },
    },
  },
  components: {
    securitySchemes: {
      bearerAuth: {
        type: 'http',
        scheme: 'bearer',
        description:
          'Enforced only when the service is configured with tokens (`"tokens"` in the config file, or FERMATA_TOKENS): then every route but /healthz and /readyz needs `Authorization: Bearer <token>`, else 401 UNAUTHORIZED with `WWW-Authenticate: Bearer`. Without tokens no route asks for one, and the service refuses to listen on a non-loopback address unless started with --insecure.',
      },
    },
    parameters: {
      TimerId: { name: 'id', in: 'path', required: true, description: 'A timer id. Anything that is not one is answered 404, like an unknown id.', schema: ref('schemas', 'TimerId') },
    },
    headers: {
      RetryAfter: { description: 'Seconds to wait before trying again; sent only for the codes that pass by themselves (CAPACITY_FULL, WAL_QUEUE_FULL, WAL_CLOSED).', schema: { type: 'integer', minimum: 1 } },
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
      LogQueueFull: errorResponse('WAL_QUEUE_FULL: too many bytes are waiting to be written to the log.', [errorCodes.walQueueFull], retryAfter),
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
          duplicate: { type: 'boolean', description: 'True when the key was already known: `id` is the original\'s.' },
          state: { ...duplicateStateSchema, description: 'A duplicate only: the original\'s state now.' },
          differs: { ...duplicateDiffersSchema, description: 'A duplicate only: the fields this request differs from the original in (empty: an exact retry).' },
        },
        required: ['id', 'fire_at', 'duplicate'],
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
          duplicate_rows: { type: 'array', items: ref('schemas', 'DuplicateRow'), description: 'The duplicate rows, in input order.' },
        },
        required: ['accepted', 'duplicates', 'ids', 'duplicate_rows'],
        additionalProperties: false,
      },
      Timer: {
        type: 'object',
        properties: {
          id: ref('schemas', 'TimerId'),
          state: { enum: Object.keys(timerStates), description: Object.entries(timerStates).map(([state, text]) => `\`${state}\`: ${text}`).join('; ') },
          fire_at: { type: 'string', format: 'date-time', description: 'The fire time it was added with (UTC, ms precision).' },
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
        },
        required: ['id', 'state', 'fire_at', 'attempts', 'queue', 'key', 'last_status', 'last_error', 'last_attempt_at', 'next_attempt_at'],
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
            },
            required: ['budget_bytes', 'resident_bytes', 'spill_metadata_bytes'],
            additionalProperties: false,
          },
          wal: {
            type: 'object',
            properties: {
              last_seq: { type: 'integer', minimum: 0, description: 'Sequence of the newest durable record.' },
              syncs: { type: 'integer', minimum: 0, description: 'Group commits (fdatasyncs) since start.' },
              appends: { type: 'integer', minimum: 0, description: 'Records appended since start.' },
              poisoned: { type: 'boolean', description: 'True once a failed write or fsync stopped the log from acknowledging.' },
            },
            required: ['last_seq', 'syncs', 'appends', 'poisoned'],
            additionalProperties: false,
          },
        },
        required: ['pending', 'resident', 'spilled', 'in_flight', 'delivered', 'dead', 'cancelled', 'horizon', 'memory', 'wal'],
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
  },
} as const;

const documentText = JSON.stringify(openApiDocument);

export async function openapiRoutes(app: HttpServer): Promise<void> {
  app.get('/openapi.json', async (_request, reply) => reply.type('application/json; charset=utf-8').send(documentText));
}
