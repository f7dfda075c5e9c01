// Who may do what: bearer tokens, each with its scopes and optionally limited to named queues,
// and the one check every transport calls (HTTP's hook, Flight, gRPC): a request's
// `authorization` header, the scope its operation needs and, when it acts on one, the queue →
// the caller, or a FermataError (UNAUTHORIZED: no known token, 401; FORBIDDEN: the token lacks
// the scope or the queue, 403, its message and details naming which). Nothing here knows a
// transport.
//
//   scope   what it opens
//   read    GETs, lists, stats, metrics
//   write   adds, cancels and reschedules of single timers
//   admin   queues, pause/resume, purge, bulk cancel, redrive, schedules, the test clock, reload
//
// A token's scopes are exactly those it lists: admin does not imply write. The tokens are
// compared in constant time (both sides hashed to SHA-256, compared with timingSafeEqual against
// every configured token without stopping early), so timing says nothing about a token.
//
// `Access` is the reloadable holder: a reload (cli/serve/reload.ts) swaps its table in one
// assignment on the main thread, which owns it; a request checked before the swap keeps its caller.
import { createHash, timingSafeEqual } from 'node:crypto';
import { errorCodes, FermataError } from '../../engine/errors.ts';

export const scopes = ['read', 'write', 'admin'] as const;
export type Scope = (typeof scopes)[number];

/** A configured token: its secret text, the name logs and audit lines use, its scopes and, when limited, its queues. */
export interface TokenGrant {
  readonly name: string;
  readonly token: string;
  readonly scopes: readonly Scope[];
  /** The queues it may act on; undefined: every queue. */
  readonly queues?: readonly string[] | undefined;
}

/** Who a request comes from, once its token is known. */
export interface Caller {
  /** The token's name ("anonymous" when the service has no tokens); never the token. */
  readonly name: string;
  readonly scopes: ReadonlySet<Scope>;
  /** The queues it may act on; undefined: every queue. */
  readonly queues: ReadonlySet<string> | undefined;
}

/** A service without tokens: every request may do everything (it listens on loopback, or --insecure). */
export const anonymous: Caller = { name: 'anonymous', scopes: new Set(scopes), queues: undefined };

/** A plain token (the config's string list, FERMATA_TOKENS): every scope, every queue, named by its place. */
export function fullGrant(token: string, index: number): TokenGrant {
  return { name: `token-${index + 1}`, token, scopes, queues: undefined };
}

const digest = (token: string): Buffer => createHash('sha256').update(token, 'utf8').digest();

const bearerPrefix = 'Bearer ';

interface Known {
  readonly digest: Buffer;
  readonly caller: Caller;
}

/** One set of tokens, immutable; `Access` holds the current one. */
export class TokenTable {
  readonly #known: readonly Known[];

  constructor(grants: readonly TokenGrant[]) {
    this.#known = grants.map((grant) => ({
      digest: digest(grant.token),
      caller: { name: grant.name, scopes: new Set(grant.scopes), queues: grant.queues === undefined ? undefined : new Set(grant.queues) },
    }));
  }

  get open(): boolean {
    return this.#known.length === 0;
  }

  /** The caller `authorization` names, anonymous when there are no tokens, undefined for a missing or unknown token. */
  caller(authorization: string | undefined): Caller | undefined {
    if (this.#known.length === 0) return anonymous;
    if (authorization === undefined || !authorization.startsWith(bearerPrefix)) return undefined;
    const presented = digest(authorization.slice(bearerPrefix.length).trim());
    let found: Caller | undefined;
    for (const known of this.#known) if (timingSafeEqual(presented, known.digest)) found ??= known.caller;
    return found;
  }
}

/** The check of one request: the caller, or the FermataError to answer (UNAUTHORIZED, FORBIDDEN). */
export function authorize(table: TokenTable, authorization: string | undefined, scope: Scope, queue?: string): Caller {
  const caller = table.caller(authorization);
  if (caller === undefined) throw new FermataError(errorCodes.unauthorized, 'this request needs authorization: Bearer <token>');
  if (!caller.scopes.has(scope)) {
    throw new FermataError(errorCodes.forbidden, `this request needs a token with the "${scope}" scope; token "${caller.name}" has ${[...caller.scopes].map((held) => `"${held}"`).join(', ') || 'none'}`, { scope });
  }
  if (queue !== undefined) checkQueue(caller, queue);
  return caller;
}

/** Throws FORBIDDEN when `caller` is limited to queues and `queue` is not one of them. */
export function checkQueue(caller: Caller, queue: string): void {
  if (caller.queues === undefined || caller.queues.has(queue)) return;
  throw new FermataError(errorCodes.forbidden, `token "${caller.name}" may not act on queue ${JSON.stringify(queue)} (its queues: ${[...caller.queues].map((name) => JSON.stringify(name)).join(', ')})`, { queue });
}

/** The tokens in force: read by every check, replaced whole by a reload. */
export class Access {
  #table: TokenTable;

  constructor(grants: readonly TokenGrant[]) {
    this.#table = new TokenTable(grants);
  }

  get table(): TokenTable {
    return this.#table;
  }

  replace(grants: readonly TokenGrant[]): void {
    this.#table = new TokenTable(grants);
  }

  /** The transport-free check (see the top of this file). */
  authorize(authorization: string | undefined, scope: Scope, queue?: string): Caller {
    return authorize(this.#table, authorization, scope, queue);
  }
}
