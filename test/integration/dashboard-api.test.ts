// The routes a dashboard reads, as a client meets them over curl (HTTP/1.1 and HTTP/2 with prior
// knowledge) and, for the event stream, as a page reads it (fetch() with the Authorization
// header): one real `fermata serve` with a bearer token for the whole file, timers delivered to a
// loopback sink (some answered 200, some 500 so they fail and retry). The last test stops it.
// Every wait is bounded.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { after, before, describe, test } from 'node:test';
import { type Service, startService } from '../helpers/service.ts';
import { testScratch } from '../helpers/scratch.ts';
import { curlRequest, json, type CurlAnswer, type CurlProtocol } from '../helpers/curl.ts';
import { type Sink, startH2Sink } from '../helpers/sinks.ts';
import { skipUnlessTool } from '../helpers/tools.ts';
import { withTimeout } from '../helpers/timeout.ts';

const scratch = testScratch('dashboard-api');
const token = 'dashboard-api-test-token';
const auth = { authorization: `Bearer ${token}` };

/** One server-sent event. */
interface StreamEvent {
  readonly event: string;
  readonly data: Record<string, unknown>;
}

/** Reads events off a `text/event-stream` body as they come. */
class EventReader {
  readonly events: StreamEvent[] = [];
  #text = '';
  #waiters: Array<() => void> = [];

  push(chunk: string): void {
    this.#text += chunk;
    for (let end = this.#text.indexOf('\n\n'); end >= 0; end = this.#text.indexOf('\n\n')) {
      const block = this.#text.slice(0, end);
      this.#text = this.#text.slice(end + 2);
      const event = /^event: (.*)$/m.exec(block)?.[1];
      const data = /^data: (.*)$/m.exec(block)?.[1];
      if (event !== undefined && data !== undefined) this.events.push({ event, data: JSON.parse(data) as Record<string, unknown> });
    }
    for (const wake of this.#waiters.splice(0)) wake();
  }

  /** The first event (from `from` on) that `match` takes, waiting for it (bounded). */
  async next(match: (event: StreamEvent) => boolean, what: string, from = 0): Promise<StreamEvent> {
    return withTimeout(
      (async () => {
        for (;;) {
          const found = this.events.slice(from).find(match);
          if (found !== undefined) return found;
          await new Promise<void>((resolve) => this.#waiters.push(resolve));
        }
      })(),
      15_000,
      what,
    );
  }
}

interface Series {
  interval_ms: number;
  samples_max: number;
  wal_last_sync_at_ms: number | null;
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
    curlRequest({ url: `${service.url}${path}`, method, protocol: options.protocol ?? 'http1.1', ...(options.body === undefined ? {} : { body: options.body }), headers: { ...auth, ...options.headers } });

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
    service = await startService(scratch.tempDir('data'), (child) => scratch.children.add(child), { env: { FERMATA_TOKENS: token } });
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
    const lastSync = series.wal_last_sync_at_ms as number;
    assert.ok(series.at_ms.includes(lastSync), 'the adds were synced: the last sync is a sample\'s time');
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
    const refused = await call('GET', '/v1/stats/due-histogram?bucket=hour');
    assert.deepEqual([refused.status, json<{ error: { field: string } }>(refused).error.field], [400, 'bucket']);
  });

  test('GET /v1/events read with fetch() and the token: counters at once and each second, a watched timer\'s changes', async () => {
    const added = json<{ id: string }>(await call('POST', '/v1/timers', { body: JSON.stringify({ delay_ms: 1500, target: `${sink.url}/ok` }) }));
    const controller = new AbortController();
    const response = await fetch(`${service.url}/v1/events?watch=${added.id}`, { headers: auth, signal: AbortSignal.any([controller.signal, AbortSignal.timeout(30_000)]) });
    assert.equal(response.status, 200);
    assert.match(response.headers.get('content-type') ?? '', /^text\/event-stream/);
    const reader = new EventReader();
    const body = response.body as ReadableStream<Uint8Array>;
    const decoder = new TextDecoder();
    const reading = (async () => {
      for await (const chunk of body) reader.push(decoder.decode(chunk, { stream: true }));
    })().catch(() => undefined);
    const first = await reader.next((event) => event.event === 'counters', 'the first counters');
    assert.equal(typeof (first.data.stats as { pending: number }).pending, 'number');
    const watched = await reader.next((event) => event.event === 'timer', 'the watched timer');
    assert.deepEqual([watched.data.id, watched.data.state, watched.data.revision], [added.id, 'pending', 1]);
    const delivered = await reader.next((event) => event.event === 'timer' && event.data.state === 'delivered', 'the timer delivered');
    assert.equal(delivered.data.attempts, 1);
    // Once a second: a sample with its figures, taken after the one before.
    const sampled = reader.events.filter((event) => event.event === 'counters' && event.data.sample !== null).length;
    const later = await reader.next((event) => event.event === 'counters' && event.data.sample !== null, 'a later sample', reader.events.length);
    assert.ok(sampled >= 1 && typeof (later.data.sample as { at_ms: number }).at_ms === 'number');
    controller.abort();
    await reading;
  });

  test('GET /v1/events: the token is needed, an unknown watched id is 404, an unknown parameter 400, past the limit 429', async () => {
    assert.equal((await curlRequest({ url: `${service.url}/v1/events` })).status, 401);
    const unknown = await call('GET', '/v1/events?watch=0000000004000001m8vgw5r0');
    assert.deepEqual([unknown.status, json<{ error: { code: string; field: string } }>(unknown).error.code], [404, 'NOT_FOUND']);
    assert.equal((await call('GET', '/v1/events?wach=1')).status, 400);
    // Fill every place (64), over one HTTP/1.1 connection each; the next is refused with 429.
    const controller = new AbortController();
    const open = await Promise.all(Array.from({ length: 64 }, () => fetch(`${service.url}/v1/events`, { headers: auth, signal: controller.signal })));
    assert.ok(open.every((response) => response.status === 200));
    const refused = await call('GET', '/v1/events', { protocol: 'http2' });
    assert.deepEqual([refused.status, json<{ error: { code: string } }>(refused).error.code], [429, 'EVENT_STREAMS_FULL']);
    controller.abort();
    // A place comes free once a stream is closed: a stream that opens runs until curl's --max-time (1 s).
    await withTimeout(
      (async () => {
        for (;;) {
          const answer = await curlRequest({ url: `${service.url}/v1/events`, headers: auth, timeoutMs: 1000 }).catch(() => 'streamed' as const);
          if (answer === 'streamed') return;
          assert.equal(answer.status, 429);
          await new Promise((resolve) => setTimeout(resolve, 100));
        }
      })(),
      15_000,
      'a place for a stream again',
    );
  });

  test('POST /v1/dead/retry: redrives the dead timers the list\'s filter names, answering how many', async () => {
    await call('PUT', '/v1/queues/once', { body: JSON.stringify({ max_attempts: 1 }) });
    await call('PUT', '/v1/queues/once-other', { body: JSON.stringify({ max_attempts: 1 }) });
    const lines = [...Array.from({ length: 3 }, () => ({ delay_ms: 0, target: `${sink.url}/fail`, queue: 'once' })), { delay_ms: 0, target: `${sink.url}/fail`, queue: 'once-other' }];
    await call('POST', '/v1/timers', { body: lines.map((line) => JSON.stringify(line)).join('\n'), headers: { 'content-type': 'application/x-ndjson' } });
    interface DeadList { dead: Array<{ id: string; attempts: number }> }
    await until<DeadList>('/v1/dead?queue=once', (body) => body.dead.length === 3, 'three dead in queue once');
    await until<DeadList>('/v1/dead?queue=once-other', (body) => body.dead.length === 1, 'one dead in queue once-other');
    const failuresBefore = sink.to('/fail').length;
    const answer = await call('POST', '/v1/dead/retry', { body: JSON.stringify({ queue: 'once' }), protocol: 'http2' });
    assert.equal(answer.status, 200);
    assert.deepEqual(json(answer), { redriven: 3, more: false });
    // Sent round again (and dead again: one attempt each), the other queue's left alone.
    await withTimeout(
      (async () => {
        while (sink.to('/fail').length < failuresBefore + 3) await new Promise((resolve) => setTimeout(resolve, 100));
      })(),
      15_000,
      'the three redriven timers sent again',
    );
    assert.equal(json<DeadList>(await call('GET', '/v1/dead?queue=once-other')).dead.length, 1);
    for (const [body, field] of [['{"queue": "once", "limit": 5}', 'limit'], ['{"queue": 7}', 'queue']] as const) {
      const refused = await call('POST', '/v1/dead/retry', { body });
      assert.deepEqual([refused.status, json<{ error: { code: string; field: string } }>(refused).error.field], [400, field]);
    }
    assert.equal((await call('POST', '/v1/dead/retry', { body: '[]' })).status, 400);
  });

  test('GET /v1/queues: each queue\'s waiting and in-flight timers and its delivery rate', async () => {
    await call('PUT', '/v1/queues/counted', { body: '{}' });
    assert.equal((await call('POST', '/v1/queues/counted/pause')).status, 200);
    const lines = [...Array.from({ length: 4 }, () => ({ delay_ms: 0, target: `${sink.url}/ok`, queue: 'counted' })), { delay_ms: 3_600_000, target: `${sink.url}/ok`, queue: 'counted' }];
    await call('POST', '/v1/timers', { body: lines.map((line) => JSON.stringify(line)).join('\n'), headers: { 'content-type': 'application/x-ndjson' } });
    interface Listed { name: string; paused: boolean; pending: number; in_flight: number; delivered_per_s: number }
    const listed = (await until<{ queues: Listed[] }>('/v1/queues', () => true, 'the queues')).queues.find((queue) => queue.name === 'counted');
    assert.deepEqual([listed?.paused, listed?.pending, listed?.in_flight, listed?.delivered_per_s], [true, 5, 0, 0]);
    // Resumed: the four due ones go out; the queue's rate shows them.
    assert.equal((await call('POST', '/v1/queues/counted/resume')).status, 200);
    const after = await until<{ queues: Listed[] }>('/v1/queues', (body) => (body.queues.find((queue) => queue.name === 'counted')?.delivered_per_s ?? 0) > 0, 'the deliveries in the rate');
    const counted = after.queues.find((queue) => queue.name === 'counted');
    assert.deepEqual([counted?.pending, counted?.in_flight], [1, 0]);
    assert.ok((counted?.delivered_per_s ?? 0) <= 4, 'four deliveries over the last minute');
  });

  test('a stop ends every event stream cleanly, HTTP/1.1 and HTTP/2 alike, without waiting for the drain timeout', async () => {
    const readers = (['--http1.1', '--http2-prior-knowledge'] as const).map((flag) => {
      const child = spawn('curl', ['-sSN', flag, '-H', `authorization: Bearer ${token}`, '--max-time', '60', `${service.url}/v1/events`], { stdio: ['ignore', 'pipe', 'pipe'] });
      scratch.children.add(child);
      const reader = new EventReader();
      child.stdout.setEncoding('utf8').on('data', (chunk: string) => reader.push(chunk));
      return { child, reader, exited: once(child, 'exit') as Promise<[number | null, string | null]> };
    });
    for (const { reader } of readers) await reader.next((event) => event.event === 'counters', 'a stream open');
    const stoppedAt = Date.now();
    service.child.kill('SIGTERM');
    for (const { exited } of readers) {
      const [code] = await withTimeout(exited, 10_000, 'curl to see the stream end');
      assert.equal(code, 0, 'the stream ended cleanly (curl exits 0, not 18 or 28)');
    }
    await withTimeout(service.exited, 10_000, 'the service to stop');
    assert.equal(service.child.exitCode, 0);
    assert.ok(Date.now() - stoppedAt < 8_000, 'not held up until the drain timeout');
  });
});
