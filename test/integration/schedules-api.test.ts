// Schedules as a user meets them (issue 43): the real `fermata serve --clock manual` on
// loopback, driven with curl over HTTP/1.1 and HTTP/2 (prior knowledge), delivering to a
// loopback sink. PUT creates (answering the next five occurrences), GET lists by name with a
// cursor, a PUT of the same name replaces it (its pending occurrences follow the new rule), pause
// and resume, DELETE; bad input is 400 naming the field, and so is a user key beginning with
// schedule:. Downtime: the service stops and starts again and the clock then steps an hour;
// catch_up latest delivers the most recent missed occurrence once, all each one, none none;
// then the rule goes on; no occurrence is delivered twice. A year of `0 9 * * MON-FRI`
// Europe/Berlin (2027, the expectation computed from the EU's daylight-saving rule, not a time
// zone library) is delivered at exactly the expected instants, and so are a daily 02:30 across
// both of Berlin's 2027 changes (the gap, the repeated hour). 2027, not a past year: the test
// clock starts at the real time and never goes back. Every wait is bounded.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { after, before, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { curl, curlWithoutHttp2 } from '../helpers/curl.ts';
import { testScratch } from '../helpers/scratch.ts';
import { type Service, startService } from '../helpers/service.ts';
import { type Sink, startH2Sink } from '../helpers/sinks.ts';
import { withTimeout } from '../helpers/timeout.ts';
import { toolPath } from '../helpers/tools.ts';

const minute = 60_000;
const hour = 3_600_000;
const deliveredWithinMs = 10_000;
const quietMs = 1_500;

const scratch = testScratch('fermata-schedules');
const children = scratch.children;
let sink: Sink;

after(() => (sink === undefined ? undefined : sink.close()));

interface CurlAnswer {
  readonly status: number;
  readonly httpVersion: string;
  readonly json: Record<string, unknown>;
}

function curlJson(method: string, url: string, body: unknown, http2 = false): Promise<CurlAnswer> {
  const args = ['-s', '--max-time', '10', '-X', method, '-w', '\n%{http_code} %{http_version}', ...(http2 ? ['--http2-prior-knowledge'] : ['--http1.1'])];
  if (body !== undefined) args.push('-H', 'content-type: application/json', '--data-binary', JSON.stringify(body));
  args.push(url);
  return new Promise((resolve, reject) => {
    execFile('curl', args, { encoding: 'utf8' }, (err, stdout) => {
      if (err !== null) return reject(err);
      const cut = stdout.lastIndexOf('\n');
      const [status, httpVersion] = stdout.slice(cut + 1).split(' ');
      resolve({ status: Number(status), httpVersion: httpVersion ?? '', json: JSON.parse(stdout.slice(0, cut)) as Record<string, unknown> });
    });
  });
}

const start = (dataDir: string): Promise<Service> => startService(dataDir, (child) => children.add(child), { args: ['--clock', 'manual'] });

async function stop(service: Service): Promise<void> {
  service.child.kill('SIGTERM');
  await withTimeout(service.exited, 20_000, 'the service to stop');
}

async function clockMs(service: Service): Promise<number> {
  return (await curlJson('GET', `${service.url}/v1/clock`, undefined)).json.now_ms as number;
}

/** Waits until the sink has had `count` requests to `path` (within deliveredWithinMs). */
async function arrivals(path: string, count: number): Promise<void> {
  await withTimeout(
    (async () => {
      while (sink.to(path).length < count) await sleep(2);
    })(),
    deliveredWithinMs,
    `request ${count} to ${path}`,
  );
}

/**
 * The pending occurrences of schedule `report` as [key, payload], once every one carries
 * `payload` (within 5 s): the materializer creates them just after a PUT is answered, not
 * before.
 */
async function occurrencesOf(service: Service, payload: string): Promise<string[][]> {
  const pending = async (): Promise<string[][]> => {
    const answer = await curlJson('GET', `${service.url}/v1/timers?key_prefix=schedule:report:&state=pending`, undefined);
    return (answer.json.timers as Array<{ key: string; payload: string }>).map((timer) => [timer.key, timer.payload]);
  };
  const started = performance.now();
  let seen = await pending();
  while ((seen.length === 0 || seen.some(([, each]) => each !== payload)) && performance.now() - started < 5_000) {
    await sleep(20);
    seen = await pending();
  }
  return seen;
}

const firedAt = (path: string): number[] => sink.to(path).map((request) => Number(request.headers['fermata-fire-at']));
const keysOf = (path: string): string[] => sink.to(path).map((request) => String(request.headers['idempotency-key']));

const hasCurl = toolPath('curl') !== undefined && curl.http2;

describe('schedules over HTTP', { skip: hasCurl ? false : `needs curl with HTTP/2 (${curlWithoutHttp2})` }, () => {
  before(async () => {
    sink = await startH2Sink();
  });

  test('create, list with a cursor, replace, pause, resume and delete; bad input is 400 naming the field', async () => {
    const service = await start(scratch.tempDir('api'));
    const nowMs = await clockMs(service);
    const startAtMs = Math.ceil((nowMs + 1) / minute) * minute;
    const created = await curlJson('PUT', `${service.url}/v1/schedules/report`, { every_ms: minute, start_at: new Date(startAtMs).toISOString(), target: `${sink.url}/report`, payload: 'v1', headers: { 'x-run': 'nightly' } }, true);
    assert.equal(created.status, 200);
    assert.equal(created.httpVersion, '2');
    assert.equal(created.json.name, 'report');
    assert.equal(created.json.catch_up, 'latest');
    assert.deepEqual(
      (created.json.next as Array<{ occurrence: string }>).map((next) => next.occurrence),
      [0, 1, 2, 3, 4].map((k) => new Date(startAtMs + k * minute).toISOString()),
    );
    assert.deepEqual(await occurrencesOf(service, 'v1'), [0, 1].map((k) => [`schedule:report:${startAtMs + k * minute}`, 'v1']), 'the occurrences of the next two minutes are timers');

    for (const name of ['alpha', 'beta']) assert.equal((await curlJson('PUT', `${service.url}/v1/schedules/${name}`, { cron: '0 9 * * MON-FRI', time_zone: 'Europe/Berlin', target: `${sink.url}/${name}` })).status, 200);
    const first = await curlJson('GET', `${service.url}/v1/schedules?limit=2`, undefined);
    assert.deepEqual((first.json.schedules as Array<{ name: string }>).map((s) => s.name), ['alpha', 'beta']);
    assert.equal(first.json.next_cursor, 'beta');
    const second = await curlJson('GET', `${service.url}/v1/schedules?limit=2&cursor=beta`, undefined);
    assert.deepEqual((second.json.schedules as Array<{ name: string }>).map((s) => s.name), ['report']);
    assert.equal(second.json.next_cursor, null);

    const replaced = await curlJson('PUT', `${service.url}/v1/schedules/report`, { every_ms: minute, start_at: startAtMs, target: `${sink.url}/report`, payload: 'v2' });
    assert.equal(replaced.status, 200);
    assert.equal(replaced.json.payload, 'v2');
    assert.deepEqual(await occurrencesOf(service, 'v2'), [0, 1].map((k) => [`schedule:report:${startAtMs + k * minute}`, 'v2']), 'the pending occurrences follow the new rule');

    const stats = await curlJson('GET', `${service.url}/v1/stats`, undefined);
    assert.deepEqual({ ...(stats.json.schedules as object), occurrences_created: 0 }, { count: 3, paused: 0, occurrences_created: 0, catch_up_created: 0, skipped: 0, catch_up_cancelled: 0, occurrences_fired: 0 });
    const metrics = await fetch(`${service.url}/metrics`).then((answer) => answer.text());
    assert.match(metrics, /^fermata_schedules 3$/m);
    assert.match(metrics, /^fermata_schedule_occurrences_created_total \d+$/m);
    const paused = await curlJson('POST', `${service.url}/v1/schedules/report/pause`, undefined);
    assert.equal(paused.status, 200);
    assert.equal(paused.json.paused, true);
    assert.deepEqual((await curlJson('GET', `${service.url}/v1/timers?key_prefix=schedule:report:&state=pending`, undefined)).json.timers, []);
    const resumed = await curlJson('POST', `${service.url}/v1/schedules/report/resume`, undefined, true);
    assert.equal(resumed.json.paused, false);
    assert.equal((await curlJson('GET', `${service.url}/v1/schedules/report`, undefined)).json.paused, false);
    const deleted = await curlJson('DELETE', `${service.url}/v1/schedules/report`, undefined);
    assert.deepEqual(deleted.json, { name: 'report', deleted: true });
    assert.equal((await curlJson('GET', `${service.url}/v1/schedules/report`, undefined)).status, 404);
    assert.equal((await curlJson('POST', `${service.url}/v1/schedules/report/pause`, undefined)).status, 404);

    const bad = async (body: unknown, field: string, name = 'bad'): Promise<void> => {
      const answer = await curlJson('PUT', `${service.url}/v1/schedules/${name}`, body);
      assert.equal(answer.status, 400, JSON.stringify(answer.json));
      assert.equal((answer.json.error as { field: string }).field, field, JSON.stringify(answer.json));
    };
    const target = `${sink.url}/bad`;
    await bad({ every_ms: 999, target }, 'every_ms');
    await bad({ cron: '61 * * * *', target }, 'cron');
    await bad({ cron: '0 9 * * *', time_zone: 'Mars/Olympus', target }, 'time_zone');
    await bad({ every_ms: minute, start_at: '2030-01-02T00:00:00Z', end_at: '2030-01-01T00:00:00Z', target }, 'end_at');
    await bad({ every_ms: minute, catch_up: 'some', target }, 'catch_up');
    await bad({ every_ms: minute, target, colour: 'red' }, 'colour');
    await bad({ every_ms: minute, target: 'not a url' }, 'target');
    await bad({ every_ms: minute, target }, 'name', 'no:colons');
    const userKey = await curlJson('POST', `${service.url}/v1/timers`, { delay_ms: 0, target, key: 'schedule:x:1' }, true);
    assert.equal(userKey.status, 400);
    assert.equal((userKey.json.error as { field: string }).field, 'key');
    await stop(service);
  });

  // The three catch_up modes share one service (three schedules), so its two restarts serve all three.
  test("after a restart and an hour's step of the clock, catch_up latest, all and none; then the rule goes on, each occurrence once", async () => {
    const modes = ['latest', 'all', 'none'] as const;
    const dataDir = scratch.tempDir('downtime');
    let service = await start(dataDir);
    const putAtMs = await clockMs(service);
    const startAtMs = Math.ceil((putAtMs + 1) / minute) * minute;
    const pathOf = (catchUp: string): string => `/down-${catchUp}`;
    for (const catchUp of modes) {
      assert.equal((await curlJson('PUT', `${service.url}/v1/schedules/down-${catchUp}`, { every_ms: minute, start_at: startAtMs, catch_up: catchUp, target: `${sink.url}${pathOf(catchUp)}` })).status, 200);
    }
    await stop(service);
    service = await start(dataDir);
    assert.equal(await clockMs(service), putAtMs, 'the clock resumed where it stood');
    const nowMs = (await curlJson('POST', `${service.url}/v1/clock`, { advance_ms: hour })).json.now_ms as number;
    const missed: number[] = [];
    for (let at = startAtMs; at < nowMs; at += minute) missed.push(at);
    const expectedOf = (catchUp: string): number[] => (catchUp === 'all' ? missed : catchUp === 'latest' ? missed.slice(-1) : []);
    for (const catchUp of modes) if (expectedOf(catchUp).length > 0) await arrivals(pathOf(catchUp), expectedOf(catchUp).length);
    await sleep(quietMs);
    for (const catchUp of modes) assert.deepEqual(firedAt(pathOf(catchUp)), expectedOf(catchUp), `catch_up ${catchUp}`);
    // The rule goes on: the next occurrence, once, when the clock reaches it.
    const nextMs = (missed.at(-1) as number) + minute;
    await curlJson('POST', `${service.url}/v1/clock`, { set: new Date(nextMs).toISOString() });
    for (const catchUp of modes) await arrivals(pathOf(catchUp), expectedOf(catchUp).length + 1);
    await stop(service);
    service = await start(dataDir);
    await curlJson('POST', `${service.url}/v1/clock`, { advance_ms: 30_000 });
    await sleep(quietMs);
    for (const catchUp of modes) {
      const path = pathOf(catchUp);
      assert.deepEqual(firedAt(path), [...expectedOf(catchUp), nextMs], `catch_up ${catchUp}`);
      assert.equal(new Set(keysOf(path)).size, keysOf(path).length, `catch_up ${catchUp}: no occurrence delivered twice`);
    }
    await stop(service);
  });

  test('daylight saving in Berlin, 2027: 02:30 in the spring gap fires at 03:00, 02:30 twice in the autumn fires once (the first)', { timeout: 120_000 }, async () => {
    const service = await start(scratch.tempDir('dst'));
    const spring = ['2027-03-27T01:30:00Z', '2027-03-28T01:00:00Z', '2027-03-29T00:30:00Z'].map(Date.parse);
    const autumn = ['2027-10-30T00:30:00Z', '2027-10-31T00:30:00Z', '2027-11-01T01:30:00Z'].map(Date.parse);
    const put = async (name: string, startAt: string, endAt: string): Promise<void> => {
      const answer = await curlJson('PUT', `${service.url}/v1/schedules/${name}`, { cron: '30 2 * * *', time_zone: 'Europe/Berlin', start_at: startAt, end_at: endAt, target: `${sink.url}/${name}` });
      assert.equal(answer.status, 200, JSON.stringify(answer.json));
    };
    await put('dst-spring', '2027-03-27T00:00:00Z', '2027-03-29T12:00:00Z');
    await put('dst-autumn', '2027-10-30T00:00:00Z', '2027-11-01T12:00:00Z');
    for (const [path, instants] of [['/dst-spring', spring], ['/dst-autumn', autumn]] as const) {
      for (let i = 0; i < instants.length; i++) {
        await curlJson('POST', `${service.url}/v1/clock`, { set: instants[i] });
        await arrivals(path, i + 1);
      }
    }
    await curlJson('POST', `${service.url}/v1/clock`, { set: '2027-11-03T00:00:00Z' });
    await sleep(quietMs);
    assert.deepEqual(firedAt('/dst-spring'), spring);
    assert.deepEqual(firedAt('/dst-autumn'), autumn);
    await stop(service);
  });

  test('a year of 0 9 * * MON-FRI in Europe/Berlin is delivered at exactly its instants, the test clock stepping from one to the next', { timeout: 300_000 }, async (t) => {
    const service = await start(scratch.tempDir('year'));
    const expected = berlinWeekdayNines(2027);
    assert.equal(expected.length, 261);
    const put = await curlJson('PUT', `${service.url}/v1/schedules/berlin`, { cron: '0 9 * * MON-FRI', time_zone: 'Europe/Berlin', start_at: '2027-01-01T00:00:00+01:00', end_at: '2027-12-31T23:59:59+01:00', target: `${sink.url}/berlin` });
    assert.equal(put.status, 200, JSON.stringify(put.json));
    assert.deepEqual((put.json.next as Array<{ fire_at: string }>).map((next) => Date.parse(next.fire_at)), expected.slice(0, 5));
    const startedAt = Date.now();
    // 261 steps: fetch rather than a curl process each (curl drives the API in the tests above).
    for (let i = 0; i < expected.length; i++) {
      const step = await fetch(`${service.url}/v1/clock`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ set: expected[i] }) });
      assert.equal(step.status, 200, await step.text());
      await arrivals('/berlin', i + 1);
    }
    await curlJson('POST', `${service.url}/v1/clock`, { set: '2028-01-10T00:00:00Z' });
    await sleep(quietMs);
    assert.deepEqual(firedAt('/berlin'), expected);
    const stats = (await curlJson('GET', `${service.url}/v1/stats`, undefined)).json.schedules as Record<string, number>;
    assert.equal(stats.occurrences_fired, expected.length);
    assert.equal(stats.occurrences_created, expected.length);
    t.diagnostic(`a year of occurrences in ${Date.now() - startedAt} ms`);
    await stop(service);
  });
});

/**
 * 09:00 in Berlin on every weekday of `year`, as epoch ms, from the EU rule alone: CET (UTC+1),
 * and CEST (UTC+2) from 01:00 UTC on the last Sunday of March to 01:00 UTC on the last Sunday
 * of October. 09:00 local is never in a change's hour, so the rule decides it whole.
 */
function berlinWeekdayNines(year: number): number[] {
  const lastSunday = (month: number): number => {
    const last = new Date(Date.UTC(year, month + 1, 0));
    return last.getUTCDate() - last.getUTCDay();
  };
  const summerFrom = Date.UTC(year, 2, lastSunday(2), 1);
  const summerTo = Date.UTC(year, 9, lastSunday(9), 1);
  const out: number[] = [];
  for (let day = Date.UTC(year, 0, 1); day < Date.UTC(year + 1, 0, 1); day += 86_400_000) {
    const weekday = new Date(day).getUTCDay();
    if (weekday === 0 || weekday === 6) continue;
    const summer = day + 7 * hour >= summerFrom && day + 7 * hour < summerTo;
    out.push(day + (summer ? 7 : 8) * hour);
  }
  return out;
}
