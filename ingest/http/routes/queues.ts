// /v1/queues: a queue's retry policy and flow limits. PUT replaces a queue's whole config
// (absent fields take their defaults) and answers once the QUEUE record is durable; GET lists
// every queue that was configured or has held a timer, GET /{name} answers one (404 unknown);
// DELETE /{name} deletes one once its QUEUE record is durable (409 QUEUE_NOT_EMPTY with the
// count while timers wait in it, 409 QUEUE_PROTECTED for `default`). Validation is the
// engine's (engine/queues.ts): a bad name or field is QUEUE_INVALID naming it, a 400.
import type { QueueConfig } from '../../../engine/queues.ts';
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
} as const;

const configFields = Object.keys(configProperties);

const configSchema = {
  type: 'object',
  properties: configProperties,
  required: configFields,
  additionalProperties: false,
} as const;

const namedConfigSchema = {
  type: 'object',
  properties: { name: { type: 'string' }, ...configProperties },
  required: ['name', ...configFields],
  additionalProperties: false,
} as const;

const queueListSchema = {
  type: 'object',
  properties: { queues: { type: 'array', items: namedConfigSchema } },
  required: ['queues'],
  additionalProperties: false,
} as const;

const deletedSchema = {
  type: 'object',
  properties: { name: { type: 'string' }, deleted: { type: 'boolean' } },
  required: ['name', 'deleted'],
  additionalProperties: false,
} as const;

const noSuchQueue = (name: string): HttpProblem => new HttpProblem(httpErrorCodes.notFound, `no queue ${name}`);

interface NameParams {
  readonly name: string;
}

export async function queuesRoutes(app: HttpServer, { engine }: RoutesOptions): Promise<void> {
  app.put<{ Params: NameParams; Body: unknown }>('/v1/queues/:name', { schema: { response: { 200: configSchema } } }, async (request): Promise<QueueConfig> => {
    return engine.setQueue(request.params.name, request.body);
  });

  app.get('/v1/queues', { schema: { response: { 200: queueListSchema } } }, async () => ({
    queues: engine.queues().map(({ name, config }) => ({ name, ...config })),
  }));

  app.get<{ Params: NameParams }>('/v1/queues/:name', { schema: { response: { 200: namedConfigSchema } } }, async (request) => {
    const { name } = request.params;
    const config = engine.findQueue(name);
    if (config === undefined) throw noSuchQueue(name);
    return { name, ...config };
  });

  app.delete<{ Params: NameParams }>('/v1/queues/:name', { schema: { response: { 200: deletedSchema } } }, async (request) => {
    const { name } = request.params;
    if (!(await engine.deleteQueue(name))) throw noSuchQueue(name);
    return { name, deleted: true };
  });
}
