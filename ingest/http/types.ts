// The types every route plugin is written against: the fastify instance the HTTP adapter builds
// (server.ts) and what each plugin is registered with. A leaf: it imports no route and no
// server, so routes and server.ts both import it and neither imports the other's values
// through it. Types only; no thread owns anything here.
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import type http2 from 'node:http2';
import type { Engine } from '../../engine/engine.ts';
import type { CleartextListener } from './listen/cleartext-listener.ts';

/**
 * fastify on the cleartext listener. `request.raw` is typed Http2ServerRequest, but on an
 * HTTP/1.1 connection it is an http.IncomingMessage (server.ts says why): routes keep to
 * fastify's request/reply API.
 */
export type HttpServer = FastifyInstance<CleartextListener, http2.Http2ServerRequest, http2.Http2ServerResponse, FastifyBaseLogger>;

/** What each route plugin is registered with. */
export interface RoutesOptions {
  /** The routes' engine, known only through its public API. */
  readonly engine: Engine;
}
