// Forwarding a request to the node that owns its partition, over HTTP/2 (one session per
// address, reused; a session that fails is dropped and the next request opens another). The
// request goes with its method, path, body and the client's headers, plus two of the cluster's:
// `fermata-forwarded` (so the receiver never forwards it again: one hop) and
// `fermata-cluster-secret` (the cluster's secret, which the receiver checks: cluster-auth.ts).
// An owner that does not answer within the timeout, or cannot be reached, is PARTITION_MOVING:
// 503 with Retry-After, as a partition between owners is. Main thread.
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

  /** Sends `request` to the node at `address` (host:port, or an http:// URL) and reads its whole answer. */
  send(address: string, request: ForwardRequest): Promise<ForwardAnswer> {
    const headers: http2.OutgoingHttpHeaders = { ':method': request.method, ':path': request.path };
    for (const [name, value] of Object.entries(request.headers)) {
      if (value === undefined || name.startsWith(':') || notForwarded.has(name)) continue;
      headers[name] = value;
    }
    headers[forwardedHeader] = '1';
    headers[secretHeader] = this.#secret;
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
