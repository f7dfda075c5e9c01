// The gRPC health service follows the service's readiness as GET /readyz does: NOT_SERVING
// while the delivery workers warm up, SERVING once they are warm, NOT_SERVING once the log is
// poisoned (a failed fsync), and a service over the reopened engine SERVING again. A
// fermata.v1.Timers (with health) on a grpc-js server in this process, over a simulated file
// system whose fsync can be made to fail; the client is grpc-js's, from grpc-health-check's own
// definition of grpc.health.v1.Health. Loopback only.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { credentials, makeClientConstructor, Server, ServerCredentials, type Client, type ClientReadableStream, type ServiceError } from '@grpc/grpc-js';
import { service as healthService } from 'grpc-health-check';
import pino from 'pino';
import { AdmitCoalescer } from '../../engine/admit-coalescer.ts';
import { Engine } from '../../engine/engine.ts';
import { Access } from '../../ingest/auth/access.ts';
import { TimersService, timersServiceName } from '../../ingest/grpc/timers-service.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';
import { withTimeout } from '../helpers/timeout.ts';

const waitMs = 10_000;
const t0 = 1_796_220_000_000;

type Status = 'SERVING' | 'NOT_SERVING' | 'UNKNOWN' | 'SERVICE_UNKNOWN';
type HealthClient = Client & {
  check(request: { service: string }, callback: (err: ServiceError | null, response?: { status: Status }) => void): void;
  watch(request: { service: string }): ClientReadableStream<{ status: Status }>;
};
const HealthClientConstructor = makeClientConstructor(healthService, 'Health') as unknown as new (address: string, creds: ReturnType<typeof credentials.createInsecure>) => HealthClient;

interface Served {
  readonly engine: Engine;
  readonly timers: TimersService;
  readonly server: Server;
  readonly client: HealthClient;
}

const fs = new SimFileSystem({ seed: 44 });
let warm = false;
const open: Served[] = [];

async function serve(): Promise<Served> {
  const engine = await Engine.open({ dataDir: '/data', fs, clock: { now: () => t0 } });
  const timers = new TimersService({ engine, logger: pino({ level: 'silent' }), access: new Access([]), readiness: { engine, warm: () => warm } });
  const server = new Server();
  timers.addTo(server);
  const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (err, bound) => (err === null ? resolve(bound) : reject(err))));
  const served = { engine, timers, server, client: new HealthClientConstructor(`127.0.0.1:${port}`, credentials.createInsecure()) };
  open.push(served);
  return served;
}

function check(client: HealthClient, service: string): Promise<Status> {
  return withTimeout(
    new Promise<Status>((resolve, reject) => client.check({ service }, (err, response) => (err === null && response !== undefined ? resolve(response.status) : reject(err ?? new Error('no response'))))),
    waitMs,
    `Check(${JSON.stringify(service)})`,
  );
}

async function bothAre(client: HealthClient, status: Status, why: string): Promise<void> {
  assert.equal(await check(client, ''), status, `the server: ${why}`);
  assert.equal(await check(client, timersServiceName), status, `${timersServiceName}: ${why}`);
}

let first: Served;

before(async () => {
  first = await serve();
});

after(async () => {
  for (const { timers, server, client, engine } of open) {
    client.close();
    timers.stopping();
    server.forceShutdown();
    await engine.close().catch(() => undefined);
  }
});

test('health is NOT_SERVING while the delivery workers warm up, SERVING once they are warm', async () => {
  await bothAre(first.client, 'NOT_SERVING', 'warming up');
  warm = true;
  await bothAre(first.client, 'SERVING', 'warm');
});

test('a poisoned log makes health NOT_SERVING, and Watch hears it; a service over the reopened engine is SERVING again', async () => {
  warm = true;
  const watch = first.client.watch({ service: timersServiceName });
  const heard: Status[] = [];
  const notServing = new Promise<void>((resolve) =>
    watch.on('data', ({ status }: { status: Status }) => {
      heard.push(status);
      if (status === 'NOT_SERVING') resolve();
    }),
  );
  watch.on('error', () => undefined);
  fs.failAfter('datasync', 0, 'EIO');
  await assert.rejects(new AdmitCoalescer(first.engine).admitOne({ fireAtMs: t0 + 60_000, target: 'https://example.test/hook', payload: new Uint8Array(0), queue: 'default', key: 'k' }));
  assert.ok(first.engine.log.poisoned !== undefined, 'the failed fsync poisoned the log');
  await bothAre(first.client, 'NOT_SERVING', 'the log is poisoned');
  await withTimeout(notServing, waitMs, 'Watch to hear NOT_SERVING');
  assert.deepEqual(heard, ['SERVING', 'NOT_SERVING']);
  watch.cancel();

  await first.engine.close().catch(() => undefined);
  const next = await serve();
  await bothAre(next.client, 'SERVING', 'the reopened engine');
});
