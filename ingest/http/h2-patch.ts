// `PATCH /v1/timers/{id}` on the raw HTTP/2 stream, the way h2-single-add.ts serves the single
// add (decision 0013 says why and what it measured): answered without node's compatibility
// request/response objects and without fastify's routing, hooks and reply, by the route's own
// code (routes/timer-patch.ts's patchTimer: the body's fields, If-Match, the engine's
// reschedule, the answer's ETag; timer-views.ts for the view; error-map.ts for refusals).
// Which engine holds the timer is PatchTimers' to say: a single node's one engine for any id
// (singleEngine below), a cluster node's engine of the id's partition when this node owns it
// (cluster/raw-patch.ts; decision 0035). It takes only
//
//   h2c, :method PATCH, :path exactly /v1/timers/ + an id its PatchTimers serves here (no query
//   string, nothing to decode, no static route's path), a JSON body as h2-json-request.ts takes
//   it, and, when tokens are configured, a token with the write scope on every queue (a token
//   limited to queues needs the timer's queue looked up first: fastify's hooks do that)
//
// and leaves every other stream, untouched, to fastify, which answers it as before (a cluster
// node's route forwards a PATCH of another node's partition, or answers that it moves). The
// route records no audit action (route-scopes.ts) and the engine counts reschedules itself, so
// nothing fastify's hooks do is skipped for a request taken here. One object per request;
// main thread, like the listener that offers the streams.
import type http2 from 'node:http2';
import type { Engine } from '../../engine/engine.ts';
import type { TimerView } from '../../engine/types.ts';
import { RawJsonRequest, type RawJsonContext, type RawRouteLogger, takenJsonLength } from './h2-json-request.ts';
import type { BearerCheck } from './listen/bearer-auth.ts';
import type { H2StreamTaker } from './listen/cleartext-listener.ts';
import { patchTimer } from './routes/timer-patch.ts';
import { timerView } from './timer-views.ts';

const prefix = '/v1/timers/';
/** A timer id (docs/format/ids.md): what fastify would hand the route as it is, and no static route's path segment. */
const timerId = /^[0-9a-hjkmnp-tv-z]{24}$/;

/** Where the timer a PATCH names is served on this node. */
export interface PatchTimers {
  /** The engine that holds timer `id` when its PATCH is served here, else undefined: the stream is left to fastify. */
  engineOf(id: string, headers: http2.IncomingHttpHeaders): Engine | undefined;
  /** The id that engine gives the timer (`id` itself on a single node). */
  engineIdOf(id: string): string;
}

/** A single node's: its one engine holds every well-formed id, under that id. */
export function singleEngine(engine: Engine): PatchTimers {
  return {
    engineOf: (id) => (timerId.test(id) ? engine : undefined),
    engineIdOf: (id) => id,
  };
}

export interface H2PatchOptions {
  readonly timers: PatchTimers;
  /** The server's JSON body parser: the parsed value, or throws what fastify's route answers for the text. */
  readonly parseJson: (text: string) => unknown;
  /** The server's bearer check when tokens are configured; a stream it refuses is left to fastify. */
  readonly bearer: BearerCheck | undefined;
  /** Where an unexpected error (a bug) is logged, as fastify's error handler logs it. */
  readonly logger: RawRouteLogger;
}

export class H2Patch implements H2StreamTaker, RawJsonContext {
  readonly timers: PatchTimers;
  readonly parseJson: (text: string) => unknown;
  readonly logger: RawRouteLogger;
  readonly #bearer: BearerCheck | undefined;

  constructor(options: H2PatchOptions) {
    this.timers = options.timers;
    this.parseJson = options.parseJson;
    this.logger = options.logger;
    this.#bearer = options.bearer;
  }

  take(stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders): boolean {
    if (headers[':method'] !== 'PATCH') return false;
    const path = headers[':path'];
    if (path === undefined || !path.startsWith(prefix)) return false;
    const id = path.slice(prefix.length);
    const engine = this.timers.engineOf(id, headers);
    if (engine === undefined) return false;
    const length = takenJsonLength(stream, headers, path, this.#bearer);
    if (length === undefined) return false;
    new PatchStream(this, stream, headers, engine, id, length).attach();
    return true;
  }
}

/** One taken PATCH: its body (RawJsonRequest), then the engine's reschedule, then the answer. */
class PatchStream extends RawJsonRequest {
  readonly #engine: Engine;
  /** The id the client named, and the one the engine knows the timer by (the same on a single node). */
  readonly #id: string;
  readonly #engineId: string;
  /** What patchTimer reads of a request: the headers (If-Match) and the parsed body. */
  readonly headers: http2.IncomingHttpHeaders;
  body: unknown = undefined;
  #etag: string | undefined = undefined;

  constructor(patches: H2Patch, stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders, engine: Engine, id: string, length: number) {
    super(patches, stream, headers, length);
    this.#engine = engine;
    this.headers = headers;
    this.#id = id;
    this.#engineId = patches.timers.engineIdOf(id);
  }

  protected handle(value: unknown): void {
    this.body = value;
    patchTimer(this.#engine, this.#engineId, this.#id, this, this).then(
      (view) => this.#patched(view),
      (err: unknown) => this.answerError(err),
    );
  }

  /** patchTimer's reply: the ETag it sets on the answer. */
  header(name: string, value: string): void {
    if (name === 'etag') this.#etag = value;
  }

  #patched(view: TimerView): void {
    const json = timerView.json(view);
    // A cluster id names the timer as the cluster front's route names it: the view with the client's id.
    this.respond(200, JSON.stringify(this.#id === this.#engineId ? json : { ...json, id: this.#id }), undefined, this.#etag);
  }
}
