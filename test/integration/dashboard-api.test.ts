// The routes a dashboard reads, as a client meets them over curl (HTTP/1.1 and HTTP/2 with prior
// knowledge): one real `fermata serve` for the whole file, timers delivered to a loopback sink
// (some answered 200, some 500 so they fail and retry). Every wait is bounded.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { type Service, startService } from '../helpers/service.ts';
import { testScratch } from '../helpers/scratch.ts';
import { curlRequest, json, type CurlAnswer, type CurlProtocol } from '../helpers/curl.ts';
import { type Sink, startH2Sink } from '../helpers/sinks.ts';
import { skipUnlessTool } from '../helpers/tools.ts';
import { withTimeout } from '../helpers/timeout.ts';

const scratch = testScratch('dashboard-api');

interface Series {
  interval_ms: number;
  samples_max: number;
  at_ms: number[];
  adds: number[];
  deliveries: number[];
  failures: number[];
  lateness_ms: { p50: Array<number | null>; p99: Array<number | null>; max: Array<number | null> };
}

const sum = (values: readonly number[]): number => values.reduce((a, b) => a + b, 0);

describe('the dashboard\'s API over curl', { skip: skipUnlessTool('curl'), timeout: 90_000 }, () => {
  let service: Service;
  let sink: Sink;
  const call = (method: string, path: string, options: { body?: string; protocol?: CurlProtocol; headers?: Record<string, string> } = {}): Promise<CurlAnswer> =>
    curlRequest({ url: `${service.url}${path}`, method, protocol: options.protocol ?? 'http1.1', ...(options.body === undefined ? {} : { body: options.body }), headers: options.headers ?? {} });

  /** Asks `path` until `done` holds for its JSON answer (bounded). */
  async function until<T>(path: string, done: (body: T) => boolean, what: string): Promise<T> {
    return withTimeout(
      (async () => {
        for (;;) {
          const body = json<T>(await call('GET', path));
          if (done(body)) return body;
          await new Promise((resolve) => setTimeout(resolve, 200));
        }
      })(),
      20_000,
      what,
    );
  }

  before(async () => {
    sink = await startH2Sink((path) => (path === '/fail' ? { status: 500 } : { status: 200 }));
    service = await startService(scratch.tempDir('data'), (child) => scratch.children.add(child));
    await call('PUT', '/v1/queues/slow', { body: JSON.stringify({ max_attempts: 2, min_backoff_ms: 60_000 }) });
  });

  after(async () => {
    service?.child.kill('SIGTERM');
    await sink?.close();
  });

  test('GET /v1/stats/series: adds, deliveries, failures and lateness a second, over both protocols', async () => {
    const lines = [...Array.from({ length: 5 }, () => ({ delay_ms: 0, target: `${sink.url}/ok` })), { delay_ms: 0, target: `${sink.url}/fail`, queue: 'slow' }];
    const added = await call('POST', '/v1/timers', { body: lines.map((line) => JSON.stringify(line)).join('\n'), headers: { 'content-type': 'application/x-ndjson' } });
    assert.equal(added.status, 201);
    const series = await until<Series>('/v1/stats/series', (body) => sum(body.deliveries) >= 5 && sum(body.failures) >= 1, 'the deliveries and the failure in the series');
    assert.equal(series.interval_ms, 1000);
    assert.equal(series.samples_max, 900);
    assert.ok(sum(series.adds) >= 6, `adds ${series.adds}`);
    const n = series.at_ms.length;
    for (const column of [series.adds, series.deliveries, series.failures, series.lateness_ms.p50, series.lateness_ms.p99, series.lateness_ms.max]) assert.equal(column.length, n);
    for (let i = 1; i < n; i++) assert.ok((series.at_ms[i] as number) > (series.at_ms[i - 1] as number), 'oldest first');
    const withLateness = series.lateness_ms.max.findIndex((max) => max !== null);
    assert.ok(withLateness >= 0, 'a second with first attempts has their lateness');
    assert.ok((series.lateness_ms.p50[withLateness] as number) <= (series.lateness_ms.max[withLateness] as number), JSON.stringify(series.lateness_ms));
    // after_ms: only what came later; the same over HTTP/2.
    const last = series.at_ms[n - 1] as number;
    const later = json<Series>(await call('GET', `/v1/stats/series?after_ms=${last}`, { protocol: 'http2' }));
    assert.ok(later.at_ms.every((at) => at > last));
    const bad = await call('GET', '/v1/stats/series?after_ms=soon');
    assert.equal(bad.status, 400);
    assert.equal(json<{ error: { code: string } }>(bad).error.code, 'REQUEST_INVALID');
  });
});
