// The service's lives: `fermata serve` opens the engine (the WAL takes the data directory's lock
// and recovers), then builds on it the memory loader, the dispatcher's worker threads, and the
// listeners (cli/serve/listeners.ts). A poisoned log (a failed write or fdatasync) ends one life:
// the next opens the data directory again, as a restart would, and takes over the same ports. On
// SIGTERM or SIGINT the service drains: Caddy first, then both ports stop accepting and open
// requests finish (at most drainTimeoutMs, then cut), deliveries in flight are recorded
// (bounded), the WAL is closed (flushing queued appends, releasing the lock). A second signal
// exits 1 at once, unless it is the same signal delivered twice (cli/serve/stop-signals.ts).
// Main thread only; the exit code it returns is the process's.
import assert from 'node:assert/strict';
import { flushCompileCache } from 'node:module';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { AdmitCoalescer } from '../../engine/admit-coalescer.ts';
import type { FermataError } from '../../engine/errors.ts';
import { ManualClock } from '../../engine/clock.ts';
import { type Clock, Engine, systemClock } from '../../engine/engine.ts';
import { readinessLimits, serviceLimits } from '../../engine/limits.ts';
import { memoryBudget, residentSlotsFor } from '../../engine/memory-budget.ts';
import { MemoryLoader } from '../../engine/spill/memory-loader.ts';
import { Dispatcher } from '../../dispatch/dispatcher.ts';
import { TargetGuard } from '../../dispatch/target-guard.ts';
import { isLoopbackHost } from '../../ingest/http/listen/bearer-auth.ts';
import { DiskSpaceCheck } from '../../ingest/http/listen/disk-space.ts';
import type { HttpServer } from '../../ingest/http/server.ts';
import type { FlightListener } from '../../ingest/flight/flight-service.ts';
import { PeerGuard } from '../../ingest/http/listen/peer-guard.ts';
import { memoryReturn } from '../../runtime/garbage-collector.ts';
import { mallocTrim } from '../../runtime/malloc-trim.ts';
import { logStartFailure } from './errors.ts';
import { Access } from '../../ingest/auth/access.ts';
import { AuditTrail } from '../../ingest/auth/audit.ts';
import { drainHttp, PortInUseError, type Ports, type ServiceControls, startFlight, startHttp, startHttp3 } from './listeners.ts';
import { Reloader, reloadOnHangup } from './reload.ts';
import type { ServeSettings } from './settings.ts';
import { stopRequested } from './stop-signals.ts';

/**
 * One life of the service on an opened engine: the loader, the dispatcher, the HTTP adapter and
 * the Flight service built on it. A poisoned log ends a life; the next opens the data directory
 * again (recovery re-reads the disk, as after a crash) and serves on the same ports.
 */
interface Life {
  readonly engine: Engine;
  readonly loader: MemoryLoader;
  readonly dispatcher: Dispatcher;
  readonly app: HttpServer;
  readonly flight: FlightListener | undefined;
}

/**
 * Runs the service until a stop signal; `reread` reads the settings again from the same flags,
 * config file and environment, for a reload (SIGHUP, POST /v1/admin/reload; without it a reload
 * applies the settings as they were at start).
 */
export async function runService(settings: ServeSettings, logger: Logger, reread: () => ServeSettings = () => settings): Promise<number> {
  // Signals are caught from the start, so that one arriving while the WAL recovers still
  // leads to an orderly stop once it is open.
  const stopSignal = stopRequested(logger);

  // Loopback targets are fine for a service that only listens on loopback (a local setup); a
  // port anyone else can reach must not let them ask it to POST to this machine's own services.
  const allowLoopback = isLoopbackHost(settings.listen.host) && (settings.tls === undefined || isLoopbackHost(settings.tls.listen.host));
  // Replaced by a reload; adds ask whichever is in force.
  let guard = new TargetGuard({ allow: settings.dispatch.allow, allowLoopback });
  // The dispatcher of the life serving now (a reload reconfigures its workers), if any yet.
  let dispatcher: Dispatcher | undefined;
  const access = new Access(settings.tokens);
  const audit = new AuditTrail(logger);
  const reloader = new Reloader({
    settings,
    reread,
    access,
    audit,
    logger,
    guardFor: (allow) => new TargetGuard({ allow, allowLoopback }),
    setGuard: (next) => (guard = next),
    setDiskFreeBytesMin: (bytes) => disk.setFreeBytesMin(bytes),
    reconfigureDelivery: async (delivery) => dispatcher?.reconfigure(delivery),
  });
  reloadOnHangup(reloader);
  const controls: ServiceControls = { access, audit, reload: (who) => reloader.reload(who) };
  // One reading of the free space for every life: /readyz and the adds' gate.
  const disk = new DiskSpaceCheck({ dir: settings.dataDir, freeBytesMin: settings.diskFreeBytesMin, checkIntervalMs: readinessLimits.diskCheckIntervalMs });
  // Read before the engine opens: it sizes the store's slot limit.
  const budget = memoryBudget(settings.memoryBudgetBytes);
  // One clock for every life: a manual one starts at the real time, and the engine's open puts
  // it where the log says it stood (engine/clock-moves.ts).
  const clock: Clock = settings.clock === 'manual' ? new ManualClock(Date.now()) : systemClock;
  let poisoned = Promise.withResolvers<FermataError>();
  const openEngine = (): Promise<Engine> => {
    const thisLife = Promise.withResolvers<FermataError>();
    poisoned = thisLife;
    return Engine.open({
      dataDir: settings.dataDir,
      clock,
      // Slots as the budget allows (a past life with a larger one may have let in more: they
      // all come back, and the limit rises to them).
      store: { capacityMax: residentSlotsFor(budget.bytes) },
      logger: logger.child({ component: 'wal' }),
      checkTarget: (target) => guard.checkTargetAtAdmit(target),
      admitGate: () => disk.admitRefusal(),
      onLogPoisoned: (poison) => thisLife.resolve(poison),
    });
  };

  let engine: Engine;
  try {
    engine = await openEngine();
  } catch (err) {
    logStartFailure(logger, err, `cannot open the data directory ${settings.dataDir}`);
    return 1;
  }
  // The adds' gate answers from the last reading: take the first one before serving.
  await disk.verdict();
  logger.info(
    {
      budgetBytes: budget.bytes,
      source: budget.source,
      limitBytes: budget.limitBytes,
      residentMax: engine.stats().residentMax,
      farHorizonMs: Number.isFinite(settings.farHorizonMs) ? settings.farHorizonMs : null,
      // glibc's malloc_trim, through node:ffi (experimental in Node 26): freed memory goes back to the kernel.
      mallocTrim: mallocTrim() !== undefined,
    },
    'memory budget',
  );
  const loggedClockMs = engine.loggedClockMs;
  if (settings.clock === 'manual') logger.info({ clock: 'manual', nowMs: clock.now(), now: new Date(clock.now()).toISOString() }, 'a manual clock: timers fire when POST /v1/clock moves it');
  else if (loggedClockMs !== undefined) logger.warn({ loggedClockMs }, 'the log holds a manual clock\'s position; this service runs on the real clock, and a later --clock manual start resumes there');
  const firstPorts: Ports = { listen: settings.listen, tls: settings.tls?.listen, flight: settings.flight };
  let life = await startLife(reloader.settings, engine, clock, firstPorts, disk, allowLoopback, controls, logger).catch(portInUse);
  if (typeof life === 'number') return life;
  if (life === undefined) return 1;
  dispatcher = life.dispatcher;
  const ports = portsOf(life, firstPorts);
  const caddy = await startHttp3(settings, life.app, logger);
  if (caddy === 'failed') {
    await stopLife(life, logger);
    return 1;
  }
  // What the start compiled is written to Node's compile cache now (bin/compile-cache.js), not
  // only at exit: a service that is killed, or crashes, still leaves the next start a warm cache.
  flushCompileCache();

  for (;;) {
    const ended = await Promise.race([stopSignal, poisoned.promise]);
    if (typeof ended === 'string') {
      logger.info({ signal: ended }, 'stopping');
      // Caddy first: it stops taking HTTP/3 requests and finishes those in flight while fermata still answers them.
      await caddy?.stop();
      const exitCode = await stopLife(life, logger);
      logger.info({ exitCode }, 'stopped');
      return exitCode;
    }
    // The old life's ports stay open meanwhile: its adds are answered 503/507 from the poison
    // (Retry-After), its reads from memory, until the next life can take over.
    logger.error({ poison: ended.message }, 'the log is poisoned: opening the data directory again (recovery re-reads the disk)');
    // A reload meanwhile reaches the next life through its settings (reloader.settings).
    dispatcher = undefined;
    await stopDelivering(life);
    // A full disk: the same writes would fail again at once, so the directory is opened again
    // only once there is room (the old life answers 507 meanwhile, its ports open).
    const roomNeeded = ended.details.cause === 'ENOSPC' ? Math.max(settings.diskFreeBytesMin, serviceLimits.reopenFreeBytesMin) : 0;
    const hasRoom = async (): Promise<string | undefined> => {
      if (roomNeeded === 0) return undefined;
      const verdict = await disk.fresh();
      return verdict.freeBytes !== undefined && verdict.freeBytes >= roomNeeded ? undefined : `waiting for ${roomNeeded} bytes free (${verdict.freeBytes ?? 'unknown'} now)`;
    };
    const next = await reopen(life.engine, hasRoom, openEngine, stopSignal, logger);
    if (next === undefined) {
      logger.info('stopping');
      await caddy?.stop();
      const exitCode = await stopServing(life, logger);
      await life.engine.close().catch(() => undefined);
      logger.info({ exitCode }, 'stopped');
      return exitCode;
    }
    const old = life;
    const draining = stopServing(old, logger);
    await portsReleased(old);
    const started = await startLife(reloader.settings, next, clock, ports, disk, allowLoopback, controls, logger).catch(portInUse);
    await draining;
    if (started === undefined || typeof started === 'number') {
      await caddy?.stop();
      return started ?? 1;
    }
    life = started;
    dispatcher = life.dispatcher;
    logger.info({ lastSeq: next.log.lastSeq, pending: next.stats().pending }, 'serving again after the poisoned log');
  }
}

/** Opens the engine, loader, dispatcher, HTTP and Flight on `ports`; undefined (all closed, the reason logged) when a port cannot be bound. */
async function startLife(settings: ServeSettings, engine: Engine, clock: Clock, ports: Ports, disk: DiskSpaceCheck, allowLoopback: boolean, controls: ServiceControls, logger: Logger): Promise<Life | undefined> {
  const wal = engine.log;
  logger.info({ ...wal.describe(), lastSeq: wal.lastSeq, resident: engine.stats().resident, pending: engine.stats().pending }, 'engine open');
  // Read again at each step: a container whose limit is lowered at run time spills at once.
  const loader = new MemoryLoader(engine, {
    budget: () => memoryBudget(settings.memoryBudgetBytes),
    clock,
    limits: { farHorizonMs: settings.farHorizonMs },
    logger: logger.child({ component: 'loader' }),
    returnMemory: memoryReturn(),
    trimMemory: mallocTrim(),
  });
  loader.start();
  const dispatcher = new Dispatcher({
    engine,
    clock,
    // A manual clock stands still: a timer taken ahead of it would be sent before its time by it.
    ...(settings.clock === 'manual' ? { limits: { takeAheadMs: 0 } } : {}),
    logger: logger.child({ component: 'dispatch' }),
    allow: settings.dispatch.allow,
    allowLoopback,
    signingSecrets: settings.dispatch.signingSecrets,
    queueSigningSecrets: settings.dispatch.queueSigningSecrets,
    ...(settings.dispatch.threads === undefined ? {} : { threads: settings.dispatch.threads }),
    ...(settings.dispatch.ca === undefined ? {} : { ca: settings.dispatch.ca }),
  });
  // With timers due soon the service listens once its delivery workers are warm, so the first
  // of them go out on time; otherwise it serves at once, /readyz red until they are.
  const dueSoon = dispatcher.originsDueSoon();
  const warming = dispatcher.warmUp(dueSoon);
  if (dueSoon.length > 0) await warming;
  const closeEngineSide = async (): Promise<void> => {
    await loader.stop();
    await dispatcher.close();
    await engine.close().catch(() => undefined);
  };
  let app: HttpServer | undefined;
  let flight: FlightListener | undefined | 'failed';
  try {
    // One peer guard for every port: a peer penalised on one is refused on all.
    const guard = new PeerGuard({ logger: logger.child({ component: 'http' }) });
    // One coalescer for the single adds of every port: those of one turn share a record.
    const coalescer = new AdmitCoalescer(engine);
    app = await startHttp(settings, ports, engine, dispatcher, disk, controls, logger, guard, coalescer);
    flight = app === undefined ? 'failed' : await startFlight(settings, ports.flight, engine, dispatcher.pull, controls.access, logger, guard, { engine, disk, warm: () => dispatcher.warm }, coalescer);
  } catch (err) {
    // A port in use (PortInUseError): closed like any failed start, and told by the caller.
    if (app !== undefined) await drainHttp(app, logger);
    await closeEngineSide();
    throw err;
  }
  if (app === undefined || flight === 'failed') {
    if (app !== undefined) await drainHttp(app, logger);
    await closeEngineSide();
    return undefined;
  }
  dispatcher.start();
  logger.info({ threads: dispatcher.threads, signing: settings.dispatch.signingSecrets.length > 0, allowLoopback }, 'dispatching');
  return { engine, loader, dispatcher, app, flight };
}

/**
 * A port another process holds ends the start with one plain line on stderr and exit 2, like a
 * bad setting (the port is one); anything else is rethrown.
 */
function portInUse(err: unknown): number {
  if (!(err instanceof PortInUseError)) throw err;
  process.stderr.write(`${err.message}\n`);
  return 2;
}

/** The ports a life was given, for the next one to listen on. */
function portsOf(life: Life, asked: Ports): Ports {
  const cleartext = life.app.server.address();
  const secure = life.app.server.tls?.address();
  assert.ok(cleartext !== null && typeof cleartext === 'object', 'the cleartext port is listening');
  return {
    listen: { host: asked.listen.host, port: cleartext.port },
    tls: asked.tls === undefined || secure === undefined || secure === null || typeof secure !== 'object' ? asked.tls : { host: asked.tls.host, port: secure.port },
    flight: asked.flight === undefined || life.flight === undefined ? asked.flight : { host: asked.flight.host, port: life.flight.port },
  };
}

/** Stops everything of a life: its ports (drained), its deliveries (recorded, bounded), its loader, its engine; the exit code so far. */
async function stopLife(life: Life, logger: Logger): Promise<number> {
  // Both drains at once: each is bounded by its own timeout.
  let [exitCode] = await Promise.all([drainHttp(life.app, logger), life.flight?.close()]);
  // Deliveries in flight finish and are recorded (bounded); what is not recorded is delivered again after a restart.
  await life.dispatcher.close();
  await life.loader.stop();
  try {
    await life.engine.close();
  } catch (err) {
    logger.error({ err }, 'closing the engine failed');
    exitCode = 1;
  }
  return exitCode;
}

/** A poisoned life's deliveries, loader and engine stop (releasing the data directory); its ports still answer. */
async function stopDelivering(life: Life): Promise<void> {
  await life.dispatcher.close();
  await life.loader.stop();
}

/** A life's ports, drained; the exit code of the HTTP drain. */
async function stopServing(life: Life, logger: Logger): Promise<number> {
  const [exitCode] = await Promise.all([drainHttp(life.app, logger), life.flight?.close()]);
  return exitCode;
}

/** Resolves once a draining life no longer listens on its ports (its open connections may still be finishing). */
async function portsReleased(life: Life): Promise<void> {
  const deadline = performance.now() + serviceLimits.portReleaseWaitMsMax;
  while (life.app.server.listening || life.app.server.tls?.listening === true) {
    if (performance.now() > deadline) return;
    await sleep(5);
  }
}

/**
 * Opens the data directory again after a poisoned log, backing off while the disk fails;
 * undefined when a stop is asked meanwhile. First the poisoned log is cut back to its last
 * synced record (and the engine closed, releasing the directory): the new life must not read
 * back records whose clients were refused, nor append after bytes the kernel may have dropped.
 */
async function reopen(
  poisoned: Engine,
  hasRoom: () => Promise<string | undefined>,
  openEngine: () => Promise<Engine>,
  stopSignal: Promise<NodeJS.Signals>,
  logger: Logger,
): Promise<Engine | undefined> {
  let stopping = false;
  const stop = stopSignal.then(() => {
    stopping = true;
    return undefined;
  });
  let released = false;
  for (let delayMs: number = serviceLimits.reopenDelayMsMin; ; delayMs = Math.min(2 * delayMs, serviceLimits.reopenDelayMsMax)) {
    try {
      if (!released) {
        await poisoned.log.cutToSynced();
        await poisoned.close();
        released = true;
      }
      const waiting = await hasRoom();
      if (waiting !== undefined) throw new Error(waiting);
      const engine = await openEngine();
      // A stop asked while the log was replayed: no new life is started for it.
      if (!stopping) return engine;
      await engine.close().catch(() => undefined);
      return undefined;
    } catch (err) {
      logger.error({ err, retryInMs: delayMs }, released ? 'opening the data directory again failed' : 'cutting the poisoned log back to its last synced record failed');
    }
    const waited = await Promise.race([stop, sleep(delayMs).then(() => 'again' as const)]);
    if (waited === undefined) return undefined;
  }
}
