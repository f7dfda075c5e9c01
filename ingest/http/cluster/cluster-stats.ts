// /v1/stats and /v1/cluster in cluster mode: this node's partitions (each with its epoch and
// counts, from its engine's memory) and the cluster's totals, which add every other node's own
// totals (asked once a node, forwarded, so the node answers for itself alone); and the node's
// ring of one-second samples, with the dashboard's routes over it (dashboard-routes.ts).
// Registered by the cluster front (front.ts); main thread.
//
//   GET /v1/stats    {"node": {"node_id", "partitions": [{partition, epoch, pending, …}], "totals": {…}, "sends_refused_total"},
//                     "cluster": {"nodes", "totals": {…}, "sends_refused_total", "unreachable": [address…], "moving": [partition…]}}
//                    (a forwarded request gets "node" alone)
//   GET /v1/cluster  {"node_id", "partitions", "owned": [{partition, epoch, last_seq, checkpoint_seq, replay_records}],
//                     "owners": [{partition, here, address}]}
//                    An owner applies each record as it commits it: its lag is what a takeover of the
//                    partition would replay, the records past its last checkpoint (replay_records).
import type { Engine } from '../../../engine/engine.ts';
import { StatsSeries } from '../../../engine/stats-series.ts';
import type { ClusterRouter } from '../../../cluster/router.ts';
import type { HttpServer } from '../types.ts';
import { clusterDashboardRoutes } from './dashboard-routes.ts';
import { type ForwardAnswer, forwardedHeader, type ForwardRequest } from './forwarder.ts';
import { nodeSeriesSources, type SeriesDirectory } from './node-series.ts';

const countNames = ['pending', 'resident', 'spilled', 'in_flight', 'delivered', 'dead', 'cancelled'] as const;
type Counts = Record<(typeof countNames)[number], number>;

/** A directory that also knows its partitions' epochs, dispatchers and refused sends (the node runner does); the router's interface does not require them. */
type WithEpochs = SeriesDirectory & { epochOf?(partition: number): bigint | undefined; readonly sendsRefused?: number };

function countsOf(engine: Engine): Counts {
  const stats = engine.stats();
  return {
    pending: stats.pending,
    resident: stats.resident,
    spilled: stats.spill.spilled,
    in_flight: stats.counts.delivering,
    delivered: stats.counts.delivered,
    dead: stats.counts.dead,
    cancelled: stats.counts.cancelled,
  };
}

function zero(): Counts {
  return { pending: 0, resident: 0, spilled: 0, in_flight: 0, delivered: 0, dead: 0, cancelled: 0 };
}

function add(into: Counts, counts: Readonly<Record<string, unknown>>): void {
  for (const name of countNames) into[name] += typeof counts[name] === 'number' ? counts[name] : 0;
}

export interface ClusterStatsOptions {
  readonly directory: WithEpochs;
  readonly router: ClusterRouter;
  readonly send: (address: string, request: ForwardRequest) => Promise<ForwardAnswer>;
}

/**
 * Registers GET /v1/stats and /v1/cluster, and the dashboard's routes (dashboard-routes.ts) over
 * this node's ring of one-second samples, which lives as long as the server; answers that ring
 * (GET /v1/queues reads each queue's deliveries a second from it).
 */
export function clusterStatsRoutes(app: HttpServer, { directory, router, send }: ClusterStatsOptions): StatsSeries {
  const epochOf = (partition: number): number | null => {
    const epoch = directory.epochOf?.(partition);
    return epoch === undefined ? null : Number(epoch);
  };

  const nodeStats = (): { node_id: string; partitions: (Counts & { partition: number; epoch: number | null })[]; totals: Counts; sends_refused_total: number } => {
    const totals = zero();
    const partitions: (Counts & { partition: number; epoch: number | null })[] = [];
    for (const partition of directory.owned()) {
      const engine = directory.engineOf(partition);
      if (engine === undefined) continue;
      const counts = countsOf(engine);
      add(totals, counts);
      partitions.push({ partition, epoch: epochOf(partition), ...counts });
    }
    return { node_id: directory.nodeId, partitions, totals, sends_refused_total: directory.sendsRefused ?? 0 };
  };

  /** GET /v1/stats's body for a request with `headers` (a forwarded one gets this node's alone). */
  const statsBody = async (headers: Readonly<Record<string, string | string[] | undefined>>): Promise<unknown> => {
    const node = nodeStats();
    if (headers[forwardedHeader] !== undefined) return { node };
    const totals = zero();
    add(totals, node.totals);
    const addresses = new Set<string>();
    const moving: number[] = [];
    for (const route of router.routes()) {
      if (route.kind === 'remote') addresses.add(route.address);
      else if (route.kind === 'moving') moving.push(route.partition);
    }
    const unreachable: string[] = [];
    let nodes = 1;
    let sendsRefused = node.sends_refused_total;
    await Promise.all(
      [...addresses].map(async (address) => {
        try {
          const answer = await send(address, { method: 'GET', path: '/v1/stats', headers: { ...headers, accept: 'application/json' } });
          if (answer.status !== 200) throw new Error(`answered ${answer.status}`);
          const other = (JSON.parse(answer.body.toString('utf8')) as { node: { totals: Record<string, unknown>; sends_refused_total?: unknown } }).node;
          add(totals, other.totals);
          if (typeof other.sends_refused_total === 'number') sendsRefused += other.sends_refused_total;
          nodes++;
        } catch {
          unreachable.push(address);
        }
      }),
    );
    return { node, cluster: { nodes, totals, sends_refused_total: sendsRefused, unreachable: unreachable.sort(), moving } };
  };
  app.get('/v1/stats', async (request) => statsBody(request.headers));

  // One ring of samples a life of the server, as on one node (server.ts), over this node's partitions.
  const sources = nodeSeriesSources(directory);
  const series = new StatsSeries(sources);
  series.start();
  app.addHook('onClose', (_app, done) => {
    series.stop();
    sources.close();
    done();
  });
  clusterDashboardRoutes(app, { directory, router, send, series, stats: statsBody });

  app.get('/v1/cluster', async () => ({
    node_id: directory.nodeId,
    partitions: directory.partitions,
    owned: directory.owned().map((partition) => {
      const engine = directory.engineOf(partition);
      const lastSeq = engine?.log.lastSeq ?? null;
      const checkpointSeq = engine?.stats().spill.checkpointSeq ?? null;
      return { partition, epoch: epochOf(partition), last_seq: lastSeq, checkpoint_seq: checkpointSeq, replay_records: lastSeq === null || checkpointSeq === null ? null : lastSeq - checkpointSeq };
    }),
    owners: router.routes().map((route) => ({ partition: route.partition, here: route.kind === 'local', address: directory.ownerAddress(route.partition) ?? null })),
  }));
  return series;
}
