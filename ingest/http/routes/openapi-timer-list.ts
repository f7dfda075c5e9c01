// The OpenAPI operations of timers by filter (routes/timer-list.ts): the list and export
// (GET /v1/timers), bulk cancel (POST /v1/timers/cancel) and a queue's purge
// (DELETE /v1/queues/{name}/timers). Kept beside openapi.ts, which places them in its paths.
// Built once when the module loads; any thread.
import { errorCodes } from '../../../engine/errors.ts';
import { timerLimits } from '../../../engine/limits.ts';
import { httpErrorCodes } from '../error-map.ts';
import { mediaTypes } from '../media-types.ts';
import { bulkCancelLimits, timerListLimits } from '../route-limits.ts';
import { timerStateNames } from '../timer-filter.ts';
import { errorResponse, jsonOf, logResponses, queueNameParameter, ref, retryAfter } from './openapi-parts.ts';

const timeSchema = { oneOf: [{ type: 'string', format: 'date-time' }, { type: 'integer', minimum: 1e12 }] };
const timeText = 'an RFC 3339 date-time, or epoch ms (at least 10^12), as `fire_at` takes';

const filterParameters = [
  { name: 'queue', in: 'query', required: false, description: 'Only this queue\'s timers (a name no queue has matches none).', schema: { type: 'string' } },
  { name: 'state', in: 'query', required: false, description: 'Only timers in this state.', schema: { enum: timerStateNames } },
  { name: 'key_prefix', in: 'query', required: false, description: 'Only timers whose idempotency key starts with this (over timers on disk this reads their files).', schema: { type: 'string', minLength: 1 } },
  { name: 'key', in: 'query', required: false, description: 'Only the timer holding this idempotency key.', schema: { type: 'string', minLength: 1 } },
  { name: 'due_after', in: 'query', required: false, description: `Only timers next due at or after this: ${timeText}. A timer is next due at its fire time, or its next attempt's while it is retrying; a finished one at its fire time.`, schema: { type: 'string' } },
  { name: 'due_before', in: 'query', required: false, description: `Only timers next due before this: ${timeText}.`, schema: { type: 'string' } },
];

const cancelledSchema = {
  type: 'object',
  properties: {
    cancelled: { type: 'integer', minimum: 0, description: 'Pending and retrying timers cancelled.' },
    in_flight: { type: 'integer', minimum: 0, description: 'Matching timers left alone because a delivery of theirs had started.' },
  },
  required: ['cancelled', 'in_flight'],
  additionalProperties: false,
};

const tooManyText = `WAL_RECORD_TOO_LARGE: the filter matches more than ${timerLimits.bulkCancelTimersMax} timers, the most one bulk cancel takes (its one record): narrow it (\`due_before\`).`;

const unavailable = errorResponse(
  'CAPACITY_FULL: the cancelled timers kept on disk come into memory for their retention, and the resident store has no room for them. WAL_CLOSED: the service is stopping. WAL_POISONED: a failed write or fsync stopped the log from acknowledging; the service opens its data directory again by itself.',
  [errorCodes.capacityFull, errorCodes.walClosed, errorCodes.walPoisoned],
  retryAfter,
);

/** GET /v1/timers (placed beside POST in openapi.ts's '/v1/timers'). */
export const listTimersOperation = {
  operationId: 'listTimers',
  summary: 'List or export timers by filter',
  description: [
    'Timers in memory and on disk alike, ordered by when they are next due, then by id, a page at a time: pass a page\'s `next_cursor` as `cursor` for the next page (with the same filter). The cursor names a place in that order, so it stays good across restarts; a timer whose due time changes during a scan may be seen twice or not at all.',
    `With \`Accept: ${mediaTypes.arrowStream}\` every match (no \`limit\`) streams as one Arrow IPC stream of record batches of ${timerListLimits.exportBatchRows} rows, made as the client reads, with the columns \`id\` (Utf8), \`state\` (Utf8), \`fire_at\` (Timestamp ms UTC), \`next_attempt_at\` (Timestamp ms UTC, null), \`attempts\` (Uint32), \`queue\` (Utf8), \`key\` (Utf8, null), \`target\` (Utf8), \`headers\` (Utf8 JSON object, null), \`payload\` (Binary), \`last_status\` (Uint16, null), \`last_error\` (Utf8, null), \`last_attempt_at\` (Timestamp ms UTC, null), \`revision\` (Uint32), \`callback\` (Utf8, null), \`failure_callback\` (Utf8, null), \`created_at\` (Timestamp ms UTC, null).`,
  ].join('\n\n'),
  parameters: [
    ...filterParameters,
    { name: 'limit', in: 'query', required: false, description: 'At most this many (not for an export).', schema: { type: 'integer', minimum: 1, maximum: timerListLimits.max, default: timerListLimits.default } },
    { name: 'cursor', in: 'query', required: false, description: 'The `next_cursor` of the page before (opaque).', schema: { type: 'string', minLength: 1 } },
  ],
  responses: {
    '200': {
      description: 'A page of timers (null `next_cursor`: the last), or with Accept: Arrow the export.',
      content: {
        ...jsonOf({
          type: 'object',
          properties: { timers: { type: 'array', items: ref('schemas', 'Timer') }, next_cursor: { type: ['string', 'null'] } },
          required: ['timers', 'next_cursor'],
          additionalProperties: false,
        }),
        [mediaTypes.arrowStream]: {},
      },
    },
    '400': errorResponse('REQUEST_INVALID: a parameter that is not good, named in `field` (`limit` over the most, a `cursor` that is not one, an unknown `state`, a time that does not parse).', [httpErrorCodes.requestInvalid]),
    '401': ref('responses', 'Unauthorized'),
  },
};

/** POST /v1/timers/cancel and DELETE /v1/queues/{name}/timers. */
export const timerListPaths = {
  '/v1/timers/cancel': {
    post: {
      operationId: 'cancelTimers',
      summary: 'Cancel the timers a filter names',
      description:
        'Cancels every pending and retrying timer, in memory or on disk, that the filter names (its fields together), or the timers `ids` names, with one durable record: answered once it is durable. Timers being delivered are counted in `in_flight` and left alone.',
      requestBody: {
        required: true,
        content: jsonOf({
          type: 'object',
          properties: {
            queue: { type: 'string', description: 'Only this queue\'s timers (a name no queue has matches none).' },
            key_prefix: { type: 'string', minLength: 1 },
            due_after: timeSchema,
            due_before: timeSchema,
            ids: { type: 'array', items: { type: 'string' }, minItems: 1, maxItems: bulkCancelLimits.idsMax, description: 'Instead of a filter: these timers (a string that is not the id of a timer is skipped, as an unknown id is).' },
          },
          minProperties: 1,
          additionalProperties: false,
        }),
      },
      responses: {
        '200': { description: 'Cancelled (durable).', content: jsonOf(cancelledSchema) },
        '400': errorResponse('REQUEST_INVALID: no filter, an unknown field, `ids` with a filter or over the most, a time that does not parse (naming the `field`).', [httpErrorCodes.requestInvalid, httpErrorCodes.bodyInvalid]),
        '401': ref('responses', 'Unauthorized'),
        '413': errorResponse(tooManyText, [errorCodes.walRecordTooLarge]),
        ...logResponses,
        '503': unavailable,
      },
    },
  },
  '/v1/queues/{name}/timers': {
    delete: {
      operationId: 'purgeQueue',
      summary: 'Cancel a queue\'s waiting timers',
      description: 'A bulk cancel with the filter `queue`: every pending and retrying timer of the queue, in memory or on disk, with one durable record.',
      parameters: [queueNameParameter],
      responses: {
        '200': { description: 'Cancelled (durable).', content: jsonOf(cancelledSchema) },
        '401': ref('responses', 'Unauthorized'),
        '404': errorResponse('NOT_FOUND: no queue has this name.', [httpErrorCodes.notFound]),
        '413': errorResponse(tooManyText, [errorCodes.walRecordTooLarge]),
        ...logResponses,
        '503': unavailable,
      },
    },
  },
};
