// Forwarding a request to the node that owns its partition, over HTTP/2 (one session per
// address, reused; a session that fails is dropped and the next request opens another). The
// request goes with its method, path, body and the client's headers, plus two of the cluster's:
// `fermata-forwarded` (so the receiver never forwards it again: one hop) and
// `fermata-cluster-secret` (the cluster's secret, which the receiver checks: cluster-auth.ts).
// An owner that does not answer within the timeout, or cannot be reached, is PARTITION_MOVING:
// 503 with Retry-After, as a partition between owners is. send() reads the whole answer within
// the timeout; open() (an answer of any length: the Arrow export's, arrow-export.ts) bounds the
// wait for its head, then each wait for more of its body while it is read. Main thread.
import http2 from 'node:http2';
import { errorCodes, FermataError } from '../../../engine/errors.ts';

export const forwardedHeader = 'fermata-forwarded';
export const secretHeader = 'fermata-cluster-secret';

export interface ForwardRequest {
  readonly method: string;
  /** The path and query, as the client sent them. */
  readonly path: string;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly body?: Uint8Array;
}

export interface ForwardAnswer {
  readonly status: number;
  readonly headers: http2.IncomingHttpHeaders;
  readonly body: Buffer;
}

/** Headers that belong to one connection, or that the HTTP/2 client sets itself: never copied to the owner. */
const notForwarded: ReadonlySet<string> = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'transfer-encoding',
  'upgrade',
  'te',
  'http2-settings',
  'host',
  'content-length',
  forwardedHeader,
  secretHeader,
]);

/** An answer whose body is read as it arrives (open()). */
export interface ForwardStream {
  readonly status: number;
  readonly headers: http2.IncomingHttpHeaders;
  /**
   * The body's chunks as they arrive: the owner's sends wait while they are not read (HTTP/2 flow
   * control). A wait for the next chunk longer than the timeout throws PARTITION_MOVING; leaving
   * the loop early cancels the stream. Read it to its end or leave it: an unread body holds its stream.
   */
  readonly body: AsyncIterable<Buffer>;
}

export interface ForwarderOptions {
  readonly secret: string;
  /** How long an owner has to answer before the request is answered PARTITION_MOVING. */
  readonly timeoutMs: number;
}

export class Forwarder {
  readonly #secret: string;
  readonly #timeoutMs: number;
  readonly #sessions = new Map<string, http2.ClientHttp2Session>();

  constructor(options: ForwarderOptions) {
    this.#secret = options.secret;
    this.#timeoutMs = options.timeoutMs;
  }

  /** The request's headers as the owner gets them: the client's that may travel, and the cluster's. */
  #headersOf(request: ForwardRequest): http2.OutgoingHttpHeaders {
    const headers: http2.OutgoingHttpHeaders = { ':method': request.method, ':path': request.path };
    for (const [name, value] of Object.entries(request.headers)) {
      if (value === undefined || name.startsWith(':') || notForwarded.has(name)) continue;
      headers[name] = value;
    }
    headers[forwardedHeader] = '1';
    headers[secretHeader] = this.#secret;
    return headers;
  }

  /**
   * Sends `request` to the node at `address` and resolves with the answer's head once it arrives
   * (within the timeout), its body to be read as it comes (ForwardStream.body).
   */
  open(address: string, request: ForwardRequest): Promise<ForwardStream> {
    const headers = this.#headersOf(request);
    const timeoutMs = this.#timeoutMs;
    const unreachable = (why: string): FermataError => new FermataError(errorCodes.partitionMoving, `the partition's owner at ${address} did not answer (${why}): try again`);
    return new Promise<ForwardStream>((resolve, reject) => {
      let session: http2.ClientHttp2Session;
      try {
        session = this.#session(address);
      } catch (err) {
        return reject(unreachable((err as Error).message));
      }
      const stream = session.request(headers, { endStream: request.body === undefined });
      const deadline = setTimeout(() => {
        stream.close(http2.constants.NGHTTP2_CANCEL);
        reject(unreachable(`no answer within ${timeoutMs} ms`));
      }, timeoutMs);
      stream.once('response', (received) => {
        clearTimeout(deadline);
        resolve({ status: Number(received[':status']), headers: received, body: chunksWithin(stream, timeoutMs, () => unreachable(`no more of its answer within ${timeoutMs} ms`)) });
      });
      // Before the head these end the request; after it the body's reader meets them (a settled promise ignores them).
      stream.on('close', () => {
        clearTimeout(deadline);
        reject(unreachable('the stream ended without an answer'));
      });
      stream.on('error', (err) => reject(unreachable(err.message)));
      if (request.body !== undefined) stream.end(request.body);
    });
  }

  /** Sends `request` to the node at `address` (host:port, or an http:// URL) and reads its whole answer. */
  send(address: string, request: ForwardRequest): Promise<ForwardAnswer> {
    const headers = this.#headersOf(request);
    return new Promise<ForwardAnswer>((resolve, reject) => {
      const unreachable = (why: string): void => reject(new FermataError(errorCodes.partitionMoving, `the partition's owner at ${address} did not answer (${why}): try again`));
      let session: http2.ClientHttp2Session;
      try {
        session = this.#session(address);
      } catch (err) {
        return unreachable((err as Error).message);
      }
      const stream = session.request(headers, { endStream: request.body === undefined });
      const chunks: Buffer[] = [];
      let status = 0;
      let answerHeaders: http2.IncomingHttpHeaders = {};
      // A bound on the whole exchange, not on each pause in it (what stream.setTimeout measures).
      const deadline = setTimeout(() => {
        stream.close(http2.constants.NGHTTP2_CANCEL);
        unreachable(`no answer within ${this.#timeoutMs} ms`);
      }, this.#timeoutMs);
      stream.on('close', () => clearTimeout(deadline));
      stream.on('response', (received) => {
        status = Number(received[':status']);
        answerHeaders = received;
      });
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('end', () => (status === 0 ? unreachable('the stream ended without an answer') : resolve({ status, headers: answerHeaders, body: Buffer.concat(chunks) })));
      stream.on('error', (err) => unreachable(err.message));
      if (request.body !== undefined) stream.end(request.body);
    });
  }

  close(): void {
    for (const session of this.#sessions.values()) session.close();
    this.#sessions.clear();
  }

  #session(address: string): http2.ClientHttp2Session {
    const known = this.#sessions.get(address);
    if (known !== undefined && !known.closed && !known.destroyed) return known;
    const session = http2.connect(address.includes('://') ? address : `http://${address}`);
    const forget = (): void => {
      if (this.#sessions.get(address) === session) this.#sessions.delete(address);
    };
    session.on('error', forget);
    session.on('close', forget);
    session.on('goaway', forget);
    // An idle session does not keep the process alive.
    session.unref();
    this.#sessions.set(address, session);
    return session;
  }
}

/** A stream's chunks, each waited for at most `waitMs` (then `late()` is thrown and the stream cancelled). */
async function* chunksWithin(stream: http2.ClientHttp2Stream, waitMs: number, late: () => Error): AsyncGenerator<Buffer> {
  const chunks = stream[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  try {
    for (;;) {
      let timer: NodeJS.Timeout | undefined;
      const waited = new Promise<never>((_resolve, reject) => {
        timer = setTimeout(() => reject(late()), waitMs);
      });
      let next: IteratorResult<Buffer>;
      try {
        next = await Promise.race([chunks.next(), waited]);
      } finally {
        clearTimeout(timer);
      }
      if (next.done === true) return;
      yield next.value;
    }
  } finally {
    // Left early (a late chunk, a reader that stopped): the stream is cancelled, which also ends a
    // read still waiting (the iterator's own return() would wait for that read first).
    if (!stream.closed) stream.close(http2.constants.NGHTTP2_CANCEL);
    chunks.return?.().catch(() => undefined);
  }
}
