// The routes of a cluster node that are not about timers: what the single-node server answers
// from its one engine (health, /metrics) answered from the node's partition
// directory instead, since a node has no single stable engine (server.ts installs them in
// cluster mode beside the cluster front, front.ts). Main thread, fastify's.
//
//   GET /healthz     the process serves
//   GET /readyz      200 once the node has joined and its checks pass (the cluster database
//                    reachable), else 503 {"status": "not-ready", "reason"}
//   GET /metrics     this node's partitions: owned, their timers by state, sends refused past a
//                    lease deadline (cluster_sends_refused_total), and the caller's metrics
//
// /v1/clock is not served: a cluster runs on the real clock, so it is 404 as on a real-clock node.
import type { Registry } from 'prom-client';
import type { PartitionDirectory } from '../../../cluster/partition-directory.ts';
import type { TimerStateName } from '../../../engine/engine.ts';
import type { PeerGuard } from '../listen/peer-guard.ts';
import type { HttpServer } from '../types.ts';

/** A directory that also counts the sends its workers refused past a lease deadline (the node runner does). */
export type NodeDirectory = PartitionDirectory & { readonly sendsRefused?: number };

export interface ClusterNodeRoutesOptions {
  readonly directory: NodeDirectory;
  /** Why this node is not ready (not joined, its database out of reach), or undefined when it is. */
  readonly notReady?: (() => Promise<string | undefined>) | undefined;
  readonly guard: PeerGuard;
  readonly metrics?: ((registry: Registry) => void | Promise<void>) | undefined;
}

const states: readonly TimerStateName[] = ['pending', 'delivering', 'retrying', 'delivered', 'dead', 'cancelled'];

const statusSchema = {
  type: 'object',
  properties: { status: { type: 'string' }, reason: { type: 'string' } },
  required: ['status'],
  additionalProperties: false,
} as const;

export async function clusterNodeRoutes(app: HttpServer, options: ClusterNodeRoutesOptions): Promise<void> {
  app.get('/healthz', { schema: { response: { 200: statusSchema } } }, async () => ({ status: 'ok' }));
  app.get('/readyz', { schema: { response: { 200: statusSchema, 503: statusSchema } } }, async (_request, reply) => {
    const reason = await options.notReady?.();
    if (reason !== undefined) return reply.code(503).send({ status: 'not-ready', reason });
    return reply.send({ status: 'ready' });
  });

  let registry: Promise<Registry> | undefined;
  app.get('/metrics', async (_request, reply) => {
    registry ??= nodeMetrics(options);
    const built = await registry;
    reply.header('content-type', built.contentType);
    return built.metrics();
  });
}

/** The node's registry, read at scrape time (prom-client loaded at the first scrape, as routes/metrics.ts does). */
async function nodeMetrics({ directory, guard, metrics }: ClusterNodeRoutesOptions): Promise<Registry> {
  // prom-client is CommonJS: its classes are on the module object, the default export of a
  // dynamic import (the bundle, bin/bundle.js, gives no named exports for a CommonJS chunk).
  const [{ default: promClient }, { peerGuardMetrics }] = await Promise.all([import('prom-client'), import('../routes/metric-registry.ts')]);
  const { Counter, Gauge, Registry } = promClient;
  const registry = new Registry();
  new Gauge({
    name: 'fermata_cluster_partitions',
    help: "The cluster's partition count.",
    registers: [registry],
    collect() {
      this.set(directory.partitions);
    },
  });
  new Gauge({
    name: 'fermata_cluster_partitions_owned',
    help: 'Partitions this node owns now.',
    registers: [registry],
    collect() {
      this.set(directory.owned().length);
    },
  });
  new Gauge({
    name: 'fermata_timers',
    help: "Resident timers by state in this node's partitions (finished ones until their retention ends).",
    labelNames: ['partition', 'state'],
    registers: [registry],
    collect() {
      this.reset();
      for (const partition of directory.owned()) {
        const counts = directory.engineOf(partition)?.stats().counts;
        if (counts === undefined) continue;
        for (const state of states) this.set({ partition: String(partition), state }, counts[state]);
      }
    },
  });
  new Counter({
    name: 'fermata_cluster_sends_refused_total',
    help: "Deliveries this node's workers did not send because the partition's local lease deadline had passed.",
    registers: [registry],
    collect() {
      this.reset();
      this.inc(directory.sendsRefused ?? 0);
    },
  });
  peerGuardMetrics(registry, guard);
  await metrics?.(registry);
  return registry;
}
