// @fermata/client's request discipline, against small local servers that answer as fermata does
// in the cases a real service gives only under load: many concurrent add() calls share one
// `POST /v1/timers/stream` request under HTTP/2; a line answered 429 is sent again alone, after
// its retry_after_s; a 503 with Retry-After is retried; retries stop at the policy's bound, and
// a wait longer than its longest is not made; every request rides one session; a server
// without HTTP/2 gets HTTP/1.1, one request per add; lines a stopping server did not read go
// again; a server without the add stream (cluster mode) gets one POST per add; a broken
// connection fails an unanswered add with STREAM_ENDED (it may have been added) and the next
// add reconnects; a server not reached yet decides no protocol.
import assert from 'node:assert/strict';
import http from 'node:http';
import http2 from 'node:http2';
import type net from 'node:net';
import { once } from 'node:events';
import { createInterface } from 'node:readline';
import { after, test } from 'node:test';
import { FermataClient, FermataError } from '@fermata/client';

const closers: Array<() => Promise<void>> = [];
after(async () => {
  for (const close of closers) await close();
});

interface Seen {
  streams: number;
  lines: Map<string, number>;
  requests: Map<string, number>;
}

function json(stream: http2.ServerHttp2Stream, status: number, body: unknown, headers: http2.OutgoingHttpHeaders = {}): void {
  stream.respond({ ':status': status, 'content-type': 'application/json', ...headers });
  stream.end(JSON.stringify(body));
}

/** An h2c server answering the add stream, /v1/stats (503 once), /v1/queues (429 always), /v1/dead (Retry-After past any bound). */
async function fakeH2(): Promise<{ url: string; seen: Seen; sessions: () => number }> {
  const seen: Seen = { streams: 0, lines: new Map(), requests: new Map() };
  const server = http2.createServer();
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on('session', (session) => sessions.add(session));
  server.on('stream', (stream: http2.ServerHttp2Stream, headers) => {
    const path = String(headers[':path']);
    const count = (seen.requests.get(path) ?? 0) + 1;
    seen.requests.set(path, count);
    if (path === '/v1/timers/stream') {
      seen.streams++;
      stream.respond({ ':status': 200, 'content-type': 'application/x-ndjson' });
      let line = 0;
      createInterface({ input: stream }).on('line', (text) => {
        line++;
        const { payload } = JSON.parse(text) as { payload: string };
        const times = (seen.lines.get(payload) ?? 0) + 1;
        seen.lines.set(payload, times);
        const answer = payload === 'busy' && times === 1
          ? { line, status: 429, error: { code: 'WAL_QUEUE_FULL', message: 'the log queue is full' }, retry_after_s: 1 }
          : { line, status: 201, id: `id-${payload}`, fire_at: '2030-01-01T00:00:00.000Z', revision: 1, duplicate: false };
        stream.write(`${JSON.stringify(answer)}\n`);
      }).on('close', () => stream.end());
      return;
    }
    if (path === '/v1/stats') return count === 1 ? json(stream, 503, { error: { code: 'CAPACITY_FULL', message: 'full' } }, { 'retry-after': '1' }) : json(stream, 200, { pending: 7 });
    if (path === '/v1/queues') return json(stream, 429, { error: { code: 'WAL_QUEUE_FULL', message: 'full' } }, { 'retry-after': '0' });
    if (path.startsWith('/v1/dead')) return json(stream, 503, { error: { code: 'CAPACITY_FULL', message: 'full' } }, { 'retry-after': '3600' });
    json(stream, 404, { error: { code: 'ROUTE_NOT_FOUND', message: path } });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(() => {
    for (const session of sessions) session.destroy();
    return new Promise((resolve) => server.close(() => resolve()));
  });
  return { url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`, seen, sessions: () => sessions.size };
}

test('many concurrent adds share one add stream; a line refused with 429 is sent again alone', async () => {
  const { url, seen } = await fakeH2();
  const client = new FermataClient({ url });
  try {
    const payloads = ['busy', ...Array.from({ length: 99 }, (_, i) => `p${i}`)];
    const added = await Promise.all(payloads.map((payload) => client.add({ delay_ms: 1000, target: 'http://127.0.0.1:9/x', payload })));
    assert.deepEqual(added.map((one) => one.id), payloads.map((payload) => `id-${payload}`));
    assert.equal(seen.streams, 1, 'one request for every add');
    assert.equal(seen.lines.get('busy'), 2, 'the refused line went again');
    for (const payload of payloads.slice(1)) assert.equal(seen.lines.get(payload), 1, `${payload} went once`);
  } finally {
    await client.close();
  }
});

test('503 with Retry-After is retried; retries stop at the bound; a wait past the longest is not made', async () => {
  const { url, seen, sessions } = await fakeH2();
  const client = new FermataClient({ url, retry: { retries: 2, maxDelayMs: 5_000 } });
  try {
    assert.deepEqual(await client.stats(), { pending: 7 });
    assert.equal(seen.requests.get('/v1/stats'), 2);
    await assert.rejects(client.queues(), (err: unknown) => err instanceof FermataError && err.status === 429 && err.code === 'WAL_QUEUE_FULL' && err.retryAfterS === 0);
    assert.equal(seen.requests.get('/v1/queues'), 3, 'the first try and two retries');
    await assert.rejects(client.dead().next(), (err: unknown) => err instanceof FermataError && err.code === 'CAPACITY_FULL' && err.retryAfterS === 3600);
    assert.equal(seen.requests.get('/v1/dead'), 1, 'an hour is past the longest wait: not retried');
    assert.equal(sessions(), 1, 'every request on one HTTP/2 session');
  } finally {
    await client.close();
  }
});

test('a server that speaks only HTTP/1.1 gets HTTP/1.1, one request per add', async () => {
  let posts = 0;
  const server = http.createServer((request, response) => {
    posts += request.method === 'POST' && request.url === '/v1/timers' ? 1 : 0;
    request.resume().on('end', () => {
      response.writeHead(201, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ id: `h1-${posts}`, fire_at: '2030-01-01T00:00:00.000Z', revision: 1, duplicate: false }));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(() => new Promise((resolve) => server.close(() => resolve())));
  const client = new FermataClient({ url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}` });
  try {
    assert.equal(await client.protocol(), 'http/1.1');
    await Promise.all(Array.from({ length: 3 }, () => client.add({ delay_ms: 1, target: 'http://127.0.0.1:9/x' })));
    assert.equal(posts, 3);
  } finally {
    await client.close();
    server.closeAllConnections();
  }
});

/** An h2c server whose add streams are answered by `onStream` (given the stream's number, from 1); POST /v1/timers answers 201. */
async function fakeStreams(onStream: (stream: http2.ServerHttp2Stream, index: number, lines: (payload: string) => void) => void): Promise<{ url: string; seen: Seen }> {
  const seen: Seen = { streams: 0, lines: new Map(), requests: new Map() };
  const server = http2.createServer();
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on('session', (session) => sessions.add(session));
  server.on('stream', (stream: http2.ServerHttp2Stream, headers) => {
    const path = String(headers[':path']);
    seen.requests.set(path, (seen.requests.get(path) ?? 0) + 1);
    if (path === '/v1/timers/stream') return onStream(stream, ++seen.streams, (payload) => seen.lines.set(payload, (seen.lines.get(payload) ?? 0) + 1));
    stream.resume().on('end', () => json(stream, 201, { id: 'by-post', fire_at: '2030-01-01T00:00:00.000Z', revision: 1, duplicate: false }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  closers.push(() => {
    for (const session of sessions) session.destroy();
    return new Promise((resolve) => server.close(() => resolve()));
  });
  return { url: `http://127.0.0.1:${(server.address() as net.AddressInfo).port}`, seen };
}

test('lines a stopping server never read go again on a new add stream', async () => {
  const { url, seen } = await fakeStreams((stream, index, count) => {
    stream.respond({ ':status': 200, 'content-type': 'application/x-ndjson' });
    let line = 0;
    const reader = createInterface({ input: stream });
    reader.on('line', (text) => {
      const { payload } = JSON.parse(text) as { payload: string };
      line++;
      if (index === 1 && line > 1) return; // the first stream stops after its first line
      count(payload);
      stream.write(`${JSON.stringify({ line, status: 201, id: `id-${payload}`, fire_at: '2030-01-01T00:00:00.000Z', revision: 1, duplicate: false })}\n`);
      if (index === 1) stream.end(`${JSON.stringify({ status: 503, error: { code: 'WAL_CLOSED', message: 'the service is stopping' } })}\n`);
    });
    reader.on('close', () => {
      if (!stream.writableEnded) stream.end();
    });
  });
  const client = new FermataClient({ url });
  try {
    const added = await Promise.all(['a', 'b', 'c'].map((payload) => client.add({ delay_ms: 1, target: 'http://127.0.0.1:9/x', payload })));
    assert.deepEqual(added.map((one) => one.id), ['id-a', 'id-b', 'id-c']);
    assert.equal(seen.streams, 2);
    assert.deepEqual([...seen.lines.entries()].sort(), [['a', 1], ['b', 1], ['c', 1]], 'each timer answered once');
  } finally {
    await client.close();
  }
});

test('a server that does not serve the add stream (cluster mode) gets one POST /v1/timers per add', async () => {
  const { url, seen } = await fakeStreams((stream) => json(stream, 405, { error: { code: 'METHOD_NOT_ALLOWED', message: 'POST is not served here' } }));
  const client = new FermataClient({ url });
  try {
    const added = await Promise.all(Array.from({ length: 3 }, () => client.add({ delay_ms: 1, target: 'http://127.0.0.1:9/x' })));
    assert.deepEqual(added.map((one) => one.id), ['by-post', 'by-post', 'by-post']);
    assert.equal(seen.requests.get('/v1/timers'), 3);
    await client.add({ delay_ms: 1, target: 'http://127.0.0.1:9/x' });
    assert.equal(seen.streams, 1, 'the stream is not asked again');
  } finally {
    await client.close();
  }
});

test('a connection that breaks under an unanswered line fails that add with STREAM_ENDED; the next add reconnects', async () => {
  const { url, seen } = await fakeStreams((stream, index, count) => {
    stream.respond({ ':status': 200, 'content-type': 'application/x-ndjson' });
    let line = 0;
    const reader = createInterface({ input: stream });
    reader.on('line', (text) => {
      const { payload } = JSON.parse(text) as { payload: string };
      count(payload);
      if (index === 1) return stream.session?.destroy(); // read, maybe added, never answered
      stream.write(`${JSON.stringify({ line: ++line, status: 201, id: `id-${payload}`, fire_at: '2030-01-01T00:00:00.000Z', revision: 1, duplicate: false })}\n`);
    });
    reader.on('close', () => {
      if (!stream.destroyed && !stream.writableEnded) stream.end();
    });
  });
  const client = new FermataClient({ url });
  try {
    await assert.rejects(client.add({ delay_ms: 1, target: 'http://127.0.0.1:9/x', payload: 'lost' }), (err: unknown) => err instanceof FermataError && err.code === 'STREAM_ENDED');
    assert.equal((await client.add({ delay_ms: 1, target: 'http://127.0.0.1:9/x', payload: 'next' })).id, 'id-next');
    assert.equal(seen.streams, 2);
  } finally {
    await client.close();
  }
});

test('a server not reached yet decides no protocol: the call fails with CONNECTION_FAILED, a later one speaks HTTP/2', async () => {
  const server = http2.createServer((_request, response) => {
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end('{"pending":1}');
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const port = (server.address() as net.AddressInfo).port;
  await new Promise<void>((resolve) => server.close(() => resolve()));
  const client = new FermataClient({ url: `http://127.0.0.1:${port}`, connectTimeoutMs: 2_000 });
  try {
    await assert.rejects(client.stats(), (err: unknown) => err instanceof FermataError && err.code === 'CONNECTION_FAILED' && err.status === 0);
    server.listen(port, '127.0.0.1');
    await once(server, 'listening');
    closers.push(() => new Promise((resolve) => server.close(() => resolve())));
    assert.deepEqual(await client.stats(), { pending: 1 });
    assert.equal(await client.protocol(), 'h2');
  } finally {
    await client.close();
  }
});
