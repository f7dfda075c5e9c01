// The gRPC port's idle close (grpc-js's `grpc.max_connection_idle_ms`, set to the HTTP
// listener's session idle time in grpcServerOptions): a session with no call open is closed
// (GOAWAY) once idle that long, one with a call open is not, however quiet. The server here runs
// grpcServerOptions with a short idle time; fermata.v1.Timers over a simulated file system.
// Loopback only.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http2 from 'node:http2';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, test } from 'node:test';
import { Server, ServerCredentials } from '@grpc/grpc-js';
import pino from 'pino';
import { Engine } from '../../engine/engine.ts';
import { httpLimits } from '../../engine/limits.ts';
import { Access } from '../../ingest/auth/access.ts';
import { grpcServerOptions, TimersService } from '../../ingest/grpc/timers-service.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';
import { withTimeout } from '../helpers/timeout.ts';

const idleMs = 300;
const waitMs = 10_000;

let engine: Engine;
let server: Server;
let url: string;

before(async () => {
  engine = await Engine.open({ dataDir: '/data', fs: new SimFileSystem({ seed: 45 }) });
  server = new Server({ ...grpcServerOptions, 'grpc.max_connection_idle_ms': idleMs });
  new TimersService({ engine, logger: pino({ level: 'silent' }), access: new Access([]) }).addTo(server);
  const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (err, bound) => (err === null ? resolve(bound) : reject(err))));
  url = `http://127.0.0.1:${port}`;
});

after(async () => {
  server.forceShutdown();
  await engine.close();
});

test('the gRPC server closes sessions idle for the HTTP listener\'s idle time', () => {
  assert.equal(grpcServerOptions['grpc.max_connection_idle_ms'], httpLimits.http2SessionIdleTimeoutMs);
});

test('a session without a call is closed once idle; one with a quiet call open is not', { timeout: 30_000 }, async () => {
  const idle = http2.connect(url);
  const busy = http2.connect(url);
  for (const session of [idle, busy]) session.on('error', () => undefined);
  try {
    await Promise.all([once(idle, 'connect'), once(busy, 'connect')]);
    const call = busy.request({ ':method': 'POST', ':path': '/fermata.v1.Timers/StreamAddTimers', 'content-type': 'application/grpc', te: 'trailers' }, { endStream: false });
    call.on('error', () => undefined);
    let busyGoaway = false;
    busy.once('goaway', () => (busyGoaway = true));
    await withTimeout(once(idle, 'goaway'), waitMs, 'the idle session\'s GOAWAY');
    // Three idle times more: the session with a call open must still be served.
    await sleep(3 * idleMs);
    assert.equal(busyGoaway, false, 'no GOAWAY on the session with a call open');
    assert.equal(busy.closed || busy.destroyed, false);
    await withTimeout(new Promise<void>((resolve, reject) => busy.ping((err) => (err === null ? resolve() : reject(err)))), waitMs, 'a PING on the busy session');
    call.close(http2.constants.NGHTTP2_CANCEL);
  } finally {
    idle.destroy();
    busy.destroy();
  }
});
