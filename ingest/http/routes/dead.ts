// /v1/dead: the dead-letter list and redrive. GET lists dead timers (oldest first, optionally
// one queue's, at most `limit`); POST /v1/dead/{id}/retry sends one round again with its
// attempts reset, and answers once that is durable.
import { httpErrorCodes, HttpProblem } from '../error-map.ts';
import { deadListLimits } from '../route-limits.ts';
import type { HttpServer, RoutesOptions } from '../types.ts';

const deadTimerSchema = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    queue: { type: 'string' },
    target: { type: 'string' },
    fire_at: { type: 'string' },
    attempts: { type: 'integer' },
    last_status: { type: ['integer', 'null'] },
    reason: { type: 'string', enum: ['attempts_exhausted', 'gone', 'target_refused', 'unknown'] },
  },
  required: ['id', 'queue', 'target', 'fire_at', 'attempts', 'last_status', 'reason'],
  additionalProperties: false,
} as const;

const deadListSchema = {
  type: 'object',
  properties: { dead: { type: 'array', items: deadTimerSchema } },
  required: ['dead'],
  additionalProperties: false,
} as const;

const listQuerySchema = {
  type: 'object',
  properties: {
    queue: { type: 'string', minLength: 1 },
    limit: { type: 'integer', minimum: 1, maximum: deadListLimits.max, default: deadListLimits.default },
  },
  additionalProperties: false,
} as const;

const idParamsSchema = { type: 'object', properties: { id: { type: 'string' } }, required: ['id'] } as const;

const redrivenSchema = {
  type: 'object',
  properties: { id: { type: 'string' }, state: { type: 'string', enum: ['pending'] } },
  required: ['id', 'state'],
  additionalProperties: false,
} as const;

export async function deadRoutes(app: HttpServer, { engine }: RoutesOptions): Promise<void> {
  app.get<{ Querystring: { queue?: string; limit: number } }>('/v1/dead', { schema: { querystring: listQuerySchema, response: { 200: deadListSchema } } }, async (request) => {
    const { queue, limit } = request.query;
    const dead = engine.listDead(limit, queue).map((timer) => ({
      id: timer.id,
      queue: timer.queue,
      target: timer.target,
      fire_at: new Date(timer.fireAtMs).toISOString(),
      attempts: timer.attempts,
      last_status: timer.lastStatus,
      reason: timer.reason,
    }));
    return { dead };
  });

  app.post<{ Params: { id: string } }>('/v1/dead/:id/retry', { schema: { params: idParamsSchema, response: { 200: redrivenSchema } } }, async (request) => {
    const { id } = request.params;
    const outcome = await engine.redrive(id);
    if (outcome === 'redriven') return { id, state: 'pending' };
    if (outcome === 'not-found') throw new HttpProblem(httpErrorCodes.notFound, `no timer ${id}`);
    throw new HttpProblem(httpErrorCodes.notDead, `timer ${id} is ${engine.get(id)?.state ?? 'not dead'}: only dead timers are redriven`);
  });
}
