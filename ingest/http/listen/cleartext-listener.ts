// One cleartext TCP port that speaks HTTP/1.1 and HTTP/2 with prior knowledge (h2c) alike.
// Node serves h2c only from http2.createServer(), and `allowHTTP1` works only behind TLS, where
// ALPN names the protocol; on a cleartext port only a client's first bytes say which protocol
// it speaks. So this listener accepts every connection itself, reads until the bytes either are
// the HTTP/2 client preface or can no longer become it, puts them back (unshift), and injects
// the socket into an inner HTTP/2 or HTTP/1.1 server through their documented 'connection'
// event. Both inner servers call one request handler; an HTTP/2 stream is first offered to the
// stream taker, when one is set (the hot route on the raw stream: h2-single-add.ts), and gets
// node's compatibility request and response only when the taker leaves it. When TLS credentials are given, the
// listener also carries the TLS port (tls-listener.ts), which hands its connections to the same
// inner servers once ALPN has named the protocol; closing this listener closes that one too, so
// fastify, which knows one server, drains both ports. Both ports ask the peer guard
// (peer-guard.ts) before serving a connection, and report to it the sessions and connections
// that fail for abuse; when a peer is penalised, its open connections are closed too.
//
//   accept ─► sniff (≤ 24 B, ≤ sniffTimeoutMs) ─┬─ "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" ─► http2 server ─► taker? ─┐ (not taken)
//                                               └─ anything else ───────────────────► http server ─────────────┴─► handler
//
// Unshifting is safe for both: http.Server reads what is buffered on the socket before it
// reads the handle, and an Http2Session feeds bytes already buffered on its socket to nghttp2
// first (nodejs/node#35475). The socket must not be switched to flowing mode while sniffing,
// or the bytes would be emitted to nobody; hence 'readable' and read(), never 'data'.
//
// Owned by the main thread's event loop, like every server in the process.
import assert from 'node:assert/strict';
import type { IncomingMessage, Server as Http1Server, ServerResponse } from 'node:http';
import http2 from 'node:http2';
import net from 'node:net';
import { httpLimits } from '../../../engine/limits.ts';
import { http } from '../../../runtime/node-http.ts';
import type { Penalty } from './peer-penalty.ts';
import type { PeerGuard } from './peer-guard.ts';
import { type NegotiatedProtocol, type TlsCredentials, TlsListener } from './tls-listener.ts';

/** RFC 9113 §3.4: what an HTTP/2 client with prior knowledge sends first. */
export const http2Preface = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');

assert.equal(http2Preface.length, 24);
assert.ok(httpLimits.http1HeadersTimeoutMs <= httpLimits.http1RequestTimeoutMs, 'headers must be due before the whole request');

/** The protocol the first bytes of a connection commit to, or undefined while they are still a prefix of the preface. */
function sniffProtocol(head: Uint8Array): NegotiatedProtocol | undefined {
  const compared = Math.min(head.length, http2Preface.length);
  for (let i = 0; i < compared; i++) if (head[i] !== http2Preface[i]) return 'http/1.1';
  return head.length >= http2Preface.length ? 'h2' : undefined;
}

/** A request handler that accepts both request kinds (fastify's is one: it is what fastify gives http and http2 servers alike). */
export type DualProtocolRequestHandler = (
  request: IncomingMessage | http2.Http2ServerRequest,
  response: ServerResponse | http2.Http2ServerResponse,
) => void;

/** Answers some HTTP/2 streams itself (h2-single-add.ts): true when it took `stream`, which is then its own to answer. */
export interface H2StreamTaker {
  take(stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders): boolean;
}

/** As node's compatibility layer treats a stream's failure: its client sees it; nobody here is to answer. */
function ignoreStreamError(): void {}

/**
 * What node's HTTP/2 server does for a stream when it has a 'request' listener and none for
 * 'connect', 'checkContinue' or 'checkExpectation' (lib/internal/http2/compat.js,
 * onServerStream): the compatibility request and response, 405 for CONNECT, 100 Continue for
 * `Expect: 100-continue` and 417 for any other expectation.
 */
function serveCompat(stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders, rawHeaders: string[], handler: DualProtocolRequestHandler): void {
  const request = new http2.Http2ServerRequest(stream, headers, {}, rawHeaders);
  const response = new http2.Http2ServerResponse(stream);
  if (headers[':method'] === 'CONNECT') {
    response.statusCode = http2.constants.HTTP_STATUS_METHOD_NOT_ALLOWED;
    response.end();
    return;
  }
  const expect = headers.expect;
  if (expect !== undefined) {
    if (expect !== '100-continue') {
      response.statusCode = http2.constants.HTTP_STATUS_EXPECTATION_FAILED;
      response.end();
      return;
    }
    response.writeContinue();
  }
  handler(request, response);
}

export class CleartextListener extends net.Server {
  readonly #http1: Http1Server;
  readonly #http2: http2.Http2Server;
  /** Every accepted socket until it closes, whatever protocol it turned out to speak. */
  readonly #sockets = new Set<net.Socket>();
  readonly #sniffing = new Set<net.Socket>();
  readonly #sessions = new Set<http2.ServerHttp2Session>();
  readonly #guard: PeerGuard;
  readonly #handler: DualProtocolRequestHandler;
  #taker: H2StreamTaker | undefined = undefined;
  /** The TLS port, when credentials were given; it listens when told to, on its own address. */
  readonly tls: TlsListener | undefined;

  constructor(handler: DualProtocolRequestHandler, guard: PeerGuard, tlsCredentials?: TlsCredentials) {
    // As http.Server configures its own sockets: an HTTP/1.1 client may half-close after its
    // request and still read the response; responses are not held back by Nagle.
    super({ allowHalfOpen: true, noDelay: true });
    this.#guard = guard;
    this.#http1 = http.createServer(
      {
        keepAliveTimeout: httpLimits.http1KeepAliveTimeoutMs,
        maxHeaderSize: httpLimits.headerListBytesMax,
        headersTimeout: httpLimits.http1HeadersTimeoutMs,
        requestTimeout: httpLimits.http1RequestTimeoutMs,
      },
      handler,
    );
    this.#http2 = http2.createServer(
      {
        settings: {
          maxConcurrentStreams: httpLimits.http2ConcurrentStreamsMax,
          maxHeaderListSize: httpLimits.headerListBytesMax,
          initialWindowSize: httpLimits.http2StreamWindowBytes,
        },
        maxHeaderListPairs: httpLimits.headerFieldsMax,
        maxSessionMemory: httpLimits.http2SessionMemoryMbMax,
        maxSessionInvalidFrames: httpLimits.http2SessionInvalidFramesMax,
        maxSessionRejectedStreams: httpLimits.http2SessionRejectedStreamsMax,
        streamResetBurst: httpLimits.http2StreamResetBurst,
        streamResetRate: httpLimits.http2StreamResetsPerSecond,
      },
    );
    // No 'request' listener: node would make its compatibility objects for every stream. The
    // streams come here first (#onStream), and only those the taker leaves get them.
    this.#http2.on('stream', (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders, _flags: number, rawHeaders: string[]) =>
      this.#onStream(stream, headers, rawHeaders),
    );
    this.#handler = handler;
    this.#http1.maxHeadersCount = httpLimits.headerFieldsMax;
    this.#http2.on('session', (session) => this.#adoptSession(session));
    // http.Server starts tracking its connections (the headers/request timeout checks,
    // closeIdleConnections) when it hears 'listening'. It never listens itself; it hears ours.
    this.on('listening', () => this.#http1.emit('listening'));
    // fastify answers client errors (malformed HTTP/1.1) with a JSON 400 through its listener
    // on the server it was given: this one. Without a listener here, drop the connection.
    this.#http1.on('clientError', (err: Error, socket: net.Socket) => {
      const penalty = this.#guard.http1ClientError(socket.remoteAddress, err);
      if (!this.emit('clientError', err, socket)) socket.destroy();
      this.#penalise(penalty);
    });
    this.on('connection', (socket: net.Socket) => this.#accept(socket));
    this.tls = tlsCredentials === undefined ? undefined : new TlsListener(tlsCredentials, (socket, protocol) => this.#serve(socket, protocol), (socket) => guard.admits(socket));
  }

  /**
   * Stops accepting; closes idle HTTP/1.1 connections (active ones close after their response
   * once fastify marks them `Connection: close`), sends GOAWAY on every HTTP/2 session (open
   * streams finish, no new ones start) and drops connections that never said anything; the
   * same on the TLS port when it listens. `callback` runs once every connection of both has closed.
   */
  override close(callback?: (err?: Error) => void): this {
    const secure = this.tls?.listening === true ? this.tls : undefined;
    let open = secure === undefined ? 1 : 2;
    let firstError: Error | undefined;
    const closed = (err?: Error): void => {
      firstError ??= err;
      if (--open === 0) callback?.(firstError);
    };
    super.close(closed);
    secure?.close(closed);
    this.#http1.close();
    for (const session of this.#sessions) session.close();
    for (const socket of this.#sniffing) socket.destroy();
    return this;
  }

  /** Destroys every connection at once: the bound on a graceful close. */
  closeAllConnections(): void {
    for (const socket of this.#sockets) socket.destroy();
    this.tls?.closeAllConnections();
  }

  /** Offers every HTTP/2 stream (both ports) to `taker` before any request object is made for it. */
  takeStreams(taker: H2StreamTaker): void {
    this.#taker = taker;
  }

  // Http2Server's own members, so that fastify's HTTP/2 typing accepts this listener as the
  // server it runs on (fastify itself calls neither).
  setTimeout(msec?: number, callback?: () => void): this {
    this.#http1.setTimeout(msec, callback);
    this.#http2.setTimeout(msec, callback);
    return this;
  }

  updateSettings(settings: http2.Settings): void {
    this.#http2.updateSettings(settings);
  }

  #accept(socket: net.Socket): void {
    // A penalised peer's connection: reset (no FIN, no TIME_WAIT here) before any HTTP work.
    if (!this.#guard.admits(socket)) {
      socket.resetAndDestroy();
      return;
    }
    this.#sockets.add(socket);
    this.#sniffing.add(socket);
    socket.once('close', () => {
      this.#sockets.delete(socket);
      this.#sniffing.delete(socket);
    });

    let head: Buffer = Buffer.alloc(0);
    const onReadable = (): void => {
      for (let chunk = socket.read() as Buffer | null; chunk !== null; chunk = socket.read() as Buffer | null) {
        head = head.length === 0 ? chunk : Buffer.concat([head, chunk]);
      }
      const protocol = sniffProtocol(head);
      if (protocol === undefined) return;
      stopSniffing();
      socket.unshift(head);
      this.#serve(socket, protocol);
    };
    // Silent past the deadline, gone, or ended inside the preface: nothing to answer.
    const drop = (): void => {
      stopSniffing();
      socket.destroy();
    };
    const stopSniffing = (): void => {
      this.#sniffing.delete(socket);
      socket.setTimeout(0);
      socket.off('readable', onReadable).off('timeout', drop).off('end', drop).off('error', drop);
    };
    socket.setTimeout(httpLimits.sniffTimeoutMs);
    socket.on('readable', onReadable).on('timeout', drop).on('end', drop).on('error', drop);
  }

  /** Hands a connection whose protocol is settled (sniffed here, or negotiated on the TLS port) to its inner server. */
  #serve(socket: net.Socket, protocol: NegotiatedProtocol): void {
    if (!this.#sockets.has(socket)) {
      this.#sockets.add(socket);
      socket.once('close', () => this.#sockets.delete(socket));
    }
    if (protocol === 'h2') this.#http2.emit('connection', socket);
    else this.#http1.emit('connection', socket);
  }

  #onStream(stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders, rawHeaders: string[]): void {
    // A stream its client has already reset has nobody to answer, so it skips fastify's
    // routing, body read, error and reply (measured: 65–77 µs of server CPU per rapid-reset
    // stream instead of 83–88). Node hands a stream over after reading the whole chunk it came
    // in, so the RST_STREAM sent right behind the HEADERS has usually been read by then.
    if (stream.destroyed) {
      stream.on('error', ignoreStreamError);
      return;
    }
    if (this.#taker?.take(stream, headers) === true) return;
    serveCompat(stream, headers, rawHeaders, this.#handler);
  }

  #adoptSession(session: http2.ServerHttp2Session): void {
    this.#sessions.add(session);
    session.once('close', () => this.#sessions.delete(session));
    // Read now: once the session has failed its socket is gone, and with it the address.
    const address = session.socket.remoteAddress;
    session.once('error', (err: Error) => this.#penalise(this.#guard.sessionError(address, err)));
    session.setTimeout(httpLimits.http2SessionIdleTimeoutMs, () => session.close());
    // setLocalWindowSize throws on a destroyed session (a peer gone before it was adopted).
    if (!session.destroyed) session.setLocalWindowSize(httpLimits.http2SessionWindowBytes);
  }

  /** A penalty just started: the peer's other connections (both ports, once served) are closed as well. */
  #penalise(penalty: Penalty | undefined): void {
    if (penalty === undefined) return;
    for (const socket of this.#sockets) if (this.#guard.belongsTo(socket, penalty.peer)) socket.destroy();
  }
}
