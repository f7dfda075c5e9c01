// The OpenAPI side of scoped tokens (ingest/auth/access.ts): each guarded operation's scope, read
// from route-scopes.ts (the table the server enforces), stated in its description and with its
// 403 FORBIDDEN answer; and the POST /v1/admin/reload path (routes/admin-reload.ts). openapi.ts
// applies withScopes to its whole document. Built once when the module loads; any thread.
import { errorCodes } from '../../../engine/errors.ts';
import { accessOf } from '../route-scopes.ts';
import { errorResponse, jsonOf, ref } from './openapi-parts.ts';

export const forbiddenResponse = errorResponse(
  'FORBIDDEN: the token is known but lacks the scope this operation needs (`scope` names it), or is limited to queues and this request names or touches another (`queue` names it), or must name one of its queues (a list\'s `queue` filter) and does not.',
  [errorCodes.forbidden],
);

export const adminPaths = {
  '/v1/admin/reload': {
    post: {
      operationId: 'reload',
      summary: 'Reload tokens, signing secrets and the allow-list',
      description:
        'Reads the config file and the environment again, as SIGHUP does, and puts in force the bearer tokens, the signing secrets (the service\'s and each queue\'s), the dispatch allow-list and the free-space minimum (`readiness.disk_free_bytes_min`); the settings are checked whole first, and a reload that fails changes nothing. Other settings changed in the file take effect after a restart (the log says which). Recorded in the audit trail.',
      responses: {
        '200': {
          description: 'The new settings are in force (the delivery workers have them); `changed` names those whose values changed.',
          content: jsonOf({
            type: 'object',
            properties: { reloaded: { const: true }, changed: { type: 'array', items: { enum: ['tokens', 'signing_secrets', 'queue_signing_secrets', 'allow', 'readiness.disk_free_bytes_min'] } } },
            required: ['reloaded', 'changed'],
            additionalProperties: false,
          }),
        },
        '401': ref('responses', 'Unauthorized'),
        '422': errorResponse('RELOAD_FAILED: the config file or environment cannot be applied (the message says why, as the log does); the old settings stay in force.', [errorCodes.reloadFailed]),
      },
    },
  },
};

type Operation = { description?: string; responses?: Record<string, unknown> };

/** `paths` with every guarded operation's scope in its description and its 403 answer. */
export function withScopes<T extends Record<string, unknown>>(paths: T): T {
  const scoped: Record<string, unknown> = {};
  for (const [path, item] of Object.entries(paths)) {
    const operations: Record<string, unknown> = {};
    for (const [method, value] of Object.entries(item as Record<string, unknown>)) {
      const operation = value as Operation;
      const access = accessOf(method.toUpperCase(), path.replace(/\{(\w+)\}/g, ':$1'));
      if (access?.scope === undefined) {
        operations[method] = value;
        continue;
      }
      const scopeText = `Needs a token with the \`${access.scope}\` scope.`;
      operations[method] = {
        ...operation,
        description: operation.description === undefined ? scopeText : `${operation.description}\n\n${scopeText}`,
        responses: { ...operation.responses, '403': forbiddenResponse },
      };
    }
    scoped[path] = operations;
  }
  return scoped as T;
}
