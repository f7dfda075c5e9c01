// `fermata serve --cluster`: a cluster node's life. The HTTP front listens first (its bound port
// is the address other nodes forward to, unless "cluster.advertise" names one), then the node
// joins (cluster/node.ts: membership, the ownership loop, an engine and a dispatcher per
// partition it owns, one pool of delivery workers). On SIGTERM or SIGINT every partition is
// handed over cleanly first (its dispatcher stops, its engine closes, its lease is released, so
// the next owner takes it at once with nothing delivered twice), then the front drains and the
// process exits 0. A node keeps no state of its own beyond its id: the data directory is a cache
// (<data>/partitions/<p>) and the cluster database the truth. Main thread only.
import { availableParallelism } from 'node:os';
import type { Logger } from 'pino';
import { openClusterPool } from '../../cluster/connection.ts';
import { resolveNodeId } from '../../cluster/membership.ts';
import { ClusterNode } from '../../cluster/node.ts';
import { systemClock } from '../../engine/engine.ts';
import { nodeFileSystem } from '../../engine/fs/node-file-system.ts';
import { memoryBudget, residentSlotsFor } from '../../engine/memory-budget.ts';
import { TargetGuard } from '../../dispatch/target-guard.ts';
import { isLoopbackHost } from '../../ingest/http/listen/bearer-auth.ts';
import { createClusterFront } from './cluster-front.ts';
import type { ClusterSettings } from './cluster-settings.ts';
import { logStartFailure } from './errors.ts';
import type { ServeSettings } from './settings.ts';
import { stopRequested } from './stop-signals.ts';

export async function runClusterService(settings: ServeSettings, cluster: ClusterSettings, logger: Logger): Promise<number> {
  const stopSignal = stopRequested(logger);
  const allowLoopback = isLoopbackHost(settings.listen.host);
  const guard = new TargetGuard({ allow: settings.dispatch.allow, allowLoopback });
  const budget = memoryBudget(settings.memoryBudgetBytes);
  const front = createClusterFront(settings.tokens, logger);
  let port: number;
  try {
    port = await front.listen(settings.listen.host, settings.listen.port);
  } catch (err) {
    logStartFailure(logger, err, `cannot listen on ${settings.listen.host}:${settings.listen.port}`);
    return (err as NodeJS.ErrnoException).code === 'EADDRINUSE' ? 2 : 1;
  }
  const host = settings.listen.host.includes(':') ? `[${settings.listen.host}]` : settings.listen.host;
  logger.info({ url: `http://${host}:${port}` }, 'listening');
  const sql = openClusterPool(cluster.url);
  let node: ClusterNode;
  try {
    const nodeId = await resolveNodeId(nodeFileSystem, settings.dataDir, cluster.nodeId);
    node = await ClusterNode.start({
      sql,
      nodeId,
      advertise: cluster.advertise ?? `${host}:${port}`,
      dataDir: settings.dataDir,
      logger,
      clock: systemClock,
      leaseSettings: cluster.lease,
      // The budget's slots are the node's, shared by its partitions' stores as they fill.
      store: { capacityMax: residentSlotsFor(budget.bytes) },
      checkTarget: (target) => guard.checkTargetAtAdmit(target),
      dispatch: {
        threads: settings.dispatch.threads ?? Math.max(1, availableParallelism() - 1),
        allow: settings.dispatch.allow,
        allowLoopback,
        signingSecrets: settings.dispatch.signingSecrets,
        ca: settings.dispatch.ca,
      },
    });
  } catch (err) {
    logStartFailure(logger, err, 'cannot join the cluster');
    await front.close();
    await sql.end({ timeout: 1 });
    return 1;
  }
  front.attach(node);
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
  await front.close();
  await sql.end({ timeout: 5 });
  logger.info({ exitCode }, 'stopped');
  return exitCode;
}
