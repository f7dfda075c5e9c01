// /v1/queues: a queue's retry policy and flow limits. PUT replaces a queue's whole config
// (absent fields take their defaults) and answers its view once the QUEUE record is durable; GET lists
// every queue that was configured or has held a timer, GET /{name} answers one (404 unknown),
// each with `paused`; DELETE /{name} deletes one once its QUEUE record is durable (409
// QUEUE_NOT_EMPTY with the count while timers wait in it, 409 QUEUE_PROTECTED for `default`).
// POST /{name}/pause and /resume hold or release its due timers once their QUEUE record is
// durable and answer its view (404 unknown). Validation is the engine's (engine/queues.ts): a
// bad name or field is QUEUE_INVALID naming it, a 400.
import type { QueueView } from '../../../engine/queue-registry.ts';
import type { StatsSeries } from '../../../engine/stats-series.ts';
import { httpErrorCodes, HttpProblem } from '../error-map.ts';
import type { HttpServer, RoutesOptions } from '../types.ts';

const nullableInteger = { type: ['integer', 'null'] } as const;

const configProperties = {
  max_attempts: { type: 'integer' },
  min_backoff_ms: { type: 'integer' },
  max_backoff_ms: { type: 'integer' },
  max_doublings: { type: 'integer' },
  rate_per_s: nullableInteger,
  max_concurrent: nullableInteger,
  timeout_ms: { type: 'integer' },
  delivery: { type: 'string' },
  sink: { type: ['string', 'null'] },
  batch_rows_max: { type: 'integer' },
  linger_ms: { type: 'integer' },
  retention_ms: nullableInteger,
  dead_retention_ms: nullableInteger,
  max_pending: nullableInteger,
} as const;

const configFields = Object.keys(configProperties);

/** A queue as GET, PUT and pause/resume show it: its name, its config and whether it is paused. */
export const queueViewSchema = {
  type: 'object',
  properties: { name: { type: 'string' }, ...configProperties, paused: { type: 'boolean' } },
  required: ['name', ...configFields, 'paused'],
  additionalProperties: false,
} as const;

/** A queue as GET /v1/queues lists it: its view and its timers now (queueFigures). */
export const listedQueueSchema = {
  type: 'object',
  properties: {
    ...queueViewSchema.properties,
    pending: { type: 'integer' },
    in_flight: { type: 'integer' },
    delivered_per_s: { type: 'number' },
  },
  required: [...queueViewSchema.required, 'pending', 'in_flight', 'delivered_per_s'],
  additionalProperties: false,
} as const;

export const queueListSchema = {
  type: 'object',
  properties: { queues: { type: 'array', items: listedQueueSchema } },
  required: ['queues'],
  additionalProperties: false,
} as const;

export const deletedSchema = {
  type: 'object',
  properties: { name: { type: 'string' }, deleted: { type: 'boolean' } },
  required: ['name', 'deleted'],
  additionalProperties: false,
} as const;

const noSuchQueue = (name: string): HttpProblem => new HttpProblem(httpErrorCodes.notFound, `no queue ${name}`);

interface NameParams {
  readonly name: string;
}

const viewBody = ({ name, config, paused }: QueueView): Record<string, unknown> => ({ name, ...config, paused });

export interface QueuesRoutesOptions extends RoutesOptions {
  /** The samples a queue's delivery rate is read from; without it the rate is 0. */
  readonly series?: StatsSeries;
}

export async function queuesRoutes(app: HttpServer, { engine, series }: QueuesRoutesOptions): Promise<void> {
  /**
   * A queue's timers now, waiting (pending, retrying, held; in memory and spilled to disk) and
   * being delivered, and its deliveries a second over the last minute: from counts kept, no
   * timer read.
   */
  const queueFigures = (view: QueueView): Record<string, unknown> => {
    const counts = engine.queueCounts(view.name);
    return { ...viewBody(view), pending: counts.waiting, in_flight: counts.inFlight, delivered_per_s: series?.deliveredPerSecond(view.name) ?? 0 };
  };

  app.put<{ Params: NameParams; Body: unknown }>('/v1/queues/:name', { schema: { response: { 200: queueViewSchema } } }, async (request) => {
    const { name } = request.params;
    await engine.setQueue(name, request.body);
    const view = engine.findQueueView(name);
    // A DELETE of it made durable in between: gone, as a GET would say.
    if (view === undefined) throw noSuchQueue(name);
    return viewBody(view);
  });

  app.get('/v1/queues', { schema: { response: { 200: queueListSchema } } }, async () => ({
    queues: engine.queues().map(queueFigures),
  }));

  app.get<{ Params: NameParams }>('/v1/queues/:name', { schema: { response: { 200: queueViewSchema } } }, async (request) => {
    const { name } = request.params;
    const view = engine.findQueueView(name);
    if (view === undefined) throw noSuchQueue(name);
    return viewBody(view);
  });

  for (const [action, paused] of [['pause', true], ['resume', false]] as const) {
    app.post<{ Params: NameParams }>(`/v1/queues/:name/${action}`, { schema: { response: { 200: queueViewSchema } } }, async (request) => {
      const { name } = request.params;
      const view = await engine.setQueuePaused(name, paused);
      if (view === undefined) throw noSuchQueue(name);
      return viewBody(view);
    });
  }

  app.delete<{ Params: NameParams }>('/v1/queues/:name', { schema: { response: { 200: deletedSchema } } }, async (request) => {
    const { name } = request.params;
    if (!(await engine.deleteQueue(name))) throw noSuchQueue(name);
    return { name, deleted: true };
  });
}
