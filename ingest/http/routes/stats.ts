// /v1/stats: counts an operator (or a load balancer's dashboard) reads, all from memory: no
// request here touches the disk. Finished timers are counted until their retention ends;
// spilled timers (on disk, due at or past the horizon) are counted in pending too.
import type { DataDirSize } from '../listen/data-dir-size.ts';
import type { DiskSpaceCheck } from '../listen/disk-space.ts';
import type { HttpServer, RoutesOptions } from '../types.ts';

const count = { type: 'integer' } as const;

export const statsSchema = {
  type: 'object',
  properties: {
    pending: count,
    resident: count,
    spilled: count,
    in_flight: count,
    delivered: count,
    dead: count,
    cancelled: count,
    // Bulk cancels and queue purges since start, and the timers they cancelled.
    bulk_cancels: count,
    cancelled_in_bulk: count,
    // Epoch ms: pending timers due before it are in memory; null while nothing was ever spilled.
    horizon: { type: ['integer', 'null'] },
    memory: {
      type: 'object',
      properties: { budget_bytes: { type: ['integer', 'null'] }, resident_bytes: count, spill_metadata_bytes: count, add_times_bytes: count },
      required: ['budget_bytes', 'resident_bytes', 'spill_metadata_bytes', 'add_times_bytes'],
      additionalProperties: false,
    },
    wal: {
      type: 'object',
      properties: { last_seq: count, syncs: count, appends: count, poisoned: { type: 'boolean' }, last_sync_at: { type: ['string', 'null'], format: 'date-time' } },
      required: ['last_seq', 'syncs', 'appends', 'poisoned', 'last_sync_at'],
      additionalProperties: false,
    },
    // The data directory's file system: bytes its files take (null until first measured), bytes free
    // (null until first read) and the free-space minimum. Absent where the service has no disk check.
    disk: {
      type: 'object',
      properties: { data_bytes: { type: ['integer', 'null'] }, free_bytes: { type: ['integer', 'null'] }, free_bytes_min: count },
      required: ['data_bytes', 'free_bytes', 'free_bytes_min'],
      additionalProperties: false,
    },
    // Paused queues, their due timers held now, and timers that went out after being held (engine/queue-pause.ts).
    paused_queues: count,
    held: count,
    held_released: count,
    // PATCHes applied since start; timers a PATCH changed (their revision and fire time held apart) and that table's memory.
    reschedules: {
      type: 'object',
      properties: { applied: count, redirects: count, redirect_bytes: count },
      required: ['applied', 'redirects', 'redirect_bytes'],
      additionalProperties: false,
    },
    // Schedules, and their occurrences since start (engine/schedules/).
    schedules: {
      type: 'object',
      properties: { count, paused: count, occurrences_created: count, catch_up_created: count, skipped: count, catch_up_cancelled: count, occurrences_fired: count },
      required: ['count', 'paused', 'occurrences_created', 'catch_up_created', 'skipped', 'catch_up_cancelled', 'occurrences_fired'],
      additionalProperties: false,
    },
  },
  required: ['pending', 'resident', 'spilled', 'in_flight', 'delivered', 'dead', 'cancelled', 'bulk_cancels', 'cancelled_in_bulk', 'horizon', 'memory', 'wal', 'paused_queues', 'held', 'held_released', 'reschedules', 'schedules'],
  additionalProperties: false,
} as const;

/** The data directory's disk, as GET /v1/stats shows it. */
export interface StatsDisk {
  readonly check: DiskSpaceCheck;
  readonly size: DataDirSize;
}

export interface StatsRoutesOptions extends RoutesOptions {
  readonly disk?: StatsDisk | undefined;
}

export async function statsRoutes(app: HttpServer, { engine, disk }: StatsRoutesOptions): Promise<void> {
  app.get('/v1/stats', { schema: { response: { 200: statsSchema } } }, async () => statsBody(engine, disk));
}

/** The body of GET /v1/stats (also what each `counters` event of GET /v1/events carries). */
export function statsBody(engine: RoutesOptions['engine'], disk?: StatsDisk): Record<string, unknown> {
  const stats = engine.stats();
  const counts = stats.counts;
  const wal = engine.log;
  const spill = stats.spill;
  const holds = engine.queueHoldStats();
  return {
    pending: stats.pending,
    resident: stats.resident,
    spilled: spill.spilled,
    in_flight: counts.delivering,
    delivered: counts.delivered,
    dead: counts.dead,
    cancelled: counts.cancelled,
    bulk_cancels: stats.bulkCancels,
    cancelled_in_bulk: stats.timersCancelledInBulk,
    horizon: Number.isFinite(spill.watermarkMs) ? spill.watermarkMs : null,
    memory: { budget_bytes: spill.budgetBytes ?? null, resident_bytes: spill.residentBytes, spill_metadata_bytes: spill.metadataBytes, add_times_bytes: stats.addTimes.bytes },
    wal: {
      last_seq: wal.lastSeq,
      syncs: wal.counters.syncs,
      appends: wal.counters.appends,
      poisoned: wal.poisoned !== undefined,
      last_sync_at: wal.counters.lastSyncAtMs === undefined ? null : new Date(wal.counters.lastSyncAtMs).toISOString(),
    },
    ...(disk === undefined ? {} : { disk: { data_bytes: disk.size.bytes() ?? null, free_bytes: disk.check.lastFreeBytes ?? null, free_bytes_min: disk.check.freeBytesMin } }),
    paused_queues: holds.pausedQueues,
    held: holds.held,
    held_released: holds.heldReleased,
    reschedules: { applied: stats.reschedules.applied, redirects: stats.reschedules.redirects, redirect_bytes: stats.reschedules.redirectBytes },
    schedules: {
      count: stats.schedules.count,
      paused: stats.schedules.paused,
      occurrences_created: stats.schedules.occurrencesCreated,
      catch_up_created: stats.schedules.catchUpCreated,
      skipped: stats.schedules.skipped,
      catch_up_cancelled: stats.schedules.catchUpCancelled,
      occurrences_fired: stats.schedules.occurrencesFired,
    },
  };
}
