// Callbacks through the real service (`fermata serve`, port 0), timers added with curl over
// HTTP/1.1 and HTTP/2 (prior knowledge), targets and receivers on loopback: a delivered timer's
// callback gets the outcome summary with the target's status and answer body (from an HTTP/1.1
// target and an HTTP/2 one); a timer dead at
// once (410) and one whose target never answers 2xx (connection refused, a short retry policy)
// make their failure callbacks, with the status or the error; a callback's own outcome makes no
// callback, a cancelled timer none; bad URLs and callbacks on arrow and pull queues are 400
// naming the field. And kill -9 while the callback is being delivered: after a restart it is
// delivered (again), the original timer not.
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { curl, type CurlAnswer, type CurlProtocol, curlRequest, curlWithoutHttp2, json } from '../helpers/curl.ts';
import { startService, type Service } from '../helpers/service.ts';
import { type Sink, type SinkRequest, type SinkScript, startH1Sink, startH2Sink } from '../helpers/sinks.ts';
import { testScratch } from '../helpers/scratch.ts';
import { withTimeout } from '../helpers/timeout.ts';
import { skipOrFail, toolOrSkip } from '../helpers/tools.ts';

const scratch = testScratch('fermata-callbacks');
const sinks: Sink[] = [];
after(() => Promise.all(sinks.map((sink) => sink.close())));

async function sink(script?: SinkScript, http1 = false): Promise<Sink> {
  const started = await (http1 ? startH1Sink(script) : startH2Sink(script));
  sinks.push(started);
  return started;
}

type Json = Record<string, unknown>;

/** curl over `protocol`: the answer, its body as JSON ({} when there is none). */
async function curlJson(protocol: CurlProtocol, method: string, url: string, body?: unknown): Promise<CurlAnswer & { readonly json: Json }> {
  const answer = await curlRequest({ protocol, method, url, ...(body === undefined ? {} : { body: JSON.stringify(body) }) });
  return { ...answer, json: answer.body.length === 0 ? {} : json<Json>(answer) };
}

async function get(base: string, id: string): Promise<Json> {
  const response = await fetch(`${base}/v1/timers/${id}`);
  return (await response.json()) as Json;
}

async function until<T>(what: string, probe: () => T | undefined | Promise<T | undefined>, ms = 15_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    assert.ok(Date.now() < deadline, `${what} did not happen in ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** The one request to `path` of `receiver`, once it came, as JSON with its headers. */
async function callbackAt(receiver: Sink, path: string): Promise<{ body: Json; request: SinkRequest }> {
  const request = await until(`a callback to ${path}`, () => receiver.to(path)[0]);
  return { body: JSON.parse(request.body.toString('utf8')) as Json, request };
}

/** A loopback port nothing listens on (bound, then closed). */
async function closedPort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

const protocols = [
  { name: 'HTTP/1.1', protocol: 'http1.1', version: '1.1' },
  { name: 'HTTP/2', protocol: 'http2', version: '2' },
] as const;

describe('callbacks over curl', { timeout: 120_000 }, () => {
  let service: Service;
  let target: Sink;
  /** The same script, HTTP/1.1 only: the answer's body is read from either kind of connection. */
  let target1: Sink;
  let receiver: Sink;
  let deadPort: number;

  before(async () => {
    // The target answers /gone with 410 and everything else 200 with a body; the receiver
    // answers /fail with 500 (a callback that dies) and everything else 200.
    const targetScript: SinkScript = (path) => (path.startsWith('/gone') ? { status: 410, body: 'gone for good' } : { status: 200, body: `thanks for ${path}` });
    target = await sink(targetScript);
    target1 = await sink(targetScript, true);
    receiver = await sink((path) => (path.startsWith('/fail') ? { status: 500 } : { status: 200 }));
    deadPort = await closedPort();
    service = await startService(scratch.tempDir('data'), (child) => scratch.children.add(child));
    const put = async (name: string, config: Json): Promise<void> => assert.equal((await fetch(`${service.url}/v1/queues/${name}`, { method: 'PUT', body: JSON.stringify(config), headers: { 'content-type': 'application/json' } })).status, 200);
    await put('short', { max_attempts: 2, min_backoff_ms: 10, max_backoff_ms: 10 });
    await put('once', { max_attempts: 1 });
    await put('batched', { delivery: 'arrow', sink: `${target.url}/sink` });
    await put('pulled', { delivery: 'pull' });
  });

  after(async () => {
    service.child.kill('SIGTERM');
    await withTimeout(service.exited, 20_000, 'exit after SIGTERM');
  });

  for (const protocol of protocols) {
    const tag = protocol.name.replace(/\W/g, '');
    const skipped = (t: Parameters<typeof toolOrSkip>[0]): boolean => {
      if (toolOrSkip(t, 'curl') === undefined) return true;
      if (protocol.version === '2' && !curl.http2) {
        skipOrFail(t, curlWithoutHttp2);
        return true;
      }
      return false;
    };
    const add = async (body: Json): Promise<string> => {
      const added = await curlJson(protocol.protocol, 'POST', `${service.url}/v1/timers`, body);
      assert.deepEqual([added.status, added.httpVersion], [201, protocol.version], JSON.stringify(added.json));
      return String(added.json.id);
    };

    test(`${protocol.name}: a delivered timer's callback gets the summary with the target's status and answer`, async (t) => {
      if (skipped(t)) return;
      const origin = protocol.version === '2' ? target : target1;
      const id = await add({ delay_ms: 0, target: `${origin.url}/ok-${tag}`, payload: 'hi', callback: `${receiver.url}/cb-${tag}`, failure_callback: `${receiver.url}/never-${tag}` });
      const view = await get(service.url, id);
      assert.deepEqual([view.callback, view.failure_callback], [`${receiver.url}/cb-${tag}`, `${receiver.url}/never-${tag}`]);
      const { body, request } = await callbackAt(receiver, `/cb-${tag}`);
      assert.equal(body.id, id);
      assert.equal(body.state, 'delivered');
      assert.equal(body.attempts, 1);
      assert.equal(body.status, 200);
      assert.equal(body.error, null);
      assert.equal(Buffer.from(String(body.response_base64), 'base64').toString('utf8'), `thanks for /ok-${tag}`);
      assert.equal(body.fire_at, view.fire_at);
      assert.ok(Date.parse(String(body.delivered_at)) >= Date.parse(String(body.fire_at)));
      assert.equal(request.headers['fermata-callback-for'], id);
      assert.equal(request.headers['content-type'], 'application/json');
      assert.notEqual(request.headers['fermata-timer-id'], id, 'the follow-up is a timer of its own');
      const followUp = await get(service.url, String(request.headers['fermata-timer-id']));
      assert.deepEqual([followUp.key, followUp.callback, followUp.failure_callback], [`callback:${id}`, null, null]);
      assert.equal(receiver.to(`/never-${tag}`).length, 0, 'a delivered timer makes no failure callback');
    });

    test(`${protocol.name}: a 410 is dead at once and makes the failure callback with status 410`, async (t) => {
      if (skipped(t)) return;
      const id = await add({ delay_ms: 0, target: `${target.url}/gone-${tag}`, callback: `${receiver.url}/never-${tag}`, failure_callback: `${receiver.url}/dead-${tag}` });
      const { body } = await callbackAt(receiver, `/dead-${tag}`);
      assert.deepEqual([body.id, body.state, body.attempts, body.status, body.delivered_at], [id, 'dead', 1, 410, null]);
      assert.equal(Buffer.from(String(body.response_base64), 'base64').toString('utf8'), 'gone for good');
      assert.equal(receiver.to(`/never-${tag}`).length, 0);
    });

    test(`${protocol.name}: a target that never answers 2xx dies under a short policy, and the failure callback carries the error`, async (t) => {
      if (skipped(t)) return;
      const id = await add({ delay_ms: 0, target: `http://127.0.0.1:${deadPort}/x`, queue: 'short', failure_callback: `${receiver.url}/refused-${tag}` });
      const { body } = await callbackAt(receiver, `/refused-${tag}`);
      assert.deepEqual([body.id, body.state, body.attempts, body.status, body.response_base64], [id, 'dead', 2, null, null]);
      assert.match(String(body.error), /connection refused/);
    });

    test(`${protocol.name}: a callback's own outcome makes no callback; a cancelled timer makes none`, async (t) => {
      if (skipped(t)) return;
      // The follow-up is in queue "once", and its receiver answers 500: it dies at its first attempt.
      const id = await add({ delay_ms: 0, target: `${target.url}/ok2-${tag}`, queue: 'once', callback: `${receiver.url}/fail-${tag}`, failure_callback: `${receiver.url}/fail-${tag}` });
      const { request } = await callbackAt(receiver, `/fail-${tag}`);
      const followUpId = String(request.headers['fermata-timer-id']);
      await until('the follow-up dead', async () => ((await get(service.url, followUpId)).state === 'dead' ? true : undefined));
      const cancelled = await add({ delay_ms: 60_000, target: `${target.url}/cancelled-${tag}`, callback: `${receiver.url}/cancel-cb-${tag}`, failure_callback: `${receiver.url}/cancel-cb-${tag}` });
      assert.equal((await curlJson(protocol.protocol, 'DELETE', `${service.url}/v1/timers/${cancelled}`)).status, 200);
      await new Promise((resolve) => setTimeout(resolve, 800));
      assert.equal(receiver.to(`/fail-${tag}`).length, 1, `one callback for ${id}, none for its follow-up's death`);
      assert.equal(receiver.to(`/cancel-cb-${tag}`).length, 0, 'none for a cancelled timer');
      assert.equal(target.to(`/cancelled-${tag}`).length, 0);
    });

    test(`${protocol.name}: bad callback URLs and callbacks on arrow and pull queues are 400 naming the field`, async (t) => {
      if (skipped(t)) return;
      const refused = async (body: Json, field: string): Promise<void> => {
        const answer = await curlJson(protocol.protocol, 'POST', `${service.url}/v1/timers`, body);
        assert.equal(answer.status, 400, JSON.stringify(answer.json));
        const error = answer.json.error as { code: string; message: string; details?: Json };
        assert.equal(error.code, 'BATCH_INVALID');
        assert.match(error.message, new RegExp(field));
        assert.ok(JSON.stringify(error).includes(`"${field}"`), JSON.stringify(error));
      };
      await refused({ delay_ms: 0, target: `${target.url}/a`, callback: 'ftp://example.com/x' }, 'callback');
      await refused({ delay_ms: 0, target: `${target.url}/a`, failure_callback: 'not a url' }, 'failure_callback');
      await refused({ delay_ms: 0, target: `${target.url}/a`, callback: 42 }, 'callback');
      await refused({ delay_ms: 0, target: `${target.url}/a`, queue: 'batched', callback: `${receiver.url}/x` }, 'callback');
      await refused({ delay_ms: 0, target: `${target.url}/a`, queue: 'pulled', failure_callback: `${receiver.url}/x` }, 'failure_callback');
    });
  }
});

test('kill -9 while a callback is being delivered: after a restart it is delivered, the original timer not again', { timeout: 90_000 }, async () => {
  const target = await sink(() => ({ status: 200, body: 'ok' }));
  // The first callback request hangs (the service is killed while it waits); later ones are answered.
  const receiver = await sink((_path, nth) => (nth === 0 ? { hang: true } : { status: 200 }));
  const dataDir = scratch.tempDir('data-kill');
  let service = await startService(dataDir, (child) => scratch.children.add(child));
  const added = await fetch(`${service.url}/v1/timers`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ delay_ms: 0, target: `${target.url}/t`, callback: `${receiver.url}/cb` }) });
  assert.equal(added.status, 201);
  const { id } = (await added.json()) as { id: string };
  await until('the callback in flight', () => receiver.to('/cb')[0]);
  service.child.kill('SIGKILL');
  await withTimeout(service.exited, 20_000, 'exit after SIGKILL');
  service = await startService(dataDir, (child) => scratch.children.add(child));
  try {
    await until('the callback delivered after the restart', () => (receiver.to('/cb').length >= 2 ? true : undefined), 30_000);
    const again = JSON.parse((receiver.to('/cb')[1] as SinkRequest).body.toString('utf8')) as Json;
    assert.deepEqual([again.id, again.state, again.status], [id, 'delivered', 200]);
    assert.equal((await get(service.url, id)).state, 'delivered');
    assert.equal(target.to('/t').length, 1, 'the original was delivered once: its outcome and its callback were one record');
  } finally {
    service.child.kill('SIGTERM');
    await withTimeout(service.exited, 20_000, 'exit after SIGTERM');
  }
});
