// PATCH /v1/timers/{id} on the raw HTTP/2 stream (ingest/http/h2-patch.ts) against fastify's
// route, in one process on a simulated disk: the same request sent both ways (to
// /v1/timers/{id} the raw path takes it; to /v1/timers/{id}?via=fastify, the same route, fastify
// does) must get the same status, headers (but `date`) and body bytes: a plain reschedule,
// If-Match that matches and that does not (a weak tag, a header that does not parse), an
// unknown id, a timer no longer pending, bad bodies. A 2xx changes its timer, so those are sent
// to two timers added alike and compared with the id and created_at set aside. What the raw path
// must leave to fastify (a missing token, a token without the write scope or limited to queues,
// a static route's path, HTTP/1.1) reaches fastify and is answered as before. Which path served
// a request is read from a fastify onSend hook that counts what fastify answers. Every request
// is bounded in time.
import assert from 'node:assert/strict';
import type net from 'node:net';
import { after, before, describe, test } from 'node:test';
import { pino } from 'pino';
import { Engine } from '../../engine/engine.ts';
import { ingestLimits } from '../../engine/limits.ts';
import { Access } from '../../ingest/auth/access.ts';
import { createHttpServer, type HttpServer } from '../../ingest/http/server.ts';
import { type H2Answer, H2Client } from '../helpers/h2-client.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';

const requestTimeoutMs = 10_000;
const target = 'http://127.0.0.1:9/hook';
const token = 'a-token-long-enough-to-be-taken';
const readToken = 'a-read-token-long-enough-too';
const queueToken = 'a-queue-token-long-enough-too';
/** An id of the right shape that names no timer. */
const unknownId = '0000000zzzzzzzzzm8vgw5r0';

interface Served {
  readonly app: HttpServer;
  readonly engine: Engine;
  readonly client: H2Client;
  readonly url: string;
  /** Requests fastify answered so far. */
  fastify: number;
  close(): Promise<void>;
}

async function serve(seed: number, tokens: boolean): Promise<Served> {
  const engine = await Engine.open({ dataDir: '/data', fs: new SimFileSystem({ seed }) });
  const access = new Access([
    { name: 'writer', token, scopes: ['read', 'write'] },
    { name: 'reader', token: readToken, scopes: ['read'] },
    { name: 'queued', token: queueToken, scopes: ['read', 'write'], queues: ['default'] },
  ]);
  const app = createHttpServer({ logger: pino({ level: 'silent' }), engine, ...(tokens ? { access } : {}) });
  const served = { app, engine, fastify: 0 } as Served;
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

async function add(served: Served, timer: object, headers: Record<string, string> = {}): Promise<string> {
  const answer = await served.client.request({ method: 'POST', path: '/v1/timers', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(timer) });
  assert.equal(answer.status, 201, answer.body.toString());
  return (JSON.parse(answer.body.toString('utf8')) as { id: string }).id;
}

function patch(served: Served, path: string, body: string | Uint8Array, headers: Record<string, string> = {}): Promise<H2Answer> {
  return served.client.request({ method: 'PATCH', path, headers: { 'content-type': 'application/json', ...headers }, body });
}

/** `body` PATCHed to `fastId` on the raw path and to `viaId` through fastify; checks which served each. */
async function bothWays(served: Served, fastId: string, viaId: string, body: string | Uint8Array, headers: Record<string, string> = {}): Promise<{ fast: H2Answer; fastify: H2Answer }> {
  const before = served.fastify;
  const fast = await patch(served, `/v1/timers/${fastId}`, body, headers);
  assert.equal(served.fastify, before, 'the raw path took the request');
  const viaFastify = await patch(served, `/v1/timers/${viaId}?via=fastify`, body, headers);
  assert.equal(served.fastify, before + 1, 'a request with a query string goes to fastify');
  return { fast, fastify: viaFastify };
}

const withoutDate = (answer: H2Answer): Record<string, string> => {
  const { date, ...rest } = answer.headers;
  assert.ok(date !== undefined, 'an answer has a date');
  return rest;
};

/** The body's bytes as text with `id` and the created_at value set aside (two timers added alike differ only there). */
const sameTimerText = (answer: H2Answer, id: string): string => answer.body.toString('utf8').replaceAll(id, 'ID').replace(/"created_at":"[^"]*"/, '"created_at":"T"');

/** Same status, headers (but date) and body bytes. */
function assertSameAnswer(fast: H2Answer, viaFastify: H2Answer, what: string, ids?: { fast: string; fastify: string }): void {
  assert.equal(fast.status, viaFastify.status, `${what}: ${fast.body.toString()} / ${viaFastify.body.toString()}`);
  assert.deepEqual(withoutDate(fast), withoutDate(viaFastify), what);
  if (ids === undefined) assert.equal(fast.body.toString('utf8'), viaFastify.body.toString('utf8'), what);
  else assert.equal(sameTimerText(fast, ids.fast), sameTimerText(viaFastify, ids.fastify), what);
}

const errorCode = (answer: H2Answer): string => (JSON.parse(answer.body.toString('utf8')) as { error: { code: string } }).error.code;

describe('PATCH /v1/timers/{id} on the raw HTTP/2 stream answers as fastify’s route does', { timeout: 60_000 }, () => {
  let served: Served;
  before(async () => {
    served = await serve(50, false);
  });
  after(() => served.close());

  /** Two timers added alike: one for each way. */
  async function twins(): Promise<{ fast: string; fastify: string }> {
    const timer = { fire_at: '2030-01-31T09:00:00.000Z', target, payload: 'hello', headers: { 'x-a': 'b' } };
    return { fast: await add(served, timer), fastify: await add(served, timer) };
  }

  test('a plain reschedule: 200, the new view and ETag "2", the same bytes; the timer moved', async () => {
    const ids = await twins();
    const body = JSON.stringify({ fire_at: '2030-02-01T10:00:00.000Z', payload: 'changed' });
    const applied = served.engine.stats().reschedules.applied;
    const { fast, fastify } = await bothWays(served, ids.fast, ids.fastify, body);
    assert.equal(served.engine.stats().reschedules.applied, applied + 2, 'both counted in /metrics and /v1/stats');
    assert.equal(fast.status, 200, fast.body.toString());
    assert.equal(fast.headers.etag, '"2"');
    assert.equal(fast.headers['content-type'], 'application/json; charset=utf-8');
    assertSameAnswer(fast, fastify, 'reschedule', ids);
    const view = served.engine.get(ids.fast);
    assert.equal(view?.fireAtMs, Date.parse('2030-02-01T10:00:00.000Z'));
    assert.equal(view?.revision, 2);
  });

  test('If-Match: a matching tag, a list with it and * apply; a stale, a weak or an unparsable one is refused alike', async () => {
    const ids = await twins();
    for (const [ifMatch, status] of [
      ['"1"', 200],
      ['"7", "2"', 200],
      ['*', 200],
    ] as const) {
      const { fast, fastify } = await bothWays(served, ids.fast, ids.fastify, JSON.stringify({ delay_ms: 3_600_000 }), { 'if-match': ifMatch });
      assert.equal(fast.status, status, `${ifMatch}: ${fast.body.toString()}`);
      // delay_ms counts from each request's own now: compare all but fire_at.
      const strip = (answer: H2Answer): H2Answer => ({ ...answer, body: Buffer.from(answer.body.toString('utf8').replace(/"fire_at":"[^"]*"/, '"fire_at":"F"')) });
      assertSameAnswer(strip(fast), strip(fastify), `If-Match ${ifMatch}`, ids);
    }
    for (const [ifMatch, code] of [
      ['"1"', 'REVISION_MISMATCH'],
      ['W/"4"', 'REVISION_MISMATCH'],
      ['"abc"', 'REQUEST_INVALID'],
      ['4', 'REQUEST_INVALID'],
      ['', 'REQUEST_INVALID'],
    ] as const) {
      // A refusal changes nothing: the same timer both ways, the same bytes.
      const { fast, fastify } = await bothWays(served, ids.fast, ids.fast, JSON.stringify({ delay_ms: 1000 }), { 'if-match': ifMatch });
      assert.equal(errorCode(fast), code, `If-Match ${ifMatch}: ${fast.body.toString()}`);
      assertSameAnswer(fast, fastify, `If-Match ${ifMatch}`);
    }
    assert.equal(served.engine.get(ids.fast)?.revision, 4, 'nothing refused was applied');
  });

  test('an unknown id: 404; a cancelled timer: 409 TIMER_NOT_PENDING', async () => {
    const unknown = await bothWays(served, unknownId, unknownId, JSON.stringify({ delay_ms: 1000 }));
    assert.equal(unknown.fast.status, 404);
    assertSameAnswer(unknown.fast, unknown.fastify, 'unknown id');
    const id = await add(served, { delay_ms: 3_600_000, target });
    assert.equal(await served.engine.cancel(id), 'cancelled');
    const cancelled = await bothWays(served, id, id, JSON.stringify({ delay_ms: 1000 }));
    assert.equal(errorCode(cancelled.fast), 'TIMER_NOT_PENDING');
    assertSameAnswer(cancelled.fast, cancelled.fastify, 'a cancelled timer');
  });

  test('bad bodies: the same status, error body and headers; nothing applied', async () => {
    const id = await add(served, { delay_ms: 3_600_000, target, key: 'patch-refusals' });
    const bodies: Array<string | Uint8Array> = [
      '{"delay_ms": 5,',
      '',
      ' ',
      '[]',
      '"text"',
      '{}',
      '{"__proto__": {"x": 1}, "delay_ms": 1}',
      Buffer.from([0x7b, 0xff, 0x7d]),
      JSON.stringify({ colour: 'red' }),
      JSON.stringify({ key: 'other' }),
      JSON.stringify({ fire_at: null }),
      JSON.stringify({ fire_at: 'tomorrow' }),
      JSON.stringify({ fire_at: '2030-01-01T00:00:00Z', delay_ms: 5 }),
      JSON.stringify({ target: 'ftp://files.example.com/' }),
      JSON.stringify({ queue: 'no spaces' }),
      JSON.stringify({ payload: 'a', payload_base64: 'YQ==' }),
      JSON.stringify({ headers: { 'x-n': 1 } }),
      JSON.stringify({ payload: 'x'.repeat(2 * 1024 * 1024) }),
      // Past the JSON body limit: refused once the body's bytes pass it.
      JSON.stringify({ payload: 'x'.repeat(ingestLimits.jsonBodyBytesMax) }),
    ];
    for (const body of bodies) {
      const { fast, fastify } = await bothWays(served, id, id, body);
      const what = typeof body === 'string' ? body.slice(0, 60) : `bytes ${Buffer.from(body).toString('hex')}`;
      assert.ok(fast.status >= 400 && fast.status < 500, `${what}: ${fast.status} ${fast.body.toString()}`);
      assertSameAnswer(fast, fastify, what);
    }
    assert.equal(served.engine.get(id)?.revision, 1, 'nothing refused was applied');
  });

  test('what the raw path leaves to fastify: a static route’s path, an id of another shape, another media type, HTTP/1.1', async () => {
    const id = await add(served, { delay_ms: 3_600_000, target });
    const body = JSON.stringify({ delay_ms: 7_200_000 });
    let before = served.fastify;
    const cancelPath = await patch(served, '/v1/timers/cancel', body);
    assert.equal(cancelPath.status, 405);
    assert.equal(served.fastify, ++before);
    assert.equal((await patch(served, `/v1/timers/${id.toUpperCase()}`, body)).status, 404);
    assert.equal(served.fastify, ++before);
    assert.equal((await patch(served, `/v1/timers/${id}`, body, { 'content-type': 'Application/JSON' })).status, 200);
    assert.equal(served.fastify, ++before);
    const h1 = await fetch(`${served.url}/v1/timers/${id}`, { method: 'PATCH', headers: { 'content-type': 'application/json' }, body, signal: AbortSignal.timeout(requestTimeoutMs) });
    assert.equal(h1.status, 200);
    assert.equal(h1.headers.get('etag'), '"3"');
    assert.equal(served.fastify, ++before);
  });
});

test('with tokens: a write token on every queue is taken; none, a read-only or a queue-limited one is left to fastify', { timeout: 30_000 }, async () => {
  const served = await serve(51, true);
  try {
    const auth = (secret: string): Record<string, string> => ({ authorization: `Bearer ${secret}` });
    const id = await add(served, { delay_ms: 3_600_000, target }, auth(token));
    const body = JSON.stringify({ delay_ms: 7_200_000 });
    for (const [headers, status] of [
      [{}, 401],
      [auth('not-the-token-at-all'), 401],
      [auth(readToken), 403],
      [auth(queueToken), 200],
    ] as const) {
      const before = served.fastify;
      const answer = await patch(served, `/v1/timers/${id}`, body, headers);
      assert.equal(answer.status, status, `${JSON.stringify(headers)}: ${answer.body.toString()}`);
      assert.equal(served.fastify, before + 1, JSON.stringify(headers));
    }
    const twin = await add(served, { delay_ms: 3_600_000, target }, auth(token));
    const { fast, fastify } = await bothWays(served, id, twin, JSON.stringify({ fire_at: '2031-01-01T00:00:00.000Z' }), auth(token));
    assert.equal(fast.status, 200);
    // The timer on the raw path had one PATCH more (the queue-limited token's, above).
    assert.equal(fast.headers.etag, '"3"');
    assert.equal(fastify.headers.etag, '"2"');
    const refusal = await bothWays(served, id, id, JSON.stringify({ colour: 'red' }), auth(token));
    assertSameAnswer(refusal.fast, refusal.fastify, 'a refusal with a good token');
  } finally {
    await served.close();
  }
});
