// One HTTP/2 (prior knowledge) session to a fermata, as the reliability tests speak to it: every
// request bounded in time, answered with status, headers, body and how long it took. A stream
// closed without a response (a reset, a dead server) rejects, naming the request; the session's
// own errors never escape as unhandled events. Owned by the test's main thread.
import http2 from 'node:http2';
import { performance } from 'node:perf_hooks';
import { withTimeout } from './timeout.ts';

export interface H2Answer {
  readonly status: number;
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Buffer;
  /** From the request's start to the end of its answer, ms. */
  readonly elapsedMs: number;
}

export interface H2Request {
  readonly method: string;
  readonly path: string;
  readonly headers?: Readonly<Record<string, string>>;
  readonly body?: string | Uint8Array;
}

const connectTimeoutMs = 5_000;

export class H2Client {
  readonly #session: http2.ClientHttp2Session;
  readonly #requestTimeoutMs: number;

  private constructor(session: http2.ClientHttp2Session, requestTimeoutMs: number) {
    this.#session = session;
    this.#requestTimeoutMs = requestTimeoutMs;
  }

  /** A connected session to `url`; each request on it fails after `requestTimeoutMs`. */
  static async connect(url: string, requestTimeoutMs: number): Promise<H2Client> {
    const session = http2.connect(url);
    session.on('error', () => undefined);
    try {
      await withTimeout(
        new Promise<void>((resolve, reject) => {
          session.once('connect', () => resolve());
          session.once('error', reject);
          session.once('close', () => reject(new Error(`the HTTP/2 session to ${url} closed before it connected`)));
        }),
        connectTimeoutMs,
        `an HTTP/2 session to ${url}`,
      );
    } catch (err) {
      session.destroy();
      throw err;
    }
    return new H2Client(session, requestTimeoutMs);
  }

  /** The session can still start streams (not closed, destroyed or told to go away). */
  get usable(): boolean {
    return !this.#session.closed && !this.#session.destroyed;
  }

  request(request: H2Request): Promise<H2Answer> {
    const startedMs = performance.now();
    const what = `HTTP/2 ${request.method} ${request.path}`;
    let stream: http2.ClientHttp2Stream | undefined;
    const answer = new Promise<H2Answer>((resolve, reject) => {
      stream = this.#session.request({ ':method': request.method, ':path': request.path, ...request.headers });
      let status = 0;
      const headers: Record<string, string> = {};
      const chunks: Buffer[] = [];
      stream.on('response', (received) => {
        status = Number(received[':status']);
        for (const [name, value] of Object.entries(received)) if (!name.startsWith(':')) headers[name] = String(value);
      });
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      // A server may answer before it read the whole body (413) and then reset the stream: the answer still counts.
      stream.on('close', () => {
        if (status === 0) reject(new Error(`${what}: the stream closed without a response`));
        else resolve({ status, headers, body: Buffer.concat(chunks), elapsedMs: performance.now() - startedMs });
      });
      stream.on('error', () => undefined);
      stream.end(request.body === undefined ? undefined : Buffer.from(request.body));
    });
    return withTimeout(answer, this.#requestTimeoutMs, what).finally(() => {
      if (stream !== undefined && !stream.closed) stream.close(http2.constants.NGHTTP2_CANCEL);
    });
  }

  close(): void {
    this.#session.close();
    // A session whose server is gone never finishes a graceful close.
    setTimeout(() => this.#session.destroy(), 1_000).unref();
  }
}

/** JSON of an answer's body, or undefined when it is not JSON. */
export function jsonBody(answer: H2Answer): unknown {
  try {
    return JSON.parse(answer.body.toString('utf8'));
  } catch {
    return undefined;
  }
}
