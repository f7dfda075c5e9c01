// POST /v1/queues/{name}/pause and /resume as a client meets them with curl, over HTTP/1.1 and
// HTTP/2 (prior knowledge), against the real `fermata serve` (port 0): the queue's view with
// `paused`, GET /v1/queues and GET /v1/queues/{name} showing it, a PUT that keeps it, 404 in the
// error shape for an unknown queue, 405 with `Allow` for other methods, a due timer held (in
// /v1/stats and /metrics), and a pause that holds after kill -9 and a restart. Every wait is
// bounded; children are killed in `after`.
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test, type TestContext } from 'node:test';
import { curl, type CurlAnswer, type CurlProtocol, curlRequest, curlWithoutHttp2, json, text } from '../helpers/curl.ts';
import { type Service, startService } from '../helpers/service.ts';
import { withTimeout } from '../helpers/timeout.ts';
import { skipOrFail, toolOrSkip } from '../helpers/tools.ts';

const children = new Set<ChildProcess>();
const dataDir = mkdtempSync(join(tmpdir(), 'fermata-pause-api-'));
let service: Service | undefined;

after(() => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  rmSync(dataDir, { recursive: true, force: true });
});

/** One curl request to the running service. */
function call(protocol: CurlProtocol, method: string, path: string, body?: string): Promise<CurlAnswer> {
  return curlRequest({ protocol, method, url: `${(service as Service).url}${path}`, ...(body === undefined ? {} : { body }) });
}

function curlOrSkip(t: TestContext, protocol: CurlProtocol): boolean {
  if (toolOrSkip(t, 'curl') === undefined) return false;
  if (protocol === 'http2' && !curl.http2) {
    skipOrFail(t, curlWithoutHttp2);
    return false;
  }
  return true;
}

async function until(what: string, ms: number, done: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await done())) {
    assert.ok(Date.now() < deadline, `timed out after ${ms} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

test('the service starts', async () => {
  service = await startService(dataDir, (child) => children.add(child));
});

for (const protocol of ['http1.1', 'http2'] as const) {
  test(`pause, resume and GET over ${protocol} with curl`, async (t) => {
    if (!curlOrSkip(t, protocol)) return;
    const version = protocol === 'http2' ? '2' : '1.1';
    const queue = `billing-${protocol.replace('.', '-')}`;
    assert.equal((await call(protocol, 'PUT', `/v1/queues/${queue}`, '{"rate_per_s": 5}')).status, 200);

    const paused = await call(protocol, 'POST', `/v1/queues/${queue}/pause`);
    assert.deepEqual([paused.status, paused.httpVersion], [200, version]);
    assert.match(paused.headers['content-type'] ?? '', /^application\/json/);
    const view = json(paused);
    assert.deepEqual([view.name, view.rate_per_s, view.max_attempts, view.paused], [queue, 5, 20, true]);
    assert.equal(json(await call(protocol, 'POST', `/v1/queues/${queue}/pause`)).paused, true, 'pausing twice is fine');

    const listed = (json(await call(protocol, 'GET', '/v1/queues')).queues as Array<Record<string, unknown>>).find((entry) => entry.name === queue);
    assert.equal(listed?.paused, true);
    assert.equal(json(await call(protocol, 'GET', `/v1/queues/${queue}`)).paused, true);
    assert.equal(json(await call(protocol, 'GET', '/v1/queues/default')).paused, false);
    const put = json(await call(protocol, 'PUT', `/v1/queues/${queue}`, '{"rate_per_s": 7}'));
    assert.deepEqual(put, json(await call(protocol, 'GET', `/v1/queues/${queue}`)), 'a PUT answers the queue as GET shows it');
    assert.deepEqual([put.name, put.rate_per_s, put.paused], [queue, 7, true], 'a PUT keeps the pause');

    // A timer due now is held, counted as held, and stays pending.
    const added = json(await call(protocol, 'POST', '/v1/timers', JSON.stringify({ delay_ms: 0, target: 'https://a.example/hook', queue })));
    await until('the due timer to be held', 10_000, async () => (json(await call(protocol, 'GET', '/v1/stats')).held as number) >= 1);
    assert.equal(json(await call(protocol, 'GET', `/v1/timers/${String(added.id)}`)).state, 'pending');
    const metrics = text(await call(protocol, 'GET', '/metrics')).split('\n');
    assert.ok(metrics.some((line) => /^fermata_queues_paused [1-9]/.test(line)), 'paused queues in /metrics');
    assert.ok(metrics.some((line) => /^fermata_timers_held [1-9]/.test(line)), 'held timers in /metrics');

    for (const action of ['pause', 'resume']) {
      const unknown = await call(protocol, 'POST', `/v1/queues/nowhere/${action}`);
      assert.equal(unknown.status, 404);
      assert.equal((json(unknown).error as Record<string, unknown>).code, 'NOT_FOUND');
      for (const method of ['GET', 'PUT', 'DELETE']) {
        const refused = await call(protocol, method, `/v1/queues/${queue}/${action}`);
        assert.equal(refused.status, 405, `${method} ${action}`);
        assert.equal((json(refused).error as Record<string, unknown>).code, 'METHOD_NOT_ALLOWED');
        assert.match(refused.headers.allow ?? '', /^post\b/i);
      }
    }

    const resumed = await call(protocol, 'POST', `/v1/queues/${queue}/resume`);
    assert.deepEqual([resumed.status, json(resumed).paused, json(resumed).rate_per_s], [200, false, 7]);
    assert.equal(json(await call(protocol, 'POST', `/v1/queues/${queue}/resume`)).paused, false, 'resuming twice is fine');
    await until('the resumed timer to leave the held count', 10_000, async () => json(await call(protocol, 'GET', `/v1/timers/${String(added.id)}`)).attempts !== 0);
    assert.equal(json(await call(protocol, 'POST', `/v1/queues/${queue}/pause`)).paused, true, 'paused again, for the restart');
  });
}

test('after kill -9 and a restart the pauses hold', async (t) => {
  if (!curlOrSkip(t, 'http1.1')) return;
  const running = service as Service;
  running.child.kill('SIGKILL');
  await withTimeout(running.exited, 10_000, 'fermata to die');
  service = await startService(dataDir, (child) => children.add(child));
  const queues = json(await call('http1.1', 'GET', '/v1/queues')).queues as Array<Record<string, unknown>>;
  assert.deepEqual(
    queues.filter((queue) => String(queue.name).startsWith('billing-')).map((queue) => [queue.name, queue.paused]),
    curl.http2 ? [['billing-http1-1', true], ['billing-http2', true]] : [['billing-http1-1', true]],
  );
  assert.equal(json(await call('http1.1', 'GET', '/v1/stats')).paused_queues, curl.http2 ? 2 : 1);
});
