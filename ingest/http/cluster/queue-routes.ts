// /v1/queues in cluster mode: a queue's config and pause are the cluster's (the fermata_queues
// table, cluster/cluster-queues.ts), its counts the sum of its partitions'. Registered by the
// cluster front (front.ts); main thread, fastify's.
//
//   PUT /v1/queues/{name}            validated as on one node, committed to the table, applied to
//   POST …/pause, …/resume           this node's partitions before the answer; every other node
//   DELETE /v1/queues/{name}         applies it within a poll (docs/cluster.md, "Queues")
//   GET /v1/queues                   every queue the table holds or a partition's engine names,
//                                    config and pause from the table, pending, in_flight and
//                                    delivered_per_s (each node's from its ring of samples,
//                                    node-series.ts) summed over the nodes (each asked once,
//                                    forwarded, answers for its own partitions alone, as GET
//                                    /v1/stats does)
//   GET /v1/queues/{name}            the table's row, or the defaults for a queue known only by
//                                    its timers; 404 when neither
//
// DELETE counts the queue's timers in the whole cluster first: 409 QUEUE_NOT_EMPTY with that
// count while any wait. A node that does not answer, or a partition without an owner, fails the
// reads and the delete that need every partition (503 PARTITION_MOVING): a count is never given
// with a part missing. Without the cluster database (a front over a fixture directory) every
// route is 501 CLUSTER_UNSUPPORTED.
import type { ClusterQueues, QueueRow } from '../../../cluster/cluster-queues.ts';
import type { PartitionDirectory } from '../../../cluster/partition-directory.ts';
import type { ClusterRouter } from '../../../cluster/router.ts';
import { defaultQueue } from '../../../engine/batch/timer-batch.ts';
import { errorCodes, FermataError } from '../../../engine/errors.ts';
import { defaultQueueConfig, type QueueConfig } from '../../../engine/queues.ts';
import { httpErrorCodes, HttpProblem } from '../error-map.ts';
import { deletedSchema as queueDeletedSchema, queueListSchema, queueViewSchema } from '../routes/queues.ts';
import type { StatsSeries } from '../../../engine/stats-series.ts';
import type { HttpServer } from '../types.ts';
import { type ForwardAnswer, forwardedHeader, type ForwardRequest } from './forwarder.ts';

export interface ClusterQueueRoutesOptions {
  readonly directory: PartitionDirectory;
  readonly router: ClusterRouter;
  readonly send: (address: string, request: ForwardRequest) => Promise<ForwardAnswer>;
  /** The cluster's queue table; undefined: no cluster database, the routes are 501. */
  readonly queues: ClusterQueues | undefined;
  /** This node's ring of one-second samples: its partitions' deliveries a second, by queue. */
  readonly series: StatsSeries;
}

interface NameParams {
  readonly name: string;
}

interface Counts {
  pending: number;
  in_flight: number;
  delivered_per_s: number;
}

const noCounts = (): Counts => ({ pending: 0, in_flight: 0, delivered_per_s: 0 });

type Headers = Readonly<Record<string, string | string[] | undefined>>;

const noSuchQueue = (name: string): HttpProblem => new HttpProblem(httpErrorCodes.notFound, `no queue ${name}`);

const viewBody = (name: string, config: QueueConfig | null, paused: boolean): Record<string, unknown> => ({ name, ...(config ?? defaultQueueConfig), paused });

export function clusterQueueRoutes(app: HttpServer, options: ClusterQueueRoutesOptions): void {
  const { queues } = options;
  if (queues === undefined) {
    const unsupported = async (): Promise<never> => {
      throw new FermataError(errorCodes.clusterUnsupported, 'queue configs and pauses are cluster-wide and this node has no cluster database: cluster mode does not serve this route here (docs/api.md, Cluster mode)');
    };
    app.get('/v1/queues', unsupported);
    app.get('/v1/queues/:name', unsupported);
    app.put('/v1/queues/:name', unsupported);
    app.delete('/v1/queues/:name', unsupported);
    app.post('/v1/queues/:name/pause', unsupported);
    app.post('/v1/queues/:name/resume', unsupported);
    return;
  }
  const { directory, router, send, series } = options;

  /** The queues this node's engines name, with their timers waiting and in flight here. */
  const countsHere = (): Map<string, Counts> => {
    const counts = new Map<string, Counts>();
    for (const partition of directory.owned()) {
      const engine = directory.engineOf(partition);
      if (engine === undefined) continue;
      for (const { name } of engine.queues()) {
        const here = engine.queueCounts(name);
        const sum = counts.get(name) ?? noCounts();
        sum.pending += here.waiting;
        sum.in_flight += here.inFlight;
        counts.set(name, sum);
      }
    }
    for (const [name, sum] of counts) sum.delivered_per_s = series.deliveredPerSecond(name);
    return counts;
  };

  /** Every partition's counts: this node's and every other owner's (asked once each); 503 while a partition has no owner or an owner does not answer. */
  const countsEverywhere = async (headers: Headers): Promise<Map<string, Counts>> => {
    const counts = countsHere();
    const addresses = new Set<string>();
    for (const route of router.routes()) {
      if (route.kind === 'moving') throw new FermataError(errorCodes.partitionMoving, `partition ${route.partition} is moving between nodes: its queues cannot be counted now, try again`);
      if (route.kind === 'remote') addresses.add(route.address);
    }
    await Promise.all(
      [...addresses].map(async (address) => {
        const answer = await send(address, { method: 'GET', path: '/v1/queues', headers: { ...headers, accept: 'application/json' } });
        if (answer.status !== 200) throw new FermataError(errorCodes.partitionMoving, `the node at ${address} answered ${answer.status} for its queues: try again`);
        const listed = (JSON.parse(answer.body.toString('utf8')) as { queues: (Counts & { name: string })[] }).queues;
        for (const { name, pending, in_flight, delivered_per_s } of listed) {
          const sum = counts.get(name) ?? noCounts();
          sum.pending += pending;
          sum.in_flight += in_flight;
          sum.delivered_per_s += delivered_per_s;
          counts.set(name, sum);
        }
      }),
    );
    return counts;
  };

  /** The queues a list shows, by name: the table's live ones, and those the engines name (a deleted one while timers are in it). */
  const listing = (rows: readonly QueueRow[], counts: ReadonlyMap<string, Counts>): Record<string, unknown>[] => {
    const byName = new Map(rows.map((row) => [row.name, row]));
    const names = new Set<string>();
    for (const row of rows) if (!row.deleted) names.add(row.name);
    for (const [name, count] of counts) if (byName.get(name)?.deleted !== true || count.pending + count.in_flight > 0) names.add(name);
    return [...names].sort().map((name) => {
      const row = byName.get(name);
      const count = counts.get(name) ?? noCounts();
      return { ...viewBody(name, row?.deleted === false ? row.config : null, row?.deleted === false && row.paused), ...count };
    });
  };

  /** Whether the cluster knows the queue: the default one, a live row, or one a partition's engine names. */
  const isKnown = async (name: string, rows: readonly QueueRow[], headers: Headers): Promise<boolean> => {
    if (name === defaultQueue || rows.some((row) => row.name === name && !row.deleted)) return true;
    return (await countsEverywhere(headers)).has(name);
  };

  app.get('/v1/queues', { schema: { response: { 200: queueListSchema } } }, async (request) => {
    const rows = await queues.rows();
    // A forwarded request answers for this node's partitions alone.
    const counts = request.headers[forwardedHeader] !== undefined ? countsHere() : await countsEverywhere(request.headers);
    return { queues: listing(rows, counts) };
  });

  app.get<{ Params: NameParams }>('/v1/queues/:name', { schema: { response: { 200: queueViewSchema } } }, async (request) => {
    const { name } = request.params;
    const rows = await queues.rows();
    const row = rows.find((one) => one.name === name && !one.deleted);
    if (row !== undefined) return viewBody(name, row.config, row.paused);
    if (!(await isKnown(name, rows, request.headers))) throw noSuchQueue(name);
    return viewBody(name, null, false);
  });

  app.put<{ Params: NameParams; Body: unknown }>('/v1/queues/:name', { schema: { response: { 200: queueViewSchema } } }, async (request) => {
    const row = await queues.put(request.params.name, request.body);
    await queues.applyHere();
    return viewBody(row.name, row.config, row.paused);
  });

  for (const [action, paused] of [['pause', true], ['resume', false]] as const) {
    app.post<{ Params: NameParams }>(`/v1/queues/:name/${action}`, { schema: { response: { 200: queueViewSchema } } }, async (request) => {
      const { name } = request.params;
      if (!(await isKnown(name, await queues.rows(), request.headers))) throw noSuchQueue(name);
      const row = await queues.setPaused(name, paused);
      await queues.applyHere();
      return viewBody(row.name, row.config, row.paused);
    });
  }

  app.delete<{ Params: NameParams }>('/v1/queues/:name', { schema: { response: { 200: queueDeletedSchema } } }, async (request) => {
    const { name } = request.params;
    if (name === defaultQueue) throw new FermataError(errorCodes.queueProtected, `the ${defaultQueue} queue cannot be deleted (PUT sets its config)`, { queue: name });
    const rows = await queues.rows();
    const counts = await countsEverywhere(request.headers);
    if (!rows.some((row) => row.name === name && !row.deleted) && !counts.has(name)) throw noSuchQueue(name);
    const count = counts.get(name);
    const pending = count === undefined ? 0 : count.pending + count.in_flight;
    if (pending > 0) {
      throw new FermataError(errorCodes.queueNotEmpty, `queue ${name} has ${pending} timer(s) waiting in the cluster: cancel them or let them finish first`, { queue: name, pending });
    }
    await queues.delete(name);
    await queues.applyHere();
    return { name, deleted: true };
  });
}
