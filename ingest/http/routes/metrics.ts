// GET /metrics: Prometheus text, from prom-client (the registries: metric-registry.ts). The
// registry is built at the first scrape, not when the server is: prom-client and what it loads
// (OpenTelemetry's API among them) are a tenth of the modules a start would otherwise load
// before listening, and nothing but this route needs them. Scrapes that arrive while it is being
// built wait for the same one. Main thread.
import type { Registry } from 'prom-client';
import type { PeerGuard } from '../listen/peer-guard.ts';
import type { HttpServer, RoutesOptions } from '../types.ts';

export interface MetricsRoutesOptions extends RoutesOptions {
  /** The peer guard whose counters are served beside the engine's. */
  readonly guard?: PeerGuard;
  /** Registers more metrics (the dispatcher's), read at scrape time like the engine's; called once, at the first scrape. */
  readonly metrics?: ((registry: Registry) => void | Promise<void>) | undefined;
}

export async function metricsRoutes(app: HttpServer, options: MetricsRoutesOptions): Promise<void> {
  let registry: Promise<Registry> | undefined;
  app.get('/metrics', async (_request, reply) => {
    registry ??= metricsRegistry(options);
    const built = await registry;
    reply.header('content-type', built.contentType);
    return built.metrics();
  });
}

async function metricsRegistry({ engine, guard, metrics }: MetricsRoutesOptions): Promise<Registry> {
  const { engineMetrics, peerGuardMetrics } = await import('./metric-registry.ts');
  const registry = engineMetrics(engine);
  if (guard !== undefined) peerGuardMetrics(registry, guard);
  await metrics?.(registry);
  return registry;
}
