// The OpenAPI 3.1 description of the HTTP API as implemented, served by GET /openapi.json
// (openapi-route.ts), and the one place it is written. Error codes, limits and queue defaults
// are read from the modules that enforce them; test/unit/openapi.test.ts holds the rest to the
// code: every route fastify has is documented (and nothing else), each documented error code
// answers with the status it is listed under (error-map.ts), live answers match their schemas,
// queue ranges match the engine. Why it is written and not generated from the route schemas:
// docs/decisions/0010-openapi-hand-written.md. Built once when the module loads; any thread.
import { manualClockMsMax } from '../../../engine/clock.ts';
import { errorCodes } from '../../../engine/errors.ts';
import { ingestLimits, retentionDefaults, timerLimits, walLimits } from '../../../engine/limits.ts';
import { httpErrorCodes } from '../error-map.ts';
import { mediaTypes } from '../media-types.ts';
import { deadListLimits, streamLimits } from '../route-limits.ts';
import { sizeText, ref, jsonOf, queueNameSchema, lastErrorSchema, lastAttemptAtSchema, timerContentSchemas, timerContentFields, errorResponse, arrowColumns, metricNames, queueNameParameter, namedQueueSchema, retryAfter, bearer, open, logResponses } from './openapi-parts.ts';
import { callbackWebhooks } from './openapi-callbacks.ts';
import { clockAdvanceMsMax, clockSchema } from './clock.ts';
import { limitsSchema } from './limits.ts';
import { adminPaths, withScopes } from './openapi-access.ts';
import { openApiComponents } from './openapi-components.ts';
import { queuePausePaths } from './openapi-queue-pause.ts';
import { dashboardPaths, listedQueueSchema } from './openapi-dashboard.ts';
import { schedulePaths } from './openapi-schedules.ts';
import { listTimersOperation, timerListPaths } from './openapi-timer-list.ts';
import { uiPaths } from './openapi-ui.ts';
import { traceParameters } from './openapi-trace.ts';

export const openApiDocument = {
  openapi: '3.1.0',
  info: {
    title: 'fermata',
    version: '0.1.0',
    summary: 'A durable timer service: POST this payload to this URL at time T.',
    description: [
      'Timers are kept on disk (every 2xx is sent once the change is durable), fired on time and delivered as an HTTP POST of the payload to the target, retried with backoff under their queue\'s policy.',
      'Every error is answered with the `Error` JSON shape; its `code` is stable. Overload (429, 503) carries `Retry-After` when the condition passes by itself.',
      'A path no route serves is answered 404 ROUTE_NOT_FOUND (`RouteNotFound`); a path a route serves, asked with a method none of its routes takes, 405 METHOD_NOT_ALLOWED with `Allow` listing the methods they take (`MethodNotAllowed`); a fixed path (`/v1/timers/cancel`, `/v1/timers/stream`) is its routes\' alone, never taken as a `{id}`. Neither is listed under each path.',
      'The service speaks HTTP/1.1 and HTTP/2 (prior knowledge) on one cleartext port. Every GET route also answers HEAD.',
    ].join('\n\n'),
    license: { name: 'Apache-2.0', identifier: 'Apache-2.0' },
  },
  security: bearer,
  paths: withScopes({
    '/v1/timers': {
      get: listTimersOperation,
      post: {
        operationId: 'addTimers',
        summary: 'Add one timer (JSON) or a batch (NDJSON, Arrow)',
        description: `A batch is accepted whole or refused whole; the answer comes once it is durable. A batch holds 1 to ${timerLimits.rowsPerBatchMax} timers. A timer whose \`key\` is already known is not added again: the answer names the original.`,
        parameters: traceParameters,
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
              `A batch whose request has \`Accept: ${mediaTypes.arrowStream}\` is answered with an Arrow IPC stream instead: one row per input row, in input order, with the columns \`id\` (Utf8), \`duplicate\` (Bool), \`state\` (Utf8), \`differs\` (List<Utf8>), the last two as in \`DuplicateRow\` and null for a new row, and \`revision\` (Uint32), as in \`BatchAdded.revisions\`. A single JSON timer is always answered with JSON.`,
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
        parameters: traceParameters,
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
    ...timerListPaths,
    '/v1/timers/{id}': {
      parameters: [ref('parameters', 'TimerId')],
      get: {
        operationId: 'getTimer',
        summary: 'Look up a timer',
        description: `Finished timers stay visible for their retention: ${retentionDefaults.finishedMs / 3_600_000} h after they are delivered or cancelled, ${retentionDefaults.deadMs / 86_400_000} days after they are dead (defaults).`,
        responses: {
          '200': {
            description: 'The timer.',
            headers: { ETag: { description: 'The timer\'s revision as a strong entity tag, `"<revision>"`: what `If-Match` of a PATCH takes.', schema: { type: 'string' } } },
            content: jsonOf(ref('schemas', 'Timer')),
          },
          '401': ref('responses', 'Unauthorized'),
          '404': ref('responses', 'NotFound'),
        },
      },
      patch: {
        operationId: 'rescheduleTimer',
        summary: 'Change a pending timer: its fire time, payload, headers, target, queue or callbacks',
        description: [
          'Any of the fields below; a field left out keeps its value. Each is checked by the rules of an add (`TimerInput`), so a changed field is exactly as valid as an added one. The change is one durable record, applied once it is durable: after the 200, the timer never fires at its old time, also across a crash. The id and the idempotency key keep naming the timer (`key` itself cannot change). `callback` and `failure_callback` take a URL, or `null` to remove it; a timer keeps its callbacks through any other change, and one that has a callback cannot move to a queue that delivers by `arrow` or `pull`. A `retrying` timer keeps its attempts, and its next attempt is the new fire time; a timer handed to a worker ahead of its time is taken back, as a cancel would.',
          '`If-Match` makes it compare-and-set: `*`, or a list of strong entity tags of revisions (`"3"`, `"2", "3"`, as `GET` sends in `ETag`); a weak tag (`W/"3"`) never matches. Two PATCHes of one timer at once are applied one after the other: the second is decided on what the first left (with `If-Match` naming the revision both read, the second answers 412).',
        ].join('\n\n'),
        parameters: [
          {
            name: 'If-Match',
            in: 'header',
            required: false,
            description: '`*` or strong entity tags of the revisions the change is made on.',
            schema: { type: 'string' },
          },
        ],
        requestBody: {
          required: true,
          content: jsonOf({
            type: 'object',
            properties: {
              fire_at: { type: ['string', 'integer'], description: 'As in `TimerInput`.' },
              delay_ms: { type: 'integer', minimum: 0, description: 'As in `TimerInput`: from now.' },
              payload: { type: 'string' },
              payload_base64: { type: 'string' },
              headers: { type: 'object', additionalProperties: { type: 'string' }, description: 'Replaces the headers whole (`{}`: none).' },
              target: { type: 'string' },
              queue: queueNameSchema,
              callback: { type: ['string', 'null'], format: 'uri', maxLength: timerLimits.targetBytesMax, description: 'As in `TimerInput`; null removes it.' },
              failure_callback: { type: ['string', 'null'], format: 'uri', maxLength: timerLimits.targetBytesMax, description: 'As in `TimerInput`; null removes it.' },
            },
            minProperties: 1,
            not: { anyOf: [{ required: ['fire_at', 'delay_ms'] }, { required: ['payload', 'payload_base64'] }] },
            additionalProperties: false,
          }),
        },
        responses: {
          '200': {
            description: 'Changed and durable: the timer as it is now (`revision` one more).',
            headers: { ETag: { description: 'The new revision, `"<revision>"`.', schema: { type: 'string' } } },
            content: jsonOf(ref('schemas', 'Timer')),
          },
          '400': errorResponse(
            'BATCH_INVALID naming the field: an unknown field, `key`, a null (but for `callback` and `failure_callback`), no field at all, both `fire_at` and `delay_ms`, a callback on (or a timer with a callback moved to) a queue that delivers by `arrow` or `pull`, or a value an add would refuse; TARGET_REFUSED; BODY_INVALID; REQUEST_INVALID: an `If-Match` that is not `*` or a list of entity tags of revisions.',
            [errorCodes.batchInvalid, errorCodes.targetRefused, httpErrorCodes.bodyInvalid, httpErrorCodes.requestInvalid],
          ),
          '401': ref('responses', 'Unauthorized'),
          '404': ref('responses', 'NotFound'),
          '409': errorResponse('TIMER_NOT_PENDING: the timer is delivering (an attempt was sent), delivered, dead or cancelled.', [httpErrorCodes.timerNotPending]),
          '412': errorResponse('REVISION_MISMATCH: the timer\'s revision is none `If-Match` names (it changed since it was read).', [httpErrorCodes.revisionMismatch]),
          '415': ref('responses', 'UnsupportedMediaType'),
          ...logResponses,
          '503': errorResponse(
            'CAPACITY_FULL: the resident store holds as many timers as it may (a changed timer may take a new place in it). WAL_CLOSED: the service is stopping. WAL_POISONED: a failed write or fsync stopped the log from acknowledging; the service opens its data directory again by itself.',
            [errorCodes.capacityFull, errorCodes.walClosed, errorCodes.walPoisoned],
            retryAfter,
          ),
        },
      },
      delete: {
        operationId: 'cancelTimer',
        summary: 'Cancel a timer',
        description: 'A 200 means the timer will not be delivered (the cancel is durable). Cancelling a cancelled timer answers 200 again. `If-Match` makes the cancel conditional on the revision, as for a PATCH.',
        parameters: [
          {
            name: 'If-Match',
            in: 'header',
            required: false,
            description: '`*` or strong entity tags of the revisions the cancel is made on (a weak tag never matches).',
            schema: { type: 'string' },
          },
        ],
        responses: {
          '200': {
            description: 'Cancelled.',
            content: jsonOf({
              type: 'object',
              properties: { id: ref('schemas', 'TimerId'), state: { const: 'cancelled' }, revision: { type: 'integer', minimum: 1, description: 'The revision it kept (a cancel does not change it).' } },
              required: ['id', 'state', 'revision'],
              additionalProperties: false,
            }),
          },
          '400': errorResponse('REQUEST_INVALID: an `If-Match` that is not `*` or a list of entity tags of revisions.', [httpErrorCodes.requestInvalid]),
          '401': ref('responses', 'Unauthorized'),
          '404': ref('responses', 'NotFound'),
          '409': errorResponse('TOO_LATE: a delivery already started or finished (an attempt was sent, or the timer is delivered or dead).', [httpErrorCodes.tooLate]),
          '412': errorResponse('REVISION_MISMATCH: the timer\'s revision is none `If-Match` names (a PATCH changed it since it was read).', [httpErrorCodes.revisionMismatch]),
          ...logResponses,
        },
      },
    },
    '/v1/queues/{name}': {
      get: {
        operationId: 'getQueue',
        summary: 'A queue\'s config',
        description: 'A queue that was configured or has held a timer (and was not deleted since), with the config it runs with and whether it is paused. `default` always answers.',
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
        description: 'Replaces the queue\'s whole config (fields left out take their defaults) and answers the queue as GET does once durable (a pause stays). A queue never configured runs with the defaults.',
        parameters: [queueNameParameter],
        requestBody: {
          required: true,
          content: jsonOf({ allOf: [ref('schemas', 'QueueConfig')], unevaluatedProperties: false }),
        },
        responses: {
          '200': { description: 'The queue: its name, the config now in force (every field given) and whether it is paused.', content: jsonOf(namedQueueSchema) },
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
        description: 'Every queue that was configured or has held a timer, by name, with the config it runs with, whether it is paused, and its timers now: `pending` (waiting in memory: pending, retrying, held), `in_flight` (being delivered) and `delivered_per_s` (deliveries a second over the last minute). From counts kept, no timer read; timers spilled to disk (due past the memory horizon) are not in a queue\'s `pending` (`/v1/stats` counts them as `spilled`).',
        responses: {
          '200': {
            description: 'The queues.',
            content: jsonOf({
              type: 'object',
              properties: {
                queues: {
                  type: 'array',
                  items: listedQueueSchema,
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
    ...queuePausePaths,
    ...schedulePaths,
    ...uiPaths,
    ...dashboardPaths,
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
                      revision: { type: 'integer', minimum: 1, description: 'As in `Timer`.' },
                      queue: queueNameSchema,
                      fire_at: { type: 'string', format: 'date-time' },
                      attempts: { type: 'integer', minimum: 0 },
                      last_status: { type: ['integer', 'null'], description: 'The last HTTP status the target answered; null when none came back.' },
                      reason: { enum: ['attempts_exhausted', 'gone', 'target_refused', 'unknown'] },
                      last_error: lastErrorSchema,
                      last_attempt_at: lastAttemptAtSchema,
                      ...timerContentSchemas,
                    },
                    required: ['id', 'revision', 'queue', 'fire_at', 'attempts', 'last_status', 'reason', 'last_error', 'last_attempt_at', ...timerContentFields],
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
    '/v1/limits': {
      get: {
        operationId: 'getLimits',
        summary: 'The limits a client sizes its requests by',
        description: 'Body sizes, timers a batch, lines a stream holds unanswered, a page\'s most: a client that splits its batches at these is not refused for size (413 `BODY_TOO_LARGE`, `WAL_RECORD_TOO_LARGE`, 400 `BATCH_INVALID` for too many rows). No token needed, so a client holding only a write token can size its batches.',
        security: open,
        responses: { '200': { description: 'The limits.', content: jsonOf(limitsSchema) } },
      },
    },
    '/v1/clock': {
      get: {
        operationId: 'getClock',
        summary: 'The test clock',
        description: 'Where the manual test clock stands (`fermata serve --clock manual`). A service on the real clock answers 404 `ROUTE_NOT_FOUND`, as for a path no route serves.',
        responses: {
          '200': { description: 'The clock.', content: jsonOf(clockSchema) },
          '401': ref('responses', 'Unauthorized'),
          '404': errorResponse('ROUTE_NOT_FOUND: the service runs on the real clock.', [httpErrorCodes.routeNotFound]),
        },
      },
      post: {
        operationId: 'moveClock',
        summary: 'Move the test clock forward',
        description:
          'Moves the manual test clock forward by `advance_ms`, or to `set`, once the move is durable; timers it makes due fire at once (their backoffs, retention and `delay_ms` all read this clock). Exactly one of the two. A service on the real clock answers 404 `ROUTE_NOT_FOUND`.',
        requestBody: {
          required: true,
          content: jsonOf({
            oneOf: [
              { type: 'object', properties: { advance_ms: { type: 'integer', minimum: 1, maximum: clockAdvanceMsMax, description: 'ms to move forward (at most 10 years).' } }, required: ['advance_ms'], additionalProperties: false },
              {
                type: 'object',
                properties: { set: { oneOf: [{ type: 'string', format: 'date-time' }, { type: 'integer', minimum: 1e12, maximum: manualClockMsMax }], description: 'The time to move to: RFC 3339 or epoch ms; not before where the clock stands.' } },
                required: ['set'],
                additionalProperties: false,
              },
            ],
          }),
        },
        responses: {
          '200': { description: 'The clock as the move left it.', content: jsonOf(clockSchema) },
          '400': errorResponse('CLOCK_INVALID: neither or both of `advance_ms` and `set`, an unknown field, or a value out of range (naming the `field`). BODY_INVALID: malformed or empty JSON.', [errorCodes.clockInvalid, httpErrorCodes.bodyInvalid]),
          '401': ref('responses', 'Unauthorized'),
          '404': errorResponse('ROUTE_NOT_FOUND: the service runs on the real clock.', [httpErrorCodes.routeNotFound]),
          '409': errorResponse('CLOCK_BACKWARDS: `set` is before where the clock stands (it never moves backwards).', [errorCodes.clockBackwards]),
          '415': ref('responses', 'UnsupportedMediaType'),
          ...logResponses,
        },
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
              'Not ready: the log is poisoned (a failed write or fsync), or the data directory\'s file system has fewer bytes free than the configured minimum (`free_bytes` then says how many are), or its free space cannot be read, or the delivery workers are still warming up after a start; `reason` says which.',
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
    ...adminPaths,
  }),
  webhooks: callbackWebhooks,
  components: openApiComponents,
} as const;
