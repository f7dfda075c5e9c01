// Delivery metrics for GET /metrics, per queue: outcomes counted, failed attempts by kind, lateness and latency
// quantiles from the dispatcher's HDR histograms (delivery-stats.ts), and pull queues' waiting
// and leased timers. Everything is read at scrape time (collect callbacks), so delivery pays
// nothing for it beyond recording into the histograms. Main thread.
import { Counter, Gauge, type Registry } from 'prom-client';
import type { Dispatcher } from './dispatcher.ts';

const quantiles = [0.5, 0.99, 0.999, 1] as const;

export function registerDispatchMetrics(registry: Registry, dispatcher: Dispatcher): void {
  new Counter({
    name: 'fermata_deliveries_total',
    help: 'Delivery attempts recorded since start, by queue and outcome (delivered, retried, dead).',
    labelNames: ['queue', 'outcome'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [queue, stats] of dispatcher.stats()) {
        this.inc({ queue, outcome: 'delivered' }, stats.delivered);
        this.inc({ queue, outcome: 'retried' }, stats.retried);
        this.inc({ queue, outcome: 'dead' }, stats.dead);
      }
    },
  });
  new Counter({
    name: 'fermata_delivery_failures_total',
    help: 'Failed delivery attempts since start, by kind: status (a non-2xx answer), timeout, connect (refused, reset, DNS, unreachable), tls, guard (refused by the SSRF guard), other.',
    labelNames: ['kind'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [kind, count] of dispatcher.failuresByKind()) this.inc({ kind }, count);
    },
  });
  new Counter({
    name: 'fermata_deliveries_early_total',
    help: 'First delivery attempts that started before their fire time by the worker\'s clock (never early: must stay 0).',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(dispatcher.earlyDeliveries);
    },
  });
  new Gauge({
    name: 'fermata_deliveries_in_flight',
    help: 'Deliveries handed to workers whose outcome is not yet durable.',
    registers: [registry],
    collect() {
      this.set(dispatcher.inFlight);
    },
  });
  new Gauge({
    name: 'fermata_pull_timers',
    help: 'Due timers of "pull" queues waiting for a Flight DoGet, and leased to one (not yet acked, nacked or expired), by queue.',
    labelNames: ['queue', 'state'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [queue, counts] of dispatcher.pull.allCounts()) {
        this.set({ queue, state: 'waiting' }, counts.waiting);
        this.set({ queue, state: 'leased' }, counts.leased);
      }
    },
  });
  const quantileGauge = (name: string, help: string, pick: 'lateness' | 'latency'): void => {
    new Gauge({
      name,
      help,
      labelNames: ['queue', 'quantile'],
      registers: [registry],
      collect() {
        this.reset();
        for (const [queue, stats] of dispatcher.stats()) {
          const histogram = stats[pick];
          if (histogram.totalCount === 0) continue;
          for (const quantile of quantiles) this.set({ queue, quantile: String(quantile) }, histogram.getValueAtPercentile(quantile * 100));
        }
      },
    });
  };
  quantileGauge('fermata_delivery_lateness_ms', 'Delivery start minus fire time of first attempts, in ms, by queue (quantile 1 = max) since start.', 'lateness');
  quantileGauge('fermata_delivery_latency_ms', 'Request sent to the answer\'s head (or the failure), in ms, by queue (quantile 1 = max) since start.', 'latency');
}
