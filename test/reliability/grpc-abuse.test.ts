// The gRPC port under HTTP/2 abuse, against a real `fermata serve --grpc` child: its connections
// go through fermata's own TCP listener (ingest/grpc/guarded-listener.ts), so the HTTP listener's
// peer guard sees them. A rapid-reset flood on the gRPC port gets its peer penalised: its new
// connections are then reset on the gRPC port and on the HTTP port alike, while other peers are
// served on both. The port's own limits: the stream and header list caps the HTTP listener
// advertises, the message size limit (the HTTP bulk body's), met before the message is read, and
// node's session limits as the HTTP listener sets them (reset burst, invalid frames), each shown
// with a count between the HTTP listener's cap and node's default; a CONTINUATION flood has each
// of its connections closed. Each peer is a loopback address of its own (127.0.0.1 is never penalised: a
// proxy on the host connects from it). The flood runs in rounds until the penalty shows, bounded.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http2 from 'node:http2';
import net from 'node:net';
import { after, before, test } from 'node:test';
import { status as grpcStatus } from '@grpc/grpc-js';
import { httpLimits } from '../../engine/limits.ts';
import { flightLimits } from '../../ingest/flight/flight-service.ts';
import { continuationFlood, rapidReset } from '../helpers/http-attacks.ts';
import { testScratch } from '../helpers/scratch.ts';
import { flightUrl, type Service, startService } from '../helpers/service.ts';
import { withTimeout } from '../helpers/timeout.ts';

const scratch = testScratch('fermata-grpc-abuse');
const waitMs = 10_000;
const floodRoundMs = 500;
const floodMsMax = 30_000;
const attacker = '127.0.0.9';

let service: Service;
let grpcUrl: string;

before(async () => {
  service = await startService(scratch.tempDir('data'), (child) => scratch.children.add(child), { args: ['--grpc', '127.0.0.1:0'] });
  grpcUrl = (await flightUrl(service)).replace('grpc+tcp://', 'http://');
});

after(() => service?.child.kill('SIGKILL'));

/** A GET on a session of its own from `from`: the HTTP status (the connection was served), or how the connection failed. */
async function getFrom(url: string, from: string): Promise<number | string> {
  const session = http2.connect(url, { createConnection: (authority) => net.connect({ host: authority.hostname, port: Number(authority.port), localAddress: from }) });
  session.on('error', () => undefined);
  try {
    return await withTimeout(
      new Promise<number | string>((resolve) => {
        session.once('error', (err: Error & { code?: string }) => resolve(err.code ?? err.message));
        session.once('close', () => resolve('closed'));
        const stream = session.request({ ':path': '/healthz' });
        stream.on('response', (headers) => resolve(Number(headers[':status'])));
        stream.on('error', (err: Error & { code?: string }) => resolve(err.code ?? err.message));
        stream.resume();
        stream.end();
      }),
      waitMs,
      `GET from ${from}`,
    );
  } finally {
    session.destroy();
  }
}

test('a rapid-reset flood on the gRPC port gets its peer refused on the gRPC and HTTP ports; other peers are served', { timeout: 90_000 }, async () => {
  assert.equal(typeof (await getFrom(grpcUrl, attacker)), 'number', 'served before the flood');
  const deadline = Date.now() + floodMsMax;
  const rounds: Array<Readonly<Record<string, number>>> = [];
  while (typeof (await getFrom(service.url, attacker)) === 'number') {
    assert.ok(Date.now() < deadline, `${attacker} not refused after ${floodMsMax} ms of flood on the gRPC port: ${JSON.stringify(rounds)}`);
    rounds.push((await rapidReset(grpcUrl, floodRoundMs, attacker)).facts);
  }
  assert.ok(rounds.some((facts) => (facts.sessions_closed_by_server ?? 0) > 0), `the gRPC server closed the flooding sessions: ${JSON.stringify(rounds)}`);
  assert.equal(typeof (await getFrom(grpcUrl, attacker)), 'string', 'the penalised peer is reset on the gRPC port too');
  assert.equal(typeof (await getFrom(grpcUrl, '127.0.0.10')), 'number', 'another peer is served on the gRPC port');
  assert.equal(await getFrom(service.url, '127.0.0.10'), 200, 'and on the HTTP port');
  assert.match(service.output(), /"peer":"127\.0\.0\.9"/, 'the penalty is logged');
});

test('the gRPC port advertises the HTTP listener\'s stream cap, and refuses a message over the size limit before reading it', { timeout: 30_000 }, async () => {
  const session = http2.connect(grpcUrl);
  session.on('error', () => undefined);
  try {
    const settings = await withTimeout(new Promise<http2.Settings>((resolve) => session.once('remoteSettings', resolve)), waitMs, 'the server\'s SETTINGS');
    assert.equal(settings.maxConcurrentStreams, httpLimits.http2ConcurrentStreamsMax);
    assert.equal(settings.maxHeaderListSize, httpLimits.headerListBytesMax, 'the header list cap of the HTTP listener');
    // A message whose prefix says one byte more than the limit: refused on its header, the body never sent.
    const prefix = Buffer.alloc(5);
    prefix.writeUInt32BE(flightLimits.messageBytesMax + 1, 1);
    const stream = session.request({ ':method': 'POST', ':path': '/fermata.v1.Timers/AddTimers', 'content-type': 'application/grpc', te: 'trailers' }, { endStream: false });
    stream.write(prefix);
    const status = await withTimeout(
      new Promise<string | undefined>((resolve) => {
        stream.on('response', (headers) => headers['grpc-status'] !== undefined && resolve(String(headers['grpc-status'])));
        stream.on('trailers', (trailers) => resolve(String(trailers['grpc-status'])));
        stream.on('close', () => resolve(undefined));
        stream.resume();
      }),
      waitMs,
      'the answer to an oversized message',
    );
    assert.equal(status, String(grpcStatus.RESOURCE_EXHAUSTED));
  } finally {
    session.destroy();
  }
});

const frameType = { headers: 0x1, settings: 0x4, ping: 0x6, goaway: 0x7 } as const;
const endHeaders = 0x4;
const ack = 0x1;

function frame(type: number, flags: number, streamId: number, payload: Buffer): Buffer {
  const header = Buffer.alloc(9);
  header.writeUIntBE(payload.length, 0, 3);
  header.writeUInt8(type, 3);
  header.writeUInt8(flags, 4);
  header.writeUInt32BE(streamId, 5);
  return Buffer.concat([header, payload]);
}

/** HPACK: POST, http, / from the static table, then a literal field, new name, not indexed: `name` as given. */
function requestHeaders(name: string, value: string): Buffer {
  return Buffer.concat([Buffer.of(0x83, 0x86, 0x84, 0x00, name.length), Buffer.from(name, 'latin1'), Buffer.of(value.length), Buffer.from(value, 'latin1')]);
}

/**
 * One connection from `from` that sends the preface, SETTINGS, `frames` and a PING all at once:
 * 'ended' when the server ends the session (GOAWAY, or the connection closed) before it answers
 * the PING, 'served' when it answers it.
 */
async function sessionAfter(frames: readonly Buffer[], from: string): Promise<'ended' | 'served'> {
  const socket = net.connect({ host: '127.0.0.1', port: Number(new URL(grpcUrl).port), localAddress: from });
  socket.on('error', () => undefined);
  try {
    return await withTimeout(
      new Promise<'ended' | 'served'>((resolve) => {
        let received = Buffer.alloc(0);
        socket.on('data', (chunk: Buffer) => {
          received = Buffer.concat([received, chunk]);
          for (let at = 0; at + 9 <= received.length; at += 9 + received.readUIntBE(at, 3)) {
            const type = received.readUInt8(at + 3);
            if (type === frameType.goaway) return resolve('ended');
            if (type === frameType.ping && (received.readUInt8(at + 4) & ack) !== 0) return resolve('served');
          }
        });
        socket.once('close', () => resolve('ended'));
        socket.once('connect', () => socket.write(Buffer.concat([http2Preface, frame(frameType.settings, 0, 0, Buffer.alloc(0)), ...frames, frame(frameType.ping, 0, 0, Buffer.alloc(8))])));
      }),
      waitMs,
      `the session from ${from}`,
    );
  } finally {
    socket.destroy();
  }
}

/**
 * One session from `from` that opens `count` streams and cancels each at once (node's client
 * opens them as the server's stream cap lets it): 'ended' when the server ended the session,
 * 'served' when it still answers a PING afterwards.
 */
async function cancelStreams(count: number, from: string): Promise<'ended' | 'served'> {
  const session = http2.connect(grpcUrl, { createConnection: (authority) => net.connect({ host: authority.hostname, port: Number(authority.port), localAddress: from }) });
  session.on('error', () => undefined);
  // The server's GOAWAY may come after its answer to the PING below (nghttp2 answers a PING it
  // read in the same input as the resets that end the session): either says the session ended.
  let goaway = false;
  session.once('goaway', () => (goaway = true));
  try {
    await withTimeout(once(session, 'connect'), waitMs, `a session from ${from}`);
    const closed: Array<Promise<unknown>> = [];
    for (let i = 0; i < count && !session.closed && !session.destroyed; i++) {
      const stream = session.request({ ':method': 'POST', ':path': '/fermata.v1.Timers/AddTimer', 'content-type': 'application/grpc', te: 'trailers' }, { endStream: false });
      stream.on('error', () => undefined);
      closed.push(once(stream, 'close'));
      stream.close(http2.constants.NGHTTP2_CANCEL);
    }
    await withTimeout(Promise.all(closed), waitMs, `${count} cancelled streams from ${from}`);
    if (session.closed || session.destroyed) return 'ended';
    const pinged = await withTimeout(new Promise<'ended' | 'served'>((resolve) => session.ping((err) => resolve(err === null ? 'served' : 'ended'))), waitMs, 'a PING');
    // A second round trip: a GOAWAY sent with the first PING's answer has arrived by its end.
    const again = pinged === 'served' && !goaway ? await withTimeout(new Promise<'ended' | 'served'>((resolve) => session.ping((err) => resolve(err === null ? 'served' : 'ended'))), waitMs, 'a second PING') : 'ended';
    return goaway || session.closed || session.destroyed ? 'ended' : again;
  } finally {
    session.destroy();
  }
}

const http2Preface = Buffer.from('PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n', 'latin1');
/** Between the HTTP listener's caps and node's defaults (1,000 for both), so only the HTTP listener's end the session. */
const overTheCaps = Math.round((Math.max(httpLimits.http2StreamResetBurst, httpLimits.http2SessionInvalidFramesMax) + 1_000) / 2);

test('the gRPC port ends a session past the HTTP listener\'s reset burst (rapid reset), where node\'s default would not', { timeout: 30_000 }, async () => {
  assert.equal(await cancelStreams(httpLimits.http2ConcurrentStreamsMax, '127.0.0.11'), 'served', 'a client cancelling as many streams as it may have open is served on');
  assert.equal(await cancelStreams(overTheCaps, '127.0.0.12'), 'ended', `${overTheCaps} streams cancelled at once end the session`);
});

test('the gRPC port ends a session past the HTTP listener\'s invalid frame cap, where node\'s default would not', { timeout: 30_000 }, async () => {
  // A header name in uppercase makes a HEADERS frame invalid (RFC 9113 §8.2.1): each is one invalid frame, its stream reset.
  const invalid = (count: number): Buffer[] => Array.from({ length: count }, (_, i) => frame(frameType.headers, endHeaders, 2 * i + 1, requestHeaders('X-Upper', 'a')));
  assert.equal(await sessionAfter(invalid(httpLimits.http2SessionInvalidFramesMax - 10), '127.0.0.13'), 'served', 'a few invalid frames are tolerated');
  assert.equal(await sessionAfter(invalid(overTheCaps), '127.0.0.14'), 'ended', `${overTheCaps} invalid frames end the session`);
});

test('the gRPC port ends every connection of a CONTINUATION flood (a header block without end)', { timeout: 30_000 }, async () => {
  const { facts } = await continuationFlood(Number(new URL(grpcUrl).port), floodRoundMs, '127.0.0.15');
  assert.ok((facts.connections ?? 0) > 0, `the flood connected: ${JSON.stringify(facts)}`);
  // The last connection may still be flooding when the round ends.
  assert.ok((facts.connections_closed_by_server ?? 0) >= (facts.connections ?? 0) - 1, `the server closed the flooding connections: ${JSON.stringify(facts)}`);
});
