// The per-origin line of a delivery worker's clients (dispatch/origin-clients.ts): an HTTP/2
// target never has more streams in flight than it allows in its SETTINGS, however high the
// worker's own cap, and a request's start is taken only when it goes out; a target raising its
// limit lets that many more go at once; an HTTP/1.1 target gets at most socketsPerOriginMax.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http from 'node:http';
import http2 from 'node:http2';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { type DeliveryAnswer, type DeliveryRequest, OriginClients } from '../../dispatch/origin-clients.ts';
import { TargetGuard } from '../../dispatch/target-guard.ts';

const body = new Uint8Array([1, 2, 3]);

function clientsFor(requestsPerOriginMax: number, socketsPerOriginMax: number): OriginClients {
  return new OriginClients({ guard: new TargetGuard({ allowLoopback: true }), sessionIdleMsMax: 60_000, connectTimeoutMs: 5_000, requestsPerOriginMax, socketsPerOriginMax });
}

function request(url: string): DeliveryRequest & { timing: { sentAtMs: number } } {
  return { url: new URL(url), headers: {}, body, timeoutMs: 20_000, timing: { sentAtMs: Number.NaN } };
}

/** Listens on a loopback port; the target URL there. */
async function listenLocally(server: http.Server | http2.Http2Server): Promise<string> {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
}

/** The first delivery to `url`, answered at once: it opens the origin's connection (and tells HTTP/2 from HTTP/1.1). */
async function firstDelivery(clients: OriginClients, url: string, target: HeldRequests): Promise<void> {
  target.release();
  assert.equal((await clients.send(request(url))).status, 200);
}

/** Waits until `condition` holds, checking every 10 ms for at most 5 s. */
async function until(condition: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!condition()) {
    assert.ok(Date.now() < deadline, `timed out waiting for ${what}`);
    await sleep(10);
  }
}

/** A target that holds every request until release() (answering 200 then, and at once after). */
class HeldRequests {
  open = 0;
  openMax = 0;
  #held: Array<() => void> = [];
  #released = false;

  arrived(answer: () => void): void {
    this.open++;
    this.openMax = Math.max(this.openMax, this.open);
    const done = (): void => {
      this.open--;
      answer();
    };
    if (this.#released) done();
    else this.#held.push(done);
  }

  release(): void {
    this.#released = true;
    for (const done of this.#held.splice(0)) done();
  }
}

test('an HTTP/2 target gets no more streams than its SETTINGS allow; the others start when they go out, and a raised limit lets more go', async () => {
  let target = new HeldRequests();
  const server = http2.createServer({ settings: { maxConcurrentStreams: 5 } });
  const sessions: http2.ServerHttp2Session[] = [];
  server.on('session', (session) => sessions.push(session));
  server.on('stream', (stream: http2.ServerHttp2Stream) => {
    stream.resume();
    stream.on('error', () => {});
    target.arrived(() => stream.respond({ ':status': 200 }, { endStream: true }));
  });
  const url = await listenLocally(server);
  const clients = clientsFor(1024, 256);
  try {
    // The first delivery opens the session, and its SETTINGS tell the limit.
    await firstDelivery(clients, url, target);
    target = new HeldRequests();
    const requests = Array.from({ length: 12 }, () => request(url));
    const answers: Array<Promise<DeliveryAnswer>> = requests.map((one) => clients.send(one));
    await until(() => target.open === 5, '5 streams at the target');
    await sleep(200);
    const started = (): number => requests.filter((one) => !Number.isNaN(one.timing.sentAtMs)).length;
    assert.equal(target.open, 5, 'the target has the 5 streams it allows');
    assert.equal(started(), 5, 'only the requests that went out have a start time');
    // The target allows 8 from now on: 3 more go out before any answer.
    for (const session of sessions) session.settings({ maxConcurrentStreams: 8 });
    await until(() => target.open === 8, '8 streams at the target');
    await sleep(200);
    assert.equal(target.open, 8);
    assert.equal(started(), 8);
    target.release();
    for (const answer of await Promise.all(answers)) assert.equal(answer.status, 200);
    assert.equal(started(), 12);
    assert.equal(target.openMax, 8, 'never more streams than allowed at the time');
  } finally {
    clients.close();
    for (const session of sessions) session.destroy();
    server.close();
  }
});

test('an HTTP/1.1 target gets at most socketsPerOriginMax requests at once', async () => {
  let target = new HeldRequests();
  const server = http.createServer((req, res) => {
    req.resume();
    target.arrived(() => res.end());
  });
  server.keepAliveTimeout = 60_000;
  const url = await listenLocally(server);
  const clients = clientsFor(1024, 3);
  try {
    // The first delivery finds out that the target does not speak HTTP/2.
    await firstDelivery(clients, url, target);
    const held = new HeldRequests();
    target = held;
    const requests = Array.from({ length: 10 }, () => request(url));
    const answers = requests.map((one) => clients.send(one));
    await until(() => held.open === 3, '3 requests at the target');
    await sleep(200);
    assert.equal(held.open, 3);
    assert.equal(requests.filter((one) => !Number.isNaN(one.timing.sentAtMs)).length, 3);
    held.release();
    for (const answer of await Promise.all(answers)) assert.equal(answer.status, 200);
    assert.equal(held.openMax, 3);
  } finally {
    clients.close();
    server.closeAllConnections();
    server.close();
  }
});
