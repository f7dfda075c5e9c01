// fermata_audit_actions_total{action}: the audit trail's counts (audit.ts) in a prom-client
// registry, read at scrape time. Its own module, imported at the first scrape of /metrics as the
// other metrics are (prom-client is not needed to serve). Main thread.
import { Counter, type Registry } from 'prom-client';
import type { AuditTrail } from './audit.ts';

export function registerAuditMetric(registry: Registry, trail: AuditTrail): void {
  new Counter({
    name: 'fermata_audit_actions_total',
    help: 'Administrative actions recorded in the audit trail, by action.',
    labelNames: ['action'],
    registers: [registry],
    collect() {
      this.reset();
      for (const [action, count] of trail.counts()) this.inc({ action }, count);
    },
  });
}
