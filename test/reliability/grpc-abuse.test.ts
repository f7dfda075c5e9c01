// The gRPC port under HTTP/2 abuse, against a real `fermata serve --grpc` child: its connections
// go through fermata's own TCP listener (ingest/grpc/guarded-listener.ts), so the HTTP listener's
// peer guard sees them. A rapid-reset flood on the gRPC port gets its peer penalised: its new
// connections are then reset on the gRPC port and on the HTTP port alike, while other peers are
// served on both. The port's own limits: the stream cap the HTTP listener advertises, and the
// message size limit (the HTTP bulk body's), met before the message is read. Each peer is a loopback address of its own (127.0.0.1 is never penalised: a
// proxy on the host connects from it). The flood runs in rounds until the penalty shows, bounded.
import assert from 'node:assert/strict';
import http2 from 'node:http2';
import net from 'node:net';
import { after, before, test } from 'node:test';
import { status as grpcStatus } from '@grpc/grpc-js';
import { httpLimits } from '../../engine/limits.ts';
import { flightLimits } from '../../ingest/flight/flight-service.ts';
import { rapidReset } from '../helpers/http-attacks.ts';
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
