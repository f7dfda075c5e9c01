// StreamAddTimers answers as the contract says (docs/api.md): one per request, in request order,
// each only once its timer is durable, a bad request answered with its own error in its place;
// and the answers known together go out together (AddStream corks the call, grpc-js's `_writev`
// from patches/@grpc+grpc-js+1.14.7.patch hands them to the HTTP/2 stream at once: decision
// 0030), in a few DATA frames rather than one each. fermata.v1.Timers on a grpc-js server over
// a simulated disk whose log writes the test holds; the client is node:http2 with the gRPC
// framing written here, so that its DATA frames can be counted. Loopback only.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http2 from 'node:http2';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { after, before, test } from 'node:test';
import { Server, ServerCredentials } from '@grpc/grpc-js';
import pino from 'pino';
import { Engine } from '../../engine/engine.ts';
import { Access } from '../../ingest/auth/access.ts';
import { timersPackage } from '../../ingest/grpc/proto-files.ts';
import { grpcServerOptions, TimersService, timersServiceName } from '../../ingest/grpc/timers-service.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';
import { withTimeout } from '../helpers/timeout.ts';
import { wrappedFileSystem } from '../helpers/wrapped-file-system.ts';

const waitMs = 10_000;
const requests = 200;
/** Requests refused for what they hold (no target): each answered with its error, in its place. */
const badRows = new Set([7, 120]);
/** A day from now: each request's fire time is this plus its row. */
const fireAtSeconds = Math.floor(Date.now() / 1000) + 86_400;
const grpcInvalidArgument = 3;

interface Answer {
  readonly result: 'added' | 'error';
  readonly added?: { readonly fire_at: { readonly seconds: number } };
  readonly error?: { readonly code: number; readonly message: string };
}

const method = timersPackage()[timersServiceName] as unknown as Record<'StreamAddTimers', { requestSerialize(value: unknown): Buffer; responseDeserialize(bytes: Buffer): Answer }>;
const { requestSerialize, responseDeserialize } = method.StreamAddTimers;

/** The simulated disk's writes, held (each finished on the disk, its completion kept back) while `holding`. */
let holding = false;
const held: Array<() => void> = [];
const sim = new SimFileSystem({ seed: 44, maxExtraHops: 0 });
const disk = wrappedFileSystem(
  (handle) => ({
    async writev(chunks, position) {
      const hold = holding;
      await handle.writev(chunks, position);
      if (hold) await new Promise<void>((resolve) => held.push(resolve));
    },
    async datasync() {
      const hold = holding;
      await handle.datasync();
      if (hold) await new Promise<void>((resolve) => held.push(resolve));
    },
  }),
  sim,
);

let engine: Engine;
let server: Server;
let url: string;

before(async () => {
  engine = await Engine.open({ dataDir: '/data', fs: disk });
  server = new Server(grpcServerOptions);
  new TimersService({ engine, logger: pino({ level: 'silent' }), access: new Access([]) }).addTo(server);
  const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (err, bound) => (err === null ? resolve(bound) : reject(err))));
  url = `http://127.0.0.1:${port}`;
});

after(async () => {
  server.forceShutdown();
  await engine.close();
});

/** A gRPC message as HTTP/2 carries it: uncompressed flag, big-endian length, the protobuf bytes. */
function framed(message: Buffer): Buffer {
  const frame = Buffer.alloc(5 + message.length);
  frame.writeUInt32BE(message.length, 1);
  message.copy(frame, 5);
  return frame;
}

/** Request `row`: a timer due at fireAtSeconds + row (its answer's fire_at says which request it answers), or one without a target. */
function request(row: number): Buffer {
  const timer = badRows.has(row) ? { fire_at: { seconds: fireAtSeconds + row, nanos: 0 } } : { fire_at: { seconds: fireAtSeconds + row, nanos: 0 }, target: 'https://example.test/hook', key: `stream-${row}` };
  return framed(requestSerialize({ timer }));
}

test('StreamAddTimers answers each request once, in order, only after its record is durable, in a few DATA frames', { timeout: 30_000 }, async () => {
  const session = http2.connect(url);
  session.on('error', () => undefined);
  try {
    await withTimeout(once(session, 'connect'), waitMs, 'an HTTP/2 session');
    const call = session.request({ ':method': 'POST', ':path': `/${timersServiceName}/StreamAddTimers`, 'content-type': 'application/grpc', te: 'trailers' });
    let dataFrames = 0;
    let received = Buffer.alloc(0);
    call.on('data', (chunk: Buffer) => {
      dataFrames++;
      received = Buffer.concat([received, chunk]);
    });
    const trailers = new Promise<http2.IncomingHttpHeaders>((resolve) => call.once('trailers', resolve));
    const ended = once(call, 'end');

    holding = true;
    call.write(Buffer.concat(Array.from({ length: requests }, (_, row) => request(row))));
    const giveUp = Date.now() + waitMs;
    while (held.length === 0 && Date.now() < giveUp) await nextTurn();
    assert.ok(held.length > 0, 'the requests\' log write reached the disk');
    for (let i = 0; i < 20; i++) await nextTurn();
    assert.equal(received.length, 0, 'nothing answered while the record is not durable (a bad request waits for those before it)');

    holding = false;
    for (const release of held.splice(0)) release();
    call.end();
    await withTimeout(ended, waitMs, 'the end of the answers');
    assert.equal((await trailers)['grpc-status'], '0');

    const answers: Answer[] = [];
    for (let at = 0; at < received.length; at += 5 + received.readUInt32BE(at + 1)) answers.push(responseDeserialize(received.subarray(at + 5, at + 5 + received.readUInt32BE(at + 1))));
    assert.equal(answers.length, requests, 'one answer per request');
    answers.forEach((answer, row) => {
      if (badRows.has(row)) {
        assert.equal(answer.result, 'error', `answer ${row}`);
        assert.equal(answer.error?.code, grpcInvalidArgument, `answer ${row}`);
        assert.match(answer.error?.message ?? '', /^BATCH_INVALID:.*target/, `answer ${row}`);
      } else {
        assert.equal(answer.result, 'added', `answer ${row}`);
        assert.equal(answer.added?.fire_at.seconds, fireAtSeconds + row, `answer ${row} answers request ${row}`);
      }
    });
    // One write per answer would be one DATA frame each; written together they take a few.
    assert.ok(dataFrames <= 10, `${requests} answers came in ${dataFrames} DATA frames`);
  } finally {
    session.destroy();
  }
});

test('a client that does not read its answers: the call stops reading its requests, and goes on once they are read', { timeout: 60_000 }, async () => {
  const total = 30_000;
  const session = http2.connect(url);
  session.on('error', () => undefined);
  try {
    await withTimeout(once(session, 'connect'), waitMs, 'an HTTP/2 session');
    const pendingBefore = engine.stats().pending;
    const call = session.request({ ':method': 'POST', ':path': `/${timersServiceName}/StreamAddTimers`, 'content-type': 'application/grpc', te: 'trailers' });
    call.pause();
    const timer = (row: number): Buffer => framed(requestSerialize({ timer: { fire_at: { seconds: fireAtSeconds + row, nanos: 0 }, target: 'https://example.test/hook', key: `unread-${row}` } }));
    for (let row = 0; row < total; row += 1_000) call.write(Buffer.concat(Array.from({ length: 1_000 }, (_, i) => timer(row + i))));
    call.end();
    // The answers fill the client's window, then the call's buffer: the server reads no more. Wait until its count stops moving.
    let added = -1;
    for (const giveUp = Date.now() + 20_000; ; ) {
      await new Promise((resolve) => setTimeout(resolve, 300));
      const now = engine.stats().pending - pendingBefore;
      if (now === added) break;
      added = now;
      assert.ok(Date.now() < giveUp, 'the server kept reading');
    }
    assert.ok(added > 0 && added < total, `the server read ${added} of ${total} requests while their answers were not read`);
    // Read now: every request is taken and answered.
    let bytes = 0;
    call.on('data', (chunk: Buffer) => (bytes += chunk.length));
    call.resume();
    await withTimeout(once(call, 'end'), 30_000, 'every answer');
    assert.equal(engine.stats().pending - pendingBefore, total, 'every request was added once its answers were read');
    assert.ok(bytes > total * 10, `the answers came (${bytes} bytes)`);
  } finally {
    session.destroy();
  }
});
