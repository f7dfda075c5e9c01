// The test clock as a user meets it (issue 41): the real `fermata serve --clock manual` on
// loopback, driven with curl over HTTP/1.1 and HTTP/2 (prior knowledge), delivering to a
// loopback sink. A timer 30 days out goes out within seconds of the clock being advanced 30
// days (not 30 days later), its fermata-fire-at its fire time; delay_ms counts from the manual
// clock (JSON over HTTP/1.1 and HTTP/2, NDJSON, the stream); a retry's backoff follows it (not sent until the clock passes it); after kill -9 and a
// restart the clock resumes where it stood; a non-loopback listener with --clock manual exits 2
// naming why; with the real clock /v1/clock answers 404. Every wait is bounded.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { curl, type CurlAnswer, curlRequest, curlWithoutHttp2, json } from '../helpers/curl.ts';
import { testScratch } from '../helpers/scratch.ts';
import { binPath, type Service, serviceEnv, startService } from '../helpers/service.ts';
import { type Sink, startH2Sink } from '../helpers/sinks.ts';
import { withTimeout } from '../helpers/timeout.ts';
import { toolPath } from '../helpers/tools.ts';

const day = 86_400_000;
/** How long a delivery the clock made due may take on this shared machine: the point is that it is not 30 days. */
const deliveredWithinMs = 10_000;
/** How long to watch for a delivery that must not happen yet. */
const quietMs = 1_500;

const scratch = testScratch('fermata-test-clock');
const children = scratch.children;
let sink: Sink;

after(() => (sink === undefined ? undefined : sink.close()));

/** One request with curl: HTTP/1.1, or HTTP/2 with prior knowledge; the answer with its body as JSON. */
async function curlJson(method: string, url: string, body: unknown, http2 = false): Promise<CurlAnswer & { readonly json: Record<string, unknown> }> {
  const answer = await curlRequest({ protocol: http2 ? 'http2' : 'http1.1', method, url, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  return { ...answer, json: json(answer) };
}

/** Resolves with the real ms it took until `sink` has had `count` requests to `path`. */
async function arrival(path: string, count: number): Promise<number> {
  const startedAtMs = Date.now();
  await withTimeout(
    (async () => {
      while (sink.to(path).length < count) await sleep(20);
    })(),
    deliveredWithinMs,
    `request ${count} to ${path}`,
  );
  return Date.now() - startedAtMs;
}

/** The timer's view once its state is `state` (its outcome is recorded a little after the sink answered), within deliveredWithinMs. */
async function untilState(url: string, id: unknown, state: string): Promise<Record<string, unknown>> {
  return withTimeout(
    (async () => {
      for (;;) {
        const timer = await curlJson('GET', `${url}/v1/timers/${String(id)}`, undefined);
        if (timer.json.state === state) return timer.json;
        await sleep(20);
      }
    })(),
    deliveredWithinMs,
    `timer ${String(id)} to be ${state}`,
  );
}

function start(dataDir: string, args: readonly string[]): Promise<Service> {
  return startService(dataDir, (child) => children.add(child), { args });
}

/** `fermata serve` with these arguments, expected to refuse to start: its exit code and stderr. */
function refusedStart(args: readonly string[]): Promise<{ code: number | null; stderr: string }> {
  return new Promise((resolve) => {
    const child = execFile(process.execPath, [binPath, 'serve', '--data', scratch.tempDir('refused'), ...args], { env: serviceEnv(), encoding: 'utf8', timeout: 20_000 }, (_err, _stdout, stderr) =>
      resolve({ code: child.exitCode, stderr }),
    );
  });
}

const hasCurl = toolPath('curl') !== undefined && curl.http2;

describe('fermata serve --clock manual', { skip: hasCurl ? false : `needs curl with HTTP/2 (${curlWithoutHttp2})` }, () => {
  const dataDir = scratch.tempDir('data');
  let service: Service;
  let nowMs: number;

  before(async () => {
    // /retry answers 503 once, then 200; every other path 200.
    sink = await startH2Sink((path, nth) => ({ status: path === '/retry' && nth === 0 ? 503 : 200 }));
    service = await start(dataDir, ['--clock', 'manual']);
  });

  test('GET /v1/clock: a manual clock that starts at the real time and stands still', async () => {
    const realMs = Date.now();
    const first = await curlJson('GET', `${service.url}/v1/clock`, undefined);
    assert.equal(first.status, 200);
    assert.equal(first.json.mode, 'manual');
    nowMs = first.json.now_ms as number;
    assert.ok(Math.abs(nowMs - realMs) < 60_000, `starts at the real time: ${nowMs} vs ${realMs}`);
    assert.equal(first.json.now, new Date(nowMs).toISOString());
    await sleep(50);
    const again = await curlJson('GET', `${service.url}/v1/clock`, undefined, true);
    assert.equal(again.httpVersion, '2');
    assert.equal(again.json.now_ms, nowMs, 'it stands still between moves');
  });

  test('a timer 30 days out goes out within seconds of a 30-day advance, fermata-fire-at its fire time; delay_ms counts from the clock', async (t) => {
    const fireAtMs = nowMs + 30 * day;
    const added = await curlJson('POST', `${service.url}/v1/timers`, { fire_at: fireAtMs, target: `${sink.url}/thirty`, payload: '30 days later' }, true);
    assert.equal(added.status, 201);
    const delayed = await curlJson('POST', `${service.url}/v1/timers`, { delay_ms: 3_600_000, target: `${sink.url}/hour` });
    assert.equal(delayed.status, 201);
    assert.equal(delayed.json.fire_at, new Date(nowMs + 3_600_000).toISOString(), 'delay_ms from the manual clock, which stands still');
    await sleep(quietMs);
    assert.equal(sink.requests.length, 0, 'nothing is due yet by the clock');

    const moved = await curlJson('POST', `${service.url}/v1/clock`, { advance_ms: 30 * day });
    assert.equal(moved.status, 200);
    assert.deepEqual(moved.json, { now: new Date(fireAtMs).toISOString(), now_ms: fireAtMs, mode: 'manual' });
    nowMs = fireAtMs;
    const tookMs = await arrival('/thirty', 1);
    assert.ok(tookMs < deliveredWithinMs, `delivered ${tookMs} ms after the advance`);
    t.diagnostic(`the 30-day timer arrived ${tookMs} ms (real) after the advance was answered`);
    const delivery = sink.to('/thirty')[0];
    assert.equal(delivery?.headers['fermata-fire-at'], String(fireAtMs));
    assert.equal(delivery?.body.toString(), '30 days later');
    await arrival('/hour', 1);
    assert.equal(sink.to('/hour')[0]?.headers['fermata-fire-at'], String(fireAtMs - 30 * day + 3_600_000));
    await untilState(service.url, added.json.id, 'delivered');
    await untilState(service.url, delayed.json.id, 'delivered');
    // Sent at or after its fire time by the manual clock (the hour's timer 30 days late by it, as it should be).
    const metrics = await fetch(`${service.url}/metrics`).then((answer) => answer.text());
    assert.match(metrics, /^fermata_deliveries_early_total 0$/m);
  });

  test('delay_ms counts from the manual clock on every way in: HTTP/2 single add, NDJSON, the stream', async () => {
    const delayMs = 10 * day;
    const expected = new Date(nowMs + delayMs).toISOString();
    const single = await curlJson('POST', `${service.url}/v1/timers`, { delay_ms: delayMs, target: `${sink.url}/later` }, true);
    assert.equal(single.httpVersion, '2');
    assert.equal(single.json.fire_at, expected);
    const lines = `${JSON.stringify({ delay_ms: delayMs, target: `${sink.url}/later` })}\n`;
    const ndjson = { 'content-type': 'application/x-ndjson' };
    const { ids } = json<{ ids: string[] }>(await curlRequest({ url: `${service.url}/v1/timers`, body: lines, headers: ndjson }));
    assert.equal(ids.length, 1);
    assert.equal((await curlJson('GET', `${service.url}/v1/timers/${String(ids[0])}`, undefined)).json.fire_at, expected);
    const streamed = await curlRequest({ protocol: 'http2', url: `${service.url}/v1/timers/stream`, body: lines, headers: ndjson });
    assert.equal(json<{ fire_at: string }>(streamed).fire_at, expected);
  });

  test('a retry waits for its backoff by the manual clock: not sent until the clock passes it', async () => {
    const queue = await curlJson('PUT', `${service.url}/v1/queues/by-the-clock`, { min_backoff_ms: 60_000, max_backoff_ms: 60_000 });
    assert.equal(queue.status, 200);
    const added = await curlJson('POST', `${service.url}/v1/timers`, { delay_ms: 0, target: `${sink.url}/retry`, queue: 'by-the-clock' });
    assert.equal(added.status, 201);
    await arrival('/retry', 1);
    const timer = await untilState(service.url, added.json.id, 'retrying');
    assert.equal(timer.last_status, 503);
    assert.equal(timer.next_attempt_at, new Date(nowMs + 60_000).toISOString(), 'the backoff counts from the manual clock');
    assert.equal(timer.last_attempt_at, new Date(nowMs).toISOString());
    await sleep(quietMs);
    assert.equal(sink.to('/retry').length, 1, 'not retried while the clock stands still');
    const short = await curlJson('POST', `${service.url}/v1/clock`, { advance_ms: 59_999 }, true);
    assert.equal(short.json.now_ms, nowMs + 59_999);
    await sleep(quietMs);
    assert.equal(sink.to('/retry').length, 1, 'not retried a millisecond before its backoff ends');
    const moved = await curlJson('POST', `${service.url}/v1/clock`, { set: new Date(nowMs + 60_000).toISOString() }, true);
    assert.equal(moved.json.now_ms, nowMs + 60_000);
    nowMs += 60_000;
    await arrival('/retry', 2);
    assert.equal(sink.to('/retry')[1]?.headers['fermata-attempt'], '2');
    await untilState(service.url, added.json.id, 'delivered');
  });

  test('bad moves are refused naming why; the clock never moves backwards', async () => {
    const back = await curlJson('POST', `${service.url}/v1/clock`, { set: nowMs - 1 });
    assert.equal(back.status, 409);
    assert.equal((back.json.error as { code: string }).code, 'CLOCK_BACKWARDS');
    for (const [body, field] of [[{ advance_ms: 0 }, 'advance_ms'], [{}, 'advance_ms'], [{ advance_ms: 1, set: nowMs }, 'set'], [{ set: 'next week' }, 'set']] as const) {
      const refused = await curlJson('POST', `${service.url}/v1/clock`, body, true);
      assert.equal(refused.status, 400, JSON.stringify(body));
      assert.deepEqual([(refused.json.error as { code: string }).code, (refused.json.error as { field: string }).field], ['CLOCK_INVALID', field]);
    }
    assert.equal((await curlJson('GET', `${service.url}/v1/clock`, undefined)).json.now_ms, nowMs);
  });

  test('after kill -9 and a restart the clock resumes where it stood, not at the real time', async () => {
    service.child.kill('SIGKILL');
    await withTimeout(service.exited, 10_000, 'fermata to die');
    service = await start(dataDir, ['--clock', 'manual']);
    const resumed = await curlJson('GET', `${service.url}/v1/clock`, undefined);
    assert.equal(resumed.json.now_ms, nowMs);
    service.child.kill('SIGTERM');
    await withTimeout(service.exited, 20_000, 'fermata to stop');
  });

  test('with the real clock (the same data directory), /v1/clock is 404 and the logged position is left for later', async () => {
    service = await start(dataDir, []);
    for (const http2 of [false, true]) {
      const read = await curlJson('GET', `${service.url}/v1/clock`, undefined, http2);
      assert.equal(read.status, 404);
      assert.equal((read.json.error as { code: string }).code, 'ROUTE_NOT_FOUND');
      const move = await curlJson('POST', `${service.url}/v1/clock`, { advance_ms: 1 }, http2);
      assert.equal(move.status, 404);
      assert.equal((move.json.error as { code: string }).code, 'ROUTE_NOT_FOUND');
    }
    assert.match(service.output(), /the log holds a manual clock's position/);
    service.child.kill('SIGTERM');
    await withTimeout(service.exited, 20_000, 'fermata to stop');
  });
});

test('--clock manual with a listener off loopback exits 2 and says why', async () => {
  const cleartext = await refusedStart(['--listen', '0.0.0.0:0', '--clock', 'manual', '--insecure']);
  assert.equal(cleartext.code, 2);
  assert.match(cleartext.stderr, /--clock: a manual clock serves on loopback only .* --listen is 0\.0\.0\.0/);
  const flight = await refusedStart(['--listen', '127.0.0.1:0', '--flight', '[::]:0', '--clock', 'manual']);
  assert.equal(flight.code, 2);
  assert.match(flight.stderr, /a manual clock serves on loopback only .* --flight is ::/);
  const unknown = await refusedStart(['--clock', 'fast']);
  assert.equal(unknown.code, 2);
  assert.match(unknown.stderr, /--clock: "fast" is not a clock/);
});
