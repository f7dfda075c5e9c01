// POST /v1/admin/reload (admin scope): rereads what a running service may change without a
// restart (tokens, signing secrets, the dispatch allow-list: cli/serve/reload.ts) from the config
// file and the environment, as SIGHUP does. 200 {"reloaded": true, "changed": [...]} once the new
// settings are in force; a reload that fails changes nothing and answers 422 RELOAD_FAILED
// saying why. Main thread.
import { callerOf } from '../listen/bearer-auth.ts';
import type { HttpServer } from '../types.ts';

export interface ReloadAnswer {
  readonly reloaded: true;
  /** The settings whose values changed ("tokens", "signing_secrets", "queue_signing_secrets", "allow", "readiness.disk_free_bytes_min"). */
  readonly changed: readonly string[];
}

export interface AdminReloadOptions {
  /** Applies the settings as they are now (`who`: the caller's token name, for the audit trail), or throws a FermataError RELOAD_FAILED (the old ones stay). */
  readonly reload: (who: string) => Promise<ReloadAnswer>;
}

const reloadSchema = {
  type: 'object',
  properties: { reloaded: { type: 'boolean' }, changed: { type: 'array', items: { type: 'string' } } },
  required: ['reloaded', 'changed'],
  additionalProperties: false,
} as const;

export async function adminReloadRoutes(app: HttpServer, { reload }: AdminReloadOptions): Promise<void> {
  app.post('/v1/admin/reload', { schema: { response: { 200: reloadSchema } } }, async (request) => reload(callerOf(request).name));
}
