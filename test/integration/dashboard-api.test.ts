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
    await call('PUT', '/v1/queues/slow', { body: JSON.stringify({ max_attempts: 2, min_backoff_ms: 600_000 }) });
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

  test('GET /v1/stats/due-histogram: waiting timers by when they are next due, held ones too, over both protocols', async () => {
    await call('PUT', '/v1/queues/held', { body: '{}' });
    assert.equal((await call('POST', '/v1/queues/held/pause')).status, 200);
    const minute = 60_000;
    const lines = [
      { delay_ms: 0, target: `${sink.url}/ok`, queue: 'held' }, // due now, held by the pause: the next minute
      { delay_ms: 30 * minute, target: `${sink.url}/ok` },
      { delay_ms: 5 * 60 * minute, target: `${sink.url}/ok` },
      { delay_ms: 10 * 24 * 60 * minute, target: `${sink.url}/ok` },
      { delay_ms: 60 * 24 * 60 * minute, target: `${sink.url}/ok` },
    ];
    const before = json<{ buckets: Array<{ count: number }> }>(await call('GET', '/v1/stats/due-histogram'));
    assert.equal((await call('POST', '/v1/timers', { body: lines.map((line) => JSON.stringify(line)).join('\n'), headers: { 'content-type': 'application/x-ndjson' } })).status, 201);
    for (const protocol of ['http1.1', 'http2'] as const) {
      const answer = await call('GET', '/v1/stats/due-histogram', { protocol });
      assert.equal(answer.status, 200);
      const histogram = json<{ now_ms: number; buckets: Array<{ name: string; until: string | null; until_ms: number | null; count: number }>; total: number; resident: number; spilled: number }>(answer);
      assert.deepEqual(histogram.buckets.map((bucket) => bucket.name), ['minute', 'hour', 'day', 'month', 'beyond']);
      assert.deepEqual(
        histogram.buckets.map((bucket, k) => bucket.count - (before.buckets[k]?.count ?? 0)),
        [1, 1, 1, 1, 1],
      );
      const spans = [minute, 60 * minute, 24 * 60 * minute, 30 * 24 * 60 * minute];
      histogram.buckets.slice(0, 4).forEach((bucket, k) => {
        const span = (bucket.until_ms as number) - histogram.now_ms;
        assert.ok(span >= (spans[k] as number) && span <= (spans[k] as number) + minute, `${bucket.name} ends a slot at most after now + its span`);
        assert.equal(new Date(bucket.until as string).getTime(), bucket.until_ms);
      });
      assert.equal(histogram.buckets[4]?.until, null);
      const stats = json<{ pending: number }>(await call('GET', '/v1/stats', { protocol }));
      assert.equal(histogram.total, stats.pending, 'the histogram holds every pending timer');
      assert.equal(histogram.resident + histogram.spilled, histogram.total);
    }
  });
});
