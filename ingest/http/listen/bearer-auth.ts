// Bearer tokens on the HTTP API: the hooks that apply the one check (ingest/auth/access.ts) to
// each request with its route's scope and queue (route-scopes.ts). When tokens are configured,
// every route but the health checks needs `authorization: Bearer <token>` (401 without a known
// one, 403 FORBIDDEN naming the scope or the queue it lacks); a path no route serves needs a
// known token before it is told so. The scope and a queue in the path or query are checked
// before the body is read (onRequest); a queue in the body or the timer's own once the body is
// parsed (preHandler); an add's rows by its route (timers.ts, through callerOf). Main thread.
//
// Also the rule for where the service may listen: a non-loopback address needs tokens unless
// the operator says --insecure.
import { BlockList, isIP } from 'node:net';
import { type Access, anonymous, type Caller, checkQueue } from '../../auth/access.ts';
import { errorCodes, FermataError } from '../../../engine/errors.ts';
import { accessOf, type RouteAccess } from '../route-scopes.ts';
import type { HttpServer } from '../types.ts';

/** Tokens shorter than this are refused at start-up: they could be guessed. */
export const tokenLengthMin = 16;

/** The HTTP/2 single-add path's question (h2-single-add.ts): may this request add to any queue? */
export interface BearerCheck {
  allows(path: string, authorization: string | undefined): boolean;
}

/** Write scope on every queue, or (with no tokens) anyone: the fast path takes only those; fastify answers the rest. */
export function bearerCheck(access: Access): BearerCheck {
  return {
    allows(_path, authorization) {
      const caller = access.table.caller(authorization);
      return caller !== undefined && caller.scopes.has('write') && caller.queues === undefined;
    },
  };
}

export interface AuthHooksOptions {
  readonly access: Access;
  /** The queue of the timer `id` names (undefined: no such timer); absent (cluster mode), a queue-limited token is refused on a timer's routes. */
  readonly queueOfTimer?: ((id: string) => Promise<string | undefined>) | undefined;
}

const callers = new WeakMap<object, Caller>();

/** What the queue checks read of a request. */
interface RequestParts {
  readonly method: string;
  readonly params: unknown;
  readonly query: unknown;
  readonly body: unknown;
  readonly routeOptions: { readonly url?: string | undefined };
}

/** The caller the auth hook found for `request` (anonymous when no tokens are configured). */
export function callerOf(request: { readonly raw: object }): Caller {
  return callers.get(request.raw) ?? anonymous;
}

/** Refuses to register a route missing from route-scopes.ts, and checks each request against its entry. */
export function installAuthHooks(app: HttpServer, options: AuthHooksOptions): void {
  const { access } = options;
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) {
      if (accessOf(method, route.url) === undefined) throw new Error(`route ${method} ${route.url} has no scope: add it to ingest/http/route-scopes.ts`);
    }
  });
  // Callback hooks, not async ones: every request passes here, and a promise each is not free.
  app.addHook('onRequest', (request, reply, done) => {
    const url = request.routeOptions.url;
    const route = url === undefined ? undefined : accessOf(request.method, url);
    const authorization = request.headers.authorization;
    if (route === undefined) {
      // No route serves it: a known token learns so, anyone else gets 401.
      if (access.table.caller(authorization) !== undefined) return done();
      // A 401 tells the client how to authenticate (RFC 6750).
      reply.header('www-authenticate', 'Bearer');
      return done(new FermataError(errorCodes.unauthorized, 'this request needs authorization: Bearer <token>'));
    }
    const scope = route.scope;
    if (scope === undefined) return done();
    try {
      const caller = access.authorize(authorization, scope);
      // Without tokens every caller is anonymous, which callerOf answers by itself.
      if (caller !== anonymous) callers.set(request.raw, caller);
      if (caller.queues !== undefined) checkEarlyQueue(caller, route, request);
    } catch (err) {
      if (err instanceof FermataError && err.code === errorCodes.unauthorized) reply.header('www-authenticate', 'Bearer');
      return done(err as Error);
    }
    done();
  });
  app.addHook('preHandler', (request, _reply, done) => {
    const caller = callers.get(request.raw);
    if (caller?.queues === undefined) return done();
    const route = accessOf(request.method, request.routeOptions.url ?? '');
    try {
      if (route?.queue === 'body') checkQueue(caller, requiredQueue(fieldOf(request.body, 'queue'), 'the body\'s "queue"', caller));
    } catch (err) {
      return done(err as Error);
    }
    if (route?.queue !== 'timer') return done();
    checkTimerQueue(caller, request, options.queueOfTimer).then(() => done(), done);
  });
}

function fieldOf(value: unknown, name: string): unknown {
  return typeof value === 'object' && value !== null ? (value as Record<string, unknown>)[name] : undefined;
}

/** A queue-limited token must name its queue where the route filters by one. */
function requiredQueue(value: unknown, where: string, caller: Caller): string {
  if (typeof value === 'string' && value !== '') return value;
  throw new FermataError(errorCodes.forbidden, `token "${caller.name}" is limited to queues (${[...(caller.queues ?? [])].map((name) => JSON.stringify(name)).join(', ')}): ${where} must name one of them`);
}

function checkEarlyQueue(caller: Caller, route: RouteAccess, request: RequestParts): void {
  switch (route.queue) {
    case 'param':
      return checkQueue(caller, String(fieldOf(request.params, 'name')));
    case 'query':
      return checkQueue(caller, requiredQueue(fieldOf(request.query, 'queue'), 'the "queue" query parameter', caller));
    case 'service':
      throw new FermataError(errorCodes.forbidden, `token "${caller.name}" is limited to queues; ${request.method} ${request.routeOptions.url ?? ''} acts on the whole service`);
    default:
      return;
  }
}

async function checkTimerQueue(caller: Caller, request: RequestParts, queueOfTimer: AuthHooksOptions['queueOfTimer']): Promise<void> {
  if (queueOfTimer === undefined) throw new FermataError(errorCodes.forbidden, `token "${caller.name}" is limited to queues, which a cluster node does not check on a single timer's routes`);
  const queue = await queueOfTimer(String(fieldOf(request.params, 'id')));
  // No such timer: the route answers 404 (a limited token learns no more than that).
  if (queue !== undefined) checkQueue(caller, queue);
  const moveTo = request.method === 'PATCH' ? fieldOf(request.body, 'queue') : undefined;
  if (typeof moveTo === 'string') checkQueue(caller, moveTo);
}

const loopback = new BlockList();
loopback.addSubnet('127.0.0.0', 8, 'ipv4');
loopback.addAddress('::1', 'ipv6');

export function isLoopbackHost(host: string): boolean {
  if (host === 'localhost') return true;
  const family = isIP(host);
  if (family === 4) return loopback.check(host, 'ipv4');
  if (family === 6) return loopback.check(host, 'ipv6') || loopback.check(host.replace(/^::ffff:/i, ''), 'ipv4');
  return false;
}

/** Why the service may not listen on `host` with these settings, or undefined when it may. */
export function listenRefusal(host: string, tokens: readonly unknown[], insecure: boolean): string | undefined {
  if (tokens.length > 0 || insecure || isLoopbackHost(host)) return undefined;
  return `listening on ${host}, which is not a loopback address, needs bearer tokens ("tokens" in the config file, or FERMATA_TOKENS); --insecure serves without them`;
}
