// The ports of one life of `fermata serve`: the HTTP adapter on the cleartext port and, with a
// certificate, the TLS port; the Arrow Flight service; the supervised Caddy that serves HTTP/3;
// and a cluster node's TLS port, HTTP/3 and gRPC port beside its cleartext one (startClusterPorts).
// Each start logs its "listening" line (what tests and operators read the URL from), or logs why
// it could not bind and closes what it opened; a port someone else holds is a `PortInUseError`
// instead (the caller says so in one plain line and exits 2: there is nothing to debug, only a
// setting to change). Main thread only.
//
// The Flight service (gRPC and its Arrow Flight adapter) is imported when a life starts it, so a
// service without --flight does not load it, and the dispatcher's metrics at the first scrape of
// /metrics; the HTTP adapter and Caddy's supervisor are small beside the engine and are imported
// with this module.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import type { AddressInfo } from 'node:net';
import { resolve } from 'node:path';
import type { Logger } from 'pino';
import type { AdmitCoalescer } from '../../engine/admit-coalescer.ts';
import type { Engine } from '../../engine/engine.ts';
import { httpLimits } from '../../engine/limits.ts';
import type { SeriesSources } from '../../engine/stats-series.ts';
import type { Dispatcher } from '../../dispatch/dispatcher.ts';
import type { PullQueues } from '../../dispatch/pull-queues.ts';
import type { DiskSpaceCheck } from '../../ingest/http/listen/disk-space.ts';
import type { PeerGuard } from '../../ingest/http/listen/peer-guard.ts';
import { createHttpServer, type HttpServer } from '../../ingest/http/server.ts';
import { alpnProtocols } from '../../ingest/http/listen/tls-listener.ts';
import type { FlightListener } from '../../ingest/flight/flight-service.ts';
import type { ClusterGrpcListener, HttpRequest } from '../../ingest/grpc/cluster-timers-service.ts';
import { advertiseHttp3 } from '../../ingest/http3/alt-svc.ts';
import { CaddySupervisor } from '../../ingest/http3/caddy-supervisor.ts';
import type { Access } from '../../ingest/auth/access.ts';
import type { AuditTrail } from '../../ingest/auth/audit.ts';
import type { ReloadAnswer } from '../../ingest/http/routes/admin-reload.ts';
import type { ReadinessSources } from '../../ingest/readiness.ts';
import { logStartFailure } from './errors.ts';
import type { ListenAddress, ServeSettings } from './settings.ts';

/** How long a drain may take before the connections still open are cut. */
const { drainTimeoutMs } = httpLimits;

/** A port another process holds: the whole message is the one line `fermata serve` prints. */
export class PortInUseError extends Error {
  override readonly name = 'PortInUseError';
  readonly address: ListenAddress;
  constructor(address: ListenAddress) {
    super(`port ${address.port} on ${address.host} is in use`);
    this.address = address;
  }
}

/** Whether a bind failed on a port in use: Node's listeners say so in `code`, grpc-js only in its message. */
function addressInUse(err: unknown): boolean {
  return err instanceof Error && ((err as NodeJS.ErrnoException).code === 'EADDRINUSE' || err.message.includes('EADDRINUSE'));
}

/** What every life's listeners share: the tokens in force, the audit trail, the reload (cli/serve/reload.ts). */
export interface ServiceControls {
  readonly access: Access;
  readonly audit: AuditTrail;
  readonly reload: (who: string) => Promise<ReloadAnswer>;
}

/** Where a life listens: the settings' addresses, or after the first life the ports it was given (port 0 picks once). */
export interface Ports {
  readonly listen: ListenAddress;
  readonly tls: ListenAddress | undefined;
  readonly flight: ListenAddress | undefined;
}

/**
 * The HTTP adapter on the engine, listening on the cleartext port and, when configured, the TLS
 * port; logs one "listening" line for each, cleartext first. Undefined (after logging why and
 * closing what was opened) when a port cannot be bound.
 */
export async function startHttp(settings: ServeSettings, ports: Ports, engine: Engine, dispatcher: Dispatcher, disk: DiskSpaceCheck, controls: ServiceControls, logger: Logger, guard: PeerGuard, coalescer: AdmitCoalescer): Promise<HttpServer | undefined> {
  const app = createHttpServer({
    peerGuard: guard,
    logger: logger.child({ component: 'http' }),
    engine,
    access: controls.access,
    audit: controls.audit,
    reload: controls.reload,
    disk,
    warm: () => dispatcher.warm,
    coalescer,
    // Imported at the first scrape of /metrics, with prom-client (ingest/http/routes/metrics.ts).
    metrics: async (registry) => (await import('../../dispatch/dispatch-metrics.ts')).registerDispatchMetrics(registry, dispatcher),
    seriesSources: seriesSources(engine, dispatcher),
    ...(settings.tls === undefined ? {} : { tls: settings.tls.credentials }),
  });
  if (settings.http3 !== undefined && settings.tls !== undefined) advertiseHttp3(app, settings.http3.port);
  let bound = ports.listen;
  let what = '';
  try {
    await app.listen({ host: ports.listen.host, port: ports.listen.port });
    const secure = app.server.tls;
    if (ports.tls !== undefined && secure !== undefined) {
      [bound, what] = [ports.tls, ' (TLS)'];
      secure.listen({ host: ports.tls.host, port: ports.tls.port });
      await once(secure, 'listening');
    }
  } catch (err) {
    await app.close().catch(() => undefined);
    if (addressInUse(err)) throw new PortInUseError(bound);
    logStartFailure(logger, err, `cannot listen on ${bound.host}:${bound.port}${what}`);
    return undefined;
  }
  logger.info({ url: urlOf('http', app.server.address()), data: settings.dataDir }, 'listening');
  if (app.server.tls !== undefined) logger.info({ url: urlOf('https', app.server.tls.address()), alpn: alpnProtocols }, 'listening');
  return app;
}

/** What a cluster node's gRPC port needs from its life (cli/serve/cluster-service.ts). */
export interface ClusterGrpcSources {
  readonly access: Access;
  /** The HTTP server's peer guard, which sees the gRPC port's connections too. */
  readonly guard: PeerGuard;
  /** Why the node is not ready (/readyz's reason), or undefined: what gRPC health follows. */
  readonly notReady: () => Promise<string | undefined>;
}

/**
 * A cluster node's other ports (cli/serve/cluster-service.ts), beside its cleartext port
 * (listening already): the TLS port is the same server's, so it serves the same routes, the
 * cluster front's; HTTP/3 is the supervised Caddy forwarding to the cleartext port, as on one
 * node; the gRPC port is startClusterGrpc's. Logs each one's "listening" line. Resolves with what
 * stops the gRPC port and Caddy (the server's close closes the TLS port), or 'failed' after
 * logging why and stopping what it started; a port someone holds is a PortInUseError.
 */
export async function startClusterPorts(settings: ServeSettings, app: HttpServer, grpc: ClusterGrpcSources, logger: Logger): Promise<{ stop(): Promise<void> } | 'failed'> {
  const secure = app.server.tls;
  if (settings.tls !== undefined && secure !== undefined) {
    try {
      secure.listen({ host: settings.tls.listen.host, port: settings.tls.listen.port });
      await once(secure, 'listening');
    } catch (err) {
      if (addressInUse(err)) throw new PortInUseError(settings.tls.listen);
      logStartFailure(logger, err, `cannot listen on ${settings.tls.listen.host}:${settings.tls.listen.port} (TLS)`);
      return 'failed';
    }
    logger.info({ url: urlOf('https', secure.address()), alpn: alpnProtocols }, 'listening');
  }
  const caddy = await startHttp3(settings, app, logger);
  if (caddy === 'failed') return 'failed';
  let timers: ClusterGrpcListener | undefined | 'failed' = 'failed';
  try {
    timers = await startClusterGrpc(settings, app, grpc, logger);
  } finally {
    // A gRPC port that did not come up (or threw) leaves nothing running.
    if (timers === 'failed') await caddy?.stop();
  }
  if (timers === 'failed') return 'failed';
  return {
    stop: async () => {
      await timers?.close();
      await caddy?.stop();
    },
  };
}

/** What GET /v1/stats/series samples once a second: the engine's adds and log syncs, the dispatcher's outcomes, failures and fire lateness. */
function seriesSources(engine: Engine, dispatcher: Dispatcher): SeriesSources {
  return {
    added: () => engine.stats().rowsInserted,
    delivered: () => {
      let delivered = 0;
      for (const stats of dispatcher.stats().values()) delivered += stats.delivered;
      return delivered;
    },
    failed: () => dispatcher.failuresByKind().reduce((sum, [, count]) => sum + count, 0),
    lateness: () => dispatcher.lateness,
    deliveredByQueue: () => Array.from(dispatcher.stats(), ([queue, stats]) => [queue, stats.delivered] as const),
    syncs: () => engine.log.counters.syncs,
  };
}

/**
 * The gRPC server when --grpc (or --flight) is set: Arrow Flight and fermata.v1.Timers (with
 * reflection and health) on one port, TLS with the TLS port's certificate when "grpc.tls" says
 * so, its connections seen by `guard`, the HTTP listener's peer guard, its health following `readiness` as /readyz does. Logs a "flight listening" line with its grpc+tcp:// (or grpc+tls://) "url"; 'failed'
 * (logged) when it cannot bind, a PortInUseError when its port is taken.
 */
export async function startFlight(settings: ServeSettings, address: ListenAddress | undefined, engine: Engine, pull: PullQueues, access: Access, logger: Logger, guard: PeerGuard, readiness: ReadinessSources, coalescer: AdmitCoalescer): Promise<FlightListener | undefined | 'failed'> {
  if (address === undefined) return undefined;
  // grpc-js is CommonJS: its functions are on the module object, the default export of a dynamic
  // import (the bundle, bin/bundle.js, gives no named exports for a CommonJS chunk).
  const [grpc, { FlightService }, { engineFlightTimers }, { TimersService, grpcServerOptions }] = await Promise.all([
    import('@grpc/grpc-js').then((module) => module.default),
    import('../../ingest/flight/flight-service.ts'),
    import('../../ingest/flight/flight-timers.ts'),
    import('../../ingest/grpc/timers-service.ts'),
  ]);
  const setGrpcLogger = grpc.setLogger;
  const flightLogger = logger.child({ component: 'flight' });
  // grpc-js writes its own diagnostics to stderr as bare text (a failed bind among them): into the log with the rest.
  setGrpcLogger(grpcLogger(flightLogger));
  const service = new FlightService({ timers: engineFlightTimers(engine, pull), logger: flightLogger, access });
  const timers = new TimersService({ engine, logger: logger.child({ component: 'grpc' }), access, readiness, coalescer });
  const tls = settings.grpcTls ? settings.tls?.credentials : undefined;
  const credentials = tls === undefined ? undefined : grpc.ServerCredentials.createSsl(null, [{ cert_chain: Buffer.from(tls.cert), private_key: Buffer.from(tls.key) }], false);
  try {
    const listener = await service.listen(address.host, address.port, {
      register: (server) => timers.addTo(server),
      closing: () => timers.stopping(),
      options: grpcServerOptions,
      guard,
      ...(credentials === undefined ? {} : { credentials }),
    });
    logger.info({ services: ['arrow.flight.protocol.FlightService', 'fermata.v1.Timers'], url: listener.url }, 'flight listening');
    return listener;
  } catch (err) {
    if (addressInUse(err)) throw new PortInUseError(address);
    logStartFailure(logger, err, `cannot listen on ${address.host}:${address.port} (gRPC)`);
    return 'failed';
  }
}

/**
 * A cluster node's gRPC port when --grpc (or --flight) is set: fermata.v1.Timers (with
 * reflection and health) and Arrow Flight, both made of requests to the node's own HTTP server,
 * so the cluster front routes every call (ingest/grpc/cluster-timers-service.ts,
 * ingest/flight/cluster-flight-timers.ts).
 * TLS as on one node ("grpc.tls"), its connections seen by `guard`, health following `notReady`
 * (/readyz's). Logs the "flight listening" line one node logs; 'failed' (logged) when it cannot
 * bind, a PortInUseError when its port is taken.
 */
export async function startClusterGrpc(settings: ServeSettings, app: HttpServer, { access, guard, notReady }: ClusterGrpcSources, logger: Logger): Promise<ClusterGrpcListener | undefined | 'failed'> {
  const address = settings.flight;
  if (address === undefined) return undefined;
  const [grpc, { ClusterTimersService }, { FlightService }, { clusterFlightTimers }] = await Promise.all([
    import('@grpc/grpc-js').then((module) => module.default),
    import('../../ingest/grpc/cluster-timers-service.ts'),
    import('../../ingest/flight/flight-service.ts'),
    import('../../ingest/flight/cluster-flight-timers.ts'),
  ]);
  const grpcLog = logger.child({ component: 'grpc' });
  grpc.setLogger(grpcLogger(grpcLog));
  const http = async (request: HttpRequest): Promise<{ status: number; headers: Record<string, string | string[] | number | undefined>; body: Buffer }> => {
    const answer = await app.inject({ method: request.method, url: request.url, headers: request.headers, ...(request.body === undefined ? {} : { payload: request.body }) });
    return { status: answer.statusCode, headers: answer.headers, body: answer.rawPayload };
  };
  const service = new ClusterTimersService({ http, logger: grpcLog, access, notReady });
  const flight = new FlightService({ timers: clusterFlightTimers(http), logger: logger.child({ component: 'flight' }), access });
  const tls = settings.grpcTls ? settings.tls?.credentials : undefined;
  try {
    const listener = await service.listen(address.host, address.port, guard, tls === undefined ? undefined : grpc.ServerCredentials.createSsl(null, [{ cert_chain: Buffer.from(tls.cert), private_key: Buffer.from(tls.key) }], false), flight);
    logger.info({ services: ['arrow.flight.protocol.FlightService', 'fermata.v1.Timers'], url: listener.url }, 'flight listening');
    return listener;
  } catch (err) {
    if (addressInUse(err)) throw new PortInUseError(address);
    logStartFailure(logger, err, `cannot listen on ${address.host}:${address.port} (gRPC)`);
    return 'failed';
  }
}

/** The HTTP/3 adapter when --http3 is set: a supervised Caddy forwarding to the cleartext port; 'failed' (logged) when it does not come up. */
export async function startHttp3(settings: ServeSettings, app: HttpServer, logger: Logger): Promise<CaddySupervisor | undefined | 'failed'> {
  if (settings.http3 === undefined || settings.tls === undefined) return undefined;
  const cleartext = app.server.address();
  assert.ok(cleartext !== null && typeof cleartext === 'object', 'the cleartext port is listening');
  const upstreamHost = cleartext.family === 'IPv6' ? (cleartext.address === '::' ? '[::1]' : `[${cleartext.address}]`) : cleartext.address === '0.0.0.0' ? '127.0.0.1' : cleartext.address;
  const caddy = new CaddySupervisor({
    dir: resolve(settings.dataDir, 'http3'),
    config: { host: settings.tls.listen.host, port: settings.http3.port, upstream: `${upstreamHost}:${cleartext.port}`, certFile: settings.http3.certFile, keyFile: settings.http3.keyFile },
    logger: logger.child({ component: 'http3' }),
  });
  try {
    await caddy.start();
  } catch (err) {
    logStartFailure(logger, err, `cannot serve HTTP/3 on ${settings.tls.listen.host}:${settings.http3.port}`);
    return 'failed';
  }
  logger.info({ url: `https://${settings.tls.listen.host.includes(':') ? `[${settings.tls.listen.host}]` : settings.tls.listen.host}:${settings.http3.port}`, protocol: 'h3' }, 'http3 listening');
  return caddy;
}

/** grpc-js's logger interface (error, info, debug; console-style arguments) over a pino logger. */
function grpcLogger(logger: Logger): Partial<Console> {
  const text = (message: unknown, params: unknown[]): string => [message, ...params].map(String).join(' ');
  return {
    error: (message?: unknown, ...params: unknown[]) => logger.error(text(message, params)),
    info: (message?: unknown, ...params: unknown[]) => logger.info(text(message, params)),
    debug: (message?: unknown, ...params: unknown[]) => logger.debug(text(message, params)),
  };
}

/** Stops accepting on every port and lets open requests finish, cutting them after drainTimeoutMs; the exit code so far. */
export async function drainHttp(app: HttpServer, logger: Logger): Promise<number> {
  const cut = setTimeout(() => {
    logger.warn({ drainTimeoutMs }, 'connections still open after the drain timeout: closing them');
    app.server.closeAllConnections();
  }, drainTimeoutMs);
  try {
    await app.close();
    return 0;
  } catch (err) {
    logger.error({ err }, 'closing the HTTP server failed');
    return 1;
  } finally {
    clearTimeout(cut);
  }
}

function urlOf(scheme: 'http' | 'https', address: AddressInfo | string | null): string {
  assert.ok(address !== null && typeof address === 'object', 'a TCP listener has an address once listening');
  const host = address.family === 'IPv6' ? `[${address.address}]` : address.address;
  return `${scheme}://${host}:${address.port}`;
}
