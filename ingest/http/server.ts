// The HTTP adapter: a fastify instance on the cleartext listener (HTTP/1.1 and h2c on one
// port, and the optional TLS port it carries), with the health routes, the v1 API, /metrics and
// /openapi.json as encapsulated plugins (routes/). The engine knows nothing of this module; this
// module knows the engine only through its public API. Every error leaves through one handler
// (error-map.ts). Routes import their types from types.ts, never this file: nothing imports
// back into the server. Built and served on the main thread.
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
import fastify, { type FastifyBaseLogger, type FastifyReply, type FastifyRequest, type RouteGenericInterface } from 'fastify';
import type http2 from 'node:http2';
import type { Registry } from 'prom-client';
import type { Engine } from '../../engine/engine.ts';
import { errorCodes, FermataError } from '../../engine/errors.ts';
import { ingestLimits } from '../../engine/limits.ts';
import { errorAnswer } from './error-map.ts';
import { bearerCheck } from './listen/bearer-auth.ts';
import { CleartextListener, type DualProtocolRequestHandler } from './listen/cleartext-listener.ts';
import type { DiskSpaceCheck } from './listen/disk-space.ts';
import { PeerGuard } from './listen/peer-guard.ts';
import type { TlsCredentials } from './listen/tls-listener.ts';
import { deadRoutes } from './routes/dead.ts';
import { healthRoutes } from './routes/health.ts';
import { metricsRoutes, peerGuardMetrics } from './routes/metrics.ts';
import { openapiRoutes } from './routes/openapi.ts';
import { queuesRoutes } from './routes/queues.ts';
import { statsRoutes } from './routes/stats.ts';
import { timersRoutes } from './routes/timers.ts';
import type { HttpServer } from './types.ts';

export type { HttpServer } from './types.ts';

export interface HttpServerOptions {
  /** fastify's own lines (5xx errors, broken responses) go here; see the level note below. */
  readonly logger: FastifyBaseLogger;
  /** The routes' engine; /readyz looks at its log's poison (a failed write or fsync stops acknowledging). */
  readonly engine: Engine;
  /** Bearer tokens every route but the health checks requires; none = no authentication. */
  readonly tokens?: readonly string[];
  /** When given, /readyz is also red while the data directory's file system is nearly full. */
  readonly disk?: DiskSpaceCheck;
  /** When given, `app.server.tls` is a TLS port (ALPN h2 and http/1.1) on the same handler; the caller makes it listen. */
  readonly tls?: TlsCredentials;
  /** Registers more metrics for GET /metrics (the dispatcher's), read at scrape time like the engine's. */
  readonly metrics?: (registry: Registry) => void;
  /** Refuses penalised peers on both ports (listen/peer-guard.ts); made here, logging to `logger`, when not given (a test gives one to read its table). */
  readonly peerGuard?: PeerGuard;
}

type HttpRequest = FastifyRequest<RouteGenericInterface, CleartextListener, http2.Http2ServerRequest>;
type HttpReply = FastifyReply<RouteGenericInterface, CleartextListener, http2.Http2ServerRequest, http2.Http2ServerResponse>;

export function createHttpServer(options: HttpServerOptions): HttpServer {
  const guard = options.peerGuard ?? new PeerGuard({ logger: options.logger });
  const app = fastify<CleartextListener>({
    http2: true,
    // fastify's handler accepts both request kinds (see the top of this file); its type names only the HTTP/2 one.
    serverFactory: (handler) => new CleartextListener(handler as DualProtocolRequestHandler, guard, options.tls),
    // Per-request lines ("incoming request", "request completed", 4xx) are info: at ingest
    // rates they would cost more than the requests. Warnings and errors still come through.
    loggerInstance: options.logger.child({}, { level: 'warn' }),
    // The limit of fastify's own JSON parser; the Arrow and NDJSON parsers set their own.
    bodyLimit: ingestLimits.jsonBodyBytesMax,
  });
  // Only JSON bodies at the root: a text/plain one is answered 415 like any other unknown type.
  app.removeContentTypeParser('text/plain');
  app.setErrorHandler(answerError);

  const tokens = options.tokens ?? [];
  if (tokens.length > 0) {
    const check = bearerCheck(tokens);
    app.addHook('onRequest', (request, reply, done) => {
      if (check.allows(request.url.split('?')[0] ?? '', request.headers.authorization)) return done();
      reply.header('www-authenticate', 'Bearer');
      done(new FermataError(errorCodes.unauthorized, 'this request needs authorization: Bearer <token>'));
    });
  }

  const { engine, disk } = options;
  void app.register(healthRoutes, { engine, disk });
  void app.register(timersRoutes, { engine });
  void app.register(queuesRoutes, { engine });
  void app.register(deadRoutes, { engine });
  void app.register(statsRoutes, { engine });
  const metrics = options.metrics;
  void app.register(metricsRoutes, {
    engine,
    metrics: (registry) => {
      peerGuardMetrics(registry, guard);
      metrics?.(registry);
    },
  });
  void app.register(openapiRoutes);
  return app;
}

/** fastify's error handler for every route: fermata's JSON error shape, status and Retry-After (error-map.ts). */
function answerError(error: unknown, request: HttpRequest, reply: HttpReply): HttpReply {
  const answer = errorAnswer(error, request.headers['content-type']);
  if (answer.unexpected) request.log.error({ err: error }, 'unexpected error answering a request');
  // fastify asks an HTTP/1.1 client to close after a body it did not read; HTTP/2 has no such header.
  if (request.raw.httpVersionMajor === 2) reply.removeHeader('connection');
  if (answer.retryAfterSeconds !== undefined) reply.header('retry-after', String(answer.retryAfterSeconds));
  return reply.code(answer.status).send(answer.body);
}
