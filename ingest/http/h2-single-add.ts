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
// One object per request (SingleAddStream: the body read so far, then the coalescer's waiter)
// and named handlers that find it on the stream; the answer's write callback is the one
// closure an add makes. In cluster mode the timer goes where the cluster front's would
// (cluster/stream-admitter.ts: a partition owned here, or forwarded to its owner), through an
// admitter made for the request; a request another node forwarded is left to the front, which
// checks the cluster's secret. Owned by the main thread's event loop, like the listener that
// calls it.
import type http2 from 'node:http2';
import { errorCodes as fastifyErrorCodes } from 'fastify';
import type { AdmitWaiter } from '../../engine/admit-coalescer.ts';
import type { DuplicateAnswer } from '../../engine/engine.ts';
import { ingestLimits } from '../../engine/limits.ts';
import type { Clock } from '../../engine/types.ts';
import { inJsonTerms, specFromJsonTimer } from './body/json-batch.ts';
import { errorAnswer } from './error-map.ts';
import type { BearerCheck } from './listen/bearer-auth.ts';
import type { H2StreamTaker } from './listen/cleartext-listener.ts';
import { singleAddAnswer } from './single-add.ts';
import type { LineAdmitter } from './timer-stream.ts';

const path = '/v1/timers';
const jsonContentType = 'application/json; charset=utf-8';
/** The Content-Type values taken here; fastify's parser reads any other spelling (and refuses what it must). */
const takenContentTypes: ReadonlySet<string> = new Set(['application/json', jsonContentType]);

export interface SingleAddLogger {
  error(fields: object, message: string): void;
}

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
  readonly logger: SingleAddLogger;
}

const pending = Symbol('fermata.singleAdd');
const decimal = /^[0-9]{1,16}$/;

/** A stream this path took: its request's state rides on it for the named handlers below. */
type TakenStream = http2.ServerHttp2Stream & { [pending]?: SingleAddStream | undefined };

export class H2SingleAdd implements H2StreamTaker {
  readonly #admitter: H2SingleAddOptions['admitter'];
  readonly clock: Clock;
  readonly parseJson: (text: string) => unknown;
  readonly logger: SingleAddLogger;
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
    // Answers on the TLS port may carry more than the route's own headers (Alt-Svc, added by a fastify hook: http3/alt-svc.ts).
    if (stream.session?.encrypted === true) return false;
    const contentType = headers['content-type'];
    // A traced add goes the route's way, which puts its trace into the timer's headers.
    if (contentType === undefined || !takenContentTypes.has(contentType) || headers.expect !== undefined || headers.traceparent !== undefined) return false;
    const declared = headers['content-length'];
    let length = -1;
    if (declared !== undefined) {
      if (!decimal.test(declared)) return false;
      length = Number(declared);
      if (length > ingestLimits.jsonBodyBytesMax) return false;
    }
    if (this.#bearer !== undefined && !this.#bearer.allows(path, headers.authorization)) return false;
    const admitter = typeof this.#admitter === 'function' ? this.#admitter(headers) : this.#admitter;
    if (admitter === undefined) return false;
    const taken = stream as TakenStream;
    taken[pending] = new SingleAddStream(this, admitter, taken, contentType, length);
    taken.on('data', onData);
    taken.once('end', onEnd);
    // As node's compatibility layer does: a stream's failure is its client's to see; there is nobody to answer.
    taken.on('error', ignoreStreamError);
    return true;
  }
}

function onData(this: TakenStream, chunk: Buffer): void {
  this[pending]?.read(chunk);
}

function onEnd(this: TakenStream): void {
  const add = this[pending];
  this[pending] = undefined;
  add?.ended();
}

function ignoreStreamError(): void {}

/** One taken request: its body as it arrives, then the admit's waiter, then the answer. */
class SingleAddStream implements AdmitWaiter {
  readonly #adds: H2SingleAdd;
  readonly #admitter: LineAdmitter;
  readonly #stream: http2.ServerHttp2Stream;
  readonly #contentType: string;
  /** The declared Content-Length, or -1 for none. */
  readonly #length: number;
  /** The body's chunks: most bodies come whole in one DATA frame. */
  #first: Buffer | undefined = undefined;
  #more: Buffer[] | undefined = undefined;
  #received = 0;
  /** Answered before its body ended (one past the limit): the rest is read and dropped, as fastify does. */
  #answered = false;
  #value: unknown = undefined;
  #fireAtMs = 0;

  constructor(adds: H2SingleAdd, admitter: LineAdmitter, stream: http2.ServerHttp2Stream, contentType: string, length: number) {
    this.#adds = adds;
    this.#admitter = admitter;
    this.#stream = stream;
    this.#contentType = contentType;
    this.#length = length;
  }

  read(chunk: Buffer): void {
    if (this.#answered) return;
    this.#received += chunk.length;
    if (this.#received > ingestLimits.jsonBodyBytesMax) {
      this.#answered = true;
      this.#first = undefined;
      this.#more = undefined;
      return this.#answerError(new fastifyErrorCodes.FST_ERR_CTP_BODY_TOO_LARGE());
    }
    if (this.#first === undefined) this.#first = chunk;
    else (this.#more ??= []).push(chunk);
  }

  ended(): void {
    if (this.#answered) return;
    // nghttp2 resets a stream whose DATA does not add up to its Content-Length; fastify checks it too.
    if (this.#length >= 0 && this.#received !== this.#length) return this.#answerError(new fastifyErrorCodes.FST_ERR_CTP_INVALID_CONTENT_LENGTH());
    const first = this.#first;
    const text = first === undefined ? '' : this.#more === undefined ? first.toString('utf8') : Buffer.concat([first, ...this.#more], this.#received).toString('utf8');
    this.#first = undefined;
    this.#more = undefined;
    try {
      this.#value = this.#adds.parseJson(text);
      const spec = specFromJsonTimer(this.#value, this.#adds.clock.now());
      this.#fireAtMs = spec.fireAtMs;
      this.#admitter.admitOneTo(spec, this);
    } catch (err) {
      this.#answerError(err);
    }
  }

  admitted(id: string, _duplicate: boolean, original: DuplicateAnswer | undefined): void {
    const answer = singleAddAnswer(id, original, this.#fireAtMs, this.#value);
    this.#respond(answer.status, JSON.stringify(answer.body), undefined);
  }

  refused(err: unknown): void {
    this.#answerError(inJsonTerms(err, undefined));
  }

  #answerError(err: unknown): void {
    const answer = errorAnswer(err, this.#contentType);
    if (answer.unexpected) this.#adds.logger.error({ err }, 'unexpected error answering a request');
    this.#respond(answer.status, JSON.stringify(answer.body), answer.retryAfterSeconds);
  }

  #respond(status: number, body: string, retryAfterSeconds: number | undefined): void {
    const stream = this.#stream;
    // Reset by its client while the timer was admitted: the timer stands, nobody hears so.
    if (stream.destroyed || stream.closed) return;
    const headers: http2.OutgoingHttpHeaders = { ':status': status, 'content-type': jsonContentType, 'content-length': Buffer.byteLength(body) };
    if (retryAfterSeconds !== undefined) headers['retry-after'] = String(retryAfterSeconds);
    stream.respond(headers);
    // The stream is ended once its body is written, not with it (`end(body)`): the stream closes as
    // soon as END_STREAM is out, and node's Writable then settles the write still in flight by
    // making an ERR_STREAM_DESTROYED it throws away, a stack trace per request (9% of the main
    // thread in a profile of this path under h2load).
    stream.write(body, (err) => {
      if (err == null) stream.end();
    });
  }
}
