// The HTTP adapter: a fastify instance on the cleartext listener (HTTP/1.1 and h2c on one
// port), with the service's health routes. The timer and queue routes will register here; the
// engine knows nothing of this module.
//
// Why `http2: true` together with `serverFactory`: at run time fastify reads `http2` only to
// pick the server it creates itself (lib/server.js, getServerInstance), which `serverFactory`
// replaces, so the flag changes nothing on the wire. Its request handler is the one function
// fastify would hand to http.createServer or http2.createServer, and it detects HTTP/2 per
// request (`req.httpVersionMajor === 2`, lib/reply.js and lib/route.js), so one handler serves
// both kinds of request; test/integration/serve.test.ts proves it over both protocols. The
// flag does set fastify's types: `request.raw` is typed Http2ServerRequest. Routes must keep
// to fastify's request/reply API (or what both raw types share), because on an HTTP/1.1
// connection `request.raw` is an http.IncomingMessage.
import fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import type http2 from 'node:http2';
import type { FermataError } from '../../engine/errors.ts';
import { CleartextListener, type DualProtocolRequestHandler } from './cleartext-listener.ts';

/** What /readyz looks at: the durable log's poison (a failed write or fsync stops acknowledging). */
export interface LogHealth {
  readonly poisoned: FermataError | undefined;
}

export interface HttpServerOptions {
  /** fastify's own lines (5xx errors, broken responses) go here; see the level note below. */
  readonly logger: FastifyBaseLogger;
  readonly log: LogHealth;
}

export type HttpServer = FastifyInstance<CleartextListener, http2.Http2ServerRequest, http2.Http2ServerResponse, FastifyBaseLogger>;

const statusSchema = {
  type: 'object',
  properties: { status: { type: 'string' }, reason: { type: 'string' } },
  required: ['status'],
  additionalProperties: false,
} as const;

export function createHttpServer(options: HttpServerOptions): HttpServer {
  const app = fastify<CleartextListener>({
    http2: true,
    // fastify's handler accepts both request kinds (see the top of this file); its type names only the HTTP/2 one.
    serverFactory: (handler) => new CleartextListener(handler as DualProtocolRequestHandler),
    // Per-request lines ("incoming request", "request completed", 4xx) are info: at ingest
    // rates they would cost more than the requests. Warnings and errors still come through.
    loggerInstance: options.logger.child({}, { level: 'warn' }),
  });

  app.get('/healthz', { schema: { response: { 200: statusSchema } } }, healthz);

  const { log } = options;
  app.get('/readyz', { schema: { response: { 200: statusSchema, 503: statusSchema } } }, (_request, reply) => {
    const poison = log.poisoned;
    if (poison === undefined) return reply.send({ status: 'ready' });
    return reply.code(503).send({ status: 'not-ready', reason: poison.message });
  });
  return app;
}

/** The process serves: the answer itself is the check. */
function healthz(): { status: 'ok' } {
  return { status: 'ok' };
}
