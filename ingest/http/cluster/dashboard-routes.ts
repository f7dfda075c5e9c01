// What the dashboard reads beside /v1/stats, on a cluster node: the histogram of waiting timers
// by due time, the ring of one-second samples and the event stream, each the cluster's by
// default (this node's partitions' engines read here, every other owner asked once, forwarded,
// for its own partitions alone, as GET /v1/stats does) or, with `?scope=node` or when another
// node forwarded the request, this node's alone. Registered by cluster-stats.ts; main thread.
//
//   GET /v1/stats/due-histogram  the partitions' counts summed; a bucket's `until` is the latest
//                                any partition used (each rounds its edges by its own spill
//                                watermark, so a partition whose edge came earlier counts the
//                                timers between the two in the next bucket)
//   GET /v1/stats/series         scope=node: this node's ring (node-series.ts sums its partitions);
//                                the cluster's: every node's samples summed by the whole second
//                                they were taken in (`at_ms` is that second's end), seconds that
//                                have ended only, so a poller's `after_ms` never splits one;
//                                lateness p50, p99 and max are the highest any node had in that
//                                second (the samples keep no histograms: for p50 and p99 an upper
//                                bound of the cluster's, for max exact); wal_last_sync_at_ms the
//                                latest
//   GET /v1/events               counters once a second: `sample` this node's second just taken,
//                                `stats` GET /v1/stats as this node answers it (its partitions and
//                                the cluster's totals); ?watch={cluster id} looks the timer up once
//                                a second in its partition, here or at its owner
//
// A partition without an owner, or an owner that does not answer, fails the cluster's histogram
// and series (503 PARTITION_MOVING, Retry-After): a sum is never given with a part missing. The
// event stream's stats say which nodes did not answer, as GET /v1/stats does.
import { dueHistogramBucketNames, dueHistogramEdges } from '../../../engine/due-histogram.ts';
import { errorCodes, FermataError } from '../../../engine/errors.ts';
import { statsSeriesLimits } from '../../../engine/limits.ts';
import type { StatsSeries } from '../../../engine/stats-series.ts';
import { clusterIdParts } from '../../../cluster/partitioning.ts';
import type { ClusterRouter } from '../../../cluster/router.ts';
import { httpErrorCodes, HttpProblem } from '../error-map.ts';
import { isoOf } from '../iso-time.ts';
import { eventStreamLimits } from '../route-limits.ts';
import { dueHistogramSchema } from '../routes/due-histogram.ts';
import { EventStream, eventsQuerySchema, eventStreamType, frame, sampleBody, type TimerJson, type TimerLookup } from '../routes/events.ts';
import { onlyQueryParameters } from '../routes/query-parameters.ts';
import { type SeriesBody, seriesBody, seriesSchema } from '../routes/stats-series.ts';
import { timerView } from '../timer-views.ts';
import type { HttpServer } from '../types.ts';
import { type ForwardAnswer, forwardedHeader, type ForwardRequest } from './forwarder.ts';
import type { SeriesDirectory } from './node-series.ts';

type Headers = Readonly<Record<string, string | string[] | undefined>>;

export interface ClusterDashboardOptions {
  readonly directory: SeriesDirectory;
  readonly router: ClusterRouter;
  readonly send: (address: string, request: ForwardRequest) => Promise<ForwardAnswer>;
  /** This node's ring (over nodeSeriesSources), started and stopped by the caller. */
  readonly series: StatsSeries;
  /** The body of GET /v1/stats as this node answers the request's headers. */
  readonly stats: (headers: Headers) => Promise<unknown>;
}

const scopes = ['cluster', 'node'] as const;
type Scope = (typeof scopes)[number];

const scopeParameter = { type: 'string', enum: [...scopes] } as const;

/** The histogram's body (routes/due-histogram.ts's shape). */
interface HistogramBody {
  now: string;
  now_ms: number;
  buckets: { name: string; until: string | null; until_ms: number | null; count: number }[];
  total: number;
  resident: number;
  spilled: number;
}

const higher = (a: number | null, b: number | null | undefined): number | null => (b === null || b === undefined ? a : a === null ? b : Math.max(a, b));

/** The histogram of `bodies` (a node's or the nodes'), counts summed, each edge the latest. */
export function sumHistograms(nowMs: number, bodies: readonly HistogramBody[]): HistogramBody {
  const buckets = dueHistogramBucketNames.map((name) => ({ name, until: null as string | null, until_ms: null as number | null, count: 0 }));
  let resident = 0;
  let spilled = 0;
  for (const body of bodies) {
    body.buckets.forEach((bucket, k) => {
      const into = buckets[k];
      if (into === undefined) return;
      into.count += bucket.count;
      into.until_ms = higher(into.until_ms, bucket.until_ms);
    });
    resident += body.resident;
    spilled += body.spilled;
  }
  // With no partition at all, the edges are a node's with nothing spilled: now + each span, to the minute.
  if (bodies.length === 0) dueHistogramEdges(nowMs, 60_000, 60_000, Infinity).forEach((edgeMs, k) => ((buckets[k] as (typeof buckets)[number]).until_ms = edgeMs));
  for (const bucket of buckets) bucket.until = bucket.until_ms === null ? null : isoOf(bucket.until_ms);
  return { now: isoOf(nowMs), now_ms: nowMs, buckets, total: resident + spilled, resident, spilled };
}

/** The nodes' series summed by the second each sample was taken in, the seconds that ended at or before `untilMs` only. */
export function sumSeries(bodies: readonly SeriesBody[], untilMs: number): SeriesBody {
  const seconds = new Map<number, { adds: number; deliveries: number; failures: number; p50: number | null; p99: number | null; max: number | null }>();
  let lastSync: number | null = null;
  for (const body of bodies) {
    lastSync = higher(lastSync, body.wal_last_sync_at_ms);
    body.at_ms.forEach((atMs, i) => {
      const second = Math.ceil(atMs / 1000) * 1000;
      if (second > untilMs) return;
      let into = seconds.get(second);
      if (into === undefined) seconds.set(second, (into = { adds: 0, deliveries: 0, failures: 0, p50: null, p99: null, max: null }));
      into.adds += body.adds[i] ?? 0;
      into.deliveries += body.deliveries[i] ?? 0;
      into.failures += body.failures[i] ?? 0;
      into.p50 = higher(into.p50, body.lateness_ms.p50[i]);
      into.p99 = higher(into.p99, body.lateness_ms.p99[i]);
      into.max = higher(into.max, body.lateness_ms.max[i]);
    });
  }
  const ordered = [...seconds].sort(([a], [b]) => a - b).slice(-statsSeriesLimits.samplesMax);
  return {
    interval_ms: statsSeriesLimits.sampleIntervalMs,
    samples_max: statsSeriesLimits.samplesMax,
    wal_last_sync_at_ms: lastSync,
    at_ms: ordered.map(([second]) => second),
    adds: ordered.map(([, s]) => s.adds),
    deliveries: ordered.map(([, s]) => s.deliveries),
    failures: ordered.map(([, s]) => s.failures),
    lateness_ms: { p50: ordered.map(([, s]) => s.p50), p99: ordered.map(([, s]) => s.p99), max: ordered.map(([, s]) => s.max) },
  };
}

export function clusterDashboardRoutes(app: HttpServer, { directory, router, send, series, stats }: ClusterDashboardOptions): void {
  const scopeOf = (headers: Headers, scope: Scope | undefined): Scope => (headers[forwardedHeader] !== undefined ? 'node' : (scope ?? 'cluster'));

  /** Every other owner's answer to `path` (as JSON), asked once a node; 503 while a partition has no owner or an owner does not answer 200. */
  const askOwners = async <T,>(path: string, headers: Headers): Promise<T[]> => {
    const addresses = new Set<string>();
    for (const route of router.routes()) {
      if (route.kind === 'moving') throw new FermataError(errorCodes.partitionMoving, `partition ${route.partition} is moving between nodes: the cluster's figures cannot be summed now, try again`);
      if (route.kind === 'remote') addresses.add(route.address);
    }
    return Promise.all(
      [...addresses].map(async (address) => {
        const answer = await send(address, { method: 'GET', path, headers: { ...headers, accept: 'application/json' } });
        if (answer.status !== 200) throw new FermataError(errorCodes.partitionMoving, `the node at ${address} answered ${answer.status} for its figures: try again`);
        return JSON.parse(answer.body.toString('utf8')) as T;
      }),
    );
  };

  /** Each partition's histogram here. */
  const partitionHistograms = (nowMs: number): HistogramBody[] => {
    const bodies: HistogramBody[] = [];
    for (const partition of directory.owned()) {
      const histogram = directory.engineOf(partition)?.dueHistogram(nowMs);
      if (histogram === undefined) continue;
      bodies.push({
        now: '',
        now_ms: nowMs,
        buckets: dueHistogramBucketNames.map((name, k) => ({ name, until: null, until_ms: histogram.edgesMs[k] ?? null, count: histogram.counts[k] as number })),
        total: histogram.resident + histogram.spilled,
        resident: histogram.resident,
        spilled: histogram.spilled,
      });
    }
    return bodies;
  };

  app.get<{ Querystring: { scope?: Scope } }>(
    '/v1/stats/due-histogram',
    { schema: { querystring: { type: 'object', properties: { scope: scopeParameter }, additionalProperties: false }, response: { 200: dueHistogramSchema } }, preValidation: onlyQueryParameters('GET /v1/stats/due-histogram', ['scope']) },
    async (request) => {
      const nowMs = Date.now();
      const here = partitionHistograms(nowMs);
      if (scopeOf(request.headers, request.query.scope) === 'node') return sumHistograms(nowMs, here);
      const others = await askOwners<HistogramBody>('/v1/stats/due-histogram?scope=node', request.headers);
      return sumHistograms(nowMs, [...here, ...others]);
    },
  );

  app.get<{ Querystring: { after_ms?: number; scope?: Scope } }>(
    '/v1/stats/series',
    {
      schema: { querystring: { type: 'object', properties: { after_ms: { type: 'integer', minimum: 0 }, scope: scopeParameter }, additionalProperties: false }, response: { 200: seriesSchema } },
      preValidation: onlyQueryParameters('GET /v1/stats/series', ['after_ms', 'scope']),
    },
    async (request) => {
      const { after_ms: afterMs } = request.query;
      // Taken before any node is asked: every sample of a second that ended by then is in the answers.
      const untilMs = Math.floor(Date.now() / 1000) * 1000;
      const here = seriesBody(series.columns(afterMs), series.lastSyncAtMs);
      if (scopeOf(request.headers, request.query.scope) === 'node') return here;
      const others = await askOwners<SeriesBody>(`/v1/stats/series?scope=node${afterMs === undefined ? '' : `&after_ms=${afterMs}`}`, request.headers);
      return sumSeries([here, ...others], untilMs);
    },
  );

  // The event streams, and one counters frame a sample for all of them (GET /v1/stats's fan-out at most once at a time).
  // Each open stream, with its caller's token, which its requests to other nodes carry.
  const open = new Map<EventStream, Headers>();
  let counting = false;
  const unsubscribe = series.onSample((sample) => {
    const oldest = open.values().next();
    if (oldest.done === true || counting) return;
    counting = true;
    const atSample = sampleBody(sample, series.lastSyncAtMs);
    // The other nodes are asked with the token of the oldest stream open (each stream's was checked as it opened).
    void stats(oldest.value)
      .then((body) => {
        const text = frame('counters', { sample: atSample, stats: body });
        for (const stream of open.keys()) stream.counters(text);
      })
      .catch(() => undefined)
      .finally(() => (counting = false));
  });
  app.addHook('preClose', (done) => {
    unsubscribe();
    for (const stream of open.keys()) stream.end();
    open.clear();
    done();
  });

  /** A watched timer's view, in its partition here or at its owner. */
  const lookup =
    (headers: Headers): TimerLookup =>
    async (id) => {
      const parts = clusterIdParts(id, router.partitions);
      if (parts === undefined) return undefined;
      const route = router.route(parts.partition);
      if (route.kind === 'moving') return 'unknown';
      if (route.kind === 'local') {
        const view = await route.engine.lookup(parts.engineId);
        return view === undefined ? undefined : { ...timerView.json(view), id };
      }
      const answer = await send(route.address, { method: 'GET', path: `/v1/timers/${encodeURIComponent(id)}`, headers: { ...headers, accept: 'application/json' } });
      if (answer.status === 404) return undefined;
      if (answer.status !== 200) return 'unknown';
      return JSON.parse(answer.body.toString('utf8')) as TimerJson;
    };

  app.get<{ Querystring: { watch?: string } }>(
    '/v1/events',
    { schema: { querystring: eventsQuerySchema }, preValidation: onlyQueryParameters('GET /v1/events', ['watch']) },
    async (request, reply) => {
      if (open.size >= eventStreamLimits.streamsMax) {
        throw new HttpProblem(httpErrorCodes.eventStreamsFull, `${eventStreamLimits.streamsMax} event streams are open, the most this node keeps: poll GET /v1/stats and /v1/stats/series instead, or try again later`);
      }
      const { watch } = request.query;
      // The stream's later requests to other nodes carry the caller's token, not the connection's own headers.
      const headers: Headers = request.headers.authorization === undefined ? {} : { authorization: request.headers.authorization };
      const find = lookup(headers);
      const view = watch === undefined ? undefined : await find(watch);
      if (view === 'unknown') throw new FermataError(errorCodes.partitionMoving, `the partition of timer ${watch} is moving between nodes: try again`);
      if (watch !== undefined && view === undefined) throw new HttpProblem(httpErrorCodes.notFound, `no timer ${watch}`, 'watch');
      const first = await stats(request.headers);
      const stream = new EventStream(find, watch, view);
      open.set(stream, headers);
      reply.raw.once('close', () => {
        open.delete(stream);
        stream.end();
      });
      stream.out.write(`retry: 1000\n\n${frame('counters', { sample: sampleBody(series.last, series.lastSyncAtMs), stats: first })}`);
      return reply.code(200).header('cache-control', 'no-store').header('x-accel-buffering', 'no').type(eventStreamType).send(stream.out);
    },
  );
}
