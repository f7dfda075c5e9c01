// The measurements behind decision 0022 (docs/decisions/0022-client-transport.md), against a
// real `fermata serve` (h2c on loopback) in a child process, all in this one process so the
// figures are ratios of one run: the machine is shared.
//
//   get       GET /v1/timers/{id}, 64 in flight: @fermata/client (node:http2, one session)
//             against undici's H2CClient request() (its body read as JSON)
//   add       single adds, 64 in flight: the client's add() on the shared add stream, one
//             POST /v1/timers per add over one node:http2 session, and the client over HTTP/1.1
//
// Clients take turns round by round (A B C, B C A, …); each figure is its median round: the rate
// and this process's CPU time per request (the service is another process).
// Run: node bench/client-transport.ts [--rounds N] (prints one JSON line a figure).
import http2 from 'node:http2';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import { H2CClient } from 'undici';
import { FermataClient } from '@fermata/client';
import { startService } from '../test/helpers/service.ts';

const { values } = parseArgs({ options: { rounds: { type: 'string', default: '5' } } });
const rounds = Number(values.rounds);
const inFlight = 64;
const getsPerRound = 4000;
const addsPerRound = 2000;
const target = 'http://127.0.0.1:9/hook';

interface Figure {
  rates: number[];
  cpuUs: number[];
}

async function measure(figure: Figure, count: number, one: (i: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  const cpu = process.cpuUsage();
  const start = performance.now();
  await Promise.all(
    Array.from({ length: inFlight }, async () => {
      while (next < count) await one(next++);
    }),
  );
  const seconds = (performance.now() - start) / 1000;
  const used = process.cpuUsage(cpu);
  figure.rates.push(count / seconds);
  figure.cpuUs.push((used.user + used.system) / count);
}

const median = (values: number[]): number => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] as number;

const dir = mkdtempSync(join(tmpdir(), 'fermata-client-bench-'));
const service = await startService(dir);
try {
  const client = new FermataClient({ url: service.url });
  const h1 = new FermataClient({ url: service.url, protocol: 'http/1.1' });
  const undici = new H2CClient(service.url, { maxConcurrentStreams: 256 });
  const session = http2.connect(service.url);
  const { id } = await client.add({ delay_ms: 3_600_000, target });

  const postOne = (): Promise<void> =>
    new Promise((resolve, reject) => {
      const stream = session.request({ ':method': 'POST', ':path': '/v1/timers', 'content-type': 'application/json' });
      stream.on('response', (headers) => {
        if (headers[':status'] !== 201) reject(new Error(`status ${headers[':status']}`));
      });
      const chunks: Buffer[] = [];
      stream.on('data', (chunk: Buffer) => chunks.push(chunk));
      stream.on('end', () => {
        JSON.parse(Buffer.concat(chunks).toString());
        resolve();
      });
      stream.on('error', reject);
      stream.end(JSON.stringify({ delay_ms: 3_600_000, target }));
    });

  const gets: Record<string, [Figure, () => Promise<unknown>]> = {
    client_node_http2: [{ rates: [], cpuUs: [] }, () => client.get(id)],
    undici_h2c: [{ rates: [], cpuUs: [] }, async () => (await undici.request({ method: 'GET', path: `/v1/timers/${id}`, headers: { accept: 'application/json' } })).body.json()],
  };
  const adds: Record<string, [Figure, () => Promise<unknown>]> = {
    client_add_stream: [{ rates: [], cpuUs: [] }, () => client.add({ delay_ms: 3_600_000, target })],
    post_per_add_h2: [{ rates: [], cpuUs: [] }, postOne],
    client_add_http1: [{ rates: [], cpuUs: [] }, () => h1.add({ delay_ms: 3_600_000, target })],
  };
  // Warm-up: every client's session open and its code hot.
  for (const [figure, one] of [...Object.values(gets), ...Object.values(adds)]) await measure({ ...figure, rates: [], cpuUs: [] }, 500, one);
  for (let round = 0; round < rounds; round++) {
    for (const table of [gets, adds]) {
      const names = Object.keys(table);
      for (let k = 0; k < names.length; k++) {
        const [figure, one] = table[names[(k + round) % names.length] as string] as [Figure, () => Promise<unknown>];
        await measure(figure, table === gets ? getsPerRound : addsPerRound, one);
      }
    }
  }
  for (const [group, table] of [['get', gets], ['add', adds]] as const) {
    for (const [name, [figure]] of Object.entries(table)) {
      process.stdout.write(`${JSON.stringify({ name: `client.${group}.${name}.per_s`, value: Math.round(median(figure.rates)), unit: '1/s' })}\n`);
      process.stdout.write(`${JSON.stringify({ name: `client.${group}.${name}.cpu_us`, value: Math.round(median(figure.cpuUs) * 10) / 10, unit: 'us' })}\n`);
    }
  }
  process.stdout.write(`${JSON.stringify({ name: 'client.meta', node: process.version, rounds, inFlight, load: (await import('node:os')).loadavg()[0] })}\n`);
  await client.close();
  await h1.close();
  await undici.close();
  session.close();
} finally {
  service.child.kill('SIGKILL');
  await service.exited;
  rmSync(dir, { recursive: true, force: true });
}
