// The one-timer JSON add on the raw HTTP/2 stream (ingest/http/h2-single-add.ts) against
// fastify's POST /v1/timers route, in one process on a simulated disk: the same request sent
// both ways (to /v1/timers the fast path takes it, with or without a Content-Length; to
// /v1/timers?via=fastify, the same route, fastify does) must get the same status, headers (but
// `date`) and body bytes, for new timers, known keys and every kind of refusal, a body past the
// JSON limit included; and what the fast path must leave to fastify (a missing or wrong token,
// a declared length over the limit, NDJSON, another spelling of the media type, HTTP/1.1)
// reaches fastify and is answered as before. Which path served a request is read from a
// fastify onSend hook that counts what fastify answers. Every request is bounded in time.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import http2 from 'node:http2';
import type net from 'node:net';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { pino } from 'pino';
import { Engine } from '../../engine/engine.ts';
import { ingestLimits } from '../../engine/limits.ts';
import { createHttpServer, type HttpServer } from '../../ingest/http/server.ts';
import { type H2Answer, H2Client } from '../helpers/h2-client.ts';
import { testScratch } from '../helpers/scratch.ts';
import { withTimeout } from '../helpers/timeout.ts';
import { skipUnlessTool } from '../helpers/tools.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';

const requestTimeoutMs = 10_000;
const target = 'http://127.0.0.1:9/hook';
const token = 'a-token-long-enough-to-be-taken';
const scratch = testScratch('fermata-h2-single-add');

interface Served {
  readonly app: HttpServer;
  readonly engine: Engine;
  readonly client: H2Client;
  readonly url: string;
  /** Requests fastify answered so far. */
  fastify: number;
  close(): Promise<void>;
}

async function serve(options: { seed: number; tokens?: readonly string[]; capacityMax?: number; tls?: { cert: Buffer; key: Buffer } }): Promise<Served> {
  const engine = await Engine.open({
    dataDir: '/data',
    fs: new SimFileSystem({ seed: options.seed }),
    ...(options.capacityMax === undefined ? {} : { store: { capacityInitial: options.capacityMax, capacityMax: options.capacityMax } }),
  });
  const app = createHttpServer({
    logger: pino({ level: 'silent' }),
    engine,
    ...(options.tokens === undefined ? {} : { tokens: options.tokens }),
    ...(options.tls === undefined ? {} : { tls: options.tls }),
  });
  const served = { app, engine, fastify: 0 } as Served;
  // onSend: every answer fastify sends passes it, a refused token's included (its onRequest hook answers before any later one runs).
  app.addHook('onSend', (_request, _reply, payload, done) => {
    served.fastify++;
    done(null, payload);
  });
  await app.listen({ host: '127.0.0.1', port: 0 });
  const url = `http://127.0.0.1:${(app.server.address() as net.AddressInfo).port}`;
  const client = await H2Client.connect(url, requestTimeoutMs);
  return Object.assign(served, {
    client,
    url,
    async close() {
      client.close();
      await app.close();
      await engine.close();
    },
  });
}

/** POST /v1/timers over HTTP/2: with `length`, the body's Content-Length (what the fast path needs). */
function post(served: Served, body: string | Uint8Array, init: { length: boolean; headers?: Record<string, string>; path?: string }): Promise<H2Answer> {
  const bytes = typeof body === 'string' ? Buffer.from(body) : body;
  return served.client.request({
    method: 'POST',
    path: init.path ?? '/v1/timers',
    headers: { 'content-type': 'application/json', ...(init.length ? { 'content-length': String(bytes.length) } : {}), ...init.headers },
    body: bytes,
  });
}

/**
 * Sends `body` on the fast path with a Content-Length and without one, then to fastify (a query
 * string: the same route); checks which served each, that both fast answers agree, and returns
 * one of them and fastify's.
 */
async function bothWays(served: Served, body: string | Uint8Array, headers: Record<string, string> = {}): Promise<{ fast: H2Answer; fastify: H2Answer }> {
  const before = served.fastify;
  const unsized = await post(served, body, { length: false, headers });
  // A declared length over the limit is fastify's to refuse (test below).
  const fast = body.length <= ingestLimits.jsonBodyBytesMax ? await post(served, body, { length: true, headers }) : unsized;
  assert.equal(served.fastify, before, 'the fast path took the requests');
  const viaFastify = await post(served, body, { length: false, headers, path: '/v1/timers?via=fastify' });
  assert.equal(served.fastify, before + 1, 'a request with a query string goes to fastify');
  assert.equal(unsized.status, fast.status);
  if (fast.status !== 201) assertSameAnswer(unsized, fast, 'without a Content-Length');
  return { fast, fastify: viaFastify };
}

const withoutDate = (answer: H2Answer): Record<string, string> => {
  const { date, ...rest } = answer.headers;
  assert.ok(date !== undefined, 'an answer has a date');
  return rest;
};

/** Same status, headers (but date) and body bytes. */
function assertSameAnswer(fast: H2Answer, viaFastify: H2Answer, what: string): void {
  assert.equal(fast.status, viaFastify.status, `${what}: ${fast.body.toString()} / ${viaFastify.body.toString()}`);
  assert.deepEqual(withoutDate(fast), withoutDate(viaFastify), what);
  assert.equal(fast.body.toString('utf8'), viaFastify.body.toString('utf8'), what);
}

describe('one-timer JSON adds on the raw HTTP/2 stream answer as fastify’s route does', { timeout: 60_000 }, () => {
  let served: Served;
  before(async () => {
    served = await serve({ seed: 40 });
  });
  after(() => served.close());

  test('a new timer: 201, the same headers, the same body but for the id', async () => {
    const fireAt = '2030-01-31T09:00:00.000Z';
    const { fast, fastify } = await bothWays(served, JSON.stringify({ fire_at: fireAt, target, payload: 'hello' }));
    assert.equal(fast.status, 201);
    const [a, b] = [fast, fastify].map((answer) => JSON.parse(answer.body.toString('utf8')) as { id: string });
    assert.notEqual(a?.id, b?.id);
    assertSameAnswer({ ...fast, body: Buffer.from(JSON.stringify({ ...a, id: '' })) }, { ...fastify, body: Buffer.from(JSON.stringify({ ...b, id: '' })) }, 'new timer');
    assert.deepEqual(Object.keys(a ?? {}), ['id', 'fire_at', 'revision', 'duplicate']);
    assert.equal(fast.headers['content-type'], 'application/json; charset=utf-8');
    assert.equal(served.engine.get(a?.id ?? '')?.state, 'pending');
  });

  test('a known key, by fire_at and by delay_ms: 200 with the same bytes (the original, its state, what differs)', async () => {
    const first = await post(served, JSON.stringify({ fire_at: '2030-02-01T00:00:00Z', target, key: 'k-1', payload: 'one' }), { length: true });
    assert.equal(first.status, 201);
    for (const again of [
      { fire_at: '2030-02-02T00:00:00Z', target, key: 'k-1', payload: 'two' },
      { delay_ms: 60_000, target, key: 'k-1', payload: 'one' },
    ]) {
      const { fast, fastify } = await bothWays(served, JSON.stringify(again));
      assert.equal(fast.status, 200);
      assertSameAnswer(fast, fastify, JSON.stringify(again));
    }
  });

  test('every kind of refusal: the same status, error body and headers', async () => {
    const bodies: Array<string | Uint8Array> = [
      '{"delay_ms": 5,',
      ' ',
      '[{"delay_ms": 1}]',
      '{"__proto__": {"x": 1}, "delay_ms": 1}',
      Buffer.from([0x7b, 0xff, 0x7d]),
      JSON.stringify({ delay_ms: 1, target, colour: 'red' }),
      JSON.stringify({ delay_ms: 1 }),
      JSON.stringify({ delay_ms: 1, target: 'ftp://files.example.com/' }),
      JSON.stringify({ delay_ms: 1, target, queue: 'no spaces' }),
      // Within the JSON body limit, past the payload's.
      JSON.stringify({ delay_ms: 1, target, payload: 'x'.repeat(2 * 1024 * 1024) }),
      // Past the JSON body limit: refused once the body's bytes pass it (with a Content-Length, fastify refuses it before reading).
      JSON.stringify({ delay_ms: 1, target, payload: 'x'.repeat(ingestLimits.jsonBodyBytesMax) }),
      '',
    ];
    const pending = served.engine.stats().pending;
    for (const body of bodies) {
      const { fast, fastify } = await bothWays(served, body);
      const what = typeof body === 'string' ? body.slice(0, 60) : `bytes ${Buffer.from(body).toString('hex')}`;
      assert.ok(fast.status >= 400 && fast.status < 500, `${what}: ${fast.status} ${fast.body.toString()}`);
      assertSameAnswer(fast, fastify, what);
      assert.deepEqual(Object.keys(JSON.parse(fast.body.toString('utf8')) as object), ['error']);
    }
    assert.equal(served.engine.stats().pending, pending, 'nothing refused was stored');
  });

  test('what the fast path leaves to fastify: NDJSON, another spelling of JSON, a declared length over the limit, HTTP/1.1', async () => {
    const body = JSON.stringify({ delay_ms: 60_000, target });
    let before = served.fastify;
    const ndjson = await post(served, `${body}\n${body}\n`, { length: true, headers: { 'content-type': 'application/x-ndjson' } });
    assert.equal(ndjson.status, 201, ndjson.body.toString());
    assert.equal((JSON.parse(ndjson.body.toString('utf8')) as { accepted: number }).accepted, 2);
    assert.equal(served.fastify, ++before);
    assert.equal((await post(served, body, { length: true, headers: { 'content-type': 'Application/JSON' } })).status, 201);
    assert.equal(served.fastify, ++before);
    // Declared over the JSON limit: fastify refuses it before reading it.
    const oversized = await post(served, JSON.stringify({ delay_ms: 1, target, payload: 'x'.repeat(ingestLimits.jsonBodyBytesMax) }), { length: true });
    assert.equal(oversized.status, 413);
    assert.equal((JSON.parse(oversized.body.toString('utf8')) as { error: { code: string } }).error.code, 'BODY_TOO_LARGE');
    assert.equal(served.fastify, ++before);
    const h1 = await fetch(`${served.url}/v1/timers`, { method: 'POST', headers: { 'content-type': 'application/json' }, body, signal: AbortSignal.timeout(requestTimeoutMs) });
    assert.equal(h1.status, 201);
    assert.deepEqual(Object.keys((await h1.json()) as object), ['id', 'fire_at', 'revision', 'duplicate']);
    assert.equal(served.fastify, ++before);
  });
});

test('with tokens: a missing or wrong token is left to fastify (401, WWW-Authenticate: Bearer); a good one is taken', { timeout: 30_000 }, async () => {
  const served = await serve({ seed: 41, tokens: [token] });
  try {
    const body = JSON.stringify({ delay_ms: 60_000, target });
    for (const headers of [{}, { authorization: 'Bearer not-the-token-at-all' }, { authorization: token }]) {
      const before = served.fastify;
      const answer = await post(served, body, { length: true, headers });
      assert.equal(answer.status, 401, JSON.stringify(headers));
      assert.equal(answer.headers['www-authenticate'], 'Bearer');
      assert.equal((JSON.parse(answer.body.toString('utf8')) as { error: { code: string } }).error.code, 'UNAUTHORIZED');
      assert.equal(served.fastify, before + 1);
    }
    const { fast, fastify } = await bothWays(served, JSON.stringify({ delay_ms: 1, target, colour: 'red' }), { authorization: `Bearer ${token}` });
    assertSameAnswer(fast, fastify, 'a refusal with a good token');
    const before = served.fastify;
    assert.equal((await post(served, body, { length: true, headers: { authorization: `Bearer ${token}` } })).status, 201);
    assert.equal(served.fastify, before);
  } finally {
    await served.close();
  }
});

test('a full store on the fast path: 503 CAPACITY_FULL with Retry-After: 1, as fastify answers it', { timeout: 30_000 }, async () => {
  const served = await serve({ seed: 42, capacityMax: 1 });
  try {
    const body = JSON.stringify({ delay_ms: 60_000, target });
    assert.equal((await post(served, body, { length: true })).status, 201);
    const { fast, fastify } = await bothWays(served, body);
    assert.equal(fast.status, 503);
    assert.equal(fast.headers['retry-after'], '1');
    assertSameAnswer(fast, fastify, 'full store');
  } finally {
    await served.close();
  }
});

test('the TLS port leaves single adds to fastify (its answers may carry Alt-Svc); they are answered there', { timeout: 30_000, skip: skipUnlessTool('openssl') }, async () => {
  const dir = scratch.tempDir('tls');
  const [certFile, keyFile] = [join(dir, 'cert.pem'), join(dir, 'key.pem')];
  execFileSync(
    'openssl',
    ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '1', '-subj', '/CN=localhost', '-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', keyFile, '-out', certFile],
    { stdio: 'ignore' },
  );
  const served = await serve({ seed: 43, tls: { cert: readFileSync(certFile), key: readFileSync(keyFile) } });
  const secure = served.app.server.tls;
  assert.ok(secure !== undefined);
  secure.listen({ host: '127.0.0.1', port: 0 });
  await once(secure, 'listening');
  const session = http2.connect(`https://127.0.0.1:${(secure.address() as net.AddressInfo).port}`, { rejectUnauthorized: false });
  session.on('error', () => undefined);
  try {
    const body = Buffer.from(JSON.stringify({ delay_ms: 60_000, target }));
    const before = served.fastify;
    const stream = session.request({ ':method': 'POST', ':path': '/v1/timers', 'content-type': 'application/json', 'content-length': String(body.length) });
    stream.end(body);
    const [headers] = (await withTimeout(once(stream, 'response'), requestTimeoutMs, 'an add over TLS')) as [http2.IncomingHttpHeaders];
    stream.resume();
    assert.equal(headers[':status'], 201);
    assert.equal(served.fastify, before + 1);
  } finally {
    session.close();
    await served.close();
  }
});
