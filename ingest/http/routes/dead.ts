// /v1/dead: the dead-letter list, redrive and discard. GET lists dead timers a page at a time
// (oldest first, optionally one queue's, at most `limit`, from after `cursor`: the page before's
// `next_cursor`); POST /v1/dead/{id}/retry sends one round again with its attempts reset;
// DELETE /v1/dead/{id} discards one (released at once: GET /v1/timers/{id} answers 404). Both
// answer once their record is durable. POST /v1/dead/retry (every dead timer a filter names) is
// dead-retry.ts's.
import type { Engine } from '../../../engine/engine.ts';
import { httpErrorCodes, HttpProblem } from '../error-map.ts';
import { deadListLimits } from '../route-limits.ts';
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

export async function deadRoutes(app: HttpServer, { engine }: RoutesOptions): Promise<void> {
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
