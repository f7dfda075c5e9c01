// HTTP/3 through the supervised Caddy (`fermata serve --http3 PORT`), driven by real HTTP/3
// clients no one here wrote: headless Chromium (Debian chromium) forced onto QUIC for the
// origin, posting a JSON timer and an Arrow batch with fetch() and reporting
// performance entries' nextHopProtocol; and gtlsclient (Debian ngtcp2-client). The timers are
// then looked up on the cleartext port, and Caddy's access log must show the requests as
// HTTP/3.0. Supervision: a Caddy killed with SIGKILL is started again, and SIGTERM stops both.
// Without caddy, or without both clients, the test skips saying which; with one client it runs
// that one and says the other is missing. Under CI a missing one fails (test/helpers/tools.ts).
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { Binary, makeData, makeVector, Table, tableToIPC, Utf8, vectorFromArray } from 'apache-arrow';
import { forceQuicFlag, freePort, openChromium, spkiHash, waitFor } from '../helpers/chromium.ts';
import { binPath, serviceEnv, startService } from '../helpers/service.ts';
import { run } from '../helpers/python-venv.ts';
import { testScratch } from '../helpers/scratch.ts';
import { withTimeout } from '../helpers/timeout.ts';
import { skipOrFail, toolOrNote, toolOrSkip } from '../helpers/tools.ts';

const scratch = testScratch('fermata-http3');
const dayMs = 86_400_000;

function arrowBatch(rows: number): Buffer {
  const payloads = Array.from({ length: rows }, (_, i) => Buffer.from([i, 0, 255, 7]));
  const offsets = new Int32Array(rows + 1);
  payloads.forEach((payload, i) => (offsets[i + 1] = (offsets[i] as number) + payload.length));
  const ipc = tableToIPC(
    new Table({
      fire_at: makeVector(BigInt64Array.from({ length: rows }, (_, i) => BigInt(Date.now() + dayMs + i))),
      target: vectorFromArray(Array.from({ length: rows }, () => 'https://hooks.example.com/h3'), new Utf8()),
      payload: makeVector(makeData({ type: new Binary(), length: rows, valueOffsets: offsets, data: Buffer.concat(payloads) })),
    }),
    'stream',
  );
  return Buffer.from(ipc.buffer, ipc.byteOffset, ipc.byteLength);
}

interface AccessEntry {
  readonly request: { readonly proto: string; readonly method: string; readonly uri: string; readonly headers: Record<string, string[]> };
  readonly status: number;
}

function accessLog(dataDir: string): AccessEntry[] {
  let text: string;
  try {
    text = readFileSync(join(dataDir, 'http3', 'access.log'), 'utf8');
  } catch {
    return [];
  }
  return text.split('\n').filter((line) => line !== '').map((line) => JSON.parse(line) as AccessEntry);
}

test('--http3 without caddy is a usage error naming the package', async () => {
  const result = await run(process.execPath, [binPath, 'serve', '--data', scratch.tempDir('nocaddy'), '--listen', '127.0.0.1:0', '--http3', '18443'], 30_000, 'fermata serve', serviceEnv({ PATH: '/nonexistent' }));
  assert.equal(result.code, 2, result.stderr);
  assert.match(result.stderr, /install the Debian package caddy/);
});

test('HTTP/3 through Caddy: Chromium and gtlsclient over QUIC, timers stored, alt-svc advertised, Caddy supervised', { timeout: 180_000 }, async (t) => {
  if (toolOrSkip(t, 'caddy') === undefined || toolOrSkip(t, 'curl') === undefined) return;
  const chromium = toolOrNote(t, 'chromium', 'the browser client is skipped');
  const gtlsclient = toolOrNote(t, 'gtlsclient', 'that client is skipped');
  if (chromium === undefined && gtlsclient === undefined) return skipOrFail(t, 'no HTTP/3 client is installed (Debian packages chromium, ngtcp2-client)');
  const port = await freePort();
  const dataDir = scratch.tempDir('h3');
  const service = await startService(dataDir, (child) => scratch.children.add(child), { args: ['--http3', String(port)], tls: true });
  await waitFor('the "http3 listening" line', () => service.output().includes('"msg":"http3 listening"'));
  const h3Url = `https://127.0.0.1:${port}`;

  // The TLS port advertises the HTTP/3 port.
  const tlsHealth = spawnSync('curl', ['-sk', '-o', '/dev/null', '-D', '-', `${service.tlsUrl}/healthz`], { encoding: 'utf8', timeout: 20_000 });
  assert.match(tlsHealth.stdout, new RegExp(`alt-svc: h3=":${port}"; ma=86400`, 'i'));

  const stored: string[] = [];
  if (chromium !== undefined) {
    const spki = spkiHash(join(dataDir, 'http3', 'self-signed-cert.pem'));
    const { browser, page } = await openChromium({
      url: `${h3Url}/healthz`,
      profileDir: scratch.tempDir('chromium'),
      trustSpki: spki,
      flags: [forceQuicFlag(`127.0.0.1:${port}`)],
      onSpawn: (child) => scratch.children.add(child),
    });
    try {
      const fireAt = new Date(Date.now() + dayMs).toISOString();
      const json = await page.evaluate<{ status: number; body: { id: string }; protocol: string; page: string }>(`(async () => {
        const answer = await fetch('/v1/timers', { method: 'POST', headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ fire_at: '${fireAt}', target: 'https://hooks.example.com/h3', payload: 'from chromium' }) });
        const body = await answer.json();
        const entries = performance.getEntriesByType('resource').filter((entry) => entry.name.endsWith('/v1/timers'));
        return { status: answer.status, body, protocol: entries.at(-1).nextHopProtocol, page: performance.getEntriesByType('navigation')[0].nextHopProtocol };
      })()`);
      assert.equal(json.status, 201, JSON.stringify(json));
      assert.equal(json.protocol, 'h3', 'fetch went over HTTP/3');
      assert.equal(json.page, 'h3', 'the page itself came over HTTP/3');
      stored.push(json.body.id);

      const arrow = arrowBatch(50).toString('base64');
      const bulk = await page.evaluate<{ status: number; body: { accepted: number; duplicates: number; ids: string[] } }>(`(async () => {
        const bytes = Uint8Array.from(atob('${arrow}'), (char) => char.charCodeAt(0));
        const answer = await fetch('/v1/timers', { method: 'POST', headers: { 'content-type': 'application/vnd.apache.arrow.stream' }, body: bytes });
        return { status: answer.status, body: await answer.json() };
      })()`);
      assert.deepEqual([bulk.status, bulk.body.accepted, bulk.body.duplicates, bulk.body.ids.length], [201, 50, 0, 50]);
    } finally {
      page.close();
      browser.kill('SIGKILL');
    }
  }

  if (gtlsclient !== undefined) {
    const gtls = await run(gtlsclient, ['--quiet', '--exit-on-all-streams-close', '127.0.0.1', String(port), `${h3Url}/v1/stats`], 30_000, 'gtlsclient');
    assert.equal(gtls.code, 0, gtls.stderr);
  }

  // What reached fermata is stored, and Caddy saw every request over HTTP/3.
  for (const id of stored) assert.equal((await fetch(`${service.url}/v1/timers/${id}`)).status, 200);
  const stats = (await (await fetch(`${service.url}/v1/stats`)).json()) as { pending: number };
  assert.equal(stats.pending, stored.length === 0 ? 0 : 51);
  await waitFor('the access log', () => accessLog(dataDir).some((entry) => entry.request.uri === '/v1/stats' || entry.request.method === 'POST'));
  const entries = accessLog(dataDir);
  const posts = entries.filter((entry) => entry.request.method === 'POST');
  if (stored.length > 0) assert.equal(posts.length, 2);
  for (const entry of posts) assert.equal(entry.request.proto, 'HTTP/3.0');
  if (gtlsclient !== undefined) {
    const viaGtls = entries.find((entry) => entry.request.uri === '/v1/stats');
    assert.equal(viaGtls?.request.proto, 'HTTP/3.0');
    assert.equal(viaGtls?.status, 200);
  }

  // Supervision: a killed Caddy is started again and serves; SIGTERM stops fermata and Caddy.
  const pidOf = (): number | undefined => {
    const lines = service.output().split('\n').filter((line) => line.includes('"msg":"caddy running"') || line.includes('"msg":"caddy restarted"'));
    const last = lines.at(-1);
    return last === undefined ? undefined : (JSON.parse(last) as { pid: number }).pid;
  };
  const first = pidOf();
  assert.ok(first !== undefined);
  process.kill(first, 'SIGKILL');
  await waitFor('caddy to be restarted', () => pidOf() !== first);
  await waitFor('the restarted caddy to answer', async () => spawnSync('curl', ['-sk', '-o', '/dev/null', '-w', '%{http_code}', `${h3Url}/healthz`], { encoding: 'utf8', timeout: 5_000 }).stdout === '200');
  const second = pidOf() as number;
  service.child.kill('SIGTERM');
  await withTimeout(service.exited, 30_000, 'the service to stop');
  assert.equal(service.child.exitCode, 0, service.output());
  assert.throws(() => process.kill(second, 0), { code: 'ESRCH' }, 'caddy stopped with the service');
});

test('a Caddy left running by a fermata killed with SIGKILL is stopped by the next start, whose own Caddy serves', { timeout: 90_000 }, async (t) => {
  if (toolOrSkip(t, 'caddy') === undefined || toolOrSkip(t, 'curl') === undefined) return;
  const port = await freePort();
  const dataDir = scratch.tempDir('h3-left');
  const caddyPid = (service: { output: () => string }): number | undefined => {
    const line = service.output().split('\n').findLast((entry) => entry.includes('"msg":"caddy running"'));
    return line === undefined ? undefined : (JSON.parse(line) as { pid: number }).pid;
  };
  // A zombie has an empty command line: it holds no port.
  const alive = (pid: number): boolean => {
    try {
      return readFileSync(`/proc/${pid}/cmdline`, 'utf8').length > 0;
    } catch {
      return false;
    }
  };
  const first = await startService(dataDir, (child) => scratch.children.add(child), { args: ['--http3', String(port)], tls: true });
  await waitFor('the first caddy', () => caddyPid(first) !== undefined);
  const left = caddyPid(first) as number;
  first.child.kill('SIGKILL');
  await withTimeout(first.exited, 10_000, 'the first service to die');
  assert.ok(alive(left), 'its caddy outlives a fermata killed with SIGKILL');

  const second = await startService(dataDir, (child) => scratch.children.add(child), { args: ['--http3', String(port)], tls: true });
  await waitFor('the second caddy', () => caddyPid(second) !== undefined);
  assert.ok(!alive(left), 'the left-over caddy was stopped');
  assert.match(second.output(), /caddy left running by an earlier start of this data directory: stopping it/);
  const health = spawnSync('curl', ['-sk', '-o', '/dev/null', '-w', '%{http_code}', `https://127.0.0.1:${port}/healthz`], { encoding: 'utf8', timeout: 10_000 });
  assert.equal(health.stdout, '200', 'the new caddy serves the port');
  second.child.kill('SIGTERM');
  await withTimeout(second.exited, 30_000, 'the second service to stop');
});
