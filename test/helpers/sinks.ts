// Scripted delivery targets on loopback (port 0): an HTTP/2 cleartext sink and an HTTP/1.1-only
// sink. Each records every request it got (headers, body, arrival time) and answers as its
// script says, so tests can check what fermata sent and how it treated each answer.
import { once } from 'node:events';
import http from 'node:http';
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';

export interface SinkRequest {
  readonly path: string;
  readonly headers: Readonly<Record<string, string | string[] | undefined>>;
  readonly body: Buffer;
  readonly atMs: number;
}

/** What to do with the n-th request (0-based) to `path`: answer a status, or act. */
export type SinkAction =
  | { readonly status: number; readonly headers?: Record<string, string>; readonly body?: string }
  | { readonly hang: true }
  | { readonly reset: true }
  | { readonly goaway: true };

export type SinkScript = (path: string, nth: number, request: SinkRequest) => SinkAction;

export interface Sink {
  readonly url: string;
  readonly requests: SinkRequest[];
  /** Requests to one path, in arrival order. */
  to(path: string): SinkRequest[];
  /** TCP connections accepted so far. */
  readonly connections: number;
  /** The HTTP/2 server sessions (HTTP/2 sinks only), for PINGs from the server side. */
  readonly sessions: Set<http2.ServerHttp2Session>;
  close(): Promise<void>;
}

const ok: SinkScript = () => ({ status: 200 });

function readBody(stream: NodeJS.ReadableStream): Promise<Buffer> {
  const chunks: Buffer[] = [];
  stream.on('data', (chunk: Buffer) => chunks.push(chunk));
  return once(stream, 'end').then(() => Buffer.concat(chunks));
}

function recorder(requests: SinkRequest[]): { counts: Map<string, number>; record(path: string, headers: SinkRequest['headers'], body: Buffer): { nth: number; request: SinkRequest } } {
  const counts = new Map<string, number>();
  return {
    counts,
    record(path, headers, body) {
      const nth = counts.get(path) ?? 0;
      counts.set(path, nth + 1);
      const request = { path, headers, body, atMs: Date.now() };
      requests.push(request);
      return { nth, request };
    },
  };
}

/** An HTTP/2 cleartext (prior knowledge) sink. */
export async function startH2Sink(script: SinkScript = ok): Promise<Sink> {
  const requests: SinkRequest[] = [];
  const { record } = recorder(requests);
  const sessions = new Set<http2.ServerHttp2Session>();
  let connections = 0;
  const server = http2.createServer();
  server.on('connection', () => connections++);
  // A session torn down by the client (a killed service, a reset) is part of the script, not a test failure.
  server.on('sessionError', () => undefined);
  server.on('session', (session) => {
    session.on('error', () => undefined);
    sessions.add(session);
    session.on('close', () => sessions.delete(session));
  });
  server.on('stream', (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders) => {
    stream.on('error', () => undefined);
    void readBody(stream).then((body) => {
      // A request cut short (the sender killed mid-body: its stream ends, aborted, with what had
      // come) is no delivery: recorded, it read as one with a truncated payload.
      if (stream.aborted || stream.destroyed) return;
      const path = String(headers[':path']);
      const { nth, request } = record(path, headers, body);
      const action = script(path, nth, request);
      if ('hang' in action) return;
      if ('reset' in action) return stream.session?.socket.destroy();
      if ('goaway' in action) return stream.session?.goaway(http2.constants.NGHTTP2_NO_ERROR, (stream.id ?? 1) - 2);
      stream.respond({ ':status': action.status, ...action.headers });
      stream.end(action.body);
    });
  });
  return listening(server, requests, () => connections, sessions, () => {
    for (const session of sessions) session.destroy();
  });
}

/** An HTTP/1.1-only sink: it does not understand the HTTP/2 preface. */
export async function startH1Sink(script: SinkScript = ok): Promise<Sink> {
  const requests: SinkRequest[] = [];
  const { record } = recorder(requests);
  let connections = 0;
  const server = http.createServer((req, res) => {
    void readBody(req).then((body) => {
      if (!req.complete) return;
      const path = req.url ?? '/';
      const { nth, request } = record(path, req.headers, body);
      const action = script(path, nth, request);
      if ('hang' in action) return;
      if ('reset' in action || 'goaway' in action) return req.socket.destroy();
      res.writeHead(action.status, action.headers);
      res.end(action.body);
    });
  });
  server.on('connection', () => connections++);
  return listening(server, requests, () => connections, new Set(), () => server.closeAllConnections());
}

/** Listens on a loopback port 0 and wraps the server as a Sink; `cut` drops open connections on close. */
async function listening(
  server: http.Server | http2.Http2Server,
  requests: SinkRequest[],
  connections: () => number,
  sessions: Set<http2.ServerHttp2Session>,
  cut: () => void,
): Promise<Sink> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    to: (path) => requests.filter((request) => request.path === path),
    get connections() {
      return connections();
    },
    sessions,
    async close() {
      cut();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
