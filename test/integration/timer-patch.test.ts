// PATCH /v1/timers/{id} and revisions as a client meets them: the real `fermata serve` on port
// 0, spoken to with curl over HTTP/1.1 and over HTTP/2 with prior knowledge, the same checks on
// both (pass and refuse cases); callbacks set and removed by PATCH, with the timer delivered to a
// loopback sink and the callback's summary arriving at a loopback receiver; then kill -9 and a
// restart on the same data directory, and the acknowledged PATCHes are still there. Every wait
// is bounded; the child is killed in `after`.
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import { curl, type CurlAnswer, curlRequest, curlWithoutHttp2, json, text } from '../helpers/curl.ts';
import { type Service, startService } from '../helpers/service.ts';
import { type Sink, startH1Sink } from '../helpers/sinks.ts';
import { withTimeout } from '../helpers/timeout.ts';
import { skipOrFail, toolOrSkip } from '../helpers/tools.ts';

const target = 'https://hooks.example.com/fire';
const hour = 3_600_000;
const children = new Set<ChildProcess>();
const dataDir = mkdtempSync(join(tmpdir(), 'fermata-patch-'));

after(() => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  rmSync(dataDir, { recursive: true, force: true });
});

interface PatchAnswer extends CurlAnswer {
  /** The body as JSON; {} when there is none. */
  readonly json: Record<string, unknown>;
}

/** One request with curl; `protocol` picks HTTP/1.1 or HTTP/2 with prior knowledge. */
async function request(protocol: '1.1' | '2', url: string, method: string, body?: unknown, headers: Record<string, string> = {}): Promise<PatchAnswer> {
  const sent = body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) };
  const answer = await curlRequest({ protocol: protocol === '2' ? 'http2' : 'http1.1', method, url, headers, timeoutMs: 5_000, ...sent });
  return { ...answer, json: answer.body.length === 0 ? {} : json(answer) };
}

const errorOf = (answer: PatchAnswer): { code: string; message: string; field?: string } => answer.json.error as { code: string; message: string; field?: string };

let service: Service;
/** Where patched timers with callbacks are delivered (200 to all), and where their callbacks arrive. */
let sink: Sink;
let receiver: Sink;

before(async () => {
  service = await startService(dataDir, (child) => children.add(child));
  sink = await startH1Sink();
  receiver = await startH1Sink();
  const pulled = await request('1.1', `${service.url}/v1/queues/pulled`, 'PUT', { delivery: 'pull' });
  assert.equal(pulled.status, 200);
});

after(() => Promise.all([sink.close(), receiver.close()]));

/** `probe` until it gives a value, for at most `ms`. */
async function until<T>(what: string, probe: () => T | undefined, ms = 15_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = probe();
    if (value !== undefined) return value;
    assert.ok(Date.now() < deadline, `${what} did not happen in ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

for (const protocol of ['1.1', '2'] as const) {
  describe(`over HTTP/${protocol} (curl)`, () => {
    const call = (method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<PatchAnswer> => request(protocol, `${service.url}${path}`, method, body, headers);

    test('add answers revision 1, GET an ETag; PATCH with If-Match moves the fire time and bumps the revision', async (t) => {
      if (toolOrSkip(t, 'curl') === undefined) return;
      if (protocol === '2' && !curl.http2) return skipOrFail(t, curlWithoutHttp2);
      const added = await call('POST', '/v1/timers', { delay_ms: hour, target, payload: 'one', key: `patch-${protocol}` });
      assert.equal(added.status, 201);
      assert.equal(added.httpVersion, protocol);
      assert.equal(added.json.revision, 1);
      const id = added.json.id as string;
      const got = await call('GET', `/v1/timers/${id}`);
      assert.equal(got.headers.etag, '"1"');
      assert.equal(got.json.revision, 1);
      const fireAt = new Date(Date.parse(got.json.fire_at as string) + hour).toISOString();
      const patched = await call('PATCH', `/v1/timers/${id}`, { fire_at: fireAt }, { 'if-match': '"1"' });
      assert.equal(patched.status, 200);
      assert.equal(patched.headers.etag, '"2"');
      assert.equal(patched.json.revision, 2);
      assert.equal(patched.json.id, id, 'the id stays');
      assert.equal(patched.json.fire_at, fireAt);
      assert.equal(patched.json.state, 'pending');
      // The key still names it: a retried add answers the timer as it is now.
      const again = await call('POST', '/v1/timers', { delay_ms: hour, target, payload: 'one', key: `patch-${protocol}` });
      assert.equal(again.status, 200);
      assert.equal(again.json.id, id);
      assert.equal(again.json.revision, 2);
      assert.equal(again.json.fire_at, fireAt);
      // Compare-and-set: the revision it named is gone; a weak tag never matches.
      const stale = await call('PATCH', `/v1/timers/${id}`, { delay_ms: 5 * hour }, { 'if-match': '"1"' });
      assert.equal(stale.status, 412);
      assert.equal(errorOf(stale).code, 'REVISION_MISMATCH');
      const weak = await call('PATCH', `/v1/timers/${id}`, { delay_ms: 5 * hour }, { 'if-match': 'W/"2"' });
      assert.equal(weak.status, 412);
      const listed = await call('PATCH', `/v1/timers/${id}`, { payload: 'two', queue: 'mail', headers: { 'x-a': '1' } }, { 'if-match': '"7", "2"' });
      assert.equal(listed.status, 200);
      assert.equal(listed.json.revision, 3);
      assert.equal(listed.json.queue, 'mail');
      assert.equal(listed.json.fire_at, fireAt, 'fire_at left out keeps its time');
      const any = await call('PATCH', `/v1/timers/${id}`, { delay_ms: 3 * hour }, { 'if-match': '*' });
      assert.equal(any.json.revision, 4);
      const view = await call('GET', `/v1/timers/${id}`);
      assert.equal(view.json.revision, 4);
      assert.equal(view.headers.etag, '"4"');
    });

    test('refusals: bad If-Match, key, unknown or no field, both fire forms, a bad target, an unknown id, a finished timer', async (t) => {
      if (toolOrSkip(t, 'curl') === undefined) return;
      if (protocol === '2' && !curl.http2) return skipOrFail(t, curlWithoutHttp2);
      const added = await call('POST', '/v1/timers', { delay_ms: hour, target });
      const id = added.json.id as string;
      const refused = async (body: unknown, headers: Record<string, string>, status: number, code: string, field?: string): Promise<void> => {
        const answer = await call('PATCH', `/v1/timers/${id}`, body, headers);
        assert.equal(answer.status, status, `${JSON.stringify(body)} ${JSON.stringify(headers)}: ${JSON.stringify(answer.json)}`);
        assert.equal(errorOf(answer).code, code);
        if (field !== undefined) assert.equal(errorOf(answer).field, field);
      };
      await refused({ delay_ms: 1 }, { 'if-match': '1' }, 400, 'REQUEST_INVALID');
      await refused({ delay_ms: 1 }, { 'if-match': '"abc"' }, 400, 'REQUEST_INVALID');
      await refused({ key: 'other' }, {}, 400, 'BATCH_INVALID', 'key');
      await refused({ color: 'red' }, {}, 400, 'BATCH_INVALID', 'color');
      await refused({}, {}, 400, 'BATCH_INVALID');
      await refused({ delay_ms: 1, fire_at: '2030-01-01T00:00:00Z' }, {}, 400, 'BATCH_INVALID', 'delay_ms');
      await refused({ target: 'ftp://example.com/' }, {}, 400, 'BATCH_INVALID', 'target');
      await refused({ fire_at: 'tomorrow' }, {}, 400, 'BATCH_INVALID', 'fire_at');
      await refused({ payload: null }, {}, 400, 'BATCH_INVALID', 'payload');
      const view = await call('GET', `/v1/timers/${id}`);
      assert.equal(view.json.revision, 1, 'nothing half-applied');
      const unknown = await call('PATCH', `/v1/timers/${'0'.repeat(24)}`, { delay_ms: 1 });
      assert.equal(unknown.status, 404);
      const cancelled = await call('DELETE', `/v1/timers/${id}`);
      assert.equal(cancelled.status, 200);
      assert.equal(cancelled.json.revision, 1);
      await refused({ delay_ms: 1 }, {}, 409, 'TIMER_NOT_PENDING');
    });

    test('callbacks: a PATCH sets one (the delivery is followed by the summary), null removes one, a bad URL or a pull queue is 400 naming the field', async (t) => {
      if (toolOrSkip(t, 'curl') === undefined) return;
      if (protocol === '2' && !curl.http2) return skipOrFail(t, curlWithoutHttp2);
      const tag = protocol.replace('.', '');
      const told = await call('POST', '/v1/timers', { delay_ms: hour, target: `${sink.url}/told-${tag}` });
      const toldId = told.json.id as string;
      const set = await call('PATCH', `/v1/timers/${toldId}`, { callback: `${receiver.url}/cb-${tag}` });
      assert.equal(set.status, 200, JSON.stringify(set.json));
      assert.deepEqual([set.json.callback, set.json.failure_callback, set.json.revision], [`${receiver.url}/cb-${tag}`, null, 2]);
      // Refusals change nothing: a bad URL, and a timer with a callback moved to a pull queue.
      const bad = await call('PATCH', `/v1/timers/${toldId}`, { callback: 'ftp://example.com/cb' });
      assert.deepEqual([bad.status, errorOf(bad).code, errorOf(bad).field], [400, 'BATCH_INVALID', 'callback']);
      const badFailure = await call('PATCH', `/v1/timers/${toldId}`, { failure_callback: 'not a url' });
      assert.deepEqual([badFailure.status, errorOf(badFailure).code, errorOf(badFailure).field], [400, 'BATCH_INVALID', 'failure_callback']);
      const pulled = await call('PATCH', `/v1/timers/${toldId}`, { queue: 'pulled' });
      assert.deepEqual([pulled.status, errorOf(pulled).code, errorOf(pulled).field], [400, 'BATCH_INVALID', 'callback']);
      // Due now, with a new payload: the callback stays, and is told of the delivery.
      const due = await call('PATCH', `/v1/timers/${toldId}`, { delay_ms: 0, payload: 'now' }, { 'if-match': '"2"' });
      assert.deepEqual([due.status, due.json.callback, due.json.revision], [200, `${receiver.url}/cb-${tag}`, 3]);
      const summary = await until('the callback', () => receiver.to(`/cb-${tag}`)[0]);
      const body = JSON.parse(summary.body.toString('utf8')) as Record<string, unknown>;
      assert.deepEqual([body.id, body.state, body.status], [toldId, 'delivered', 200]);
      assert.equal(summary.headers['fermata-callback-for'], toldId);
      assert.equal(sink.to(`/told-${tag}`)[0]?.body.toString('utf8'), 'now');
      // Added with a callback, removed by a null: delivered, and nobody is told.
      const quiet = await call('POST', '/v1/timers', { delay_ms: hour, target: `${sink.url}/quiet-${tag}`, callback: `${receiver.url}/quiet-${tag}` });
      const quietId = quiet.json.id as string;
      const removed = await call('PATCH', `/v1/timers/${quietId}`, { callback: null, delay_ms: 0 });
      assert.deepEqual([removed.status, removed.json.callback], [200, null]);
      await until('the delivery', () => sink.to(`/quiet-${tag}`)[0]);
      // Settled: a follow-up would have been made in the same record, due at once.
      for (let tries = 0; (await call('GET', `/v1/timers/${quietId}`)).json.state !== 'delivered'; tries++) {
        assert.ok(tries < 200, 'the quiet timer settles');
        await new Promise((resolve) => setTimeout(resolve, 25));
      }
      // A timer added only now, and its callback after its own delivery: the quiet one's, had it been made, would have come first.
      const later = await call('POST', '/v1/timers', { delay_ms: 0, target: `${sink.url}/after-${tag}`, callback: `${receiver.url}/after-${tag}` });
      assert.equal(later.status, 201);
      await until('a later callback', () => receiver.to(`/after-${tag}`)[0]);
      assert.equal(receiver.to(`/quiet-${tag}`).length, 0, 'no callback for a removed URL');
    });

    test('DELETE with If-Match cancels only at a revision it names: 412 after a PATCH changed it, 400 for a header that does not parse', async (t) => {
      if (toolOrSkip(t, 'curl') === undefined) return;
      if (protocol === '2' && !curl.http2) return skipOrFail(t, curlWithoutHttp2);
      const id = (await call('POST', '/v1/timers', { delay_ms: hour, target })).json.id as string;
      assert.equal((await call('PATCH', `/v1/timers/${id}`, { payload: 'two' })).json.revision, 2);
      for (const [ifMatch, status, code] of [['"1"', 412, 'REVISION_MISMATCH'], ['W/"2"', 412, 'REVISION_MISMATCH'], ['2', 400, 'REQUEST_INVALID']] as const) {
        const refused = await call('DELETE', `/v1/timers/${id}`, undefined, { 'if-match': ifMatch });
        assert.equal(refused.status, status, `If-Match ${ifMatch}: ${JSON.stringify(refused.json)}`);
        assert.equal(errorOf(refused).code, code);
        if (ifMatch.startsWith('W/')) assert.match(errorOf(refused).message, /weak tag/);
      }
      assert.equal((await call('GET', `/v1/timers/${id}`)).json.state, 'pending', 'a refused cancel changed nothing');
      const cancelled = await call('DELETE', `/v1/timers/${id}`, undefined, { 'if-match': '"1", "2"' });
      assert.equal(cancelled.status, 200, JSON.stringify(cancelled.json));
      assert.deepEqual(cancelled.json, { id, state: 'cancelled', revision: 2 });
    });
  });
}

test('batch answers list revisions; after kill -9 and a restart the PATCHed timer is as acknowledged', async (t) => {
  if (toolOrSkip(t, 'curl') === undefined) return;
  const batch = await request('1.1', `${service.url}/v1/timers`, 'POST', undefined, {});
  assert.equal(batch.status, 415);
  const body = `${JSON.stringify({ delay_ms: hour, target, key: 'batch-a' })}\n${JSON.stringify({ delay_ms: hour, target, key: 'batch-b' })}\n`;
  const ndjson = json(await curlRequest({ url: `${service.url}/v1/timers`, body, headers: { 'content-type': 'application/x-ndjson' } }));
  assert.deepEqual(ndjson.revisions, [1, 1]);
  const id = (ndjson.ids as string[])[0] as string;
  const patched = await request('1.1', `${service.url}/v1/timers/${id}`, 'PATCH', { delay_ms: 2 * hour, payload: 'after' });
  assert.equal(patched.json.revision, 2);
  const metrics = text(await curlRequest({ url: `${service.url}/metrics` }));
  assert.match(metrics, /^fermata_reschedules_total [1-9]\d*$/m);
  assert.match(metrics, /^fermata_rescheduled_timers [1-9]\d*$/m);
  service.child.kill('SIGKILL');
  await withTimeout(service.exited, 10_000, 'fermata to die');
  service = await startService(dataDir, (child) => children.add(child));
  const view = await request('1.1', `${service.url}/v1/timers/${id}`, 'GET');
  assert.equal(view.json.revision, 2);
  assert.equal(view.json.fire_at, patched.json.fire_at);
  assert.equal(view.headers.etag, '"2"');
  const stats = await request('1.1', `${service.url}/v1/stats`, 'GET');
  assert.ok(((stats.json.reschedules as Record<string, number>).redirects as number) >= 1);
});

test('kill -9 at the RESCHEDULE failpoints: before the append the timer is as it was, after it (durable, unanswered) it is the new one', async (t) => {
  if (toolOrSkip(t, 'curl') === undefined) return;
  for (const [failpoint, applied] of [
    ['reschedule.before-append', false],
    ['reschedule.after-append', true],
  ] as const) {
    const dir = mkdtempSync(join(tmpdir(), 'fermata-patch-kill-'));
    try {
      const armed = await startService(dir, (child) => children.add(child), { env: { FERMATA_FAILPOINTS: failpoint } });
      const added = await request('1.1', `${armed.url}/v1/timers`, 'POST', { delay_ms: hour, target, payload: 'old' });
      const id = added.json.id as string;
      const fireAt = new Date(Date.parse(added.json.fire_at as string) + hour).toISOString();
      await assert.rejects(request('1.1', `${armed.url}/v1/timers/${id}`, 'PATCH', { fire_at: fireAt, payload: 'new' }), 'the PATCH is never answered');
      await withTimeout(armed.exited, 10_000, `fermata to die at ${failpoint}`);
      assert.equal(armed.child.signalCode, 'SIGKILL');
      const restarted = await startService(dir, (child) => children.add(child));
      const view = await request('1.1', `${restarted.url}/v1/timers/${id}`, 'GET');
      assert.deepEqual([view.json.revision, view.json.fire_at], applied ? [2, fireAt] : [1, added.json.fire_at], failpoint);
      restarted.child.kill('SIGKILL');
      await withTimeout(restarted.exited, 10_000, 'fermata to die');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
});
