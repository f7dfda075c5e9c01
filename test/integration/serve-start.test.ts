// What `fermata serve` does to start quickly, and that nothing of it shows later. The launcher
// turns on Node's compile cache (bin/compile-cache.js), and the service writes what its start
// compiled into it once it serves, not only at exit. Modules a start no longer loads before
// listening answer at their first use: GET /metrics (prom-client and the dispatcher's metrics,
// imported at the first scrape; scrapes that meet the build share it), GET /openapi.json (the
// document, built at the first request) and the Flight service (gRPC, imported when --flight
// starts it).
import assert from 'node:assert/strict';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { status } from '@grpc/grpc-js';
import { entryModule } from '../../bin/bundle-entry.js';
import { FlightTestClient } from '../../ingest/flight/flight-client.ts';
import { openApiDocument } from '../../ingest/http/routes/openapi.ts';
import { testScratch } from '../helpers/scratch.ts';
import { flightUrl, startService } from '../helpers/service.ts';

const scratch = testScratch('fermata-serve-start');
/** The cache is written just after the "listening" and "dispatching" lines; a loaded machine may take a while. */
const cacheWaitMs = 20_000;

function filesUnder(dir: string): number {
  try {
    return readdirSync(dir, { recursive: true, withFileTypes: true }).filter((entry) => entry.isFile()).length;
  } catch {
    return 0;
  }
}

test("the launcher turns on Node's compile cache, and the running service writes its start's modules into it", { timeout: 60_000 }, async () => {
  const cacheDir = join(scratch.tempDir('cache'), 'compile-cache');
  const service = await startService(scratch.tempDir('data'), (child) => scratch.children.add(child), { env: { NODE_COMPILE_CACHE: cacheDir } });
  try {
    const deadline = Date.now() + cacheWaitMs;
    // From the sources, hundreds of modules (the service's TypeScript, fastify, the engine); from
    // the bundle (bin/bundle.js), its chunks a start loads: either way more than a few written
    // means the start's graph was.
    const expected = entryModule(new URL('../../', import.meta.url)).endsWith('/dist/main.mjs') ? 8 : 100;
    while (filesUnder(cacheDir) < expected && Date.now() < deadline) await sleep(50);
    assert.ok(filesUnder(cacheDir) >= expected, `the cache holds ${filesUnder(cacheDir)} files`);
    assert.equal(service.child.exitCode, null, 'written while the service runs, not at its exit');
  } finally {
    service.child.kill('SIGTERM');
    await service.exited;
  }
});

test('GET /metrics builds its registry at the first scrape: the engine, peer guard and dispatcher metrics, concurrent scrapes alike; /openapi.json and --flight still answer', { timeout: 60_000 }, async () => {
  const service = await startService(scratch.tempDir('data'), (child) => scratch.children.add(child), { args: ['--flight', '127.0.0.1:0'] });
  const client = new FlightTestClient(await flightUrl(service));
  try {
    const scrapes = await Promise.all([0, 1, 2].map(() => fetch(`${service.url}/metrics`)));
    const bodies = await Promise.all(
      scrapes.map(async (response) => {
        assert.equal(response.status, 200);
        assert.match(response.headers.get('content-type') ?? '', /^text\/plain; version=0\.0\.4/);
        return response.text();
      }),
    );
    for (const body of bodies) {
      for (const metric of ['fermata_timers', 'fermata_wal_appends_total', 'fermata_http_abusive_connections_total', 'fermata_deliveries_total', 'fermata_delivery_failures_total']) {
        assert.match(body, new RegExp(`^# TYPE ${metric} `, 'm'), `${metric} is served`);
      }
    }
    const again = await fetch(`${service.url}/metrics`);
    assert.equal(again.status, 200);
    assert.match(await again.text(), /^fermata_wal_poisoned 0$/m);

    const documents = await Promise.all([0, 1].map(() => fetch(`${service.url}/openapi.json`)));
    for (const response of documents) {
      assert.equal(response.status, 200);
      assert.match(response.headers.get('content-type') ?? '', /^application\/json/);
      assert.deepEqual(await response.json(), JSON.parse(JSON.stringify(openApiDocument)), 'the document, whole');
    }

    const refused = await client.doAction('renew', Buffer.from('lease_nope'));
    assert.equal(refused.error?.code, status.INVALID_ARGUMENT, 'the Flight service answers, in its own words');
    assert.match(refused.error?.details ?? '', /unknown action type "renew"/);
  } finally {
    client.close();
    service.child.kill('SIGTERM');
    await service.exited;
  }
});
