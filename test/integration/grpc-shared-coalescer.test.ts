// HTTP single adds and gRPC AddTimer share one admit coalescer: a JSON add over HTTP/2 and an
// AddTimer read by `fermata serve --grpc` in the same turn of its event loop become one log
// record. The turn is made by stopping the child (SIGSTOP) while both requests are sent, and
// letting it go on (SIGCONT) once they wait in its sockets: it then reads both in one poll.
// The log's last sequence, from /metrics, says how many records the two adds took. Loopback only.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http2 from 'node:http2';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, test } from 'node:test';
import { type Client, credentials, makeClientConstructor, type ServiceDefinition, type ServiceError } from '@grpc/grpc-js';
import { timersPackage } from '../../ingest/grpc/proto-files.ts';
import { timersServiceName } from '../../ingest/grpc/timers-service.ts';
import { testScratch } from '../helpers/scratch.ts';
import { flightUrl, type Service, startService } from '../helpers/service.ts';
import { withTimeout } from '../helpers/timeout.ts';

const scratch = testScratch('fermata-grpc-shared-coalescer');
const waitMs = 10_000;
/** How long the stopped child is left for both requests to reach its sockets (loopback: far more than needed). */
const sendMs = 200;

type TimersClient = Client & { AddTimer(request: object, callback: (err: ServiceError | null, response?: { id: string }) => void): void };

let service: Service;
let grpcClient: TimersClient;
let session: http2.ClientHttp2Session;

async function lastSequence(): Promise<number> {
  const response = await fetch(`${service.url}/metrics`);
  const match = /^fermata_wal_last_sequence (\d+)$/m.exec(await response.text());
  assert.ok(match !== null, 'fermata_wal_last_sequence in /metrics');
  return Number(match[1]);
}

before(async () => {
  service = await startService(scratch.tempDir('data'), (child) => scratch.children.add(child), { args: ['--grpc', '127.0.0.1:0'] });
  const Timers = makeClientConstructor(timersPackage()[timersServiceName] as ServiceDefinition, 'Timers') as unknown as new (address: string, creds: ReturnType<typeof credentials.createInsecure>) => TimersClient;
  grpcClient = new Timers((await flightUrl(service)).replace('grpc+tcp://', ''), credentials.createInsecure());
  await withTimeout(new Promise<void>((resolve, reject) => grpcClient.waitForReady(Date.now() + waitMs, (err) => (err === undefined ? resolve() : reject(err)))), waitMs, 'the gRPC channel');
  session = http2.connect(service.url);
  session.on('error', () => undefined);
  await withTimeout(once(session, 'connect'), waitMs, 'an HTTP/2 session');
});

after(() => {
  grpcClient?.close();
  session?.destroy();
  service?.child.kill('SIGKILL');
});

test('an HTTP/2 JSON add and a gRPC AddTimer read in one turn share one log record', { timeout: 30_000 }, async () => {
  const before = await lastSequence();
  assert.ok(service.child.kill('SIGSTOP'));
  let overHttp: Promise<number>;
  let overGrpc: Promise<string>;
  try {
    const stream = session.request({ ':method': 'POST', ':path': '/v1/timers', 'content-type': 'application/json' });
    overHttp = new Promise<number>((resolve, reject) => {
      stream.on('response', (headers) => resolve(Number(headers[':status'])));
      stream.on('error', reject);
    });
    stream.resume();
    stream.end(JSON.stringify({ delay_ms: 3_600_000, target: 'https://example.test/hook', key: 'over-http' }));
    overGrpc = new Promise<string>((resolve, reject) =>
      grpcClient.AddTimer({ timer: { delay: { seconds: 3600, nanos: 0 }, target: 'https://example.test/hook', key: 'over-grpc' } }, (err, response) => (err === null && response !== undefined ? resolve(response.id) : reject(err ?? new Error('no response')))),
    );
    await sleep(sendMs);
  } finally {
    service.child.kill('SIGCONT');
  }
  assert.equal(await withTimeout(overHttp, waitMs, 'the HTTP add'), 201);
  assert.match(await withTimeout(overGrpc, waitMs, 'the gRPC add'), /\S/);
  assert.equal((await lastSequence()) - before, 1, 'both adds in one record');
});
