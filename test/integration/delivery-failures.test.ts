// Why did it fail? Through the real service (`fermata serve`, port 0) and loopback targets: a
// timer whose attempt failed shows last_error, last_attempt_at and next_attempt_at in GET
// /v1/timers/{id}, a dead one in /v1/dead too, after a restart as before it (also when a
// checkpoint let go of the log records that said it); /metrics counts
// failed attempts by kind; a dying timer is logged once at warn, with its target's origin and
// never its path. The dead list pages by cursor past 1,000, and DELETE /v1/dead/{id} discards
// one: 404 right after, 404 for an unknown id, 409 for a timer that is not dead.
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { after, test } from 'node:test';
import { startService, type Service } from '../helpers/service.ts';
import { type Sink, type SinkScript, startH2Sink } from '../helpers/sinks.ts';
import { testScratch } from '../helpers/scratch.ts';
import { withTimeout } from '../helpers/timeout.ts';

const scratch = testScratch('fermata-failures');
const sinks: Sink[] = [];

after(() => Promise.all(sinks.map((sink) => sink.close())));

async function service(dataDir: string): Promise<Service> {
  return startService(dataDir, (child) => scratch.children.add(child));
}

async function sink(script?: SinkScript): Promise<Sink> {
  const started = await startH2Sink(script);
  sinks.push(started);
  return started;
}

async function stop(svc: Service): Promise<void> {
  svc.child.kill('SIGTERM');
  await withTimeout(svc.exited, 20_000, 'exit after SIGTERM');
}

type Json = Record<string, unknown>;

async function call(base: string, method: string, path: string, body?: unknown, contentType = 'application/json'): Promise<{ status: number; json: Json }> {
  const response = await fetch(`${base}${path}`, {
    method,
    ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body), headers: { 'content-type': contentType } }),
  });
  const text = await response.text();
  return { status: response.status, json: text === '' ? {} : (JSON.parse(text) as Json) };
}

async function until(base: string, id: string, ok: (timer: Json) => boolean, ms = 15_000): Promise<Json> {
  const deadline = Date.now() + ms;
  for (;;) {
    const { json } = await call(base, 'GET', `/v1/timers/${id}`);
    if (ok(json)) return json;
    assert.ok(Date.now() < deadline, `timer ${id} did not get there in ${ms} ms: ${JSON.stringify(json)}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** A loopback port nothing listens on (bound, then closed). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

const rfc3339 = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/;

test('a failed attempt says why and when, and when the next is, across a restart; dead timers too; /metrics counts failures by kind; a death is logged once', { timeout: 90_000 }, async () => {
  const target = await sink(() => ({ status: 503 }));
  const dataDir = scratch.tempDir('data');
  let svc = await service(dataDir);
  assert.equal((await call(svc.url, 'PUT', '/v1/queues/slow', { max_attempts: 5, min_backoff_ms: 600_000, max_backoff_ms: 600_000 })).status, 200);
  assert.equal((await call(svc.url, 'PUT', '/v1/queues/once', { max_attempts: 1 })).status, 200);
  const port = await closedPort();

  const add = async (body: Json): Promise<string> => {
    const added = await call(svc.url, 'POST', '/v1/timers', body);
    assert.equal(added.status, 201, JSON.stringify(added.json));
    return String(added.json.id);
  };
  const beforeMs = Date.now();
  const status503 = await add({ delay_ms: 0, target: `${target.url}/down?token=secret`, queue: 'slow' });
  const refused = await add({ delay_ms: 0, target: `http://127.0.0.1:${port}/hook`, queue: 'slow' });
  const dead = await add({ delay_ms: 0, target: `${target.url}/down?token=secret`, queue: 'once' });
  const untried = await add({ delay_ms: 3_600_000, target: `${target.url}/later`, queue: 'slow' });

  const retrying = await until(svc.url, status503, (timer) => timer.state === 'retrying');
  assert.equal(retrying.last_error, 'HTTP 503');
  assert.equal(retrying.last_status, 503);
  assert.match(String(retrying.last_attempt_at), rfc3339);
  assert.ok(Date.parse(String(retrying.last_attempt_at)) >= beforeMs - 5);
  assert.match(String(retrying.next_attempt_at), rfc3339);
  assert.ok(Date.parse(String(retrying.next_attempt_at)) >= Date.parse(String(retrying.last_attempt_at)) + 590_000, 'the next attempt is a backoff later');
  const connect = await until(svc.url, refused, (timer) => timer.state === 'retrying');
  assert.equal(connect.last_error, 'connection refused');
  assert.equal(connect.last_status, null);
  const died = await until(svc.url, dead, (timer) => timer.state === 'dead');
  assert.deepEqual([died.last_error, died.next_attempt_at], ['HTTP 503', null]);
  const never = (await call(svc.url, 'GET', `/v1/timers/${untried}`)).json;
  assert.deepEqual([never.last_error, never.last_attempt_at, never.next_attempt_at], [null, null, null]);

  const list = (await call(svc.url, 'GET', '/v1/dead')).json;
  const [entry] = list.dead as Json[];
  assert.equal(entry?.id, dead);
  assert.equal(entry?.last_error, 'HTTP 503');
  assert.equal(entry?.last_attempt_at, died.last_attempt_at);
  assert.equal(list.next_cursor, null);

  const metrics = await (await fetch(`${svc.url}/metrics`)).text();
  assert.match(metrics, /fermata_delivery_failures_total\{kind="status"\} 2/);
  assert.match(metrics, /fermata_delivery_failures_total\{kind="connect"\} 1/);
  assert.match(metrics, /fermata_delivery_failures_total\{kind="timeout"\} 0/);

  const deadLines = svc
    .output()
    .split('\n')
    .filter((line) => line.includes('timer dead'));
  assert.equal(deadLines.length, 1, 'logged once');
  const line = JSON.parse(deadLines[0] as string) as Json;
  assert.equal(line.level, 40, 'at warn');
  assert.deepEqual([line.id, line.target, line.attempts, line.last_error, line.reason], [dead, new URL(target.url).origin, 1, 'HTTP 503', 'attempts_exhausted']);
  assert.ok(!(deadLines[0] as string).includes('secret'), 'the target path and query stay out of the log');

  await stop(svc);
  svc = await service(dataDir);
  const again = (await call(svc.url, 'GET', `/v1/timers/${status503}`)).json;
  assert.deepEqual(
    [again.state, again.last_error, again.last_attempt_at, again.next_attempt_at],
    ['retrying', 'HTTP 503', retrying.last_attempt_at, retrying.next_attempt_at],
    'kept across a restart',
  );
  assert.equal((await call(svc.url, 'GET', `/v1/timers/${refused}`)).json.last_error, 'connection refused');
  assert.equal(((await call(svc.url, 'GET', '/v1/dead')).json.dead as Json[])[0]?.last_error, 'HTTP 503');
  await stop(svc);
});

test('why and when an attempt failed survive a checkpoint that truncates the log, and a restart: GET /v1/timers/{id} and /v1/dead', { timeout: 90_000 }, async () => {
  const target = await sink(() => ({ status: 503 }));
  const dataDir = scratch.tempDir('data');
  // A budget so small that the far-future timers added below take it over: the loader then
  // spills them, in a checkpoint that lets go of the log before it (and its OUTCOME records).
  const start = (): Promise<Service> => startService(dataDir, (child) => scratch.children.add(child), { args: ['--memory-budget', '2MiB'], env: { FERMATA_MEMORY_BUDGET_FLOOR: 'off' } });
  let svc = await start();
  assert.equal((await call(svc.url, 'PUT', '/v1/queues/slow', { max_attempts: 5, min_backoff_ms: 3_600_000, max_backoff_ms: 3_600_000 })).status, 200);
  assert.equal((await call(svc.url, 'PUT', '/v1/queues/once', { max_attempts: 1 })).status, 200);
  const add = async (body: Json): Promise<string> => {
    const added = await call(svc.url, 'POST', '/v1/timers', body);
    assert.equal(added.status, 201, JSON.stringify(added.json));
    return String(added.json.id);
  };
  const retryingId = await add({ delay_ms: 0, target: `${target.url}/down`, queue: 'slow' });
  const deadId = await add({ delay_ms: 0, target: `${target.url}/down`, queue: 'once' });
  const retrying = await until(svc.url, retryingId, (timer) => timer.state === 'retrying');
  const dead = await until(svc.url, deadId, (timer) => timer.state === 'dead');
  assert.deepEqual([retrying.last_error, dead.last_error], ['HTTP 503', 'HTTP 503']);

  const fireAt = Date.now() + 10 * 24 * 3_600_000;
  const lines = Array.from({ length: 15_000 }, (_, i) => JSON.stringify({ fire_at: fireAt + i * 1000, target: `${target.url}/far`, payload: `far timer ${i} `.padEnd(100, '.') })).join('\n');
  assert.equal((await call(svc.url, 'POST', '/v1/timers', lines, 'application/x-ndjson')).status, 201);
  const deadline = Date.now() + 30_000;
  while (Number((await call(svc.url, 'GET', '/v1/stats')).json.spilled ?? 0) === 0) {
    assert.ok(Date.now() < deadline, 'the loader spills the far-future timers');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  await stop(svc);

  svc = await start();
  const after = (await call(svc.url, 'GET', `/v1/timers/${retryingId}`)).json;
  assert.deepEqual(
    [after.state, after.last_status, after.last_error, after.last_attempt_at, after.next_attempt_at],
    ['retrying', 503, 'HTTP 503', retrying.last_attempt_at, retrying.next_attempt_at],
    'the retrying timer, restored from the checkpoint',
  );
  const deadAfter = (await call(svc.url, 'GET', `/v1/timers/${deadId}`)).json;
  assert.deepEqual([deadAfter.state, deadAfter.last_error, deadAfter.last_attempt_at], ['dead', 'HTTP 503', dead.last_attempt_at]);
  const listed = ((await call(svc.url, 'GET', '/v1/dead')).json.dead as Json[]).map((timer) => [timer.id, timer.last_error, timer.last_attempt_at]);
  assert.deepEqual(listed, [[deadId, 'HTTP 503', dead.last_attempt_at]]);
  await stop(svc);
});

test('/v1/dead pages past 1,000 by cursor; DELETE /v1/dead/{id} discards one (404 at once), 404 unknown, 409 not dead', { timeout: 90_000 }, async () => {
  const target = await sink((path) => (path === '/gone' ? { status: 410 } : { status: 200 }));
  const svc = await service(scratch.tempDir('data'));
  const count = 1203;
  const lines = Array.from({ length: count }, () => JSON.stringify({ delay_ms: 0, target: `${target.url}/gone` })).join('\n');
  assert.equal((await call(svc.url, 'POST', '/v1/timers', lines, 'application/x-ndjson')).status, 201);
  const deadline = Date.now() + 30_000;
  while (((await call(svc.url, 'GET', '/v1/stats')).json.dead ?? 0) !== count) {
    assert.ok(Date.now() < deadline, 'every timer dies (410)');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }

  const ids: string[] = [];
  let cursor: string | null = null;
  let pages = 0;
  do {
    const page: { status: number; json: Json } = await call(svc.url, 'GET', `/v1/dead?limit=1000${cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`}`);
    assert.equal(page.status, 200);
    ids.push(...(page.json.dead as Json[]).map((timer) => String(timer.id)));
    cursor = page.json.next_cursor as string | null;
    pages++;
  } while (cursor !== null);
  assert.equal(pages, 2);
  assert.equal(ids.length, count);
  assert.equal(new Set(ids).size, count, 'each dead timer once');

  const bad = await call(svc.url, 'GET', '/v1/dead?cursor=nonsense');
  assert.equal(bad.status, 400);
  assert.equal((bad.json.error as Json).code, 'REQUEST_INVALID');
  assert.match(String((bad.json.error as Json).message), /cursor/);

  const victim = ids[0] as string;
  const discarded = await call(svc.url, 'DELETE', `/v1/dead/${victim}`);
  assert.deepEqual([discarded.status, discarded.json], [200, { id: victim, state: 'discarded' }]);
  assert.equal((await call(svc.url, 'GET', `/v1/timers/${victim}`)).status, 404, 'released at once');
  const twice = await call(svc.url, 'DELETE', `/v1/dead/${victim}`);
  assert.deepEqual([twice.status, (twice.json.error as Json).code], [404, 'NOT_FOUND']);
  const unknown = await call(svc.url, 'DELETE', '/v1/dead/0000000000000000000000ZZ');
  assert.equal(unknown.status, 404);

  const pending = await call(svc.url, 'POST', '/v1/timers', { delay_ms: 3_600_000, target: `${target.url}/ok` });
  const notDead = await call(svc.url, 'DELETE', `/v1/dead/${String(pending.json.id)}`);
  assert.deepEqual([notDead.status, (notDead.json.error as Json).code], [409, 'NOT_DEAD']);
  assert.match(String((notDead.json.error as Json).message), /pending/);
  await stop(svc);
});
