// Timers by filter rather than by id: list and export (GET /v1/timers), bulk cancel
// (POST /v1/timers/cancel) and a queue's purge (DELETE /v1/queues/{name}/timers). A thin
// adapter over the engine's query part (engine/timer-query.ts) and bulk cancel
// (engine/bulk-cancel.ts). Main thread.
//
//   GET /v1/timers?queue&state&key_prefix&key&due_after&due_before&limit&cursor
//        → {"timers": [view…], "next_cursor": "…" | null}       in (due, id) order
//        Accept: application/vnd.apache.arrow.stream → every match as Arrow record batches,
//        each made when the response has room for it (engine/timer-export.ts)
import { Readable } from 'node:stream';
import { decodeCursor, queryStart } from '../../../engine/engine.ts';
import { httpErrorCodes, HttpProblem } from '../error-map.ts';
import { mediaTypes } from '../media-types.ts';
import { timerListLimits } from '../route-limits.ts';
import { type FilterFields, timerFilterOf } from '../timer-filter.ts';
import { timerView } from '../timer-views.ts';
import type { HttpServer, RoutesOptions } from '../types.ts';

interface ListQuery extends FilterFields {
  readonly limit?: string;
  readonly cursor?: string;
}

const listQuerySchema = {
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

const pageSchema = {
  type: 'object',
  properties: { timers: { type: 'array', items: timerView.schema }, next_cursor: { type: ['string', 'null'] } },
  required: ['timers', 'next_cursor'],
  additionalProperties: false,
} as const;

const wantsArrow = (accept: string | undefined): boolean => accept !== undefined && accept.toLowerCase().includes(mediaTypes.arrowStream);

function limitOf(value: string | undefined): number {
  if (value === undefined) return timerListLimits.default;
  const limit = /^\d{1,7}$/.test(value) ? Number(value) : NaN;
  if (!(limit >= 1 && limit <= timerListLimits.max)) {
    throw new HttpProblem(httpErrorCodes.requestInvalid, `limit must be a whole number from 1 to ${timerListLimits.max} (an export, with Accept: ${mediaTypes.arrowStream}, has no limit)`, 'limit');
  }
  return limit;
}

export async function timerListRoutes(app: HttpServer, { engine }: RoutesOptions): Promise<void> {
  app.get<{ Querystring: ListQuery }>('/v1/timers', { schema: { querystring: listQuerySchema, response: { 200: pageSchema } } }, async (request, reply) => {
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
}
