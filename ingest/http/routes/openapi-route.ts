// GET /openapi.json: the OpenAPI document (openapi.ts) as JSON text. The document is imported and
// serialized at the first request, not when the server is built: a start that is not asked for
// it does not build it. Requests that meet the first one wait for the same text. Main thread.
import type { HttpServer } from '../types.ts';

export async function openapiRoutes(app: HttpServer): Promise<void> {
  let documentText: Promise<string> | undefined;
  app.get('/openapi.json', async (_request, reply) => {
    documentText ??= import('./openapi.ts').then(({ openApiDocument }) => JSON.stringify(openApiDocument));
    return reply.type('application/json; charset=utf-8').send(await documentText);
  });
}
