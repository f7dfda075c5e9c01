// GET /v1/stats/due-histogram: pending timers (retrying and held ones too), resident and spilled,
// by when they are next due, in five disjoint buckets: the next minute (overdue ones included),
// hour, day, 30 days, and beyond. Each bucket names the edge it ends at: now + its span, rounded
// up to the histogram's slot (a minute; past the spill watermark, a spill bucket), so its count
// is exact (engine/due-histogram.ts). From counts kept in memory: no timer is read. Main thread.
import { dueHistogramBucketNames } from '../../../engine/due-histogram.ts';
import { isoOf } from '../iso-time.ts';
import type { HttpServer, RoutesOptions } from '../types.ts';
import { onlyQueryParameters } from './query-parameters.ts';

const count = { type: 'integer', minimum: 0 } as const;

export const dueHistogramSchema = {
  type: 'object',
  properties: {
    now: { type: 'string', format: 'date-time' },
    now_ms: { type: 'integer' },
    buckets: {
      type: 'array',
      items: {
        type: 'object',
        properties: {
          name: { enum: [...dueHistogramBucketNames] },
          until: { type: ['string', 'null'], format: 'date-time' },
          until_ms: { type: ['integer', 'null'] },
          count,
        },
        required: ['name', 'until', 'until_ms', 'count'],
        additionalProperties: false,
      },
      minItems: dueHistogramBucketNames.length,
      maxItems: dueHistogramBucketNames.length,
    },
    total: count,
    resident: count,
    spilled: count,
  },
  required: ['now', 'now_ms', 'buckets', 'total', 'resident', 'spilled'],
  additionalProperties: false,
} as const;

export async function dueHistogramRoutes(app: HttpServer, { engine }: RoutesOptions): Promise<void> {
  app.get('/v1/stats/due-histogram', { schema: { response: { 200: dueHistogramSchema } }, preValidation: onlyQueryParameters('GET /v1/stats/due-histogram', []) }, async () => {
    const histogram = engine.dueHistogram();
    const { edgesMs, counts } = histogram;
    return {
      now: isoOf(histogram.nowMs),
      now_ms: histogram.nowMs,
      buckets: dueHistogramBucketNames.map((name, k) => {
        const until = edgesMs[k];
        return { name, until: until === undefined ? null : isoOf(until), until_ms: until ?? null, count: counts[k] as number };
      }),
      total: histogram.resident + histogram.spilled,
      resident: histogram.resident,
      spilled: histogram.spilled,
    };
  });
}
