// The OpenAPI paths of the routes a dashboard reads beside /v1/stats: the one-second series
// (stats-series.ts), the histogram of timers by when they are next due (due-histogram.ts) and the
// event stream (events.ts), which openapi.ts puts among its paths. Built once when the module
// loads; any thread.
import { statsSeriesLimits } from '../../../engine/limits.ts';
import { httpErrorCodes } from '../error-map.ts';
import { errorResponse, jsonOf, ref } from './openapi-parts.ts';
import { seriesSchema } from './stats-series.ts';
import { dueHistogramSchema } from './due-histogram.ts';

const minutes = (statsSeriesLimits.sampleIntervalMs * statsSeriesLimits.samplesMax) / 60_000;

export const dashboardPaths = {
  '/v1/stats/series': {
    get: {
      operationId: 'getStatsSeries',
      summary: `The last ${minutes} minutes, a sample a second`,
      description: [
        `The service keeps a sample a second (the last ${statsSeriesLimits.samplesMax}, from its start), answered as columns, oldest first, one entry a sample: \`at_ms\` (epoch ms, when it was taken), \`adds\` (timers added in that second), \`deliveries\` (attempts delivered), \`failures\` (attempts failed) and \`lateness_ms\` (\`p50\`, \`p99\`, \`max\` of delivery start − fire time of the first attempts started in that second; null for a second with none).`,
        'From memory; restarts with the service. `after_ms` gives only the samples taken after it.',
      ].join('\n\n'),
      parameters: [{ name: 'after_ms', in: 'query', required: false, description: 'Only samples taken after this (epoch ms): a poller passes the last `at_ms` it has.', schema: { type: 'integer', minimum: 0 } }],
      responses: {
        '200': { description: 'The samples.', content: jsonOf(seriesSchema) },
        '400': errorResponse('REQUEST_INVALID: a bad `after_ms`, or an unknown query parameter.', [httpErrorCodes.requestInvalid]),
        '401': ref('responses', 'Unauthorized'),
      },
    },
  },
  '/v1/stats/due-histogram': {
    get: {
      operationId: 'getDueHistogram',
      summary: 'Waiting timers by when they are next due',
      description: [
        'Pending timers (retrying and held ones too), in memory and spilled to disk alike, in five disjoint buckets by when each is next due: `minute` (before now + 1 minute, overdue ones included), `hour`, `day`, `month` (30 days) and `beyond`. Each bucket but the last names its end (`until`, `until_ms`): now + its span, rounded up to the next minute, or, where it lies past the memory horizon (the spill watermark), to the next spill bucket (an hour). Counts are exact for those edges.',
        '`total` equals `/v1/stats` `pending`; `resident` counts the waiting timers in memory, `spilled` those on disk. From counts kept in memory: no timer is read, however many there are.',
      ].join('\n\n'),
      responses: {
        '200': { description: 'The histogram.', content: jsonOf(dueHistogramSchema) },
        '401': ref('responses', 'Unauthorized'),
      },
    },
  },
};
