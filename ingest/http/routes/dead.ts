// /v1/dead: the dead-letter list, redrive and discard. GET lists dead timers a page at a time
// (oldest first, optionally one queue's, at most `limit`, from after `cursor`: the page before's
// `next_cursor`); POST /v1/dead/{id}/retry sends one round again with its attempts reset;
// DELETE /v1/dead/{id} discards one (released at once: GET /v1/timers/{id} answers 404). Both
// answer once their record is durable. POST /v1/dead/retry redrives every dead timer the list's
// filter names (a JSON body: {} for all, {"queue"} for one queue's), each by the same redrive
// path, and answers how many once all are durable.
import assert from 'node:assert/strict';
import type { Engine } from '../../../engine/engine.ts';
import { httpErrorCodes, HttpProblem } from '../error-map.ts';
import { deadListLimits, deadRetryLimits } from '../route-limits.ts';
import { deadTimerView } from '../timer-views.ts';
import type { HttpServer, RoutesOptions } from '../types.ts';
import { type IdParams, idParamsSchema } from './id-params.ts';

const deadListSchema = {
  type: 'object',
  properties: { dead: { type: 'array', items: deadTimerView.schema }, next_cursor: { type: ['string', 'null'] } },
  required: ['dead', 'next_cursor'],
  additionalProperties: false,
} as const;

/** GET /v1/dead's query (the cluster front's fan-out takes the same). */
export const deadQuerySchema = {
  type: 'object',
  properties: {
    queue: { type: 'string', minLength: 1 },
    limit: { type: 'integer', minimum: 1, maximum: deadListLimits.max, default: deadListLimits.default },
    cursor: { type: 'string', minLength: 1 },
  },
  additionalProperties: false,
} as const;


const redrivenSchema = {
  type: 'object',
  properties: { id: { type: 'string' }, state: { type: 'string', enum: ['pending'] } },
  required: ['id', 'state'],
  additionalProperties: false,
} as const;

const discardedSchema = {
  type: 'object',
  properties: { id: { type: 'string' }, state: { type: 'string', enum: ['discarded'] } },
  required: ['id', 'state'],
  additionalProperties: false,
} as const;

/** Sends dead timer `id` one round again once durable (this route, the gRPC API's RetryDeadTimer); the HttpProblem that says why not. */
export async function redriveDead(engine: Engine, id: string): Promise<void> {
  const outcome = await engine.redrive(id);
  if (outcome === 'redriven') return;
  if (outcome === 'not-found') throw new HttpProblem(httpErrorCodes.notFound, `no timer ${id}`);
  throw new HttpProblem(httpErrorCodes.notDead, `timer ${id} is ${engine.get(id)?.state ?? 'not dead'}: only dead timers are redriven`);
}

/** Discards dead timer `id` once durable (this route, the gRPC API's DiscardDeadTimer); the HttpProblem that says why not. */
export async function discardDead(engine: Engine, id: string): Promise<void> {
  const outcome = await engine.discardDead(id);
  if (outcome === 'discarded') return;
  if (outcome === 'not-found') throw new HttpProblem(httpErrorCodes.notFound, `no timer ${id}`);
  throw new HttpProblem(httpErrorCodes.notDead, `timer ${id} is ${engine.get(id)?.state ?? 'not dead'}: only dead timers are discarded (DELETE /v1/timers/{id} cancels a pending one)`);
}

export const deadRetriedSchema = {
  type: 'object',
  properties: { redriven: { type: 'integer' }, more: { type: 'boolean' } },
  required: ['redriven', 'more'],
  additionalProperties: false,
} as const;

/** The filter of POST /v1/dead/retry's body: GET /v1/dead's, without the paging. */
function deadFilterOf(body: unknown): { readonly queue?: string } {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new HttpProblem(httpErrorCodes.requestInvalid, 'the body must be a JSON object: {} redrives every dead timer, {"queue": NAME} one queue\'s');
  }
  const fields = body as Record<string, unknown>;
  for (const name of Object.keys(fields)) if (name !== 'queue') throw new HttpProblem(httpErrorCodes.requestInvalid, `${name} is not a filter of the dead list: give queue, or nothing for all`, name);
  const { queue } = fields;
  if (queue === undefined) return {};
  if (typeof queue !== 'string' || queue.length === 0) throw new HttpProblem(httpErrorCodes.requestInvalid, 'queue must be a queue\'s name', 'queue');
  return { queue };
}

export async function deadRoutes(app: HttpServer, { engine }: RoutesOptions): Promise<void> {
  app.post<{ Body: unknown }>('/v1/dead/retry', { schema: { response: { 200: deadRetriedSchema } } }, async (request) => {
    const { queue } = deadFilterOf(request.body);
    // The list as it is now (pages are read in one turn), at most redrivenMax of it.
    const ids: string[] = [];
    let cursor: string | undefined;
    do {
      const page = engine.deadPage(Math.min(deadListLimits.max, deadRetryLimits.redrivenMax - ids.length), queue, cursor);
      assert.ok(page !== undefined, 'a page\'s own next_cursor is a cursor');
      for (const timer of page.dead) ids.push(timer.id);
      cursor = page.nextCursor ?? undefined;
    } while (cursor !== undefined && ids.length < deadRetryLimits.redrivenMax);
    // The redrives of a slice are logged together (the log commits them as a group); one redriven
    // or discarded meanwhile is not counted.
    let redriven = 0;
    for (let from = 0; from < ids.length; from += deadRetryLimits.redrivesAtOnce) {
      const outcomes = await Promise.all(ids.slice(from, from + deadRetryLimits.redrivesAtOnce).map((id) => engine.redrive(id)));
      for (const outcome of outcomes) if (outcome === 'redriven') redriven++;
    }
    return { redriven, more: cursor !== undefined };
  });

  app.get<{ Querystring: { queue?: string; limit: number; cursor?: string } }>('/v1/dead', { schema: { querystring: deadQuerySchema, response: { 200: deadListSchema } } }, async (request) => {
    const { queue, limit, cursor } = request.query;
    const page = engine.deadPage(limit, queue, cursor);
    if (page === undefined) throw new HttpProblem(httpErrorCodes.requestInvalid, `cursor ${JSON.stringify(cursor)} is not one: pass a page's next_cursor as it came`);
    return { dead: page.dead.map((timer) => deadTimerView.json(timer)), next_cursor: page.nextCursor };
  });

  app.post<{ Params: IdParams }>('/v1/dead/:id/retry', { schema: { params: idParamsSchema, response: { 200: redrivenSchema } } }, async (request) => {
    await redriveDead(engine, request.params.id);
    return { id: request.params.id, state: 'pending' };
  });

  app.delete<{ Params: IdParams }>('/v1/dead/:id', { schema: { params: idParamsSchema, response: { 200: discardedSchema } } }, async (request) => {
    await discardDead(engine, request.params.id);
    return { id: request.params.id, state: 'discarded' };
  });
}
