// The HTTP adapter: a fastify instance on the cleartext listener (HTTP/1.1 and h2c on one
// port, and the optional TLS port it carries), with the health routes, the v1 API, /metrics and
// /openapi.json as encapsulated plugins (routes/). The engine knows nothing of this module; this
// module knows the engine only through its public API. Every error leaves through one handler
// (error-map.ts), and so does fastify's own: a body it cannot parse (JSON bodies are parsed here,
// to name the mistake: body/json-hints.ts), a URL it cannot decode, a path or method no route
// serves (404 ROUTE_NOT_FOUND, or 405 METHOD_NOT_ALLOWED with `Allow`: route-methods.ts).
// One route has a second way in: a plain one-timer JSON `POST /v1/timers` over HTTP/2 is
// answered on the raw stream before fastify sees it (h2-single-add.ts, decision 0013), with
// this server's JSON parser, bearer check and admit coalescer and the route's own answer;
// so is a plain `PATCH /v1/timers/{id}` (h2-patch.ts; on a cluster node, of a partition it owns).
// Routes import their types from types.ts, never this file: nothing imports back into the
// server. In cluster mode (`cluster` instead of `engine`) there is no single engine: the timer
// routes are the cluster front's (cluster/front.ts) and health, /metrics, queues and schedules
// the node's (cluster/node-routes.ts); /v1/clock is not served and the HTTP/2 fast paths route as the front does.
// Built and served on the main thread.
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
import fastify, { type FastifyBaseLogger, type FastifyInstance, type FastifyReply, type FastifyRequest, type RouteGenericInterface } from 'fastify';
import type http2 from 'node:http2';
import type net from 'node:net';
import type { Registry } from 'prom-client';
import { AdmitCoalescer } from '../../engine/admit-coalescer.ts';
import type { Engine } from '../../engine/engine.ts';
import { errorCodes, FermataError } from '../../engine/errors.ts';
import { ingestLimits, readinessLimits } from '../../engine/limits.ts';
import { http } from '../../runtime/node-http.ts';
import { jsonBodyProblem } from './body/json-hints.ts';
import { LazySchemas } from './lazy-schemas.ts';
import { clientErrorAnswer, errorAnswer, httpErrorCodes, HttpProblem } from './error-map.ts';
import { H2SingleAdd } from './h2-single-add.ts';
import { H2Patch, singleEngine } from './h2-patch.ts';
import type { LineAdmitter } from './timer-stream.ts';
import { clusterFront, type ClusterFrontOptions } from './cluster/front.ts';
import { clusterNodeRoutes, type NodeDirectory } from './cluster/node-routes.ts';
import { clusterPatchTimers } from './cluster/raw-patch.ts';
import { Access, fullGrant } from '../auth/access.ts';
import { AuditTrail } from '../auth/audit.ts';
import { installAuditHook } from './audit-hook.ts';
import { bearerCheck, installAuthHooks } from './listen/bearer-auth.ts';
import { adminReloadRoutes, type ReloadAnswer } from './routes/admin-reload.ts';
import { CleartextListener, type DualProtocolRequestHandler } from './listen/cleartext-listener.ts';
import { DataDirSize } from './listen/data-dir-size.ts';
import type { DiskSpaceCheck } from './listen/disk-space.ts';
import { PeerGuard } from './listen/peer-guard.ts';
import { mediaTypes } from './media-types.ts';
import { RouteMethods } from './route-methods.ts';
import type { TlsCredentials } from './listen/tls-listener.ts';
import { clockRoutes } from './routes/clock.ts';
import { deadRoutes } from './routes/dead.ts';
import { deadRetryRoutes } from './routes/dead-retry.ts';
import { healthRoutes } from './routes/health.ts';
import { limitsRoutes } from './routes/limits.ts';
import { metricsRoutes } from './routes/metrics.ts';
import { openapiRoutes } from './routes/openapi-route.ts';
import { queuesRoutes } from './routes/queues.ts';
import { schedulesRoutes } from './routes/schedules.ts';
import { statsRoutes } from './routes/stats.ts';
import { engineSeriesSources, statsSeriesRoutes } from './routes/stats-series.ts';
import { dueHistogramRoutes } from './routes/due-histogram.ts';
import { eventsRoutes } from './routes/events.ts';
import { type SeriesSources, StatsSeries } from '../../engine/stats-series.ts';
import { timerListRoutes } from './routes/timer-list.ts';
import { timerPatchRoutes } from './routes/timer-patch.ts';
import { timersRoutes } from './routes/timers.ts';
import { uiRoutes } from './routes/ui.ts';
import type { HttpServer } from './types.ts';

export type { HttpServer } from './types.ts';

interface HttpServerCommonOptions {
  /** fastify's own lines (5xx errors, broken responses) go here; see the level note below. */
  readonly logger: FastifyBaseLogger;
  /** Bearer tokens every route but the health checks requires, each with every scope; none = no authentication. */
  readonly tokens?: readonly string[];
  /** The tokens in force with their scopes and queues (reloadable: ingest/auth/access.ts); wins over `tokens`. */
  readonly access?: Access;
  /** POST /v1/admin/reload: rereads the settings a running service may change (cli/serve/reload.ts); absent, it answers RELOAD_FAILED (nothing to reread). */
  readonly reload?: (who: string) => Promise<ReloadAnswer>;
  /** Where administrative actions are logged and counted (ingest/auth/audit.ts); made here, logging to `logger`, when not given. */
  readonly audit?: AuditTrail;
  /** When given, `app.server.tls` is a TLS port (ALPN h2 and http/1.1) on the same handler; the caller makes it listen. */
  readonly tls?: TlsCredentials;
  /** Registers more metrics for GET /metrics (the dispatcher's), read at scrape time like the engine's; called at the first scrape. */
  readonly metrics?: (registry: Registry) => void | Promise<void>;
  /** Refuses penalised peers on both ports (listen/peer-guard.ts); made here, logging to `logger`, when not given (a test gives one to read its table). */
  readonly peerGuard?: PeerGuard;
  /** Compiles the routes' schemas at first use and after listening (lazy-schemas.ts); made here when not given (a test gives one to see them all compiled). */
  readonly schemas?: LazySchemas;
}

/** Cluster mode: the node's partitions instead of one engine (cluster/front.ts, cluster/node-routes.ts). */
export interface ClusterServerOptions extends ClusterFrontOptions {
  readonly directory: NodeDirectory;
  /** Why /readyz is red (not joined yet, the cluster database out of reach), or undefined when it is green. */
  readonly notReady?: () => Promise<string | undefined>;
}

/**
 * One engine (a single node: /readyz looks at its log's poison, a failed write or fsync stops
 * acknowledging), or in cluster mode none: the timer routes act on the partitions' engines through
 * the cluster front, and health, stats and /metrics come from the node's directory.
 */
export type HttpServerOptions = HttpServerCommonOptions & (SingleNodeOptions | { readonly engine?: undefined; readonly cluster: ClusterServerOptions });

interface SingleNodeOptions {
  readonly engine: Engine;
  readonly cluster?: undefined;
  /** When given, /readyz is also red while the data directory's file system is nearly full. */
  readonly disk?: DiskSpaceCheck;
  /** When given, /readyz is also red until it returns true (the dispatcher's warm-up after a start). */
  readonly warm?: () => boolean;
  /** The counters GET /v1/stats/series samples (the dispatcher's deliveries too); the engine's adds alone when not given. */
  readonly seriesSources?: SeriesSources;
  /** The single adds' coalescer, shared with the gRPC port's (one record for both in a turn); made here when not given. */
  readonly coalescer?: AdmitCoalescer;
}

type HttpRequest = FastifyRequest<RouteGenericInterface, CleartextListener, http2.Http2ServerRequest>;
type HttpReply = FastifyReply<RouteGenericInterface, CleartextListener, http2.Http2ServerRequest, http2.Http2ServerResponse>;

export function createHttpServer(options: HttpServerOptions): HttpServer {
  const guard = options.peerGuard ?? new PeerGuard({ logger: options.logger });
  const schemas = options.schemas ?? new LazySchemas();
  const app = fastify<CleartextListener>({
    http2: true,
    // fastify's handler accepts both request kinds (see the top of this file); its type names only the HTTP/2 one.
    serverFactory: (handler) => new CleartextListener(handler as DualProtocolRequestHandler, guard, options.tls),
    // Per-request lines ("incoming request", "request completed", 4xx) are info: at ingest
    // rates they would cost more than the requests. Warnings and errors still come through.
    loggerInstance: options.logger.child({}, { level: 'warn' }),
    // The limit of fastify's own JSON parser; the Arrow and NDJSON parsers set their own.
    bodyLimit: ingestLimits.jsonBodyBytesMax,
    // A URL that does not decode (`%zz`), a malformed HTTP/1.1 request: fastify's own JSON body otherwise.
    frameworkErrors: answerError,
    clientErrorHandler: answerClientError,
    // Each route's schemas are compiled at its first request or, once listening, in idle turns.
    schemaController: schemas.controller,
  });
  app.addHook('onListen', (done) => {
    schemas.warmUp();
    done();
  });
  // Only JSON bodies at the root: a text/plain one is answered 415 like any other unknown type.
  app.removeContentTypeParser('text/plain');
  const jsonParser = new JsonBodyParser(app.getDefaultJsonParser('error', 'error'));
  app.removeContentTypeParser(mediaTypes.json);
  app.addContentTypeParser(mediaTypes.json, { parseAs: 'string' }, (request, body, done) => jsonParser.parse(request, String(body), done));
  app.setErrorHandler(answerError);
  const routes = new RouteMethods();
  const turnAwayStaticPaths = staticPathGuard(routes);
  app.addHook('onRoute', (route) => {
    routes.add(route.url, route.method);
    if (route.url.includes('/:')) route.onRequest = [...[route.onRequest ?? []].flat(), turnAwayStaticPaths];
  });
  app.setNotFoundHandler((request, reply) => answerNoRoute(routes, request, reply));

  const access = options.access ?? new Access((options.tokens ?? []).map(fullGrant));
  installAuthHooks(app, { access, queueOfTimer: options.engine === undefined ? undefined : async (id) => (await options.engine.lookup(id))?.queue });
  const audit = options.audit ?? new AuditTrail(options.logger);
  installAuditHook(app, audit);
  void app.register(adminReloadRoutes, { reload: options.reload ?? noReload });
  const moreMetrics = options.metrics;
  const metrics = async (registry: Registry): Promise<void> => {
    (await import('../auth/audit-metric.ts')).registerAuditMetric(registry, audit);
    await moreMetrics?.(registry);
  };

  if (options.cluster !== undefined) {
    // Cluster mode: timers, lists, dead letters and stats act on the partitions' engines, the rest on the node (ingest/http/cluster/).
    const { notReady, ...front } = options.cluster;
    // The single add's raw HTTP/2 path, its timer routed as the front routes it; PATCH's, for a timer of a partition owned here (cluster/raw-patch.ts).
    const fastSingleAdd = (admitterFor: (headers: http2.IncomingHttpHeaders) => LineAdmitter | undefined): void => {
      const singleAdd = new H2SingleAdd({ admitter: admitterFor, clock: front.clock, parseJson: (text) => jsonParser.value(text), bearer: bearerCheck(access), logger: app.log });
      const patch = new H2Patch({ timers: clusterPatchTimers(front.directory), parseJson: (text) => jsonParser.value(text), bearer: bearerCheck(access), logger: app.log });
      app.server.takeStreams({ take: (stream, headers) => singleAdd.take(stream, headers) || patch.take(stream, headers) });
    };
    void app.register(clusterFront, { ...front, fastSingleAdd });
    void app.register(clusterNodeRoutes, { directory: front.directory, notReady, guard, metrics });
    void app.register(limitsRoutes);
    void app.register(openapiRoutes);
    void app.register(uiRoutes);
    return app;
  }
  const { engine, disk, warm } = options;
  // One coalescer for every kind of single add, so that those read in one turn share a record.
  const coalescer = options.coalescer ?? new AdmitCoalescer(engine);
  const singleAdd = new H2SingleAdd({ admitter: coalescer, clock: engine.clock, parseJson: (text) => jsonParser.value(text), bearer: bearerCheck(access), logger: app.log });
  // PATCH /v1/timers/{id} has a raw HTTP/2 path too (h2-patch.ts); each taker looks at the method first.
  const patch = new H2Patch({ timers: singleEngine(engine), parseJson: (text) => jsonParser.value(text), bearer: bearerCheck(access), logger: app.log });
  app.server.takeStreams({ take: (stream, headers) => singleAdd.take(stream, headers) || patch.take(stream, headers) });
  void app.register(healthRoutes, { engine, disk, warm });
  // What /v1/stats shows of the data directory's disk: its files' bytes and the free space read for /readyz.
  const statsDisk = disk === undefined ? undefined : { check: disk, size: new DataDirSize({ dir: disk.dir, measureIntervalMs: readinessLimits.dataDirMeasureIntervalMs }) };
  void app.register(timersRoutes, { engine, coalescer });
  void app.register(timerPatchRoutes, { engine });
  // One ring of samples a life of the server, taken from its start and stopped with it.
  const series = new StatsSeries(options.seriesSources ?? engineSeriesSources(engine));
  series.start();
  app.addHook('onClose', (_app, done) => {
    series.stop();
    done();
  });
  void app.register(queuesRoutes, { engine, series });
  void app.register(deadRoutes, { engine });
  void app.register(timerListRoutes, { engine });
  void app.register(statsRoutes, { engine, disk: statsDisk });
  void app.register(statsSeriesRoutes, { engine, series });
  void app.register(dueHistogramRoutes, { engine });
  void app.register(eventsRoutes, { engine, series, disk: statsDisk });
  void app.register(deadRetryRoutes, { engine });
  void app.register(clockRoutes, { engine });
  void app.register(schedulesRoutes, { engine });
  void app.register(metricsRoutes, { engine, guard, metrics });
  void app.register(limitsRoutes);
  void app.register(openapiRoutes);
  void app.register(uiRoutes);
  return app;
}

/** The reload of a server built without settings to reread (a test's, an embedding's). */
async function noReload(): Promise<never> {
  throw new FermataError(errorCodes.reloadFailed, 'this server was started without settings it can read again: nothing to reload');
}

type DefaultJsonParser = ReturnType<FastifyInstance['getDefaultJsonParser']>;
/** fastify's `done` of a body parser (its type is not exported). */
type ParserDone = (err: Error | null, body?: unknown) => void;

/**
 * fastify's own JSON parser (with its guard against `__proto__` keys), whose refusal of a body
 * that is not JSON is restated to say where it fails and what the text looks like
 * (body/json-hints.ts). fastify's parser answers synchronously (a try around the parse), so its
 * answer is caught in two fields instead of a closure per request: single adds come this way,
 * through fastify or on the raw HTTP/2 stream.
 */
class JsonBodyParser {
  readonly #parse: DefaultJsonParser;
  #error: Error | null = null;
  #value: unknown = undefined;
  readonly #keep: ParserDone = (err, value) => {
    this.#error = err;
    this.#value = value;
  };

  constructor(parse: DefaultJsonParser) {
    this.#parse = parse;
  }

  parse(_request: HttpRequest, text: string, done: ParserDone): void {
    let value: unknown;
    try {
      value = this.value(text);
    } catch (err) {
      return done(err as Error, undefined);
    }
    done(null, value);
  }

  /** The body's value; throws the error fastify's route answers for a body it refuses (the HTTP/2 fast path's parse: h2-single-add.ts). */
  value(text: string): unknown {
    this.#error = null;
    this.#value = undefined;
    // Typed for fastify's default server; it reads only the body, so it is given no request.
    (this.#parse as (request: unknown, text: string, done: ParserDone) => void)(undefined, text, this.#keep);
    const error = this.#error;
    const value = this.#value;
    this.#error = null;
    this.#value = undefined;
    // fastify's text says only "not valid JSON".
    if (error !== null && (error as { code?: unknown }).code === 'FST_ERR_CTP_INVALID_JSON_BODY') throw new HttpProblem(httpErrorCodes.bodyInvalid, jsonBodyProblem(text));
    if (error !== null) throw error;
    return value;
  }
}

/** A request no route takes: 405 with `Allow` when its path is served by other methods, else 404. */
function answerNoRoute(routes: RouteMethods, request: HttpRequest, reply: HttpReply): HttpReply {
  const path = request.url.split('?')[0] ?? '';
  const allowed = routes.methodsAt(path);
  if (allowed.length === 0) return answerError(new HttpProblem(httpErrorCodes.routeNotFound, `no route serves ${path}: GET /openapi.json lists the routes`), request, reply);
  reply.header('allow', allowed.join(', '));
  return answerError(new HttpProblem(httpErrorCodes.methodNotAllowed, `${path} does not serve ${request.method}: it serves ${allowed.join(', ')}`), request, reply);
}

/**
 * A `:param` route's onRequest hook: a request for a static route's path (GET /v1/timers/cancel,
 * which fastify gives GET /v1/timers/:id) is answered as that path's miss, 405 with its methods.
 */
function staticPathGuard(routes: RouteMethods): (request: HttpRequest, reply: HttpReply, done: () => void) => void {
  return (request, reply, done) => {
    const query = request.url.indexOf('?');
    if (routes.isStaticPath(query === -1 ? request.url : request.url.slice(0, query))) answerNoRoute(routes, request, reply);
    else done();
  };
}

/**
 * A request node's HTTP/1.1 parser refused (fastify's default handler's statuses and its
 * conduct: nothing for a reset connection, then the answer if the socket still takes it, then
 * close), in the one error shape.
 */
function answerClientError(err: Error & { code?: string }, socket: net.Socket): void {
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  const answer = clientErrorAnswer(err.code);
  const body = JSON.stringify(answer.body);
  if (socket.writable) {
    socket.write(`HTTP/1.1 ${answer.status} ${http.STATUS_CODES[answer.status] ?? ''}\r\nContent-Length: ${Buffer.byteLength(body)}\r\nContent-Type: application/json; charset=utf-8\r\nConnection: close\r\n\r\n${body}`);
  }
  socket.destroy(err);
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
