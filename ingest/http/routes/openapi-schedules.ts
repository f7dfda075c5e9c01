// The OpenAPI paths of /v1/schedules (routes/schedules.ts), which openapi.ts puts among its
// paths. Built once when the module loads; any thread.
import { errorCodes } from '../../../engine/errors.ts';
import { scheduleLimits } from '../../../engine/limits.ts';
import { httpErrorCodes } from '../error-map.ts';
import { errorResponse, jsonOf, logResponses, ref } from './openapi-parts.ts';
import { scheduleListSchema, scheduleSchema } from './schedules.ts';

const nameParameter = {
  name: 'name',
  in: 'path',
  required: true,
  description: `The schedule's name: 1 to ${scheduleLimits.nameBytesMax} letters, digits, \`.\`, \`_\` or \`-\`.`,
  schema: { type: 'string', pattern: '^[A-Za-z0-9._-]+$', minLength: 1, maxLength: scheduleLimits.nameBytesMax },
};

const instant = { oneOf: [{ type: 'string', format: 'date-time' }, { type: 'integer', minimum: 1e12 }] };

const putBody = {
  type: 'object',
  properties: {
    cron: { type: 'string', description: 'A cron expression (docs/api.md, "Schedule rules"), in `time_zone`; exclusive with `every_ms`.' },
    time_zone: { type: 'string', description: 'An IANA time zone for `cron` (default UTC).' },
    every_ms: { type: 'integer', minimum: 1000, description: 'A fixed interval, counted from `start_at`, else from the PUT.' },
    start_at: { ...instant, description: 'No occurrence before it.' },
    end_at: { ...instant, description: 'No occurrence after it.' },
    jitter_ms: { type: 'integer', minimum: 0, description: 'Each occurrence fires 0 to this many ms late, the same amount every time.' },
    catch_up: { type: 'string', enum: ['latest', 'all', 'none'], description: 'Occurrences missed while the service was down (or the test clock stepped over them): the most recent once (default), each, or none.' },
    target: { type: 'string', description: 'Where each occurrence is POSTed.' },
    payload: { type: 'string' },
    payload_base64: { type: 'string' },
    headers: { type: 'object', additionalProperties: { type: 'string' } },
    queue: { type: 'string' },
  },
  required: ['target'],
  additionalProperties: false,
};

const notFound = errorResponse('NOT_FOUND: no schedule has this name.', [httpErrorCodes.notFound]);

function pauseOperation(operationId: string, summary: string, description: string): object {
  return {
    post: {
      operationId,
      summary,
      description,
      parameters: [nameParameter],
      responses: { '200': { description: 'The schedule, with `paused` as it is now.', content: jsonOf(scheduleSchema) }, '401': ref('responses', 'Unauthorized'), '404': notFound, ...logResponses },
    },
  };
}

export const schedulePaths = {
  '/v1/schedules': {
    get: {
      operationId: 'listSchedules',
      summary: 'List schedules by name',
      parameters: [
        { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: scheduleLimits.listLimitMax, default: scheduleLimits.listLimitDefault } },
        { name: 'cursor', in: 'query', description: 'A page\'s `next_cursor`: the list goes on after it.', schema: { type: 'string', minLength: 1 } },
      ],
      responses: {
        '200': { description: 'A page of schedules, by name.', content: jsonOf(scheduleListSchema) },
        '400': errorResponse('REQUEST_INVALID: a `limit` out of range.', [httpErrorCodes.requestInvalid]),
        '401': ref('responses', 'Unauthorized'),
      },
    },
  },
  '/v1/schedules/{name}': {
    put: {
      operationId: 'putSchedule',
      summary: 'Create or replace a schedule',
      description:
        'Once durable, occurrences become timers keyed `schedule:{name}:{occurrence epoch ms}`, created ahead. A PUT of an existing name replaces it: its pending occurrences are cancelled and created again by the new rule (not one being delivered, nor one a user changed).',
      parameters: [nameParameter],
      requestBody: { required: true, content: jsonOf(putBody) },
      responses: {
        '200': { description: 'The schedule, with its next five occurrences.', content: jsonOf(scheduleSchema) },
        '400': errorResponse('SCHEDULE_INVALID naming the field (the rule, an unknown field, the name); BATCH_INVALID or TARGET_REFUSED naming a timer field; BODY_INVALID.', [errorCodes.scheduleInvalid, errorCodes.batchInvalid, errorCodes.targetRefused, httpErrorCodes.bodyInvalid]),
        '401': ref('responses', 'Unauthorized'),
        ...logResponses,
      },
    },
    get: {
      operationId: 'getSchedule',
      summary: 'A schedule and its next five occurrences',
      parameters: [nameParameter],
      responses: { '200': { description: 'The schedule.', content: jsonOf(scheduleSchema) }, '401': ref('responses', 'Unauthorized'), '404': notFound },
    },
    delete: {
      operationId: 'deleteSchedule',
      summary: 'Delete a schedule',
      description: 'Once durable, its pending occurrences are cancelled (not one being delivered, nor one a user changed).',
      parameters: [nameParameter],
      responses: {
        '200': { description: 'Deleted.', content: jsonOf({ type: 'object', properties: { name: { type: 'string' }, deleted: { type: 'boolean' } }, required: ['name', 'deleted'], additionalProperties: false }) },
        '401': ref('responses', 'Unauthorized'),
        '404': notFound,
        ...logResponses,
      },
    },
  },
  '/v1/schedules/{name}/pause': pauseOperation('pauseSchedule', 'Pause a schedule', 'Once durable, it creates no occurrences and its pending ones are cancelled (not one being delivered, nor one a user changed). Pausing a paused schedule changes nothing.'),
  '/v1/schedules/{name}/resume': pauseOperation('resumeSchedule', 'Resume a paused schedule', 'Once durable, the rule goes on from now: occurrences while it was paused are not created.'),
};
