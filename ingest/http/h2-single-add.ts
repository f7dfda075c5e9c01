// The hot route on the raw HTTP/2 stream: `POST /v1/timers` with one JSON timer, answered
// without node's compatibility request/response objects and without fastify's routing, hooks
// and reply (docs/decisions/0013-single-add-path.md says why and what it measured). The
// cleartext listener offers it every HTTP/2 stream first; it takes only the plain case it
// answers exactly as fastify's route would, and leaves every other stream, untouched, to fastify:
//
//   h2c (the TLS port's answers may carry headers fastify hooks add there, such as Alt-Svc),
//   :method POST, :path exactly /v1/timers, Content-Type application/json (or with
//   "; charset=utf-8"), no Content-Length or one of at most ingestLimits.jsonBodyBytesMax,
//   no Expect, and, when tokens are configured, a token they allow
//
// A request fastify would refuse before reading its body (a missing token, a declared length
// over the limit, another media type) is left to fastify, which answers it as it always has;
// what this path does refuse is refused through the same code as the route: the body parsed by
// the server's JSON parser (server.ts), the timer read by json-batch.ts, admitted through the
// server's AdmitCoalescer, answered by single-add.ts or, refused, by error-map.ts, with the
// headers fastify sends (content-type, content-length, retry-after; the stream adds date).
// HTTP/1.1 requests never come here: fastify serves them.
//
// One object per request (SingleAddStream: the body read so far, then the coalescer's waiter;
// reading and answering are h2-json-request.ts's, shared with PATCH's raw path, h2-patch.ts);
// the answer's write callback is the one closure an add makes. In cluster mode the timer goes
// where the cluster front's would (cluster/stream-admitter.ts: a partition owned here, or
// forwarded to its owner), through an admitter made for the request; a request another node
// forwarded is left to the front, which checks the cluster's secret. Owned by the main thread's event loop, like the listener that
// calls it.
import type http2 from 'node:http2';
import type { AdmitWaiter } from '../../engine/admit-coalescer.ts';
import type { DuplicateAnswer } from '../../engine/engine.ts';
import type { Clock } from '../../engine/types.ts';
import { inJsonTerms, specFromJsonTimer } from './body/json-batch.ts';
import { RawJsonRequest, type RawJsonContext, type RawRouteLogger, takenJsonLength } from './h2-json-request.ts';
import type { BearerCheck } from './listen/bearer-auth.ts';
import type { H2StreamTaker } from './listen/cleartext-listener.ts';
import { singleAddAnswer } from './single-add.ts';
import type { LineAdmitter } from './timer-stream.ts';

const path = '/v1/timers';

export interface H2SingleAddOptions {
  /**
   * Who admits the timer: the server's AdmitCoalescer on one node; in cluster mode one made for
   * the request from its headers, or undefined to leave the request to fastify.
   */
  readonly admitter: LineAdmitter | ((headers: http2.IncomingHttpHeaders) => LineAdmitter | undefined);
  /** The clock a timer's `delay_ms` counts from (the engine's). */
  readonly clock: Clock;
  /** The server's JSON body parser: the parsed value, or throws what fastify's route answers for the text. */
  readonly parseJson: (text: string) => unknown;
  /** The server's bearer check when tokens are configured; a stream it refuses is left to fastify, which answers 401. */
  readonly bearer: BearerCheck | undefined;
  /** Where an unexpected error (a bug) is logged, as fastify's error handler logs it. */
  readonly logger: RawRouteLogger;
}

export class H2SingleAdd implements H2StreamTaker, RawJsonContext {
  readonly #admitter: H2SingleAddOptions['admitter'];
  readonly clock: Clock;
  readonly parseJson: (text: string) => unknown;
  readonly logger: RawRouteLogger;
  readonly #bearer: BearerCheck | undefined;

  constructor(options: H2SingleAddOptions) {
    this.#admitter = options.admitter;
    this.clock = options.clock;
    this.parseJson = options.parseJson;
    this.logger = options.logger;
    this.#bearer = options.bearer;
  }

  take(stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders): boolean {
    if (headers[':method'] !== 'POST' || headers[':path'] !== path) return false;
    const length = takenJsonLength(stream, headers, path, this.#bearer);
    if (length === undefined) return false;
    const admitter = typeof this.#admitter === 'function' ? this.#admitter(headers) : this.#admitter;
    if (admitter === undefined) return false;
    new SingleAddStream(this, admitter, stream, headers, length).attach();
    return true;
  }
}

/** One taken add: its body (RawJsonRequest), then the admit's waiter, then the answer. */
class SingleAddStream extends RawJsonRequest implements AdmitWaiter {
  readonly #clock: Clock;
  readonly #admitter: LineAdmitter;
  #value: unknown = undefined;
  #fireAtMs = 0;

  constructor(adds: H2SingleAdd, admitter: LineAdmitter, stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders, length: number) {
    super(adds, stream, headers, length);
    this.#clock = adds.clock;
    this.#admitter = admitter;
  }

  protected handle(value: unknown): void {
    this.#value = value;
    const spec = specFromJsonTimer(value, this.#clock.now());
    this.#fireAtMs = spec.fireAtMs;
    this.#admitter.admitOneTo(spec, this);
  }

  admitted(id: string, _duplicate: boolean, original: DuplicateAnswer | undefined): void {
    const answer = singleAddAnswer(id, original, this.#fireAtMs, this.#value);
    this.respond(answer.status, JSON.stringify(answer.body), undefined, undefined);
  }

  refused(err: unknown): void {
    this.answerError(inJsonTerms(err, undefined));
  }
}
