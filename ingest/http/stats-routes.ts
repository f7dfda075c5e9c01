// /v1/stats: counts an operator (or a load balancer's dashboard) reads, all from memory: no
// request here touches the disk. Finished timers are counted until their retention ends.
import type { HttpServer, RoutesOptions } from './server.ts';

const count = { type: 'integer' } as const;

const statsSchema = {
  type: 'object',
  properties: {
    pending: count,
    resident: count,
    spilled: count,
    in_flight: count,
    delivered: count,
    dead: count,
    cancelled: count,
    // Only null until the spill tier gives it a value.
    horizon: { type: 'null' },
    wal: {
      type: 'object',
      properties: { last_seq: count, syncs: count, appends: count, poisoned: { type: 'boolean' } },
      required: ['last_seq', 'syncs', 'appends', 'poisoned'],
      additionalProperties: false,
    },
  },
  required: ['pending', 'resident', 'spilled', 'in_flight', 'delivered', 'dead', 'cancelled', 'horizon', 'wal'],
  additionalProperties: false,
} as const;

export async function statsRoutes(app: HttpServer, { engine }: RoutesOptions): Promise<void> {
  app.get('/v1/stats', { schema: { response: { 200: statsSchema } } }, async () => {
    const counts = engine.countsByState();
    const wal = engine.log;
    return {
      pending: engine.pending,
      resident: engine.resident,
      // Every timer is resident until the spill tier (timers beyond the horizon, on disk) exists.
      spilled: 0,
      in_flight: counts.delivering,
      delivered: counts.delivered,
      dead: counts.dead,
      cancelled: counts.cancelled,
      // The horizon (how far ahead timers are kept in memory) is the spill tier's; none until then.
      horizon: null,
      wal: { last_seq: wal.lastSeq, syncs: wal.counters.syncs, appends: wal.counters.appends, poisoned: wal.poisoned !== undefined },
    };
  });
}
