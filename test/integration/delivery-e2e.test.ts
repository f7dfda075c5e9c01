// Delivery through the real service: `fermata serve` as a child process, timers added over
// HTTP, delivered to loopback sinks, seen through the API (GET a timer, /v1/dead, redrive,
// /metrics). Also: a literal private target is refused at add time with a 400; bad dispatch
// settings stop the start naming them; a timer whose delivery was cut by kill -9 is delivered
// again after the restart (at-least-once), and SIGTERM waits for deliveries in flight.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { binPath, serviceEnv, startService, type Service } from '../helpers/service.ts';
import { type Sink, type SinkScript, startH2Sink } from '../helpers/sinks.ts';
import { testScratch } from '../helpers/scratch.ts';
import { withTimeout } from '../helpers/timeout.ts';

const scratch = testScratch('fermata-e2e');
const sinks: Sink[] = [];

after(() => Promise.all(sinks.map((sink) => sink.close())));

const tempDir = (): string => scratch.tempDir('data');

async function service(dataDir: string, args: readonly string[] = []): Promise<Service> {
  return startService(dataDir, (child) => scratch.children.add(child), { args });
}

async function sink(script?: SinkScript): Promise<Sink> {
  const started = await startH2Sink(script);
  sinks.push(started);
  return started;
}

async function call(base: string, method: string, path: string, body?: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  const response = await fetch(`${base}${path}`, {
    method,
    ...(body === undefined ? {} : { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } }),
  });
  const text = await response.text();
  return { status: response.status, json: text === '' ? {} : (JSON.parse(text) as Record<string, unknown>) };
}

async function stateOf(base: string, id: string, want: string, ms = 15_000): Promise<Record<string, unknown>> {
  const deadline = Date.now() + ms;
  for (;;) {
    const { json } = await call(base, 'GET', `/v1/timers/${id}`);
    if (json.state === want) return json;
    assert.ok(Date.now() < deadline, `timer ${id} is ${String(json.state)}, not ${want}, after ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

test('added over HTTP, delivered to the sink, dead-lettered on 410, redriven over HTTP, counted in /metrics', { timeout: 60_000 }, async () => {
  let gone = true;
  const target = await sink((path) => (path === '/gone' && gone ? { status: 410 } : { status: 200 }));
  const svc = await service(tempDir());
  await call(svc.url, 'PUT', '/v1/queues/fast', { min_backoff_ms: 10, max_backoff_ms: 20 });

  const added = await call(svc.url, 'POST', '/v1/timers', { delay_ms: 100, target: `${target.url}/ok`, payload: 'hello', queue: 'fast' });
  assert.equal(added.status, 201);
  const id = String(added.json.id);
  const delivered = await stateOf(svc.url, id, 'delivered');
  assert.equal(delivered.attempts, 1);
  assert.equal(delivered.last_status, 200);
  const [request] = target.to('/ok');
  assert.equal(request?.body.toString(), 'hello');
  assert.equal(request?.headers['fermata-timer-id'], id);

  const dead = await call(svc.url, 'POST', '/v1/timers', { delay_ms: 0, target: `${target.url}/gone`, queue: 'fast' });
  const deadId = String(dead.json.id);
  await stateOf(svc.url, deadId, 'dead');
  const list = await call(svc.url, 'GET', '/v1/dead?queue=fast&limit=10');
  assert.equal(list.status, 200);
  assert.deepEqual((list.json.dead as Array<Record<string, unknown>>).map((timer) => [timer.id, timer.reason, timer.last_status]), [[deadId, 'gone', 410]]);
  assert.equal((await call(svc.url, 'POST', `/v1/dead/${id}/retry`)).status, 409, 'a delivered timer is not redriven');
  assert.equal((await call(svc.url, 'POST', '/v1/dead/0000000000000000000000ZZ/retry')).status, 404);
  gone = false;
  const redriven = await call(svc.url, 'POST', `/v1/dead/${deadId}/retry`);
  assert.deepEqual([redriven.status, redriven.json], [200, { id: deadId, state: 'pending' }]);
  await stateOf(svc.url, deadId, 'delivered');
  assert.deepEqual((await call(svc.url, 'GET', '/v1/dead')).json, { dead: [], next_cursor: null });

  const metrics = await (await fetch(`${svc.url}/metrics`)).text();
  assert.match(metrics, /fermata_deliveries_total\{queue="fast",outcome="delivered"\} 2/);
  assert.match(metrics, /fermata_deliveries_total\{queue="fast",outcome="dead"\} 1/);
  assert.match(metrics, /fermata_delivery_lateness_ms\{queue="fast",quantile="0.99"\} \d+/);

  svc.child.kill('SIGTERM');
  await withTimeout(svc.exited, 20_000, 'exit after SIGTERM');
  assert.equal(svc.child.exitCode, 0);
});

test('a literal private target is refused at add time (400 TARGET_REFUSED); an allow-listed one is accepted', { timeout: 30_000 }, async () => {
  const dir = tempDir();
  const config = join(dir, 'config.json');
  writeFileSync(config, JSON.stringify({ dispatch: { allow: ['10.9.0.0/16'] } }));
  const svc = await service(join(dir, 'data'), ['--config', config]);
  const refused = await call(svc.url, 'POST', '/v1/timers', { delay_ms: 1000, target: 'http://169.254.169.254/latest/meta-data' });
  assert.equal(refused.status, 400);
  const error = refused.json.error as Record<string, unknown>;
  assert.equal(error.code, 'TARGET_REFUSED');
  assert.match(String(error.message), /169\.254\.169\.254/);
  assert.equal((await call(svc.url, 'POST', '/v1/timers', { delay_ms: 60_000, target: 'http://10.9.1.2/hook' })).status, 201);
  const sinkRefused = await call(svc.url, 'PUT', '/v1/queues/pipe', { delivery: 'arrow', sink: 'http://192.168.1.1/ingest' });
  assert.equal(sinkRefused.status, 400);
  svc.child.kill('SIGTERM');
  await withTimeout(svc.exited, 20_000, 'exit after SIGTERM');
});

test('bad dispatch settings stop the start with exit 2, naming the setting', () => {
  const dir = tempDir();
  const cases: Array<[object, RegExp]> = [
    [{ dispatch: { allow: ['10.0.0.0/33'] } }, /dispatch\.allow/],
    [{ dispatch: { signing_secrets: ['not-a-secret'] } }, /signing_secrets.*secret \[0\]|signing secret \[0\]/],
    [{ dispatch: { threads: 0 } }, /dispatch\.threads/],
    [{ dispatch: { colour: 'red' } }, /unknown key "dispatch\.colour"/],
  ];
  for (const [content, message] of cases) {
    const config = join(dir, 'bad.json');
    writeFileSync(config, JSON.stringify(content));
    const result = spawnSync(process.execPath, [binPath, 'serve', '--data', join(dir, 'data'), '--listen', '127.0.0.1:0', '--config', config], { env: serviceEnv(), encoding: 'utf8', timeout: 20_000 });
    assert.equal(result.status, 2, `${JSON.stringify(content)}: ${result.stderr}`);
    assert.match(result.stderr, message);
  }
});

test('at-least-once across kill -9: a delivery whose outcome was never recorded is delivered again after the restart', { timeout: 60_000 }, async () => {
  // The sink takes the first request but never answers it: that delivery is in flight when the
  // service dies. It answers every later one.
  const target = await sink((_path, nth) => (nth === 0 ? { hang: true } : { status: 200 }));
  const dataDir = tempDir();
  let svc = await service(dataDir);
  await call(svc.url, 'PUT', '/v1/queues/slow', { timeout_ms: 600_000 });
  const { json } = await call(svc.url, 'POST', '/v1/timers', { delay_ms: 0, target: `${target.url}/once`, queue: 'slow' });
  const id = String(json.id);
  await stateOf(svc.url, id, 'delivering');
  await withTimeout(
    new Promise<void>((resolve) => {
      const poll = (): void => void (target.to('/once').length > 0 ? resolve() : setTimeout(poll, 20));
      poll();
    }),
    10_000,
    'the first delivery to reach the sink',
  );
  svc.child.kill('SIGKILL');
  await withTimeout(svc.exited, 10_000, 'exit after SIGKILL');

  svc = await service(dataDir);
  const delivered = await stateOf(svc.url, id, 'delivered');
  assert.equal(delivered.attempts, 1, 'the cut attempt was never recorded');
  const requests = target.to('/once');
  assert.equal(requests.length, 2, 'delivered again, once');
  assert.equal(requests[0]?.headers['idempotency-key'], requests[1]?.headers['idempotency-key'], 'the same idempotency key both times');
  svc.child.kill('SIGTERM');
  await withTimeout(svc.exited, 20_000, 'exit after SIGTERM');
  assert.equal(svc.child.exitCode, 0);
});
