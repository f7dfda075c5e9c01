// GET /v1/events: a `text/event-stream` of the service's figures, for a page that reads it with
// fetch() (so the Authorization header goes with it, which EventSource cannot send):
//
//   event: counters   once a second (and at once on connect): {"sample": the second just
//                     sampled (as a column entry of /v1/stats/series, with wal_last_sync_at_ms)
//                     or null, "stats": the body of GET /v1/stats}
//   event: timer      with ?watch={id}: the timer's view (as GET /v1/timers/{id}) at connect,
//                     then each time its state, revision, attempts, last status or due time
//                     changed, looked at once a second
//   event: timer-gone {"id"}: the watched timer is no longer kept (its retention ended, or it
//                     was discarded); the stream goes on with counters
//
// The counters are made once a sample for every stream. Streams open at once are bounded
// (route-limits.ts: past it 429 EVENT_STREAMS_FULL, the page polls instead), and so is what a
// stream holds unread (past it the stream ends: its reader stopped reading); the server's close
// ends every stream first, so a stop is not held up by them until the drain timeout. Main thread.
import { PassThrough } from 'node:stream';
import type { SeriesSample, StatsSeries } from '../../../engine/stats-series.ts';
import { httpErrorCodes, HttpProblem } from '../error-map.ts';
import { eventStreamLimits } from '../route-limits.ts';
import { timerView } from '../timer-views.ts';
import type { HttpServer, RoutesOptions } from '../types.ts';
import { onlyQueryParameters } from './query-parameters.ts';
import { type StatsDisk, statsBody } from './stats.ts';

export interface EventsRoutesOptions extends RoutesOptions {
  readonly series: StatsSeries;
  readonly disk?: StatsDisk | undefined;
}

export const eventsQuerySchema = {
  type: 'object',
  properties: { watch: { type: 'string', minLength: 1 } },
  additionalProperties: false,
} as const;

export const eventStreamType = 'text/event-stream';

export const frame = (event: string, data: unknown): string => `event: ${event}\ndata: ${JSON.stringify(data)}\n\n`;

const nullable = (ms: number): number | null => (Number.isNaN(ms) ? null : ms);

/** A sample as a counters event carries it (a column entry of /v1/stats/series, with wal_last_sync_at_ms), null before the first. */
export function sampleBody(sample: Readonly<SeriesSample> | undefined, lastSyncAtMs: number): unknown {
  if (sample === undefined) return null;
  return {
    at_ms: sample.atMs,
    wal_last_sync_at_ms: nullable(lastSyncAtMs),
    adds: sample.adds,
    deliveries: sample.deliveries,
    failures: sample.failures,
    lateness_ms: { p50: nullable(sample.latenessP50Ms), p99: nullable(sample.latenessP99Ms), max: nullable(sample.latenessMaxMs) },
  };
}

/** A timer as GET /v1/timers/{id} shows it. */
export type TimerJson = Record<string, unknown>;

/** What of a watched timer, when it changes, is told: its state, revision, attempts, last status and when it is next due. */
const fingerprint = (view: TimerJson): string => JSON.stringify([view.state, view.revision, view.attempts, view.last_status, view.next_attempt_at ?? view.fire_at]);

/**
 * How a stream finds its watched timer (in memory or on disk: Engine.lookup; in cluster mode in
 * its partition, wherever that is owned): undefined once it is not kept, 'unknown' when it cannot
 * be looked at now (the next second looks again).
 */
export type TimerLookup = (id: string) => Promise<TimerJson | undefined | 'unknown'>;

/** One open stream: where its frames go, and the timer it watches. */
export class EventStream {
  readonly out = new PassThrough();
  readonly #lookup: TimerLookup;
  /** The watched timer's id; undefined once it is gone (or when none is watched). */
  #watch: string | undefined;
  #seen: string | undefined;
  #looking = false;

  constructor(lookup: TimerLookup, watch: string | undefined, view: TimerJson | undefined) {
    this.#lookup = lookup;
    this.#watch = watch;
    if (view !== undefined) {
      this.#seen = fingerprint(view);
      this.out.write(frame('timer', view));
    }
  }

  counters(text: string): void {
    if (this.out.writableEnded) return;
    // A reader that stopped reading is let go rather than buffered for without end.
    if (this.out.writableLength + this.out.readableLength > eventStreamLimits.unreadBytesMax) return this.end();
    this.out.write(text);
    if (this.#watch !== undefined && !this.#looking) void this.#look(this.#watch);
  }

  end(): void {
    this.out.end();
  }

  /** Looks the watched timer up (on disk too) and tells what changed; one look at a time. */
  async #look(id: string): Promise<void> {
    this.#looking = true;
    let view: Awaited<ReturnType<TimerLookup>>;
    try {
      view = await this.#lookup(id);
    } catch {
      // The disk failed the lookup (a spilled timer's run), or its owner did not answer: the next second looks again.
      return;
    } finally {
      this.#looking = false;
    }
    if (view === 'unknown' || this.out.writableEnded || this.#watch === undefined) return;
    if (view === undefined) {
      this.out.write(frame('timer-gone', { id }));
      this.#watch = undefined;
      return;
    }
    const now = fingerprint(view);
    if (now === this.#seen) return;
    this.#seen = now;
    this.out.write(frame('timer', view));
  }
}

export async function eventsRoutes(app: HttpServer, { engine, series, disk }: EventsRoutesOptions): Promise<void> {
  const open = new Set<EventStream>();
  // One counters frame a sample, written to every stream.
  const unsubscribe = series.onSample((sample) => {
    if (open.size === 0) return;
    const text = frame('counters', { sample: sampleBody(sample, series.lastSyncAtMs), stats: statsBody(engine, disk) });
    for (const stream of open) stream.counters(text);
  });
  app.addHook('preClose', (done) => {
    unsubscribe();
    for (const stream of open) stream.end();
    open.clear();
    done();
  });

  app.get<{ Querystring: { watch?: string } }>('/v1/events', { schema: { querystring: eventsQuerySchema }, preValidation: onlyQueryParameters('GET /v1/events', ['watch']) }, async (request, reply) => {
    if (open.size >= eventStreamLimits.streamsMax) {
      throw new HttpProblem(httpErrorCodes.eventStreamsFull, `${eventStreamLimits.streamsMax} event streams are open, the most this service keeps: poll GET /v1/stats and /v1/stats/series instead, or try again later`);
    }
    const { watch } = request.query;
    const lookup = async (id: string): Promise<TimerJson | undefined> => {
      const view = await engine.lookup(id);
      return view === undefined ? undefined : timerView.json(view);
    };
    const view = watch === undefined ? undefined : await lookup(watch);
    if (watch !== undefined && view === undefined) throw new HttpProblem(httpErrorCodes.notFound, `no timer ${watch}`, 'watch');
    const stream = new EventStream(lookup, watch, view);
    open.add(stream);
    reply.raw.once('close', () => {
      open.delete(stream);
      stream.end();
    });
    // A reconnecting reader waits a second; the first figures go out at once.
    stream.out.write(`retry: 1000\n\n${frame('counters', { sample: sampleBody(series.last, series.lastSyncAtMs), stats: statsBody(engine, disk) })}`);
    return reply.code(200).header('cache-control', 'no-store').header('x-accel-buffering', 'no').type(eventStreamType).send(stream.out);
  });
}
