// Timers by filter rather than by id: list and export (GET /v1/timers), bulk cancel
// (POST /v1/timers/cancel) and a queue's purge (DELETE /v1/queues/{name}/timers). A thin
// adapter over the engine's query part (engine/timer-query.ts) and bulk cancel
// (engine/bulk-cancel.ts). Main thread.
//
//   GET /v1/timers?queue&state&key_prefix&key&due_after&due_before&limit&cursor
//        → {"timers": [view…], "next_cursor": "…" | null}       in (due, id) order
//        Accept: application/vnd.apache.arrow.stream → every match as Arrow record batches,
//        each made when the response has room for it (engine/timer-export.ts)
//   POST /v1/timers/cancel {queue, key_prefix, due_after, due_before | ids}
//        → {"cancelled": N, "in_flight": M}     durable before the answer (one record)
//   DELETE /v1/queues/{name}/timers          → the same, for filter {queue: name}; 404 unknown queue
import { Readable } from 'node:stream';
import { type BulkCancelOutcome, type BulkCancelTarget, decodeCursor, queryStart } from '../../../engine/engine.ts';
import { httpErrorCodes, HttpProblem } from '../error-map.ts';
import { mediaTypes } from '../media-types.ts';
import { bulkCancelLimits, timerListLimits } from '../route-limits.ts';
import { type FilterFields, timeOf, timerFilterOf } from '../timer-filter.ts';
import { timerView } from '../timer-views.ts';
import type { HttpServer, RoutesOptions } from '../types.ts';

interface ListQuery extends FilterFields {
  readonly limit?: string;
  readonly cursor?: string;
}

export const listQuerySchema = {
  type: 'object',
  properties: {
    queue: { type: 'string' },
    state: { type: 'string' },
    key_prefix: { type: 'string' },
    key: { type: 'string' },
    due_after: { type: 'string' },
    due_before: { type: 'string' },
    limit: { type: 'string' },
    cursor: { type: 'string' },
  },
  additionalProperties: false,
} as const;

/**
 * Before the schema reads the query: a parameter the list does not take, or one given twice, is
 * a 400 naming it (the schema would drop the one silently, listing more than asked for, and
 * answer the other in its own words).
 */
export function checkListQuery(query: unknown): void {
  for (const [name, value] of Object.entries(query as Record<string, unknown>)) {
    if (!(name in listQuerySchema.properties)) {
      throw new HttpProblem(httpErrorCodes.requestInvalid, `${name} is not a parameter of GET /v1/timers: it takes ${Object.keys(listQuerySchema.properties).join(', ')}`, name);
    }
    if (Array.isArray(value)) throw new HttpProblem(httpErrorCodes.requestInvalid, `${name} is given ${value.length} times: give it once`, name);
  }
}

const pageSchema = {
  type: 'object',
  properties: { timers: { type: 'array', items: timerView.schema }, next_cursor: { type: ['string', 'null'] } },
  required: ['timers', 'next_cursor'],
  additionalProperties: false,
} as const;

const wantsArrow = (accept: string | undefined): boolean => accept !== undefined && accept.toLowerCase().includes(mediaTypes.arrowStream);

export function limitOf(value: string | undefined): number {
  if (value === undefined) return timerListLimits.default;
  const limit = /^\d{1,7}$/.test(value) ? Number(value) : NaN;
  if (!(limit >= 1 && limit <= timerListLimits.max)) {
    throw new HttpProblem(httpErrorCodes.requestInvalid, `limit must be a whole number from 1 to ${timerListLimits.max} (an export, with Accept: ${mediaTypes.arrowStream}, has no limit)`, 'limit');
  }
  return limit;
}

const cancelledSchema = {
  type: 'object',
  properties: { cancelled: { type: 'integer' }, in_flight: { type: 'integer' } },
  required: ['cancelled', 'in_flight'],
  additionalProperties: false,
} as const;

/** The fields a bulk cancel's body may hold. */
const bulkCancelFields = ['queue', 'key_prefix', 'due_after', 'due_before', 'ids'];

/** What a bulk cancel's JSON body names; a bad body is a 400 naming the field. */
export function bulkCancelTargetOf(body: unknown): BulkCancelTarget {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new HttpProblem(httpErrorCodes.requestInvalid, 'the body must be a JSON object: a filter (queue, key_prefix, due_after, due_before) or ids');
  }
  const fields = body as Record<string, unknown>;
  for (const name of Object.keys(fields)) {
    if (!bulkCancelFields.includes(name)) throw new HttpProblem(httpErrorCodes.requestInvalid, `${name} is not a filter of a bulk cancel: give ${bulkCancelFields.join(', ')}`, name);
  }
  const given = bulkCancelFields.filter((name) => fields[name] !== undefined && fields[name] !== null);
  if (given.length === 0) throw new HttpProblem(httpErrorCodes.requestInvalid, `a bulk cancel needs at least one of ${bulkCancelFields.join(', ')} (to cancel a queue's timers, give queue)`, 'queue');
  if (given.includes('ids')) {
    if (given.length > 1) throw new HttpProblem(httpErrorCodes.requestInvalid, 'give ids alone, or a filter without ids', 'ids');
    const ids = fields.ids;
    if (!Array.isArray(ids) || ids.length === 0 || ids.length > bulkCancelLimits.idsMax || !ids.every((id) => typeof id === 'string')) {
      throw new HttpProblem(httpErrorCodes.requestInvalid, `ids must be a list of 1 to ${bulkCancelLimits.idsMax} timer ids`, 'ids');
    }
    return { ids: ids as string[] };
  }
  // Checked as a list's filter is; times are JSON numbers (epoch ms) or RFC 3339 strings there.
  const filter = timerFilterOf({ queue: fields.queue, key_prefix: fields.key_prefix });
  const dueAfterMs = timeOf(fields.due_after, 'due_after');
  const dueBeforeMs = timeOf(fields.due_before, 'due_before');
  return { filter: { ...filter, ...(dueAfterMs === undefined ? {} : { dueAfterMs }), ...(dueBeforeMs === undefined ? {} : { dueBeforeMs }) } };
}

const cancelledJson = (outcome: BulkCancelOutcome): { cancelled: number; in_flight: number } => ({ cancelled: outcome.cancelled, in_flight: outcome.inFlight });

export async function timerListRoutes(app: HttpServer, { engine }: RoutesOptions): Promise<void> {
  app.get<{ Querystring: ListQuery }>('/v1/timers', { schema: { querystring: listQuerySchema, response: { 200: pageSchema } }, preValidation: async (request) => checkListQuery(request.query) }, async (request, reply) => {
    const { query } = request;
    const filter = timerFilterOf(query);
    const after = query.cursor === undefined ? queryStart : decodeCursor(query.cursor);
    if (after === undefined) throw new HttpProblem(httpErrorCodes.requestInvalid, `cursor ${JSON.stringify(query.cursor)} is not one: pass a page's next_cursor as it came`, 'cursor');
    if (wantsArrow(request.headers.accept)) {
      // One batch read ahead at most: the next is made when the response has taken this one.
      const stream = Readable.from(engine.exportTimers(filter, timerListLimits.exportBatchRows, after), { objectMode: false, highWaterMark: 1 });
      return reply.code(200).type(mediaTypes.arrowStream).send(stream);
    }
    const page = await engine.listTimers(filter, limitOf(query.limit), after);
    return { timers: page.timers.map((timer) => timerView.json(timer)), next_cursor: page.nextCursor };
  });

  app.post<{ Body: unknown }>('/v1/timers/cancel', { schema: { response: { 200: cancelledSchema } } }, async (request) => {
    return cancelledJson(await engine.bulkCancel(bulkCancelTargetOf(request.body)));
  });

  app.delete<{ Params: { name: string } }>('/v1/queues/:name/timers', { schema: { params: { type: 'object', properties: { name: { type: 'string' } }, required: ['name'] }, response: { 200: cancelledSchema } } }, async (request) => {
    const { name } = request.params;
    if (engine.findQueue(name) === undefined) throw new HttpProblem(httpErrorCodes.notFound, `no queue ${name}`);
    return cancelledJson(await engine.bulkCancel({ filter: { queue: name } }));
  });
}
