// HTTP clients for delivery, one per target origin, owned by a delivery worker thread.
//
// An origin speaks HTTP/2 until it shows it can't: https targets negotiate h2 or http/1.1 by
// ALPN; cleartext http targets get HTTP/2 with prior knowledge, and one whose handshake fails
// after the TCP connect is marked HTTP/1.1 (keep-alive agent) from then on. An HTTP/2 session
// stays open between deliveries (idle workers run their event loop, so it answers PINGs) and
// is closed after sessionIdleMsMax without a request.
//
// Every connection goes to an address the target guard checked: the client resolves through
// the guard and connects to that exact address (TLS keeps the name for SNI and certificate
// checks), so a DNS answer that changes between check and connect cannot slip in a private
// address; the connected socket's remote address is checked once more. Redirects are never
// followed: a 3xx is an answer like any other non-2xx.
//
//   send(request) ─► origin h2? ─► session (connect: guard → socket → h2 handshake) ─► stream
//                        └─ h1 ─► guard → http(s).request to the checked address, keep-alive
import assert from 'node:assert/strict';
import type { Agent } from 'node:http';
import http2 from 'node:http2';
import https from 'node:https';
import net from 'node:net';
import tls from 'node:tls';
import { dispatchLimits } from '../engine/limits.ts';
import { http } from '../runtime/node-http.ts';
import { readResponseBody } from './response-body.ts';

const { tcpKeepAliveDelayMs, sessionPingTimeoutMs } = dispatchLimits;

/**
 * Streams sent to a new origin before its SETTINGS say how many it allows: the 100 that RFC 9113
 * (section 6.5.2) asks every peer to allow at least. The handshake waits for those SETTINGS, so
 * this holds only for the requests that arrive while the first session is being opened.
 */
const streamsBeforeSettings = 100;

/** What a delivery needs from the target guard (dispatch/target-guard.ts). */
export interface AddressGuard {
  /** The checked address to connect to for `url`; throws (code TARGET_REFUSED) when refused. */
  resolveTarget(url: URL): Promise<{ readonly address: string; readonly family: number; readonly servername: string | undefined }>;
  /** Why a connected socket's remote address is refused (an allow-listed origin never is), or undefined. */
  checkConnectedAddress(address: string, origin: string): string | undefined;
}

export interface OriginClientsOptions {
  readonly guard: AddressGuard;
  /** A session unused this long is closed. */
  readonly sessionIdleMsMax: number;
  /** TCP connect plus TLS and HTTP/2 handshakes, at most. */
  readonly connectTimeoutMs: number;
  /** Extra CA certificates (PEM) for https targets. */
  readonly ca?: string | undefined;
  /** HTTP/2 streams in flight to one origin at most, and never more than it allows (SETTINGS_MAX_CONCURRENT_STREAMS); more wait their turn here. */
  readonly requestsPerOriginMax: number;
  /** HTTP/1.1 requests (each a socket) in flight to one origin at most; more wait their turn here. */
  readonly socketsPerOriginMax: number;
}

export interface DeliveryRequest {
  readonly url: URL;
  readonly headers: Record<string, string>;
  readonly body: Uint8Array;
  readonly timeoutMs: number;
  /** Set when the request leaves its turn in line for the origin, to go out at once (what fire lateness measures). */
  readonly timing?: { sentAtMs: number };
  /** Bytes of the answer's body to bring back (response-body.ts); absent or 0: it is drained unread. */
  readonly responseBytesMax?: number;
}

export interface DeliveryAnswer {
  readonly status: number;
  readonly retryAfter: string | undefined;
  /** The answer's first responseBytesMax bytes, when the request asked for them. */
  readonly body?: Uint8Array;
}

/** A delivery that got no answer; `code` tells timeouts (ETIMEDOUT) from other failures. */
export class DeliveryFailure extends Error {
  readonly code: string;
  constructor(code: string, message: string, cause?: unknown) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = 'DeliveryFailure';
    this.code = code;
  }
}

/** The origin turned out not to speak HTTP/2: go on with HTTP/1.1. */
class NotHttp2 extends Error {}

type Protocol = 'h2' | 'h1';

class Origin {
  protocol: Protocol = 'h2';
  session: http2.ClientHttp2Session | undefined;
  connecting: Promise<http2.ClientHttp2Session> | undefined;
  agent: Agent | undefined;
  /**
   * Requests in flight at most: the HTTP/2 cap until the target's SETTINGS say it allows fewer
   * streams (nghttp2 would otherwise hold the excess back itself, unseen, and a timer's start
   * would be taken before it went out), or the HTTP/1.1 cap once the origin speaks only that.
   */
  limit: number;
  /** Requests in flight, and those waiting for one of them to finish (first come, first served, from waitingHead). */
  active = 0;
  readonly waiting: Array<() => void> = [];
  waitingHead = 0;

  constructor(limit: number) {
    this.limit = limit;
  }
}

export class OriginClients {
  readonly #options: OriginClientsOptions;
  readonly #origins = new Map<string, Origin>();
  #closed = false;

  constructor(options: OriginClientsOptions) {
    this.#options = options;
  }

  /** Open HTTP/2 sessions (for tests and stats). */
  get sessionCount(): number {
    let count = 0;
    for (const origin of this.#origins.values()) if (origin.session !== undefined && !origin.session.closed) count++;
    return count;
  }

  /**
   * Opens the HTTP/2 session to `url`'s origin ahead of its first delivery (a warm-up), unless
   * one is open or the origin is known to speak HTTP/1.1 only; rejects when it cannot connect.
   */
  async open(url: URL): Promise<void> {
    assert.ok(!this.#closed, 'open after close');
    const origin = this.#originOf(url.origin);
    if (origin.protocol === 'h1') return;
    try {
      await this.#session(origin, url);
    } catch (err) {
      // A cleartext origin that does not take the preface is marked HTTP/1.1 by its first delivery.
      if (!(err instanceof NotHttp2)) throw err;
    }
  }

  /** Sends one delivery; resolves with the answer's status, rejects when there is none. */
  async send(request: DeliveryRequest): Promise<DeliveryAnswer> {
    assert.ok(!this.#closed, 'send after close');
    const origin = this.#originOf(request.url.origin);
    // A target is never sent more than its origin's limit at once: a burst of due timers must
    // not flood it (nor one HTTP/2 session's memory) with thousands of streams.
    if (origin.active < origin.limit) origin.active++;
    else await new Promise<void>((resolve) => origin.waiting.push(resolve));
    if (request.timing !== undefined) request.timing.sentAtMs = Date.now();
    try {
      return await this.#sendOnOrigin(origin, request);
    } finally {
      this.#passSlot(origin);
    }
  }

  #originOf(key: string): Origin {
    let origin = this.#origins.get(key);
    if (origin === undefined) {
      origin = new Origin(Math.min(this.#options.requestsPerOriginMax, streamsBeforeSettings));
      this.#origins.set(key, origin);
    }
    return origin;
  }

  /** A request to `origin` finished: its slot goes to the next in line, or is freed (also when the limit fell below what is in flight). */
  #passSlot(origin: Origin): void {
    if (origin.waitingHead === origin.waiting.length || origin.active > origin.limit) {
      origin.active--;
      return;
    }
    this.#wakeNext(origin);
  }

  /** Sets how many requests `origin` may have in flight; a raised limit lets that many more of the waiting go at once. */
  #setLimit(origin: Origin, limit: number): void {
    origin.limit = limit;
    while (origin.active < limit && origin.waitingHead < origin.waiting.length) {
      origin.active++;
      this.#wakeNext(origin);
    }
  }

  /** The next in line for `origin` goes, in a slot already counted in `active`. */
  #wakeNext(origin: Origin): void {
    const waiting = origin.waiting;
    const next = waiting[origin.waitingHead++] as () => void;
    // A queue read from its head (a shift() would move thousands of entries each time), trimmed as it drains.
    if (origin.waitingHead === waiting.length) {
      waiting.length = 0;
      origin.waitingHead = 0;
    } else if (origin.waitingHead >= 1024 && origin.waitingHead * 2 >= waiting.length) {
      waiting.splice(0, origin.waitingHead);
      origin.waitingHead = 0;
    }
    next();
  }

  async #sendOnOrigin(origin: Origin, request: DeliveryRequest): Promise<DeliveryAnswer> {
    if (origin.protocol === 'h1') return this.#requestH1(origin, request);
    let session: http2.ClientHttp2Session;
    try {
      session = await this.#session(origin, request.url);
    } catch (err) {
      if (!(err instanceof NotHttp2)) throw err;
      // ALPN chose HTTP/1.1, or a cleartext peer did not take the HTTP/2 preface. The latter may
      // also be a dropped connection: the origin is marked HTTP/1.1 only once it has answered
      // over HTTP/1.1, so a flaky HTTP/2-only target is not downgraded for good.
      const answer = await this.#requestH1(origin, request);
      origin.protocol = 'h1';
      this.#setLimit(origin, this.#options.socketsPerOriginMax);
      return answer;
    }
    return requestH2(session, request);
  }

  /** Closes every session and agent; in-flight requests fail. */
  close(): void {
    this.#closed = true;
    for (const origin of this.#origins.values()) {
      origin.session?.close();
      origin.agent?.destroy();
    }
    this.#origins.clear();
  }

  #session(origin: Origin, url: URL): Promise<http2.ClientHttp2Session> {
    const live = origin.session;
    if (live !== undefined && !live.closed && !live.destroyed) return Promise.resolve(live);
    origin.session = undefined;
    origin.connecting ??= this.#connectH2(url).then(
      (session) => {
        origin.connecting = undefined;
        origin.session = session;
        const forget = (): void => {
          if (origin.session === session) origin.session = undefined;
        };
        session.on('close', forget);
        session.on('goaway', forget);
        session.on('error', forget);
        session.setTimeout(this.#options.sessionIdleMsMax, () => session.close());
        // The target's stream limit, from its first SETTINGS (already here) and any later ones.
        const followSettings = (): void => {
          if (origin.session === session) this.#setLimit(origin, streamLimit(session, this.#options.requestsPerOriginMax));
        };
        followSettings();
        session.on('remoteSettings', followSettings);
        return session;
      },
      (err: unknown) => {
        origin.connecting = undefined;
        throw err;
      },
    );
    return origin.connecting;
  }

  async #connectH2(url: URL): Promise<http2.ClientHttp2Session> {
    const { address, servername } = await this.#options.guard.resolveTarget(url);
    const port = Number(url.port) || (url.protocol === 'https:' ? 443 : 80);
    const deadline = AbortSignal.timeout(this.#options.connectTimeoutMs);
    const socket = url.protocol === 'https:' ? await this.#connectTls(address, port, servername, url.host, ['h2', 'http/1.1'], deadline) : await connectTcp(address, port, deadline);
    // A peer that vanishes without a FIN is found by TCP keepalive, not only by request timeouts.
    socket.setKeepAlive(true, tcpKeepAliveDelayMs);
    this.#checkConnected(socket, url);
    if (socket instanceof tls.TLSSocket && socket.alpnProtocol !== 'h2') {
      socket.destroy();
      throw new NotHttp2(`${url.origin} chose ${String(socket.alpnProtocol)} by ALPN`);
    }
    const session = http2.connect(url.origin, { createConnection: () => socket, maxSessionMemory: 64 });
    // The handshake is done when the peer's SETTINGS arrive ('connect' only means the socket
    // is up). Over TLS, ALPN already said h2: a failed handshake is a network error. In
    // cleartext, a server that accepted the connection but not the preface speaks HTTP/1.1.
    const cleartext = url.protocol === 'http:';
    return new Promise((resolve, reject) => {
      const fail = (err: unknown): void => {
        cleanup();
        session.destroy();
        reject(cleartext ? new NotHttp2(`${url.origin} did not answer the HTTP/2 preface`) : toFailure(err, `HTTP/2 handshake with ${url.origin} failed`));
      };
      const onTimeout = (): void => {
        cleanup();
        session.destroy();
        reject(new DeliveryFailure('ETIMEDOUT', `HTTP/2 handshake with ${url.origin} timed out`));
      };
      const onClose = (): void => fail(new Error('closed during the handshake'));
      const cleanup = (): void => {
        session.off('remoteSettings', onConnect);
        session.off('error', fail);
        session.off('close', onClose);
        deadline.removeEventListener('abort', onTimeout);
      };
      const onConnect = (): void => {
        cleanup();
        resolve(session);
      };
      session.once('remoteSettings', onConnect);
      session.once('error', fail);
      session.once('close', onClose);
      deadline.addEventListener('abort', onTimeout, { once: true });
    });
  }

  #connectTls(address: string, port: number, servername: string | undefined, where: string, alpn: string[], deadline: AbortSignal): Promise<tls.TLSSocket> {
    // With servername set, the certificate must name the target's host, not the address it resolved to.
    const socket = tls.connect({ host: address, port, ALPNProtocols: alpn, ...(servername === undefined ? {} : { servername }), ...(this.#options.ca === undefined ? {} : { ca: [...tls.rootCertificates, this.#options.ca] }) });
    return settleConnect(socket, 'secureConnect', deadline, where);
  }

  #requestH1(origin: Origin, request: DeliveryRequest): Promise<DeliveryAnswer> {
    const { url } = request;
    const secure = url.protocol === 'https:';
    const maxSockets = this.#options.socketsPerOriginMax;
    origin.agent ??= secure ? new https.Agent({ keepAlive: true, maxSockets, ...(this.#options.ca === undefined ? {} : { ca: [...tls.rootCertificates, this.#options.ca] }) }) : new http.Agent({ keepAlive: true, maxSockets });
    const agent = origin.agent;
    return this.#options.guard.resolveTarget(url).then(
      ({ address, servername }) =>
        new Promise<DeliveryAnswer>((resolve, reject) => {
          const options: https.RequestOptions = {
            method: 'POST',
            host: address,
            port: Number(url.port) || (secure ? 443 : 80),
            path: `${url.pathname}${url.search}`,
            headers: { host: url.host, 'content-length': String(request.body.length), ...request.headers },
            agent,
            ...(servername === undefined ? {} : { servername }),
          };
          const req = (secure ? https : http).request(options, (res) => {
            clearTimeout(timer);
            const status = res.statusCode ?? 0;
            const retryAfter = headerValue(res.headers['retry-after']);
            const bytesMax = request.responseBytesMax ?? 0;
            if (bytesMax === 0) {
              res.resume();
              resolve({ status, retryAfter });
            } else void readResponseBody(res, bytesMax, request.timeoutMs).then((body) => resolve({ status, retryAfter, body }));
          });
          const timer = setTimeout(() => req.destroy(new DeliveryFailure('ETIMEDOUT', `no answer from ${url.origin} within ${request.timeoutMs} ms`)), request.timeoutMs);
          req.on('socket', (socket) => {
            const check = (): void => {
              try {
                this.#checkConnected(socket, url);
              } catch (err) {
                req.destroy(err as Error);
              }
            };
            if (socket.remoteAddress === undefined) socket.once(secure ? 'secureConnect' : 'connect', check);
            else check();
          });
          req.on('error', (err) => {
            clearTimeout(timer);
            reject(toFailure(err, `delivery to ${url.origin} failed`));
          });
          req.end(request.body);
        }),
    );
  }

  #checkConnected(socket: net.Socket, url: URL): void {
    const remote = socket.remoteAddress;
    const refusal = remote === undefined ? 'no remote address' : this.#options.guard.checkConnectedAddress(remote, url.origin);
    if (refusal === undefined) return;
    socket.destroy();
    const err = new DeliveryFailure('TARGET_REFUSED', `connected address of ${url.origin} refused: ${refusal}`);
    throw err;
  }
}

/** Streams to have in flight on `session`: at most `max`, and at most what the peer's SETTINGS allow (at least one). */
function streamLimit(session: http2.ClientHttp2Session, max: number): number {
  const allowed = session.remoteSettings.maxConcurrentStreams;
  return Math.max(1, Math.min(max, allowed ?? max));
}

function requestH2(session: http2.ClientHttp2Session, request: DeliveryRequest): Promise<DeliveryAnswer> {
  const { url } = request;
  return new Promise((resolve, reject) => {
    let answered = false;
    const stream = session.request({
      ':method': 'POST',
      ':path': `${url.pathname}${url.search}`,
      ':authority': url.host,
      'content-length': request.body.length,
      ...request.headers,
    });
    const timer = setTimeout(() => {
      stream.close(http2.constants.NGHTTP2_CANCEL);
      reject(new DeliveryFailure('ETIMEDOUT', `no answer from ${url.origin} within ${request.timeoutMs} ms`));
      probe(session);
    }, request.timeoutMs);
    stream.once('response', (headers) => {
      answered = true;
      clearTimeout(timer);
      const status = Number(headers[':status']);
      const retryAfter = headerValue(headers['retry-after']);
      const bytesMax = request.responseBytesMax ?? 0;
      if (bytesMax === 0) {
        stream.resume();
        resolve({ status, retryAfter });
      } else void readResponseBody(stream, bytesMax, request.timeoutMs).then((body) => resolve({ status, retryAfter, body }));
    });
    stream.once('error', (err) => {
      clearTimeout(timer);
      if (!answered) reject(toFailure(err, `delivery to ${url.origin} failed`));
    });
    stream.once('close', () => {
      clearTimeout(timer);
      if (!answered) reject(new DeliveryFailure('ECONNRESET', `stream to ${url.origin} closed without an answer (code ${stream.rstCode})`));
    });
    stream.end(request.body);
  });
}

/** Sessions with a PING out after a timeout (one probe at a time per session). */
const probing = new WeakSet<http2.ClientHttp2Session>();

/**
 * A slow target and a dead connection look alike from one timed-out stream: a PING tells them
 * apart. No answer within sessionPingTimeoutMs and the session is dropped, so the next
 * delivery connects afresh instead of timing out on a connection that went silent.
 */
function probe(session: http2.ClientHttp2Session): void {
  if (session.destroyed || probing.has(session)) return;
  probing.add(session);
  const timer = setTimeout(() => session.destroy(), sessionPingTimeoutMs);
  const answered = session.ping((err) => {
    clearTimeout(timer);
    probing.delete(session);
    if (err !== null) session.destroy();
  });
  if (!answered) {
    clearTimeout(timer);
    probing.delete(session);
  }
}

function connectTcp(address: string, port: number, deadline: AbortSignal): Promise<net.Socket> {
  return settleConnect(net.connect({ host: address, port }), 'connect', deadline, `${address}:${port}`);
}

function settleConnect<S extends net.Socket>(socket: S, event: 'connect' | 'secureConnect', deadline: AbortSignal, where: string): Promise<S> {
  return new Promise((resolve, reject) => {
    const onTimeout = (): void => {
      socket.destroy();
      reject(new DeliveryFailure('ETIMEDOUT', `connecting to ${where} timed out`));
    };
    const onError = (err: Error): void => {
      deadline.removeEventListener('abort', onTimeout);
      reject(toFailure(err, `connecting to ${where} failed`));
    };
    socket.once('error', onError);
    socket.once(event, () => {
      socket.off('error', onError);
      deadline.removeEventListener('abort', onTimeout);
      resolve(socket);
    });
    deadline.addEventListener('abort', onTimeout, { once: true });
  });
}

function toFailure(err: unknown, message: string): Error {
  if (err instanceof DeliveryFailure) return err;
  const code = typeof err === 'object' && err !== null && typeof (err as { code?: unknown }).code === 'string' ? (err as { code: string }).code : 'ECONNRESET';
  return new DeliveryFailure(code, `${message}: ${err instanceof Error ? err.message : String(err)}`, err);
}

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}
