// GET /v1/stats/series: the ring of one-second samples (engine/stats-series.ts) as columns, oldest
// first, so a chart takes them as they come: timers added, deliveries and failed attempts in each
// second, and the fire lateness (p50, p99, max, ms) of the first attempts started in it (null
// for a second in which none started), and when the log last synced (to the second).
// `after_ms` gives only the samples taken after it (a page polling instead of reading
// /v1/events). All from memory. Main thread.
import type { SeriesColumns, SeriesSources, StatsSeries } from '../../../engine/stats-series.ts';
import { statsSeriesLimits } from '../../../engine/limits.ts';
import type { HttpServer, RoutesOptions } from '../types.ts';
import { onlyQueryParameters } from './query-parameters.ts';

export interface StatsSeriesRoutesOptions extends RoutesOptions {
  readonly series: StatsSeries;
}

const counts = { type: 'array', items: { type: 'integer' } } as const;
const millis = { type: 'array', items: { type: ['integer', 'null'] } } as const;

export const seriesSchema = {
  type: 'object',
  properties: {
    interval_ms: { type: 'integer' },
    samples_max: { type: 'integer' },
    wal_last_sync_at_ms: { type: ['integer', 'null'] },
    at_ms: counts,
    adds: counts,
    deliveries: counts,
    failures: counts,
    lateness_ms: {
      type: 'object',
      properties: { p50: millis, p99: millis, max: millis },
      required: ['p50', 'p99', 'max'],
      additionalProperties: false,
    },
  },
  required: ['interval_ms', 'samples_max', 'wal_last_sync_at_ms', 'at_ms', 'adds', 'deliveries', 'failures', 'lateness_ms'],
  additionalProperties: false,
} as const;

export const seriesQuerySchema = {
  type: 'object',
  properties: { after_ms: { type: 'integer', minimum: 0 } },
  additionalProperties: false,
} as const;

const plain = (column: Float64Array): number[] => Array.from(column);
const orNull = (column: Float64Array): Array<number | null> => Array.from(column, (ms) => (Number.isNaN(ms) ? null : ms));

/** The JSON body of a series (seriesSchema's). */
export interface SeriesBody {
  readonly interval_ms: number;
  readonly samples_max: number;
  readonly wal_last_sync_at_ms: number | null;
  readonly at_ms: number[];
  readonly adds: number[];
  readonly deliveries: number[];
  readonly failures: number[];
  readonly lateness_ms: { readonly p50: (number | null)[]; readonly p99: (number | null)[]; readonly max: (number | null)[] };
}

/** The JSON body of a series. */
export function seriesBody(columns: SeriesColumns, lastSyncAtMs: number): SeriesBody {
  return {
    interval_ms: statsSeriesLimits.sampleIntervalMs,
    samples_max: statsSeriesLimits.samplesMax,
    wal_last_sync_at_ms: Number.isNaN(lastSyncAtMs) ? null : lastSyncAtMs,
    at_ms: plain(columns.atMs),
    adds: plain(columns.adds),
    deliveries: plain(columns.deliveries),
    failures: plain(columns.failures),
    lateness_ms: { p50: orNull(columns.latenessP50Ms), p99: orNull(columns.latenessP99Ms), max: orNull(columns.latenessMaxMs) },
  };
}

export async function statsSeriesRoutes(app: HttpServer, { series }: StatsSeriesRoutesOptions): Promise<void> {
  app.get<{ Querystring: { after_ms?: number } }>('/v1/stats/series', { schema: { querystring: seriesQuerySchema, response: { 200: seriesSchema } }, preValidation: onlyQueryParameters('GET /v1/stats/series', ['after_ms']) }, async (request) =>
    seriesBody(series.columns(request.query.after_ms), series.lastSyncAtMs),
  );
}

/** A service without a dispatcher (tests, tools): its adds, and no deliveries. */
export function engineSeriesSources(engine: RoutesOptions['engine']): SeriesSources {
  return { added: () => engine.stats().rowsInserted, delivered: () => 0, failed: () => 0, lateness: () => undefined, deliveredByQueue: () => [], syncs: () => engine.log.counters.syncs };
}
