// Trace context through the real service (`fermata serve`, port 0), timers added with curl over
// HTTP/1.1 and HTTP/2 (prior knowledge: a traced single add is served by the route, not the
// fast path), an HTTP/2 sink on loopback: the add's traceparent reaches the target with the
// same trace id and flags under a new parent id, with its tracestate; an add without one, or
// with one that does not parse, delivers none; each retry attempt is another span of the same
// trace; a callback continues the trace; an NDJSON add's header goes to each row without its
// own, and a row's own `headers.traceparent` counts as the add's. Over gRPC (grpc-js, metadata
// `traceparent`): AddTimer, AddTimers' `timers` and StreamAddTimers keep the call's trace; so do
// the lines of POST /v1/timers/stream. One service for the file.
import assert from 'node:assert/strict';
import { type ClientDuplexStream, credentials, loadPackageDefinition, Metadata, type ServiceClientConstructor } from '@grpc/grpc-js';
import { timersPackage } from '../../ingest/grpc/proto-files.ts';
import { after, before, describe, test } from 'node:test';
import { curl, type CurlProtocol, curlRequest, curlWithoutHttp2, json } from '../helpers/curl.ts';
import { startService, type Service } from '../helpers/service.ts';
import { type Sink, type SinkRequest, startH2Sink } from '../helpers/sinks.ts';
import { testScratch } from '../helpers/scratch.ts';
import { withTimeout } from '../helpers/timeout.ts';
import { skipOrFail, toolOrSkip } from '../helpers/tools.ts';

const scratch = testScratch('fermata-trace-context');

const traceId = '4bf92f3577b34da6a3ce929d0e0e4736';
const producerSpan = '00f067aa0ba902b7';
const traceparent = `00-${traceId}-${producerSpan}-01`;
const tracestate = 'congo=t61rcWkgMzE';
const childOfProducer = new RegExp(`^00-${traceId}-([0-9a-f]{16})-01$`);

async function until<T>(what: string, probe: () => T | undefined, ms = 15_000): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = probe();
    if (value !== undefined) return value;
    assert.ok(Date.now() < deadline, `${what} did not happen in ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** The span id a delivery's traceparent names as its parent: in the producer's trace, not the producer's span. */
function spanOf(request: SinkRequest): string {
  const header = String(request.headers.traceparent);
  const span = childOfProducer.exec(header)?.[1];
  assert.ok(span !== undefined, `traceparent ${header} is not a child in trace ${traceId}`);
  assert.notEqual(span, producerSpan);
  return span;
}

describe('trace context over curl and gRPC', { timeout: 120_000 }, () => {
  let service: Service;
  let target: Sink;

  before(async () => {
    // /retry fails its first attempt; everything else is answered 200 at once.
    target = await startH2Sink((path, nth) => (path === '/retry' && nth === 0 ? { status: 503 } : { status: 200 }));
    service = await startService(scratch.tempDir('data'), (child) => scratch.children.add(child), { args: ['--grpc', '127.0.0.1:0'] });
    const queue = await fetch(`${service.url}/v1/queues/short`, {
      method: 'PUT',
      body: JSON.stringify({ max_attempts: 3, min_backoff_ms: 10, max_backoff_ms: 10 }),
      headers: { 'content-type': 'application/json' },
    });
    assert.equal(queue.status, 200);
  });

  after(async () => {
    await target.close();
    service.child.kill('SIGTERM');
    await withTimeout(service.exited, 20_000, 'exit after SIGTERM');
  });

  const skipped = (t: Parameters<typeof toolOrSkip>[0], protocol: CurlProtocol): boolean => {
    if (toolOrSkip(t, 'curl') === undefined) return true;
    if (protocol === 'http2' && !curl.http2) {
      skipOrFail(t, curlWithoutHttp2);
      return true;
    }
    return false;
  };

  const add = async (protocol: CurlProtocol, body: Record<string, unknown>, headers: Record<string, string> = {}): Promise<void> => {
    const answer = await curlRequest({ protocol, method: 'POST', url: `${service.url}/v1/timers`, body: JSON.stringify({ delay_ms: 0, ...body }), headers });
    assert.equal(answer.status, 201, answer.body.toString('utf8'));
  };

  for (const protocol of ['http1.1', 'http2'] as const) {
    test(`${protocol}: the target sees the add's trace id under a new parent id, with its tracestate`, async (t) => {
      if (skipped(t, protocol)) return;
      const path = `/traced-${protocol}`;
      await add(protocol, { target: `${target.url}${path}` }, { traceparent, tracestate });
      const delivery = await until('the traced delivery', () => target.to(path)[0]);
      spanOf(delivery);
      assert.equal(delivery.headers.tracestate, tracestate);
    });
  }

  test('an add without a traceparent, or with one that does not parse, delivers none', async (t) => {
    if (skipped(t, 'http1.1')) return;
    await add('http1.1', { target: `${target.url}/untraced` });
    await add('http1.1', { target: `${target.url}/malformed` }, { traceparent: `00-${traceId.toUpperCase()}-${producerSpan}-01`, tracestate });
    for (const path of ['/untraced', '/malformed']) {
      const delivery = await until(`the delivery to ${path}`, () => target.to(path)[0]);
      assert.deepEqual([delivery.headers.traceparent, delivery.headers.tracestate], [undefined, undefined], path);
    }
  });

  test('each attempt is another span of the same trace', async (t) => {
    if (skipped(t, 'http1.1')) return;
    await add('http1.1', { target: `${target.url}/retry`, queue: 'short' }, { traceparent });
    const [first, second] = await until('two attempts', () => (target.to('/retry').length >= 2 ? target.to('/retry') : undefined));
    assert.ok(first !== undefined && second !== undefined);
    assert.deepEqual([first.headers['fermata-attempt'], second.headers['fermata-attempt']], ['1', '2']);
    assert.notEqual(spanOf(first), spanOf(second));
  });

  test("a callback continues the timer's trace", async (t) => {
    if (skipped(t, 'http1.1')) return;
    await add('http1.1', { target: `${target.url}/with-callback`, callback: `${target.url}/callback` }, { traceparent, tracestate });
    const delivery = await until('the delivery', () => target.to('/with-callback')[0]);
    const callback = await until('the callback', () => target.to('/callback')[0]);
    assert.notEqual(spanOf(callback), spanOf(delivery));
    assert.equal(callback.headers.tracestate, tracestate);
  });

  test("gRPC: AddTimer, AddTimers and StreamAddTimers keep the call's metadata traceparent", async () => {
    const fermata = loadPackageDefinition(timersPackage()).fermata as { v1: { Timers: ServiceClientConstructor } };
    const client = new fermata.v1.Timers(await grpcAddress(service), credentials.createInsecure());
    type Call = (request: unknown, metadata: Metadata, done: (err: Error | null) => void) => void;
    const call = (method: string, request: unknown): Promise<void> => {
      const metadata = new Metadata();
      metadata.set('traceparent', traceparent);
      return new Promise((resolve, reject) => (client[method] as Call).call(client, request, metadata, (err) => (err === null ? resolve() : reject(err))));
    };
    try {
      const timer = (path: string): unknown => ({ delay: { seconds: 0 }, target: `${target.url}${path}` });
      await call('AddTimer', { timer: timer('/grpc-one') });
      await call('AddTimers', { timers: { timers: [timer('/grpc-batch'), timer('/grpc-batch')] } });
      const metadata = new Metadata();
      metadata.set('traceparent', traceparent);
      const stream = (client.StreamAddTimers as (metadata: Metadata) => ClientDuplexStream<unknown, { added?: unknown }>).call(client, metadata);
      const answered = new Promise<unknown>((resolve, reject) => stream.once('data', resolve).once('error', reject));
      stream.write({ timer: timer('/grpc-stream') });
      assert.ok(((await answered) as { added?: unknown }).added !== undefined);
      stream.end();
      spanOf(await until('the StreamAddTimers delivery', () => target.to('/grpc-stream')[0]));
      spanOf(await until('the AddTimer delivery', () => target.to('/grpc-one')[0]));
      const batch = await until('the AddTimers deliveries', () => (target.to('/grpc-batch').length === 2 ? target.to('/grpc-batch') : undefined));
      for (const delivery of batch) spanOf(delivery);
    } finally {
      client.close();
    }
  });

  test("POST /v1/timers/stream: the request's traceparent goes to every line without its own", async (t) => {
    if (skipped(t, 'http2')) return;
    const lines = [`${target.url}/stream-a`, `${target.url}/stream-b`].map((url) => JSON.stringify({ delay_ms: 0, target: url }));
    const answer = await curlRequest({
      protocol: 'http2',
      method: 'POST',
      url: `${service.url}/v1/timers/stream`,
      body: `${lines.join('\n')}\n`,
      headers: { 'content-type': 'application/x-ndjson', traceparent },
    });
    assert.equal(answer.status, 200);
    for (const path of ['/stream-a', '/stream-b']) spanOf(await until(`the delivery to ${path}`, () => target.to(path)[0]));
  });

  test("an NDJSON add's traceparent goes to each row without its own; a row's own counts as the add's", async (t) => {
    if (skipped(t, 'http1.1')) return;
    const ownTrace = 'a'.repeat(32);
    const lines = [
      { delay_ms: 0, target: `${target.url}/ndjson-add` },
      { delay_ms: 0, target: `${target.url}/ndjson-own`, headers: { TraceParent: `00-${ownTrace}-${'b'.repeat(16)}-00` } },
    ];
    const answer = await curlRequest({
      method: 'POST',
      url: `${service.url}/v1/timers`,
      body: lines.map((line) => JSON.stringify(line)).join('\n'),
      headers: { 'content-type': 'application/x-ndjson', traceparent },
    });
    assert.equal(answer.status, 201, JSON.stringify(json(answer)));
    spanOf(await until('the row with the add trace', () => target.to('/ndjson-add')[0]));
    const own = await until('the row with its own trace', () => target.to('/ndjson-own')[0]);
    assert.match(String(own.headers.traceparent), new RegExp(`^00-${ownTrace}-(?!b{16})[0-9a-f]{16}-00$`));
  });
});

/** The gRPC port's host:port, from its "flight listening" line. */
async function grpcAddress(service: Service): Promise<string> {
  return until('the "flight listening" line', () => /"url":"grpc\+tcp:\/\/([^"]+)","msg":"flight listening"/.exec(service.output())?.[1]);
}
