// The OpenAPI paths of the routes a dashboard reads beside /v1/stats: the one-second series
// (stats-series.ts), the histogram of timers by when they are next due (due-histogram.ts) and the
// event stream (events.ts), which openapi.ts puts among its paths. Built once when the module
// loads; any thread.
import { statsSeriesLimits } from '../../../engine/limits.ts';
import { httpErrorCodes } from '../error-map.ts';
import { errorCodes } from '../../../engine/errors.ts';
import { errorResponse, jsonOf, logResponses, namedQueueSchema, queueNameSchema, ref, retryAfter } from './openapi-parts.ts';
import { seriesSchema } from './stats-series.ts';
import { dueHistogramSchema } from './due-histogram.ts';
import { deadRetryLimits, eventStreamLimits } from '../route-limits.ts';
import { deadRetriedSchema } from './dead-retry.ts';

/** A queue as GET /v1/queues lists it: the queue and its timers now. */
export const listedQueueSchema = {
  ...namedQueueSchema,
  properties: {
    ...namedQueueSchema.properties,
    pending: { type: 'integer', minimum: 0, description: 'Timers of the queue waiting: pending, retrying, held by a pause, in memory and spilled to disk alike (what its max_pending counts, with in_flight).' },
    in_flight: { type: 'integer', minimum: 0, description: 'Timers of the queue being delivered.' },
    delivered_per_s: { type: 'number', minimum: 0, description: 'Deliveries a second over the last minute.' },
  },
  required: [...namedQueueSchema.required, 'pending', 'in_flight', 'delivered_per_s'],
};

const minutes = (statsSeriesLimits.sampleIntervalMs * statsSeriesLimits.samplesMax) / 60_000;

/** Cluster mode's choice between the cluster's figures and this node's (ingest/http/cluster/dashboard-routes.ts). */
const scopeParameter = {
  name: 'scope',
  in: 'query',
  required: false,
  description: 'Cluster mode only (one node answers 400 to it): `cluster` (the default) for the whole cluster\'s figures, `node` for this node\'s partitions alone.',
  schema: { type: 'string', enum: ['cluster', 'node'] },
};

const clusterPartMissing = errorResponse('PARTITION_MOVING (cluster mode): a partition has no owner now, or its owner did not answer; the cluster\'s figures are never given with a part missing.', [errorCodes.partitionMoving], retryAfter);

export const dashboardPaths = {
  '/v1/stats/series': {
    get: {
      operationId: 'getStatsSeries',
      summary: `The last ${minutes} minutes, a sample a second`,
      description: [
        `The service keeps a sample a second (the last ${statsSeriesLimits.samplesMax}, from its start), answered as columns, oldest first, one entry a sample: \`at_ms\` (epoch ms, when it was taken), \`adds\` (timers added in that second), \`deliveries\` (attempts delivered), \`failures\` (attempts failed) and \`lateness_ms\` (\`p50\`, \`p99\`, \`max\` of delivery start − fire time of the first attempts started in that second; null for a second with none).`,
        '`wal_last_sync_at_ms`: the time of the last sample that saw the log make a durable write (a group commit), to the second; null when none since the start. From memory; restarts with the service. `after_ms` gives only the samples taken after it.',
        'In cluster mode each node keeps the samples of the partitions it owns; the answer is the cluster\'s (`scope=node`: this node\'s ring): the nodes\' samples summed by the second they were taken in, `at_ms` the end of that second, the seconds that have ended only; `lateness_ms` is the highest any node had in the second (for `p50` and `p99` an upper bound of the cluster\'s), `wal_last_sync_at_ms` the latest.',
      ].join('\n\n'),
      parameters: [{ name: 'after_ms', in: 'query', required: false, description: 'Only samples taken after this (epoch ms): a poller passes the last `at_ms` it has.', schema: { type: 'integer', minimum: 0 } }, scopeParameter],
      responses: {
        '200': { description: 'The samples.', content: jsonOf(seriesSchema) },
        '400': errorResponse('REQUEST_INVALID: a bad `after_ms` or `scope`, an unknown query parameter, or one given twice.', [httpErrorCodes.requestInvalid]),
        '401': ref('responses', 'Unauthorized'),
        '503': clusterPartMissing,
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
        'In cluster mode the counts are the whole cluster\'s, each partition\'s added up (`scope=node`: this node\'s partitions alone), and each bucket\'s `until` is the latest any partition used (a partition whose memory horizon is nearer rounds an edge earlier and counts the timers between the two in the next bucket).',
      ].join('\n\n'),
      parameters: [scopeParameter],
      responses: {
        '200': { description: 'The histogram.', content: jsonOf(dueHistogramSchema) },
        '400': errorResponse('REQUEST_INVALID: a query parameter (one node takes none; a cluster node `scope`).', [httpErrorCodes.requestInvalid]),
        '401': ref('responses', 'Unauthorized'),
        '503': clusterPartMissing,
      },
    },
  },
  '/v1/events': {
    get: {
      operationId: 'streamEvents',
      summary: 'Live figures, and a watched timer\'s changes, as server-sent events',
      description: [
        'A `text/event-stream` that stays open. Read it with `fetch()` (its body as a stream) so that the `Authorization` header goes with it: a browser\'s EventSource cannot send one. Events:',
        '- `counters`, at once and then once a second: `{"sample", "stats"}`, `sample` the second just sampled (`at_ms`, `adds`, `deliveries`, `failures`, `lateness_ms` {`p50`, `p99`, `max`}: one entry of `/v1/stats/series`, with its `wal_last_sync_at_ms`; null before the first), `stats` the body of `GET /v1/stats`. In cluster mode `sample` is this node\'s second (its partitions) and `stats` what `GET /v1/stats` answers on this node (its partitions and the cluster\'s totals).',
        '- `timer`, with `watch`: the watched timer as `GET /v1/timers/{id}` shows it, at once, then whenever its `state`, `revision`, `attempts`, `last_status` or next due time changed (it is looked at once a second; in cluster mode in its partition, on this node or at its owner).',
        '- `timer-gone`, with `watch`: `{"id"}`, the watched timer is no longer kept (its retention ended, or it was discarded); counters go on.',
        `At most ${eventStreamLimits.streamsMax} streams are open at once; past that 429 \`EVENT_STREAMS_FULL\` (poll \`/v1/stats\` and \`/v1/stats/series?after_ms=\` instead). When the service stops, every stream ends (the body ends cleanly).`,
      ].join('\n\n'),
      parameters: [{ name: 'watch', in: 'query', required: false, description: 'A timer id: its changes are sent as `timer` events.', schema: { type: 'string', minLength: 1 } }],
      responses: {
        '200': {
          description: 'The stream: `event: NAME` and `data: JSON` lines, a blank line after each event (the first is `retry: 1000`).',
          content: { 'text/event-stream': { schema: { type: 'string' } } },
        },
        '400': errorResponse('REQUEST_INVALID: an empty `watch`, an unknown query parameter, or one given twice.', [httpErrorCodes.requestInvalid]),
        '401': ref('responses', 'Unauthorized'),
        '404': errorResponse('NOT_FOUND: no timer has the `watch` id.', [httpErrorCodes.notFound]),
        '429': errorResponse('EVENT_STREAMS_FULL: as many streams are open as the service keeps.', [httpErrorCodes.eventStreamsFull]),
      },
    },
  },
  '/v1/dead/retry': {
    post: {
      operationId: 'redriveDeadByFilter',
      summary: 'Redrive every dead timer a filter names',
      description: `Redrives the dead timers \`GET /v1/dead\` lists with the same filter (\`{}\`: all of them; \`{"queue"}\`: that queue's), each as \`POST /v1/dead/{id}/retry\` would (due now, attempts reset), at most ${deadRetryLimits.redrivenMax} a request, oldest first; answers once every redrive is durable. \`redriven\` counts them (one redriven or discarded meanwhile is not); \`more\` says dead timers past the most may be left: send it again.`,
      requestBody: {
        required: true,
        content: jsonOf({ type: 'object', properties: { queue: queueNameSchema }, additionalProperties: false }),
      },
      responses: {
        '200': { description: 'Redriven and durable.', content: jsonOf(deadRetriedSchema) },
        '400': errorResponse('REQUEST_INVALID: a body that is not a JSON object, a field other than `queue`, or a `queue` that is not a name.', [httpErrorCodes.requestInvalid]),
        '401': ref('responses', 'Unauthorized'),
        ...logResponses,
      },
    },
  },
};
