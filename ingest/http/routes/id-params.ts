// The path parameter of the routes that name one timer (`/v1/timers/:id`, `/v1/dead/:id`):
// its type and its fastify schema, defined once. Main thread.

export interface IdParams {
  readonly id: string;
}

export const idParamsSchema = {
  type: 'object',
  properties: { id: { type: 'string' } },
  required: ['id'],
} as const;
