// How the client reaches one fermata server: one HTTP/2 session, reused by every request and
// reopened when it closes, or HTTP/1.1 keep-alive connections where the server offers only that
// (decision 0022 says why node:http2 and not undici). Which one is decided once, at the first
// request: over TLS by ALPN (h2 preferred), in cleartext by trying HTTP/2 with prior knowledge
// and falling back when the server does not answer with HTTP/2 SETTINGS.
//
// The session is unref'd while no request is in flight, so an idle client never keeps the
// process alive; `close()` ends it. Runs on the caller's event loop; not shared across threads.
import http from 'node:http';
import http2 from 'node:http2';
import https from 'node:https';
import net from 'node:net';
import type { Readable, Writable } from 'node:stream';
import tls from 'node:tls';
import { clientErrorCodes, FermataError } from './errors.ts';

export type Protocol = 'h2' | 'http/1.1';

/** TLS settings for an https:// server: a private CA, a client certificate, a server name. */
export interface TlsOptions {
  readonly ca?: string | Buffer | Array<string | Buffer>;
  readonly cert?: string | Buffer;
  readonly key?: string | Buffer;
  readonly servername?: string;
  /** false accepts any certificate: for tests only. */
  readonly rejectUnauthorized?: boolean;
}

export interface TransportOptions {
  readonly url: URL;
  /** `auto` (the default): HTTP/2 when the server speaks it, else HTTP/1.1. */
  readonly protocol: 'auto' | Protocol;
  readonly tls: TlsOptions;
  readonly connectTimeoutMs: number;
  readonly requestTimeoutMs: number;
}

export type Headers = Record<string, string>;

type RequestBody = Uint8Array | null | 'open';

/** HTTP/1.1 connections open at once, at most: more requests wait for one (a connection each would cost a handshake each). */
const http1SocketsMax = 32;

export interface Answer {
  readonly status: number;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly body: Buffer;
}

/** A request whose body is written while its answer is read (the add stream). */
export interface Exchange {
  /** The request body: write lines, end it to finish. */
  readonly body: Writable;
  /** The answer's status and headers once they come, and its body as it arrives. Errors after it are the body's (an 'error' listener stays on the request, so a late one never goes unhandled). */
  readonly answer: Promise<{ status: number; headers: Readonly<Record<string, string | string[] | undefined>>; body: Readable }>;
  /** Drops the exchange at once (both directions). */
  abort(): void;
}

export class Transport {
  readonly #options: TransportOptions;
  readonly #origin: string;
  #protocol: Promise<Protocol> | undefined;
  #session: http2.ClientHttp2Session | undefined;
  /** Requests in flight on each session: it is ref'd while any are. */
  readonly #active = new WeakMap<http2.ClientHttp2Session, number>();
  #agent: http.Agent | undefined;
  #closed = false;

  constructor(options: TransportOptions) {
    this.#options = options;
    this.#origin = options.url.origin;
  }

  /** The protocol the server is spoken to in (decided at the first call). */
  protocol(): Promise<Protocol> {
    // A server that could not be reached decided nothing: the next call asks again.
    this.#protocol ??= this.#decide().catch((err: unknown) => {
      this.#protocol = undefined;
      throw err;
    });
    return this.#protocol;
  }

  async request(method: string, path: string, headers: Headers, body?: Uint8Array): Promise<Answer> {
    const exchange = await this.#open(method, path, headers, body ?? null);
    const answer = await exchange.answer;
    return { status: answer.status, headers: answer.headers, body: await readAll(answer.body) };
  }

  /** Opens a request whose body the caller writes as it goes; no timeout (it may stay open long). */
  exchange(method: string, path: string, headers: Headers): Promise<Exchange> {
    return this.#open(method, path, headers, 'open');
  }

  async close(): Promise<void> {
    this.#closed = true;
    const session = this.#session;
    this.#session = undefined;
    this.#agent?.destroy();
    if (session === undefined || session.closed) return;
    // An unref'd session would let the process exit before its close completes.
    session.ref();
    await new Promise<void>((resolve) => session.close(() => resolve()));
  }

  /** `body`: the whole body, null for none, or 'open' for one the caller writes (then no timeout: it may stay open long). */
  async #open(method: string, path: string, headers: Headers, body: RequestBody): Promise<Exchange> {
    if (this.#closed) throw connectionError('the client is closed');
    return (await this.protocol()) === 'h2' ? this.#h2(method, path, headers, body) : this.#h1(method, path, headers, body);
  }

  async #decide(): Promise<Protocol> {
    if (this.#options.protocol !== 'auto') return this.#options.protocol;
    if (this.#options.url.protocol === 'https:') return this.#alpn();
    try {
      this.#adopt(await this.#connect());
      return 'h2';
    } catch (err) {
      // Reached, but not answered with HTTP/2 SETTINGS: the server speaks HTTP/1.1 only.
      if (unreached(err)) throw err;
      return 'http/1.1';
    }
  }

  /** The protocol a TLS server picks among h2 and http/1.1. */
  #alpn(): Promise<Protocol> {
    const { hostname, port } = this.#options.url;
    return new Promise((resolve, reject) => {
      const socket = tls.connect({ ...this.#options.tls, host: hostname, port: Number(port || 443), ALPNProtocols: ['h2', 'http/1.1'], ...serverName(this.#options.tls.servername, hostname) });
      socket.setTimeout(this.#options.connectTimeoutMs, () => socket.destroy(new Error(`no TLS handshake within ${this.#options.connectTimeoutMs} ms`)));
      socket.once('secureConnect', () => {
        resolve(socket.alpnProtocol === 'h2' ? 'h2' : 'http/1.1');
        socket.end();
      });
      socket.once('error', (err) => reject(connectionError(`cannot connect to ${this.#origin}: ${err.message}`, err)));
    });
  }

  /** A new HTTP/2 session, once the server's SETTINGS came (so a server that speaks only HTTP/1.1 fails here). */
  #connect(): Promise<http2.ClientHttp2Session> {
    return new Promise((resolve, reject) => {
      const session = http2.connect(this.#origin, { ...this.#options.tls, maxSessionMemory: 64 });
      const timer = setTimeout(() => session.destroy(new Error(`no HTTP/2 SETTINGS within ${this.#options.connectTimeoutMs} ms`)), this.#options.connectTimeoutMs);
      const fail = (err: Error): void => {
        clearTimeout(timer);
        reject(connectionError(`cannot open an HTTP/2 session to ${this.#origin}: ${err.message}`, err));
      };
      session.once('error', fail);
      session.once('close', () => fail(new Error('the session closed')));
      session.once('remoteSettings', () => {
        clearTimeout(timer);
        session.removeListener('error', fail);
        session.on('error', () => undefined); // its streams see the error too; the session is replaced once closed
        session.unref();
        resolve(session);
      });
    });
  }

  async #liveSession(): Promise<http2.ClientHttp2Session> {
    const session = this.#session;
    if (session !== undefined && !session.closed && !session.destroyed) return session;
    this.#session = undefined;
    const fresh = await this.#connect();
    if (this.#closed) {
      fresh.destroy();
      throw connectionError('the client is closed');
    }
    this.#adopt(fresh);
    return fresh;
  }

  /** Makes `session` the one requests go on, until it closes or the server sends GOAWAY. */
  #adopt(session: http2.ClientHttp2Session): void {
    this.#session = session;
    const forget = (): void => {
      if (this.#session === session) this.#session = undefined;
    };
    session.once('close', forget);
    session.once('goaway', forget);
  }

  async #h2(method: string, path: string, headers: Headers, body: RequestBody): Promise<Exchange> {
    const session = await this.#liveSession();
    const stream = session.request({ ':method': method, ':path': path, ...headers }, { endStream: body === null });
    this.#hold(session);
    let released = false;
    const release = (): void => {
      if (released) return;
      released = true;
      this.#let(session);
    };
    stream.once('close', release);
    if (body !== 'open') stream.setTimeout(this.#options.requestTimeoutMs, () => stream.destroy(new Error(`no answer within ${this.#options.requestTimeoutMs} ms`)));
    const answer = new Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: Readable }>((resolve, reject) => {
      stream.once('response', (responseHeaders) => resolve({ status: Number(responseHeaders[':status']), headers: responseHeaders, body: stream }));
      stream.on('error', (err) => reject(connectionError(`${method} ${path}: ${err.message}`, err)));
      stream.once('close', () => reject(connectionError(`${method} ${path}: the stream closed before an answer (code ${stream.rstCode})`)));
    });
    if (body instanceof Uint8Array) stream.end(body);
    return { body: stream, answer, abort: () => stream.destroy() };
  }

  #h1(method: string, path: string, headers: Headers, body: RequestBody): Exchange {
    const secure = this.#options.url.protocol === 'https:';
    this.#agent ??= secure ? new https.Agent({ keepAlive: true, maxSockets: http1SocketsMax, ...this.#options.tls }) : new http.Agent({ keepAlive: true, maxSockets: http1SocketsMax });
    const request = (secure ? https : http).request(this.#options.url, { method, path, headers, agent: this.#agent });
    if (body !== 'open') request.setTimeout(this.#options.requestTimeoutMs, () => request.destroy(new Error(`no answer within ${this.#options.requestTimeoutMs} ms`)));
    const answer = new Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: Readable }>((resolve, reject) => {
      request.once('response', (response) => resolve({ status: response.statusCode ?? 0, headers: response.headers, body: response }));
      request.on('error', (err) => reject(connectionError(`${method} ${path}: ${err.message}`, err)));
    });
    if (body === 'open') request.flushHeaders();
    else if (body === null) request.end();
    else request.end(body);
    return { body: request, answer, abort: () => request.destroy() };
  }

  /** Keeps the process alive while a request is in flight on the session. */
  #hold(session: http2.ClientHttp2Session): void {
    const active = this.#active.get(session) ?? 0;
    this.#active.set(session, active + 1);
    if (active === 0) session.ref();
  }

  #let(session: http2.ClientHttp2Session): void {
    const active = (this.#active.get(session) ?? 1) - 1;
    this.#active.set(session, active);
    if (active === 0 && !session.destroyed && !this.#closed) session.unref();
  }
}

/** A whole body, by its events (an async iterator a request costs measurably more CPU). */
function readAll(body: Readable): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    body.on('data', (chunk: Buffer) => chunks.push(chunk));
    body.once('end', () => resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks)));
    body.on('error', reject);
    body.once('close', () => reject(connectionError('the answer was cut before its end')));
  });
}

/** Socket errors that mean the server was not reached at all (so its protocol is still unknown). */
const unreachedCodes = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'ETIMEDOUT', 'EADDRNOTAVAIL']);

function unreached(err: unknown): boolean {
  const cause = err instanceof Error ? err.cause : undefined;
  return cause instanceof Error && unreachedCodes.has((cause as NodeJS.ErrnoException).code ?? '');
}

/** SNI takes a host name, never an address. */
function serverName(given: string | undefined, hostname: string): { servername?: string } {
  const name = given ?? hostname;
  return net.isIP(name) === 0 ? { servername: name } : {};
}

function connectionError(message: string, cause?: Error): FermataError {
  return new FermataError(0, { code: clientErrorCodes.connectionFailed, message }, undefined, cause === undefined ? undefined : { cause });
}
