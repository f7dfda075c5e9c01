// Reload without restart: SIGHUP and POST /v1/admin/reload reread the config file and the
// environment (the same settings code as a start: cli/serve/settings.ts) and put in force what a
// running service can change in place: the bearer tokens (ingest/auth/access.ts), the signing
// secrets, the queues' own signing secrets, the dispatch allow-list (the admit check's guard
// here, the delivery workers' through Dispatcher.reconfigure) and the free-space minimum
// (readiness.disk_free_bytes_min, the one limit the config file sets). Everything is read and checked
// before anything changes: a reload that fails keeps every old setting, logs why and answers
// RELOAD_FAILED with the same words. Settings that need a restart (ports, the data directory,
// TLS files, threads, …) are not applied; a reload that finds them changed says so in its log
// line. One reload at a time; each is recorded in the audit trail. Main thread.
import { isDeepStrictEqual } from 'node:util';
import type { Logger } from 'pino';
import { errorCodes, FermataError } from '../../engine/errors.ts';
import type { TargetGuard } from '../../dispatch/target-guard.ts';
import type { DeliveryAccess } from '../../dispatch/signing-config.ts';
import type { Access } from '../../ingest/auth/access.ts';
import type { AuditTrail } from '../../ingest/auth/audit.ts';
import type { ReloadAnswer } from '../../ingest/http/routes/admin-reload.ts';
import { messageOf } from './errors.ts';
import type { ServeSettings } from './settings.ts';

export interface ReloaderOptions {
  /** The settings in force at start. */
  readonly settings: ServeSettings;
  /** Reads the settings again from the same flags, config file and environment; throws (a UsageError) naming what is wrong. */
  readonly reread: () => ServeSettings;
  readonly access: Access;
  readonly audit: AuditTrail;
  readonly logger: Logger;
  /** Builds the admit check's guard for an allow-list (the service's loopback rule applied). */
  readonly guardFor: (allow: readonly string[]) => TargetGuard;
  /** Puts a guard in force for adds. */
  readonly setGuard: (guard: TargetGuard) => void;
  /** Puts a free-space minimum in force (/readyz and the adds' gate). */
  readonly setDiskFreeBytesMin: (bytes: number) => void;
  /** Puts the delivery settings in force in the current life's workers; resolves once they have them. */
  readonly reconfigureDelivery: (access: DeliveryAccess) => Promise<void>;
}

/** The settings a reload changes, by the names its answer uses. */
const reloadable = ['tokens', 'signing_secrets', 'queue_signing_secrets', 'allow', 'readiness.disk_free_bytes_min'] as const;

/** What of `settings` a reload puts in force, by reloadable name. */
function reloadableOf(settings: ServeSettings): Record<(typeof reloadable)[number], unknown> {
  return {
    tokens: settings.tokens,
    signing_secrets: settings.dispatch.signingSecrets,
    queue_signing_secrets: settings.dispatch.queueSigningSecrets,
    allow: settings.dispatch.allow,
    'readiness.disk_free_bytes_min': settings.diskFreeBytesMin,
  };
}

/** Settings a reload cannot apply: told when they changed, so nobody believes they are in force. */
function needRestart(before: ServeSettings, after: ServeSettings): string[] {
  const kept = (settings: ServeSettings): Record<string, unknown> => ({
    data: settings.dataDir,
    listen: settings.listen,
    tls: settings.tls?.listen,
    flight: settings.flight,
    http3: settings.http3,
    clock: settings.clock,
    memory_budget: settings.memoryBudgetBytes,
    far_horizon: settings.farHorizonMs,
    'dispatch.threads': settings.dispatch.threads,
    'dispatch.ca_file': settings.dispatch.ca,
  });
  const old = kept(before);
  const now = kept(after);
  return Object.keys(old).filter((name) => !isDeepStrictEqual(old[name], now[name]));
}

export class Reloader {
  readonly #options: ReloaderOptions;
  #current: ServeSettings;
  #running: Promise<unknown> = Promise.resolve();

  constructor(options: ReloaderOptions) {
    this.#options = options;
    this.#current = options.settings;
  }

  /** The settings in force: those at start with every reload's changes. */
  get settings(): ServeSettings {
    return this.#current;
  }

  /** Rereads and applies; `who` is the token's name or the signal, for the audit trail. Throws RELOAD_FAILED, changing nothing. */
  reload(who: string): Promise<ReloadAnswer> {
    const next = this.#running.then(() => this.#reload(who));
    this.#running = next.catch(() => undefined);
    return next;
  }

  async #reload(who: string): Promise<ReloadAnswer> {
    const { logger } = this.#options;
    let settings: ServeSettings;
    let guard: TargetGuard;
    try {
      settings = this.#options.reread();
      guard = this.#options.guardFor(settings.dispatch.allow);
    } catch (err) {
      const reason = messageOf(err);
      logger.error({ who, reason }, 'reload failed: the old settings stay in force');
      throw new FermataError(errorCodes.reloadFailed, `reload failed, the old settings stay in force: ${reason}`);
    }
    const before = reloadableOf(this.#current);
    const after = reloadableOf(settings);
    const changed = reloadable.filter((name) => !isDeepStrictEqual(before[name], after[name]));
    // The workers first: if they cannot take the settings (they were checked above, so only a
    // stopping service fails here), nothing else has changed yet.
    try {
      await this.#options.reconfigureDelivery({ allow: settings.dispatch.allow, signingSecrets: settings.dispatch.signingSecrets, queueSigningSecrets: settings.dispatch.queueSigningSecrets });
    } catch (err) {
      const reason = messageOf(err);
      logger.error({ who, reason }, 'reload failed: the old settings stay in force');
      throw new FermataError(errorCodes.reloadFailed, `reload failed, the old settings stay in force: ${reason}`);
    }
    this.#options.setGuard(guard);
    this.#options.setDiskFreeBytesMin(settings.diskFreeBytesMin);
    this.#options.access.replace(settings.tokens);
    const ignored = needRestart(this.#current, settings);
    this.#current = { ...this.#current, tokens: settings.tokens, diskFreeBytesMin: settings.diskFreeBytesMin, dispatch: { ...this.#current.dispatch, allow: settings.dispatch.allow, signingSecrets: settings.dispatch.signingSecrets, queueSigningSecrets: settings.dispatch.queueSigningSecrets } };
    if (ignored.length > 0) logger.warn({ settings: ignored }, 'reload: these settings changed but take effect only after a restart');
    this.#options.audit.record({ action: 'reload', who, what: { changed, tokens: settings.tokens.length } });
    return { reloaded: true, changed };
  }
}

/** SIGHUP reloads from now on (a failure is logged by the reload and changes nothing). */
export function reloadOnHangup(reloader: Reloader): void {
  process.on('SIGHUP', () => void reloader.reload('SIGHUP').catch(() => undefined));
}
