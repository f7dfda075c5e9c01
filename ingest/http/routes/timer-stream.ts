// POST /v1/timers/stream: the route that opens a TimerStream (timer-stream.ts says what a
// stream reads and answers) on a request's body, ends it on HTTP/2 with a reset once the
// service stopped reading it, and stops every open stream when the server closes. Registered
// inside /v1/timers's scope to share its AdmitCoalescer (or by the cluster front). Main thread.
import http2 from 'node:http2';
import type { Readable } from 'node:stream';
import { PassThrough } from 'node:stream';
import { traceHeadersOf } from '../../../engine/trace-context.ts';
import type { Clock } from '../../../engine/types.ts';
import { httpErrorCodes, HttpProblem } from '../error-map.ts';
import { mediaTypeOf, mediaTypes } from '../media-types.ts';
import { type LineAdmitter, TimerStream } from '../timer-stream.ts';
import type { HttpServer } from '../types.ts';

export interface TimerStreamRoutesOptions {
  /**
   * Who admits a stream's lines, given its request's headers: on one node the one-timer JSON
   * route's coalescer, so that both kinds of single add share records; in cluster mode each
   * line's partition, here or at its owner (cluster/stream-admitter.ts).
   */
  readonly admitterFor: (headers: Readonly<Record<string, string | string[] | undefined>>) => LineAdmitter;
  /** The clock a line's `delay_ms` counts from (the engine's). */
  readonly clock: Clock;
}

export async function timerStreamRoutes(app: HttpServer, { admitterFor, clock }: TimerStreamRoutesOptions): Promise<void> {
  // The body is read line by line as it arrives, by the route: in this scope the NDJSON parser hands it over unread.
  app.removeContentTypeParser(mediaTypes.ndjson);
  app.addContentTypeParser(mediaTypes.ndjson, (_request, payload, done) => done(null, payload));
  const open = new Set<TimerStream>();
  app.addHook('preClose', (done) => {
    for (const stream of open) stream.stopReading();
    done();
  });

  app.post<{ Body: unknown }>('/v1/timers/stream', async (request, reply) => {
    if (mediaTypeOf(request.headers['content-type']) !== mediaTypes.ndjson) {
      throw new HttpProblem(httpErrorCodes.unsupportedMediaType, `POST /v1/timers/stream needs a Content-Type: ${mediaTypes.ndjson} (one timer a line)`);
    }
    const body = request.body as Readable;
    const out = new PassThrough();
    const stream = new TimerStream(
      body,
      out,
      admitterFor(request.headers),
      clock,
      () => open.delete(stream),
      (err) => request.log.error({ err }, 'unexpected error answering a line of an add stream'),
      traceHeadersOf(request.headers.traceparent, request.headers.tracestate),
    );
    open.add(stream);
    // Answered in full while the client still sends (the service stopped reading): tell it to
    // stop, on HTTP/2 by a reset without error once the answer is sent whole (RFC 9113 §8.1), on
    // HTTP/1.1 by closing the connection once the answer is out.
    out.once('end', () => {
      if (!stream.stoppedEarly) return;
      if (request.raw.httpVersionMajor === 2) {
        const h2 = request.raw.stream;
        const reset = (): void => h2.close(http2.constants.NGHTTP2_NO_ERROR);
        if (h2.writableFinished) reset();
        else h2.once('finish', reset);
      } else {
        reply.raw.once('finish', () => request.raw.socket.end());
      }
    });
    return reply.code(200).type(mediaTypes.ndjson).send(out);
  });
}
