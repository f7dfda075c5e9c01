// Every HTTP route's scope and the queue it acts on, in one table: the server's onRoute hook
// refuses to register a route missing from it (a new route cannot ship unguarded), and the auth
// hook (listen/bearer-auth.ts) reads it per request, and the OpenAPI document states each
// operation's scope from it (routes/openapi-access.ts). HEAD is answered as its GET. Constant
// data, read on the main thread.
//
//   queue rule   where the queue is, for a token limited to queues
//   param        the `:name` path parameter
//   query        the `queue` query parameter; a limited token must give one of its queues
//   body         the JSON body's `queue`; a limited token must give one of its queues
//   timer        the timer `:id` names (looked up); PATCH also the body's new `queue`
//   rows         every row of the add (the route checks them: timers.ts)
//   any          none: a read that shows no queue's timers (counts, queue settings, the API)
//   service      none: a limited token is refused (the clock, schedules, reload, the add stream)
//
// `audit` names the action an answered 2xx is logged and counted as (audit-hook.ts); a reload
// records itself (cli/serve/reload.ts), so a failed one and SIGHUP's are told the same way.
import type { Scope } from '../auth/access.ts';

export type QueueRule = 'param' | 'query' | 'body' | 'timer' | 'rows' | 'any' | 'service';

export interface RouteAccess {
  /** Undefined: open to all (the health checks). */
  readonly scope: Scope | undefined;
  readonly queue: QueueRule;
  /** The audit trail's name for the action, when the route is one it records. */
  readonly audit?: string;
}

const open: RouteAccess = { scope: undefined, queue: 'any' };
const read = (queue: QueueRule): RouteAccess => ({ scope: 'read', queue });
const write = (queue: QueueRule): RouteAccess => ({ scope: 'write', queue });
const admin = (queue: QueueRule, audit?: string): RouteAccess => ({ scope: 'admin', queue, ...(audit === undefined ? {} : { audit }) });

/** "METHOD /url" as fastify registers it → its access. */
export const routeAccess: ReadonlyMap<string, RouteAccess> = new Map([
  ['GET /healthz', open],
  // The dashboard's page and its hashed files: no data in them (routes/ui.ts); the page asks for a token.
  ['GET /ui', open],
  ['GET /ui/assets/:file', open],
  ['GET /readyz', open],
  ['GET /openapi.json', read('any')],
  ['GET /metrics', read('any')],
  ['GET /v1/stats', read('any')],
  ['GET /v1/stats/series', read('any')],
  ['GET /v1/stats/due-histogram', read('any')],
  // The counters, and a watched timer's changes whatever its queue: not for a queue-limited token.
  ['GET /v1/events', read('service')],
  // Open: a client holding only a write token splits its batches at these; they are no one's data.
  ['GET /v1/limits', open],
  ['GET /v1/cluster', read('any')],
  ['GET /v1/clock', read('any')],
  ['GET /v1/queues', read('any')],
  ['GET /v1/queues/:name', read('param')],
  ['GET /v1/schedules', read('any')],
  ['GET /v1/schedules/:name', read('any')],
  ['GET /v1/timers', read('query')],
  ['GET /v1/timers/:id', read('timer')],
  ['GET /v1/dead', read('query')],
  ['POST /v1/timers', write('rows')],
  ['POST /v1/timers/stream', write('service')],
  ['DELETE /v1/timers/:id', write('timer')],
  ['PATCH /v1/timers/:id', write('timer')],
  ['PUT /v1/queues/:name', admin('param', 'queue_put')],
  ['DELETE /v1/queues/:name', admin('param', 'queue_delete')],
  ['POST /v1/queues/:name/pause', admin('param', 'pause')],
  ['POST /v1/queues/:name/resume', admin('param', 'resume')],
  ['DELETE /v1/queues/:name/timers', admin('param', 'purge')],
  ['POST /v1/timers/cancel', admin('body', 'bulk_cancel')],
  ['POST /v1/dead/retry', admin('body', 'redrive_all')],
  ['POST /v1/dead/:id/retry', admin('timer', 'redrive')],
  ['DELETE /v1/dead/:id', admin('timer', 'dead_discard')],
  ['PUT /v1/schedules/:name', admin('service', 'schedule_put')],
  ['DELETE /v1/schedules/:name', admin('service', 'schedule_delete')],
  ['POST /v1/schedules/:name/pause', admin('service', 'schedule_pause')],
  ['POST /v1/schedules/:name/resume', admin('service', 'schedule_resume')],
  ['POST /v1/clock', admin('service', 'clock_move')],
  ['POST /v1/admin/reload', admin('service')],
  // bench/noop-server.ts's ceiling route (the ingest benchmark's); no fermata server registers it.
  ['POST /noop', write('any')],
]);

/** The access of a route as registered (`method` may be a list: fastify's `route.method`); undefined when the table lacks it. */
export function accessOf(method: string, url: string): RouteAccess | undefined {
  return routeAccess.get(`${method === 'HEAD' ? 'GET' : method} ${url}`);
}
