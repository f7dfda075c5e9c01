// What the raw HTTP/2 routes (h2-single-add.ts, h2-patch.ts; decision 0013) share: which
// streams carrying a JSON body they may take, reading that body, parsing it with the server's
// JSON parser, and answering with the headers fastify sends (content-type, content-length,
// retry-after, an ETag when given; the stream adds date), refusals through error-map.ts.
//
//   takenJsonLength(stream, headers, bearer) → the declared Content-Length (-1: none), or
//     undefined to leave the stream to fastify: the TLS port, another media type or spelling,
//     Expect, a traceparent, a length that is not a number or is over the JSON body limit, a
//     token that may not write to every queue
//   RawJsonRequest.attach(stream)   reads the body into the request, then calls its handle()
//
// A request fastify would refuse before reading its body is left to fastify, which answers it
// as it always has; what these routes refuse, they refuse as fastify's route does. One object
// per request, found by named handlers on the stream; the answer's write callback is the one
// closure it makes. Main thread, like the listener that offers the streams.
import type http2 from 'node:http2';
import { errorCodes as fastifyErrorCodes } from 'fastify';
import { ingestLimits } from '../../engine/limits.ts';
import { errorAnswer } from './error-map.ts';
import type { BearerCheck } from './listen/bearer-auth.ts';

const jsonContentType = 'application/json; charset=utf-8';
/** The Content-Type values taken here; fastify's parser reads any other spelling (and refuses what it must). */
const takenContentTypes: ReadonlySet<string> = new Set(['application/json', jsonContentType]);
const decimal = /^[0-9]{1,16}$/;

export interface RawRouteLogger {
  error(fields: object, message: string): void;
}

/** What a raw route's requests read of the server. */
export interface RawJsonContext {
  /** The server's JSON body parser: the parsed value, or throws what fastify's route answers for the text. */
  readonly parseJson: (text: string) => unknown;
  /** Where an unexpected error (a bug) is logged, as fastify's error handler logs it. */
  readonly logger: RawRouteLogger;
}

/**
 * The declared Content-Length of a JSON stream a raw route may take (-1 for none), or undefined
 * when it must be left to fastify. `path` is what the bearer check is asked about.
 */
export function takenJsonLength(stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders, path: string, bearer: BearerCheck | undefined): number | undefined {
  // Answers on the TLS port may carry more than the route's own headers (Alt-Svc, added by a fastify hook: http3/alt-svc.ts).
  if (stream.session?.encrypted === true) return undefined;
  const contentType = headers['content-type'];
  // A traced add goes the route's way, which puts its trace into the timer's headers.
  if (contentType === undefined || !takenContentTypes.has(contentType) || headers.expect !== undefined || headers.traceparent !== undefined) return undefined;
  const declared = headers['content-length'];
  let length = -1;
  if (declared !== undefined) {
    if (!decimal.test(declared)) return undefined;
    length = Number(declared);
    if (length > ingestLimits.jsonBodyBytesMax) return undefined;
  }
  if (bearer !== undefined && !bearer.allows(path, headers.authorization)) return undefined;
  return length;
}

const taken = Symbol('fermata.rawJsonRequest');

/** A stream a raw route took: its request rides on it for the named handlers below. */
type TakenStream = http2.ServerHttp2Stream & { [taken]?: RawJsonRequest | undefined };

function onData(this: TakenStream, chunk: Buffer): void {
  this[taken]?.read(chunk);
}

function onEnd(this: TakenStream): void {
  const request = this[taken];
  this[taken] = undefined;
  request?.ended();
}

function ignoreStreamError(): void {}

/** One taken request: its body as it arrives, then handle(value), then one answer. */
export abstract class RawJsonRequest {
  readonly #context: RawJsonContext;
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

  constructor(context: RawJsonContext, stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders, length: number) {
    this.#context = context;
    this.#stream = stream;
    this.#contentType = headers['content-type'] ?? '';
    this.#length = length;
  }

  /** Starts reading the stream's body into this request. */
  attach(): void {
    const stream = this.#stream as TakenStream;
    stream[taken] = this;
    stream.on('data', onData);
    stream.once('end', onEnd);
    // As node's compatibility layer does: a stream's failure is its client's to see; there is nobody to answer.
    stream.on('error', ignoreStreamError);
  }

  /** The body's parsed value, once it has all come: answer it (respond or answerError), or throw what to refuse it with. */
  protected abstract handle(value: unknown): void;

  read(chunk: Buffer): void {
    if (this.#answered) return;
    this.#received += chunk.length;
    if (this.#received > ingestLimits.jsonBodyBytesMax) {
      this.#answered = true;
      this.#first = undefined;
      this.#more = undefined;
      return this.answerError(new fastifyErrorCodes.FST_ERR_CTP_BODY_TOO_LARGE());
    }
    if (this.#first === undefined) this.#first = chunk;
    else (this.#more ??= []).push(chunk);
  }

  ended(): void {
    if (this.#answered) return;
    // nghttp2 resets a stream whose DATA does not add up to its Content-Length; fastify checks it too.
    if (this.#length >= 0 && this.#received !== this.#length) return this.answerError(new fastifyErrorCodes.FST_ERR_CTP_INVALID_CONTENT_LENGTH());
    const first = this.#first;
    const text = first === undefined ? '' : this.#more === undefined ? first.toString('utf8') : Buffer.concat([first, ...this.#more], this.#received).toString('utf8');
    this.#first = undefined;
    this.#more = undefined;
    try {
      this.handle(this.#context.parseJson(text));
    } catch (err) {
      this.answerError(err);
    }
  }

  /** A refusal in the one error shape, with its status and Retry-After as fastify's error handler answers it. */
  answerError(err: unknown): void {
    const answer = errorAnswer(err, this.#contentType);
    if (answer.unexpected) this.#context.logger.error({ err }, 'unexpected error answering a request');
    this.respond(answer.status, JSON.stringify(answer.body), answer.retryAfterSeconds, undefined);
  }

  protected respond(status: number, body: string, retryAfterSeconds: number | undefined, etag: string | undefined): void {
    const stream = this.#stream;
    // Reset by its client while the request was applied: the change stands, nobody hears so.
    if (stream.destroyed || stream.closed) return;
    const headers: http2.OutgoingHttpHeaders = { ':status': status, 'content-type': jsonContentType, 'content-length': Buffer.byteLength(body) };
    if (retryAfterSeconds !== undefined) headers['retry-after'] = String(retryAfterSeconds);
    if (etag !== undefined) headers.etag = etag;
    stream.respond(headers);
    // The stream is ended once its body is written, not with it (`end(body)`): the stream closes as
    // soon as END_STREAM is out, and node's Writable then settles the write still in flight by
    // making an ERR_STREAM_DESTROYED it throws away, a stack trace per request (9% of the main
    // thread in a profile of the single add under h2load).
    stream.write(body, (err) => {
      if (err == null) stream.end();
    });
  }
}
