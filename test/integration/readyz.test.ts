// /readyz and a nearly full disk. In process, over real sockets (HTTP/1.1 and HTTP/2), with the
// free space read from a statfs double and a manual clock, so a full disk is simulated without
// filling this machine's: red below the minimum, naming the reason and the free bytes, green
// again when space returns, readings cached for the check interval and shared by concurrent
// probes, and red when statfs itself fails. Then the real `fermata serve` with
// "readiness"."disk_free_bytes_min" set above any real disk: red from the real statfs, while
// writes still go through.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import http2 from 'node:http2';
import type net from 'node:net';
import { join } from 'node:path';
import { test } from 'node:test';
import { pino } from 'pino';
import { Engine } from '../../engine/engine.ts';
import { DiskSpaceCheck, type FreeBlocks } from '../../ingest/http/listen/disk-space.ts';
import { openApiDocument } from '../../ingest/http/routes/openapi.ts';
import { createHttpServer } from '../../ingest/http/server.ts';
import { binPath, serviceEnv, startService } from '../helpers/service.ts';
import { withTimeout } from '../helpers/timeout.ts';
import { testScratch } from '../helpers/scratch.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';

const requestTimeoutMs = 5_000;
const blockBytes = 4096;
const freeBytesMin = 1_000 * blockBytes;
const checkIntervalMs = 1000;

const { children, tempDir } = testScratch('fermata-readyz');

interface Answer {
  readonly status: number;
  readonly body: Record<string, unknown>;
}

async function fetchReadyz(url: string): Promise<Answer> {
  const response = await fetch(`${url}/readyz`, { signal: AbortSignal.timeout(requestTimeoutMs) });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

async function h2Readyz(url: string): Promise<Answer> {
  const session = http2.connect(url);
  try {
    const answer = new Promise<Answer>((resolve, reject) => {
      const stream = session.request({ ':path': '/readyz' });
      let status = 0;
      let body = '';
      stream.setEncoding('utf8');
      stream.on('response', (headers) => (status = Number(headers[':status'])));
      stream.on('data', (chunk: string) => (body += chunk));
      stream.on('end', () => resolve({ status, body: JSON.parse(body) as Record<string, unknown> }));
      stream.on('error', reject);
      session.on('error', reject);
    });
    return await withTimeout(answer, requestTimeoutMs, 'HTTP/2 GET /readyz');
  } finally {
    session.close();
  }
}

/** A not-ready body holds only what the OpenAPI document's Health schema names. */
function assertHealthShape(body: Record<string, unknown>): void {
  const documented = Object.keys(openApiDocument.components.schemas.Health.properties);
  for (const key of Object.keys(body)) assert.ok(documented.includes(key), `"${key}" is not in the documented Health schema`);
}

test('/readyz turns red on a nearly full disk, names the reason and the free bytes, and turns green again when space returns', { timeout: 30_000 }, async () => {
  let freeBlocks = 10_000;
  let failure: Error | undefined;
  let reads = 0;
  let nowMs = 0;
  const statfs = async (path: string): Promise<FreeBlocks> => {
    reads++;
    assert.equal(path, '/data', 'the data directory is the one watched');
    if (failure !== undefined) throw failure;
    return { bavail: freeBlocks, frsize: blockBytes };
  };
  const disk = new DiskSpaceCheck({ dir: '/data', freeBytesMin, checkIntervalMs, statfs, now: () => nowMs });
  const engine = await Engine.open({ dataDir: '/data', fs: new SimFileSystem({ seed: 41 }) });
  const app = createHttpServer({ logger: pino({ level: 'silent' }), engine, disk });
  try {
    await app.listen({ host: '127.0.0.1', port: 0 });
    const url = `http://127.0.0.1:${(app.server.address() as net.AddressInfo).port}`;
    assert.deepEqual(await fetchReadyz(url), { status: 200, body: { status: 'ready' } });
    assert.equal(reads, 1);

    freeBlocks = 999; // one block short of the minimum
    assert.deepEqual(await fetchReadyz(url), { status: 200, body: { status: 'ready' } }, 'inside the check interval the last reading answers');
    assert.equal(reads, 1, 'no second statfs inside the interval');

    nowMs += checkIntervalMs;
    const red = await fetchReadyz(url);
    assert.equal(red.status, 503);
    assert.equal(red.body.status, 'not-ready');
    assert.equal(red.body.free_bytes, 999 * blockBytes);
    assert.match(String(red.body.reason), new RegExp(`disk nearly full: ${999 * blockBytes} bytes free for /data, below the minimum of ${freeBytesMin}`));
    assertHealthShape(red.body);
    assert.deepEqual(await h2Readyz(url), red, 'the same over HTTP/2');
    assert.equal(reads, 2);
    assert.equal((await fetch(`${url}/healthz`)).status, 200, 'alive, only not ready');

    freeBlocks = 1_000; // exactly the minimum is enough
    nowMs += checkIntervalMs;
    assert.deepEqual(await h2Readyz(url), { status: 200, body: { status: 'ready' } }, 'green again once space returns');

    failure = Object.assign(new Error('EIO: i/o error, statfs'), { code: 'EIO' });
    nowMs += checkIntervalMs;
    const unreadable = await fetchReadyz(url);
    assert.equal(unreadable.status, 503);
    assert.equal(unreadable.body.free_bytes, undefined);
    assert.match(String(unreadable.body.reason), /cannot read the free space for \/data: EIO/);
    assertHealthShape(unreadable.body);
  } finally {
    await app.close();
    await engine.close();
  }
});

test('probes that arrive while free space is being read share that one reading', async () => {
  let reads = 0;
  const pending = Promise.withResolvers<FreeBlocks>();
  const disk = new DiskSpaceCheck({
    dir: '/data',
    freeBytesMin,
    checkIntervalMs,
    statfs: () => {
      reads++;
      return pending.promise;
    },
    now: () => 0,
  });
  const probes = [disk.verdict(), disk.verdict(), disk.verdict()];
  pending.resolve({ bavail: 1, frsize: blockBytes });
  const verdicts = await Promise.all(probes);
  assert.equal(reads, 1);
  for (const verdict of verdicts) assert.deepEqual(verdict, verdicts[0]);
  assert.equal(verdicts[0]?.ok, false);
});

test('fermata serve: "readiness"."disk_free_bytes_min" above the real free space turns /readyz red from the real statfs and refuses adds (507), not cancels', { timeout: 60_000 }, async () => {
  const dir = tempDir('serve');
  const config = join(dir, 'fermata.json');
  writeFileSync(config, JSON.stringify({ readiness: { disk_free_bytes_min: Number.MAX_SAFE_INTEGER } }));
  const service = await startService(join(dir, 'data'), (child) => children.add(child), { args: ['--config', config] });
  try {
    const red = await fetchReadyz(service.url);
    assert.equal(red.status, 503);
    const freeBytes = red.body.free_bytes;
    assert.ok(typeof freeBytes === 'number' && freeBytes > 0 && freeBytes < Number.MAX_SAFE_INTEGER, `free bytes from statfs: ${String(freeBytes)}`);
    assert.match(String(red.body.reason), new RegExp(`for ${join(dir, 'data')}, below the minimum of ${Number.MAX_SAFE_INTEGER}`));
    const added = await fetch(`${service.url}/v1/timers`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ delay_ms: 60_000, target: 'https://example.com/hook' }),
      signal: AbortSignal.timeout(requestTimeoutMs),
    });
    assert.equal(added.status, 507, 'as etcd past its space quota: adds are refused, and the space left is kept for cancels and delivery outcomes');
    const refusal = (await added.json()) as { error: { code: string; message: string } };
    assert.equal(refusal.error.code, 'DISK_FULL');
    assert.match(refusal.error.message, /adds are refused while fewer than \d+ bytes are free/);
    assert.doesNotMatch(refusal.error.message, new RegExp(dir), 'the data directory is not shown to clients');
    const cancelled = await fetch(`${service.url}/v1/timers/${'0'.repeat(26)}`, { method: 'DELETE', signal: AbortSignal.timeout(requestTimeoutMs) });
    assert.notEqual(cancelled.status, 507, 'cancels are not refused for want of space');
  } finally {
    service.child.kill('SIGKILL');
  }

  const green = await startService(join(dir, 'data2'), (child) => children.add(child));
  try {
    // Nothing is due: the service listens first and warms its delivery workers up, /readyz red until then.
    while (!green.output().includes('"msg":"delivery workers warm"')) await new Promise((resolve) => setTimeout(resolve, 20));
    assert.deepEqual(await fetchReadyz(green.url), { status: 200, body: { status: 'ready' } }, 'the default minimum on this machine\'s disk');
  } finally {
    green.child.kill('SIGKILL');
  }

  for (const value of [-1, 1.5, '1000', null]) {
    writeFileSync(config, JSON.stringify({ readiness: { disk_free_bytes_min: value } }));
    const child = spawn(process.execPath, [binPath, 'serve', '--config', config, '--data', join(dir, 'data3'), '--listen', '127.0.0.1:0'], { env: serviceEnv(), stdio: ['ignore', 'ignore', 'pipe'] });
    children.add(child);
    let stderr = '';
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
    const code = await withTimeout(new Promise<number | null>((resolve) => child.on('close', resolve)), 20_000, 'fermata to refuse the config');
    assert.equal(code, 2, `${JSON.stringify(value)}: ${stderr}`);
    assert.match(stderr, /"readiness\.disk_free_bytes_min" must be a whole number of bytes/);
  }
});
