// The audit trail: each administrative action (purge, bulk cancel, pause/resume, queue and
// schedule changes, redrives, clock moves, reloads) is logged once, at info, with who did it
// (the token's name, never the token), what and how many, and counted by action for /metrics
// (fermata_audit_actions_total{action}: registerAuditMetric). Transport-free: the HTTP hook
// (ingest/http/audit-hook.ts) and a SIGHUP reload (cli/serve/reload.ts) record into the same
// trail. Main thread.
export interface AuditLogger {
  info(fields: object, message: string): void;
}

export interface AuditEntry {
  /** The action, as route-scopes.ts names it ("purge", "reload", …). */
  readonly action: string;
  /** The token's name, "anonymous" without tokens, "SIGHUP" for a signal. */
  readonly who: string;
  /** What it acted on: a queue, a schedule, a timer id, a filter, the clock's new time. */
  readonly what: Readonly<Record<string, unknown>>;
  /** How many timers it touched, when the answer says. */
  readonly count?: number | undefined;
}

export class AuditTrail {
  readonly #logger: AuditLogger;
  readonly #counts = new Map<string, number>();

  constructor(logger: AuditLogger) {
    this.#logger = logger;
  }

  record(entry: AuditEntry): void {
    this.#counts.set(entry.action, (this.#counts.get(entry.action) ?? 0) + 1);
    this.#logger.info({ audit: entry.action, who: entry.who, ...entry.what, ...(entry.count === undefined ? {} : { count: entry.count }) }, 'audit');
  }

  /** Actions recorded so far, by action. */
  counts(): ReadonlyMap<string, number> {
    return this.#counts;
  }
}
