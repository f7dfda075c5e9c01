// Records the audited routes' answered actions (route-scopes.ts names them) in the audit trail
// (ingest/auth/audit.ts): once a 2xx is about to be sent, with the caller's token name, what the
// path, query and body named, and how many timers the answer says were touched. A refused
// request is no action and is not recorded. Main thread; only admin routes pay for it.
import type { AuditTrail } from '../auth/audit.ts';
import { callerOf } from './listen/bearer-auth.ts';
import { accessOf } from './route-scopes.ts';
import type { HttpServer } from './types.ts';

/** Body fields that say what a bulk action or a clock move acted on (never a payload or headers). */
const namedFields = ['queue', 'key_prefix', 'due_after', 'due_before', 'advance_ms', 'set'] as const;

export function installAuditHook(app: HttpServer, trail: AuditTrail): void {
  app.addHook('onSend', async (request, reply, payload) => {
    const action = accessOf(request.method, request.routeOptions.url ?? '')?.audit;
    if (action === undefined || reply.statusCode < 200 || reply.statusCode > 299) return payload;
    const what: Record<string, unknown> = { ...(request.params as Record<string, unknown>) };
    const body = request.body;
    if (typeof body === 'object' && body !== null) {
      for (const field of namedFields) if (field in body) what[field] = (body as Record<string, unknown>)[field];
      const ids = (body as { ids?: unknown }).ids;
      if (Array.isArray(ids)) what.ids = ids.length;
    }
    trail.record({ action, who: callerOf(request).name, what, count: countIn(payload) });
    return payload;
  });
}

/** The answer's "cancelled" count (bulk cancel, purge), when it has one. */
function countIn(payload: unknown): number | undefined {
  if (typeof payload !== 'string' || !payload.includes('"cancelled"')) return undefined;
  const cancelled: unknown = (JSON.parse(payload) as { cancelled?: unknown }).cancelled;
  return typeof cancelled === 'number' ? cancelled : undefined;
}
