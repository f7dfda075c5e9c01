// `fermata serve --cluster`: a cluster node's life. The schema is checked and the partition count
// read, then the HTTP server listens in cluster mode (ingest/http/server.ts: the router's front,
// HTTP/1.1 and h2c on the cleartext port, and the TLS port, HTTP/3 and gRPC when configured, with the
// same routes; the cleartext port's bound port is the address other nodes forward to,
// unless "cluster.advertise" names one) with /readyz red and requests on timers answering
// PARTITION_MOVING, then the node joins (cluster/node.ts: membership, the ownership loop, an
// engine and a dispatcher per partition it owns, one pool of delivery workers) and the server
// serves through it (cluster-joining.ts). /readyz is red again while the cluster database does
// not answer within 2 s. On SIGTERM or SIGINT every partition is
// handed over cleanly first (its dispatcher stops, its engine closes, its lease is released, so
// the next owner takes it at once with nothing delivered twice), then the front drains and the
// process exits 0. SIGHUP and POST /v1/admin/reload put new tokens, signing secrets and
// allow-list in force as on one node (cli/serve/reload.ts). A node keeps no state of its own
// beyond its id: the data directory is a cache (<data>/partitions/<p>) and the cluster database
// the truth. Main thread only.
import { availableParallelism } from 'node:os';
import type { Logger } from 'pino';
import { openClusterPool } from '../../cluster/connection.ts';
import { ClusterQueues } from '../../cluster/cluster-queues.ts';
import { resolveNodeId } from '../../cluster/membership.ts';
import { ClusterNode } from '../../cluster/node.ts';
import { systemClock } from '../../engine/engine.ts';
import { nodeFileSystem } from '../../engine/fs/node-file-system.ts';
import { memoryBudget, residentSlotsFor } from '../../engine/memory-budget.ts';
import { TargetGuard } from '../../dispatch/target-guard.ts';
import { isLoopbackHost } from '../../ingest/http/listen/bearer-auth.ts';
import { requireCurrentSchema } from '../../cluster/schema/migrate.ts';
import { createHttpServer, type HttpServer } from '../../ingest/http/server.ts';
import { Access } from '../../ingest/auth/access.ts';
import { AuditTrail } from '../../ingest/auth/audit.ts';
import { advertiseHttp3 } from '../../ingest/http3/alt-svc.ts';
import { JoiningDirectory } from './cluster-joining.ts';
import type { ClusterSettings } from './cluster-settings.ts';
import { logStartFailure } from './errors.ts';
import { PortInUseError, startClusterPorts } from './listeners.ts';
import { PeerGuard } from '../../ingest/http/listen/peer-guard.ts';
import { Reloader, reloadOnHangup } from './reload.ts';
import type { ServeSettings } from './settings.ts';
import { stopRequested } from './stop-signals.ts';

/**
 * Runs a cluster node until a stop signal; `reread` reads the settings again from the same flags,
 * config file and environment, for a reload (SIGHUP, POST /v1/admin/reload: cli/serve/reload.ts).
 */
export async function runClusterService(settings: ServeSettings, cluster: ClusterSettings, logger: Logger, reread: () => ServeSettings = () => settings): Promise<number> {
  const stopSignal = stopRequested(logger);
  const allowLoopback = isLoopbackHost(settings.listen.host);
  // Replaced by a reload; adds ask whichever is in force.
  let guard = new TargetGuard({ allow: settings.dispatch.allow, allowLoopback });
  // The node, once it has joined: a reload reconfigures its delivery workers.
  let node: ClusterNode | undefined;
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
    // A node's log is in the cluster database and its data directory a cache: it has no free-space gate to move.
    setDiskFreeBytesMin: () => undefined,
    reconfigureDelivery: async (delivery) => node?.reconfigureDelivery(delivery),
  });
  reloadOnHangup(reloader);
  const budget = memoryBudget(settings.memoryBudgetBytes);
  const sql = openClusterPool(cluster.url);
  let directory: JoiningDirectory;
  let queues: ClusterQueues;
  try {
    await requireCurrentSchema(sql);
    const [row] = await sql<{ partitions: number }[]>`SELECT partitions FROM fermata_cluster`;
    if (row === undefined) throw new Error('the database holds no fermata cluster: run `fermata cluster init` first');
    directory = new JoiningDirectory(row.partitions, await resolveNodeId(nodeFileSystem, settings.dataDir, cluster.nodeId));
    queues = new ClusterQueues({ sql, partitions: row.partitions, logger: logger.child({ component: 'queues' }), checkTarget: (target) => guard.checkTargetAtAdmit(target) });
  } catch (err) {
    logStartFailure(logger, err, 'cannot join the cluster');
    await sql.end({ timeout: 1 });
    return 1;
  }
  const peerGuard = new PeerGuard({ logger: logger.child({ component: 'http' }) });
  const notReady = readiness(directory, sql);
  const front = createHttpServer({
    peerGuard,
    logger: logger.child({ component: 'http' }),
    access,
    audit,
    reload: (who) => reloader.reload(who),
    cluster: { directory, secret: cluster.secret, clock: systemClock, notReady, queues },
    ...(settings.tls === undefined ? {} : { tls: settings.tls.credentials }),
  });
  if (settings.http3 !== undefined) advertiseHttp3(front, settings.http3.port);
  let port: number;
  try {
    await front.listen({ host: settings.listen.host, port: settings.listen.port });
    port = boundPort(front);
  } catch (err) {
    logStartFailure(logger, err, `cannot listen on ${settings.listen.host}:${settings.listen.port}`);
    await front.close().catch(() => undefined);
    await sql.end({ timeout: 1 });
    return (err as NodeJS.ErrnoException).code === 'EADDRINUSE' ? 2 : 1;
  }
  const host = settings.listen.host.includes(':') ? `[${settings.listen.host}]` : settings.listen.host;
  logger.info({ url: `http://${host}:${port}` }, 'listening');
  // The TLS port, HTTP/3 and gRPC serve through the same front; nodes forward to each other on the cleartext port.
  const secure = await startClusterPorts(settings, front, { access, guard: peerGuard, notReady }, logger).catch((err: unknown) => {
    logStartFailure(logger, err, 'cannot listen on the TLS or gRPC port');
    return err instanceof PortInUseError ? ('in use' as const) : ('failed' as const);
  });
  if (typeof secure === 'string') {
    await front.close().catch(() => undefined);
    await sql.end({ timeout: 1 });
    return secure === 'in use' ? 2 : 1;
  }
  // The settings a reload may have changed since the start, as the workers start with them.
  const delivery = reloader.settings.dispatch;
  try {
    node = await ClusterNode.start({
      sql,
      nodeId: directory.nodeId,
      advertise: cluster.advertise ?? `${host}:${port}`,
      dataDir: settings.dataDir,
      logger,
      clock: systemClock,
      leaseSettings: cluster.lease,
      // The budget's slots are the node's, shared by its partitions' stores as they fill.
      store: { capacityMax: residentSlotsFor(budget.bytes) },
      checkTarget: (target) => guard.checkTargetAtAdmit(target),
      queues,
      // Read again at each loader step, as a single node's: a cgroup limit lowered at run time spills at once.
      memory: { budget: () => memoryBudget(settings.memoryBudgetBytes), limits: { farHorizonMs: settings.farHorizonMs } },
      dispatch: {
        threads: settings.dispatch.threads ?? Math.max(1, availableParallelism() - 1),
        allow: delivery.allow,
        allowLoopback,
        signingSecrets: delivery.signingSecrets,
        queueSigningSecrets: delivery.queueSigningSecrets,
        ca: settings.dispatch.ca,
      },
    });
  } catch (err) {
    logStartFailure(logger, err, 'cannot join the cluster');
    await secure.stop();
    await front.close();
    await sql.end({ timeout: 1 });
    return 1;
  }
  // A reload while the node was joining reached no workers: they get what is in force now.
  const current = reloader.settings.dispatch;
  if (current !== delivery) await node.reconfigureDelivery({ allow: current.allow, signingSecrets: current.signingSecrets, queueSigningSecrets: current.queueSigningSecrets });
  directory.attach(node);
  logger.info({ nodeId: node.nodeId, partitions: node.partitions, owned: node.owned(), threads: node.threads }, 'cluster node joined');

  const signal = await stopSignal;
  logger.info({ signal }, 'stopping: handing every partition over');
  let exitCode = 0;
  try {
    await node.stop();
  } catch (err) {
    logger.error({ err }, 'handing the partitions over failed');
    exitCode = 1;
  }
  await secure.stop();
  await front.close();
  await sql.end({ timeout: 5 });
  logger.info({ exitCode }, 'stopped');
  return exitCode;
}

/** How long the cluster database has to answer /readyz's probe. */
const databaseProbeMs = 2000;

/** /readyz's reason: not joined yet, or the cluster database not answering (one probe at a time, shared by the requests that arrive meanwhile). */
function readiness(directory: JoiningDirectory, sql: ReturnType<typeof openClusterPool>): () => Promise<string | undefined> {
  let probe: Promise<string | undefined> | undefined;
  const ask = async (): Promise<string | undefined> => {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<string>((resolve) => {
      timer = setTimeout(() => resolve(`the cluster database did not answer within ${databaseProbeMs} ms`), databaseProbeMs);
    });
    try {
      return await Promise.race([sql`SELECT 1`.then(() => undefined), late]);
    } catch (err) {
      return `the cluster database cannot be reached: ${(err as Error).message}`;
    } finally {
      clearTimeout(timer);
    }
  };
  return async () => {
    if (!directory.joined) return 'this node has not joined the cluster yet';
    probe ??= ask().finally(() => {
      probe = undefined;
    });
    return probe;
  };
}

function boundPort(app: HttpServer): number {
  const address = app.server.address();
  if (address === null || typeof address !== 'object') throw new Error('the HTTP server is not listening');
  return address.port;
}
