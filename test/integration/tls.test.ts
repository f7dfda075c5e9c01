// The TLS port as clients meet it: the real `fermata serve` in a child process with a
// self-signed certificate made here by openssl (the test skips, saying so, where openssl is
// missing). ALPN must hand curl --http2 and Node's http2 client HTTP/2, curl --http1.1 HTTP/1.1;
// both ports must serve one engine; the HTTP/2 limits must be the cleartext port's; SIGTERM must
// drain both ports; bad certificate or key files must stop the start with exit 2 naming the file.
// Every wait is bounded; every child is killed in `after`.
import assert from 'node:assert/strict';
import { execFileSync, spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import http2 from 'node:http2';
import net from 'node:net';
import { join } from 'node:path';
import { before, describe, test } from 'node:test';
import { httpLimits } from '../../engine/limits.ts';
import { curl, curlRequest, curlWithoutHttp2, text } from '../helpers/curl.ts';
import { skipOrFail, skipUnlessTool, toolOrSkip } from '../helpers/tools.ts';
import { binPath, type Service, serviceEnv, startService as startTrackedService } from '../helpers/service.ts';
import { withTimeout } from '../helpers/timeout.ts';
import { testScratch } from '../helpers/scratch.ts';

const exitTimeoutMs = 20_000;
const requestTimeoutMs = 5_000;

/** Without openssl no certificate can be made for the TLS port. */
const noOpenssl = skipUnlessTool('openssl');

const { children, tempDir } = testScratch('fermata-tls');

interface KeyPair {
  readonly cert: string;
  readonly key: string;
}

/** A self-signed P-256 certificate for 127.0.0.1 and localhost, valid one day, written into `dir`. */
function selfSigned(dir: string, name: string): KeyPair {
  const pair = { cert: join(dir, `${name}-cert.pem`), key: join(dir, `${name}-key.pem`) };
  execFileSync(
    'openssl',
    ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '1', '-subj', '/CN=localhost',
      '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost', '-keyout', pair.key, '-out', pair.cert],
    { stdio: 'ignore' },
  );
  return pair;
}

function startService(dataDir: string, args: readonly string[], env: Record<string, string> = {}): Promise<Service> {
  return startTrackedService(dataDir, (child) => children.add(child), { args, env, tls: true });
}

async function stop(service: Service): Promise<number | null> {
  service.child.kill('SIGTERM');
  await withTimeout(service.exited, exitTimeoutMs, 'fermata to exit after SIGTERM');
  return service.child.exitCode;
}

/** Runs `fermata serve …` expected to stop by itself; its exit code and output. */
async function runToExit(args: readonly string[], env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [binPath, 'serve', ...args], { env: serviceEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const code = await withTimeout(new Promise<number | null>((resolve) => child.on('close', (exitCode) => resolve(exitCode))), exitTimeoutMs, `fermata serve ${args.join(' ')} to exit`);
  return { code, stdout, stderr };
}

function h2Connect(url: string, ca: Buffer): Promise<http2.ClientHttp2Session> {
  const session = http2.connect(url, { ca });
  return withTimeout(
    new Promise((resolve, reject) => {
      session.once('connect', () => resolve(session));
      session.once('error', reject);
    }),
    requestTimeoutMs,
    'an HTTP/2 session over TLS',
  );
}

function h2Request(session: http2.ClientHttp2Session, headers: http2.OutgoingHttpHeaders, body?: string): Promise<{ status: number; body: string }> {
  const answer = new Promise<{ status: number; body: string }>((resolve, reject) => {
    const stream = session.request(headers);
    let status = 0;
    let text = '';
    stream.setEncoding('utf8');
    stream.on('response', (responseHeaders) => (status = Number(responseHeaders[':status'])));
    stream.on('data', (chunk: string) => (text += chunk));
    stream.on('end', () => resolve({ status, body: text }));
    stream.on('error', reject);
    stream.end(body);
  });
  return withTimeout(answer, requestTimeoutMs, `HTTP/2 ${String(headers[':method'] ?? 'GET')} ${String(headers[':path'])}`);
}

describe('the TLS port', { skip: noOpenssl, concurrency: 3 }, () => {
  let certs: KeyPair;
  let other: KeyPair;
  let ca: Buffer;
  before(() => {
    const dir = tempDir('certs');
    certs = selfSigned(dir, 'service');
    other = selfSigned(dir, 'other');
    ca = readFileSync(certs.cert);
  });

  test('ALPN: curl --http2 and Node http2 get HTTP/2, curl --http1.1 gets HTTP/1.1; a timer added over TLS is read back over cleartext', { timeout: 60_000 }, async (t) => {
    const service = await startService(tempDir('alpn'), ['--tls-cert', certs.cert, '--tls-key', certs.key]);
    try {
      const tlsUrl = new URL(service.tlsUrl as string);
      assert.equal(tlsUrl.hostname, '127.0.0.1', 'the TLS port takes the --listen host by default');
      assert.notEqual(Number(tlsUrl.port), service.port, 'a port of its own (0 picks one when --listen has port 0)');

      await t.test('curl', async (st) => {
        if (toolOrSkip(st, 'curl') === undefined) return;
        const health = await curlRequest({ url: `${service.tlsUrl}/healthz`, flags: ['--cacert', certs.cert] });
        assert.deepEqual([health.status, text(health), health.httpVersion], [200, '{"status":"ok"}', '1.1']);
        if (!curl.http2) return skipOrFail(st, curlWithoutHttp2);
        // Nothing is due: the service listens first and warms its delivery workers up, /readyz red until then.
        while (!service.output().includes('"msg":"delivery workers warm"')) await new Promise((resolve) => setTimeout(resolve, 20));
        const ready = await curlRequest({ protocol: 'http2', url: `${service.tlsUrl}/readyz`, flags: ['--cacert', certs.cert] });
        assert.deepEqual([ready.status, text(ready), ready.httpVersion], [200, '{"status":"ready"}', '2']);
      });

      const session = await h2Connect(service.tlsUrl as string, ca);
      try {
        assert.equal(session.alpnProtocol, 'h2', 'ALPN chose HTTP/2');
        assert.equal(session.encrypted, true);
        const added = await h2Request(
          session,
          { ':method': 'POST', ':path': '/v1/timers', 'content-type': 'application/json' },
          JSON.stringify({ delay_ms: 3_600_000, target: 'https://example.com/hook', payload: 'through TLS', key: 'tls-1' }),
        );
        assert.equal(added.status, 201, added.body);
        const { id } = JSON.parse(added.body) as { id: string };
        const read = await fetch(`${service.url}/v1/timers/${id}`, { signal: AbortSignal.timeout(requestTimeoutMs) });
        assert.equal(read.status, 200);
        assert.deepEqual(
          { ...((await read.json()) as Record<string, unknown>), fire_at: 'any', created_at: 'any' },
          { id, state: 'pending', revision: 1, fire_at: 'any', created_at: 'any', attempts: 0, queue: 'default', key: 'tls-1', last_status: null, last_error: null, last_attempt_at: null, next_attempt_at: null, callback: null, failure_callback: null, target: 'https://example.com/hook', headers: {}, payload: 'through TLS', payload_base64: null },
        );
        assert.equal(session.remoteSettings.maxConcurrentStreams, httpLimits.http2ConcurrentStreamsMax, 'the HTTP/2 limits of the cleartext port');
        assert.equal(session.remoteSettings.maxHeaderListSize, httpLimits.headerListBytesMax);
      } finally {
        session.close();
      }
      assert.equal(await stop(service), 0);
    } finally {
      service.child.kill('SIGKILL');
    }
  });

  test('a certificate not signed by the client\'s CA is refused by the client: the port really serves this certificate', { timeout: 60_000 }, async () => {
    const service = await startService(tempDir('trust'), ['--tls-cert', certs.cert, '--tls-key', certs.key]);
    try {
      await assert.rejects(h2Connect(service.tlsUrl as string, readFileSync(other.cert)), /self-signed|unable to verify|certificate/i);
      assert.equal(await stop(service), 0);
    } finally {
      service.child.kill('SIGKILL');
    }
  });

  test('SIGTERM drains both ports: open HTTP/2 sessions on each get GOAWAY, the service exits 0 without waiting out the drain bound', { timeout: 60_000 }, async () => {
    const service = await startService(tempDir('drain'), ['--tls-cert', certs.cert, '--tls-key', certs.key]);
    try {
      const secure = await h2Connect(service.tlsUrl as string, ca);
      const cleartext = http2.connect(service.url);
      cleartext.on('error', () => undefined);
      secure.on('error', () => undefined);
      assert.equal((await h2Request(secure, { ':path': '/healthz' })).status, 200);
      assert.equal((await h2Request(cleartext, { ':path': '/healthz' })).status, 200);
      const goaways = [secure, cleartext].map((session) => new Promise<void>((resolve) => session.once('goaway', () => resolve())));
      assert.equal(await stop(service), 0);
      await withTimeout(Promise.all(goaways), requestTimeoutMs, 'GOAWAY on both sessions');
      assert.doesNotMatch(service.output(), /drain timeout/, 'nothing had to be cut');
      assert.match(service.output(), /"msg":"stopped"/);
    } finally {
      service.child.kill('SIGKILL');
    }
  });

  test('settings: config "tls" keys (paths taken from the file\'s directory) and FERMATA_TLS_* variables; --tls-listen; the "listening" lines', { timeout: 60_000 }, async () => {
    const dir = tempDir('config');
    writeFileSync(join(dir, 'cert.pem'), readFileSync(certs.cert));
    writeFileSync(join(dir, 'key.pem'), readFileSync(certs.key));
    const file = join(dir, 'fermata.json');
    writeFileSync(file, JSON.stringify({ tls: { cert: 'cert.pem', key: 'key.pem', listen: '127.0.0.1:0' } }));
    const fromConfig = await startService(join(dir, 'data1'), ['--config', file]);
    try {
      const lines = fromConfig.output().split('\n').filter((line) => line.includes('"msg":"listening"')).map((line) => JSON.parse(line) as Record<string, unknown>);
      assert.equal(lines.length, 2);
      assert.equal(lines[0]?.url, fromConfig.url, 'the cleartext line comes first, as before');
      assert.equal(typeof lines[0]?.data, 'string');
      assert.deepEqual(lines[1], { ...lines[1], url: fromConfig.tlsUrl, alpn: ['h2', 'http/1.1'] });
      const session = await h2Connect(fromConfig.tlsUrl as string, ca);
      session.close();
      assert.equal(await stop(fromConfig), 0);
    } finally {
      fromConfig.child.kill('SIGKILL');
    }

    const fromEnv = await startService(join(dir, 'data2'), [], { FERMATA_TLS_CERT: certs.cert, FERMATA_TLS_KEY: certs.key, FERMATA_TLS_LISTEN: '127.0.0.1:0' });
    try {
      assert.match(fromEnv.tlsUrl as string, /^https:\/\/127\.0\.0\.1:\d+$/);
      assert.equal(await stop(fromEnv), 0);
    } finally {
      fromEnv.child.kill('SIGKILL');
    }
  });

  test('bad certificate or key files exit 2 naming the file; half a TLS setting and a non-loopback TLS port without tokens exit 2', { timeout: 60_000 }, async () => {
    const dir = tempDir('bad');
    const garbage = join(dir, 'garbage.pem');
    writeFileSync(garbage, 'not a certificate\n');
    const missing = join(dir, 'absent.pem');
    const data = join(dir, 'data');
    const cases = [
      { args: ['--tls-cert', garbage, '--tls-key', certs.key], names: garbage, problem: /--tls-cert .*: not a PEM certificate/ },
      { args: ['--tls-cert', certs.cert, '--tls-key', garbage], names: garbage, problem: /--tls-key .*: not a PEM private key/ },
      { args: ['--tls-cert', missing, '--tls-key', certs.key], names: missing, problem: /--tls-cert .*: cannot read it/ },
      { args: ['--tls-cert', certs.cert, '--tls-key', other.key], names: other.key, problem: /does not belong to the certificate/ },
      { args: ['--tls-cert', certs.cert], names: '--tls-cert', problem: /needs both a certificate and its key/ },
      { args: ['--tls-listen', '127.0.0.1:0'], names: '--tls-listen', problem: /needs a certificate and its key/ },
      { args: ['--tls-cert', certs.cert, '--tls-key', certs.key, '--tls-listen', '0.0.0.0:0'], names: 'TLS port', problem: /not a loopback address, needs bearer tokens/ },
      { args: ['--tls-cert', certs.cert, '--tls-key', certs.key, '--tls-listen', 'nowhere'], names: '--tls-listen', problem: /"nowhere" is not HOST:PORT/ },
    ];
    for (const { args, names, problem } of cases) {
      const result = await runToExit(['--data', data, '--listen', '127.0.0.1:0', ...args]);
      assert.equal(result.code, 2, `${args.join(' ')}: ${result.stderr}`);
      assert.ok(result.stderr.includes(names), `${args.join(' ')}: the message names ${names}: ${result.stderr}`);
      assert.match(result.stderr, problem);
      assert.equal(result.stdout, '', 'nothing started, nothing logged');
    }
  });

  test('a TLS port already taken: exit 2, one line on stderr names the address', { timeout: 60_000 }, async () => {
    const taken = net.createServer();
    await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
    try {
      const port = (taken.address() as net.AddressInfo).port;
      const result = await runToExit(['--data', tempDir('taken'), '--listen', '127.0.0.1:0', '--tls-cert', certs.cert, '--tls-key', certs.key, '--tls-listen', `127.0.0.1:${port}`]);
      assert.equal(result.code, 2, result.stdout + result.stderr);
      assert.equal(result.stderr, `port ${port} on 127.0.0.1 is in use\n`);
      assert.doesNotMatch(result.stdout, /"msg":"listening"/, 'no port is announced when one of them fails');
    } finally {
      taken.close();
    }
  });
});
