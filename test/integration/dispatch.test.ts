// Delivery end to end: a real engine on a temp data dir, the dispatcher with a real piscina
// worker, and scripted loopback sinks. Each outcome of issue 5 with its attempt count: 2xx,
// 500-then-200, 410, 429 + Retry-After, slow past the timeout, connection reset, GOAWAY with
// streams in flight, an HTTP/1.1-only target; the delivery request byte-exact and signed.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import net from 'node:net';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { tableFromIPC } from 'apache-arrow';
import pino from 'pino';
import { Webhook } from 'standardwebhooks';
import { batchFromSpecs, type TimerSpec } from '../../engine/batch/timer-batch.ts';
import { Engine, systemClock, type TimerView } from '../../engine/engine.ts';
import { Dispatcher } from '../../dispatch/dispatcher.ts';
import { verifyWebhook } from '../../dispatch/signing.ts';
import { type Sink, type SinkScript, startH1Sink, startH2Sink } from '../helpers/sinks.ts';

const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
let dataDir: string;
let engine: Engine;
let dispatcher: Dispatcher;
const sinks: Sink[] = [];

before(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'fermata-dispatch-'));
  engine = await Engine.open({ dataDir });
  // Retries come quickly so the test runs in seconds; the timeout is short for the slow sink.
  await engine.setQueue('t', { max_attempts: 3, min_backoff_ms: 20, max_backoff_ms: 50, timeout_ms: 500 });
  dispatcher = new Dispatcher({ engine, clock: systemClock, logger: pino({ level: 'silent' }), threads: 1, allowLoopback: true, signingSecrets: [secret] });
  dispatcher.start();
});

after(async () => {
  await dispatcher.close();
  await engine.close();
  await Promise.all(sinks.map((sink) => sink.close()));
  rmSync(dataDir, { recursive: true, force: true });
});

async function sink(kind: 'h2' | 'h1', script?: SinkScript): Promise<Sink> {
  const started = kind === 'h2' ? await startH2Sink(script) : await startH1Sink(script);
  sinks.push(started);
  return started;
}

async function add(specs: TimerSpec[]): Promise<string[]> {
  const admitted = await engine.admit(batchFromSpecs(specs));
  return Array.from({ length: specs.length }, (_, row) => admitted.idOf(row));
}

/** Waits (bounded) until the timer reaches a final state, and returns its view. */
async function settled(id: string, ms = 15_000): Promise<TimerView> {
  const deadline = Date.now() + ms;
  for (;;) {
    const view = engine.get(id);
    assert.ok(view !== undefined, `timer ${id} is gone`);
    if (view.state === 'delivered' || view.state === 'dead') return view;
    assert.ok(Date.now() < deadline, `timer ${id} still ${view.state} after ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

const header = (value: string | string[] | undefined): string => (Array.isArray(value) ? (value[0] as string) : (value ?? ''));

test('2xx: delivered once, body byte-exact, with the delivery headers and a valid signature', async () => {
  const target = await sink('h2');
  const payload = new Uint8Array([0, 255, 1, 254, 0x80, 0x0a]); // not UTF-8: delivered byte for byte
  const fireAtMs = Date.now() + 50;
  const [keyed, unkeyed] = await add([
    { fireAtMs, target: `${target.url}/hook?x=1`, payload, headers: { 'x-tenant': 'acme', 'content-type': 'application/json' }, key: 'order-7', queue: 't' },
    { fireAtMs, target: `${target.url}/plain`, payload: '{"event":"trial_end"}', queue: 't' },
  ]) as [string, string];
  assert.equal((await settled(keyed)).attempts, 1);
  assert.equal((await settled(unkeyed)).state, 'delivered');

  const [request] = target.to('/hook?x=1');
  assert.ok(request !== undefined && target.to('/hook?x=1').length === 1, 'delivered once');
  assert.deepEqual(new Uint8Array(request.body), payload);
  assert.ok(request.atMs >= fireAtMs, 'never early');
  assert.equal(header(request.headers['x-tenant']), 'acme');
  assert.equal(header(request.headers['content-type']), 'application/json');
  assert.equal(header(request.headers['fermata-timer-id']), keyed);
  assert.equal(header(request.headers['fermata-attempt']), '1');
  assert.equal(header(request.headers['fermata-fire-at']), String(fireAtMs));
  assert.equal(header(request.headers['idempotency-key']), 'order-7');
  assert.equal(header(request.headers['webhook-id']), keyed);
  assert.equal(verifyWebhook(secret, request.headers, new Uint8Array(request.body), { toleranceS: 300, nowMs: Date.now() }), 'valid');
  // The reference TypeScript library (standardwebhooks, which no one here wrote) agrees.
  const jsonRequest = target.to('/plain')[0];
  assert.ok(jsonRequest !== undefined);
  const stringHeaders = Object.fromEntries(Object.entries(jsonRequest.headers).map(([name, value]) => [name, header(value)]));
  assert.doesNotThrow(() => new Webhook(secret).verify(jsonRequest.body.toString('utf8'), stringHeaders));
  assert.throws(() => new Webhook(secret).verify('tampered', stringHeaders));

  const [plain] = target.to('/plain');
  assert.equal(header(plain?.headers['idempotency-key']), unkeyed, 'without a key, the id is the idempotency key');
  assert.equal(header(plain?.headers['content-type']), 'application/octet-stream');
  assert.equal(target.connections, 1, 'one HTTP/2 connection carries both');
});

test('500 then 200: retried after backoff, delivered on attempt 2 with the same idempotency key', async () => {
  const target = await sink('h2', (_path, nth) => ({ status: nth === 0 ? 500 : 204 }));
  const [id] = (await add([{ fireAtMs: Date.now(), target: `${target.url}/flaky`, queue: 't' }])) as [string];
  const view = await settled(id);
  assert.equal(view.state, 'delivered');
  assert.equal(view.attempts, 2);
  assert.equal(view.lastStatus, 204);
  const [first, second] = target.to('/flaky');
  assert.deepEqual([header(first?.headers['fermata-attempt']), header(second?.headers['fermata-attempt'])], ['1', '2']);
  assert.equal(header(first?.headers['idempotency-key']), header(second?.headers['idempotency-key']));
  assert.ok((second?.atMs ?? 0) - (first?.atMs ?? 0) >= 20, 'not before min_backoff_ms');
});

test('release lateness: recorded for first attempts only, each no later than its delivery start', async () => {
  dispatcher.lateness.reset();
  dispatcher.releaseLateness.reset();
  const target = await sink('h2', (path, nth) => ({ status: path === '/flaky-once' && nth === 0 ? 500 : 204 }));
  const fireAtMs = Date.now() + 30;
  const [flaky, steady] = (await add([
    { fireAtMs, target: `${target.url}/flaky-once`, queue: 't' },
    { fireAtMs, target: `${target.url}/steady`, queue: 't' },
  ])) as [string, string];
  assert.equal((await settled(flaky)).attempts, 2);
  assert.equal((await settled(steady)).attempts, 1);
  assert.equal(dispatcher.releaseLateness.totalCount, 2, 'two first attempts: the retry is not one');
  assert.equal(dispatcher.lateness.totalCount, 2);
  assert.ok(dispatcher.releaseLateness.maxValue <= dispatcher.lateness.maxValue, 'a timer is released before its delivery starts');
});

test('410: dead at once, listed with reason gone, and redrivable', async () => {
  let gone = true;
  const target = await sink('h2', () => ({ status: gone ? 410 : 200 }));
  const [id] = (await add([{ fireAtMs: Date.now(), target: `${target.url}/gone`, queue: 't' }])) as [string];
  const view = await settled(id);
  assert.equal(view.state, 'dead');
  assert.equal(view.attempts, 1);
  assert.equal(engine.listDead(1000).find((dead) => dead.id === id)?.reason, 'gone');
  gone = false;
  assert.equal(await engine.redrive(id), 'redriven');
  const again = await settled(id);
  assert.equal(again.state, 'delivered');
  assert.equal(target.to('/gone').length, 2);
});

test('429 with Retry-After: the next attempt waits at least that long', async () => {
  const target = await sink('h2', (_path, nth) => (nth === 0 ? { status: 429, headers: { 'retry-after': '1' } } : { status: 200 }));
  const [id] = (await add([{ fireAtMs: Date.now(), target: `${target.url}/busy`, queue: 't' }])) as [string];
  assert.equal((await settled(id)).attempts, 2);
  const [first, second] = target.to('/busy');
  assert.ok((second?.atMs ?? 0) - (first?.atMs ?? 0) >= 1000, `Retry-After: 1 honoured (waited ${(second?.atMs ?? 0) - (first?.atMs ?? 0)} ms)`);
});

test('a target slower than the queue timeout: every attempt times out, then dead after max_attempts', async () => {
  const target = await sink('h2', () => ({ hang: true }));
  const [id] = (await add([{ fireAtMs: Date.now(), target: `${target.url}/slow`, queue: 't' }])) as [string];
  const view = await settled(id);
  assert.equal(view.state, 'dead');
  assert.equal(view.attempts, 3);
  assert.equal(view.lastStatus, null);
  assert.equal(engine.listDead(1000).find((dead) => dead.id === id)?.reason, 'attempts_exhausted');
  assert.equal(target.to('/slow').length, 3);
});

test('connection reset: the attempt fails and the next one is delivered', async () => {
  const target = await sink('h2', (_path, nth) => (nth === 0 ? { reset: true } : { status: 200 }));
  const [id] = (await add([{ fireAtMs: Date.now(), target: `${target.url}/reset`, queue: 't' }])) as [string];
  const view = await settled(id);
  assert.equal(view.state, 'delivered');
  assert.equal(view.attempts, 2);
});

test('GOAWAY with streams in flight: the unanswered ones are retried, each timer delivered', async () => {
  let goneAway = false;
  const target = await sink('h2', (path, nth) => {
    if (path === '/batch/5' && nth === 0 && !goneAway) {
      goneAway = true;
      return { goaway: true };
    }
    return { status: 200 };
  });
  const ids = await add(Array.from({ length: 20 }, (_, i) => ({ fireAtMs: Date.now(), target: `${target.url}/batch/${i}`, queue: 't' })));
  const views = await Promise.all(ids.map((id) => settled(id)));
  assert.ok(views.every((view) => view.state === 'delivered'));
  assert.ok(goneAway);
  assert.ok(views.some((view) => view.attempts === 2), 'the stream caught by GOAWAY was attempted again');
  for (let i = 0; i < 20; i++) assert.ok(target.to(`/batch/${i}`).length >= 1);
});

test('an HTTP/1.1-only target is detected and delivered to over HTTP/1.1', async () => {
  const target = await sink('h1', () => ({ status: 201 }));
  const ids = await add(Array.from({ length: 5 }, (_, i) => ({ fireAtMs: Date.now(), target: `${target.url}/h1/${i}`, payload: `p${i}`, queue: 't' })));
  for (const id of ids) {
    const view = await settled(id);
    assert.equal(view.state, 'delivered');
    assert.equal(view.attempts, 1, 'falling back to HTTP/1.1 costs no attempt');
  }
  assert.equal(target.to('/h1/3')[0]?.body.toString(), 'p3');
});

test('"arrow" delivery: due timers go to the sink as Arrow record batches of at most batch_rows_max rows; one answer settles a batch', async () => {
  let failFirst = true;
  const target = await sink('h2', (path) => {
    if (path !== '/ingest') return { status: 404 };
    if (failFirst) {
      failFirst = false;
      return { status: 503 };
    }
    return { status: 200 };
  });
  await engine.setQueue('pipe', { delivery: 'arrow', sink: `${target.url}/ingest`, batch_rows_max: 50, linger_ms: 30, min_backoff_ms: 20, max_backoff_ms: 50 });
  const fireAtMs = Date.now();
  const specs = Array.from({ length: 120 }, (_, i) => ({
    fireAtMs,
    target: 'https://unused.example/',
    payload: new Uint8Array([i, 0, 255]),
    ...(i % 2 === 0 ? { key: `k${i}` } : {}),
    queue: 'pipe',
  }));
  const ids = await add(specs);
  const views = await Promise.all(ids.map((id) => settled(id)));
  assert.ok(views.every((view) => view.state === 'delivered'));

  const batches = target.to('/ingest');
  const rowsById = new Map<string, { attempt: number; payload: Uint8Array; key: string | null; fireAt: number }>();
  for (const request of batches) {
    assert.equal(header(request.headers['content-type']), 'application/vnd.apache.arrow.stream');
    const table = tableFromIPC(request.body);
    assert.ok(table.numRows <= 50, 'batch_rows_max');
    assert.equal(header(request.headers['fermata-batch-rows']), String(table.numRows));
    assert.equal(verifyWebhook(secret, request.headers, new Uint8Array(request.body), { toleranceS: 300, nowMs: Date.now() }), 'valid');
    assert.deepEqual(table.schema.fields.map((field) => field.name), ['id', 'fire_at', 'attempt', 'target', 'key', 'payload', 'headers']);
    for (let row = 0; row < table.numRows; row++) {
      const id = String(table.getChild('id')?.get(row));
      rowsById.set(id, {
        attempt: Number(table.getChild('attempt')?.get(row)),
        payload: table.getChild('payload')?.get(row) as Uint8Array,
        key: (table.getChild('key')?.get(row) as string | null) ?? null,
        fireAt: Number(table.getChild('fire_at')?.get(row)),
      });
    }
  }
  assert.ok(batches.length >= 4, `120 rows in batches of ≤ 50, one of them refused and sent again (${batches.length} batches)`);
  ids.forEach((id, i) => {
    const row = rowsById.get(id);
    assert.ok(row !== undefined, `${id} never reached the sink`);
    assert.deepEqual(Array.from(row.payload), [i, 0, 255]);
    assert.equal(row.key, i % 2 === 0 ? `k${i}` : null);
    assert.equal(row.fireAt, fireAtMs);
  });
  const retried = views.filter((view) => view.attempts === 2).length;
  assert.ok(retried > 0 && retried <= 50, `the refused batch's rows (and only they) took a second attempt: ${retried}`);
});

test('"arrow" delivery: the batch\'s one answer is each row\'s, under its queue\'s policy: 429 + Retry-After waits, 410 is dead at once', async () => {
  const target = await sink('h2', (path, nth) => {
    if (path === '/busy') return nth === 0 ? { status: 429, headers: { 'retry-after': '1' } } : { status: 200 };
    return { status: 410 };
  });
  // Its own backoff is 50–100 ms: only Retry-After makes the second POST wait a second.
  await engine.setQueue('busy', { delivery: 'arrow', sink: `${target.url}/busy`, batch_rows_max: 20, linger_ms: 5, min_backoff_ms: 50, max_backoff_ms: 100 });
  await engine.setQueue('gone', { delivery: 'arrow', sink: `${target.url}/gone`, batch_rows_max: 20, linger_ms: 5 });
  const specs = (queue: string) => Array.from({ length: 20 }, (_, i) => ({ fireAtMs: Date.now(), target: 'https://unused.example/', payload: `p${i}`, queue }));
  const busy = await add(specs('busy'));
  const gone = await add(specs('gone'));
  for (const id of gone) {
    const view = await settled(id);
    assert.equal(view.state, 'dead');
    assert.equal(view.attempts, 1);
    assert.equal(view.lastStatus, 410);
    assert.equal(engine.listDead(1000).find((dead) => dead.id === id)?.reason, 'gone');
  }
  for (const id of busy) {
    const view = await settled(id);
    assert.equal(view.state, 'delivered');
    assert.equal(view.attempts, 2);
  }
  const [first, second] = target.to('/busy');
  assert.equal(target.to('/busy').length, 2, 'one batch, refused once, sent again whole');
  assert.ok((second?.atMs ?? 0) - (first?.atMs ?? 0) >= 1000, `Retry-After: 1 honoured for every row (waited ${(second?.atMs ?? 0) - (first?.atMs ?? 0)} ms)`);
});

test('content-type-twice: a timer\'s Content-Type (any case) replaces the default over HTTP/2 instead of doubling it', async () => {
  const target = await sink('h2');
  const [id] = (await add([{ fireAtMs: Date.now(), target: `${target.url}/typed`, payload: '{}', headers: { 'Content-Type': 'application/json' }, queue: 't' }])) as [string];
  const view = await settled(id);
  assert.equal(view.state, 'delivered');
  assert.equal(view.attempts, 1);
  assert.equal(header(target.to('/typed')[0]?.headers['content-type']), 'application/json');
});

test('odd-status-fails-one: a target answering a status outside 100-599 fails its own timer only; the task\'s others are delivered once', async () => {
  // A raw HTTP/1.1 server answering "099": Node's parser reports status 99.
  const odd = net.createServer((socket) => {
    socket.once('data', () => socket.end('HTTP/1.1 099 Odd\r\ncontent-length: 0\r\nconnection: close\r\n\r\n'));
  });
  odd.listen(0, '127.0.0.1');
  await once(odd, 'listening');
  try {
    const good = await sink('h2');
    const oddUrl = `http://127.0.0.1:${(odd.address() as net.AddressInfo).port}/odd`;
    const ids = await add([...Array.from({ length: 5 }, (_, i) => ({ fireAtMs: Date.now(), target: `${good.url}/fine/${i}`, queue: 't' })), { fireAtMs: Date.now(), target: oddUrl, queue: 't' }]);
    const views = await Promise.all(ids.map((id) => settled(id)));
    assert.deepEqual(views.slice(0, 5).map((view) => [view.state, view.attempts]), Array(5).fill(['delivered', 1]));
    for (let i = 0; i < 5; i++) assert.equal(good.to(`/fine/${i}`).length, 1, 'delivered once');
    assert.equal(views[5]?.state, 'dead');
    assert.equal(views[5]?.lastStatus, null, 'a broken answer is not recorded as a status');
  } finally {
    odd.close();
  }
});
