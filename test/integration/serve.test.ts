// `fermata serve` as a user runs it: the real bin/fermata.js in a child process on port 0,
// spoken to with fetch (HTTP/1.1), node:http2 (prior knowledge), raw sockets and, when the
// machine has it, the curl binary. Every wait is bounded; every child is killed in `after`.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import http2 from 'node:http2';
import net from 'node:net';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { Duplex } from 'node:stream';
import { describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { pino } from 'pino';
import { Engine } from '../../engine/engine.ts';
import { httpLimits } from '../../engine/limits.ts';
import { http2Preface } from '../../ingest/http/listen/cleartext-listener.ts';
import { createHttpServer } from '../../ingest/http/server.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';
import { withTimeout } from '../helpers/timeout.ts';
import { curl, type CurlProtocol, curlRequest, curlWithoutHttp2, text } from '../helpers/curl.ts';
import { skipOrFail, toolOrSkip } from '../helpers/tools.ts';
import { testScratch } from '../helpers/scratch.ts';

const { drainTimeoutMs } = httpLimits;

const binPath = fileURLToPath(new URL('../../bin/fermata.js', import.meta.url));
const startTimeoutMs = 20_000;
const exitTimeoutMs = 20_000;

type LogLine = Record<string, unknown> & { msg?: string };

interface Exit {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
}

interface Fermata {
  readonly child: ChildProcess;
  readonly lines: LogLine[];
  readonly exited: Promise<Exit>;
  stdout(): string;
  stderr(): string;
  waitForLine(predicate: (line: LogLine) => boolean, what: string, timeoutMs?: number): Promise<LogLine>;
}

interface Service extends Fermata {
  readonly url: string;
  readonly port: number;
}

const { children, tempDir } = testScratch('fermata-serve');

/** The environment of the test run without the service's own variables, plus `extra`. */
function serviceEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, ...extra };
  for (const name of ['FERMATA_DATA', 'FERMATA_LISTEN']) if (!(name in extra)) delete env[name];
  return env;
}


function spawnFermata(args: readonly string[], env: NodeJS.ProcessEnv = serviceEnv()): Fermata {
  const child = spawn(process.execPath, [binPath, ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  const lines: LogLine[] = [];
  let stdout = '';
  let stderr = '';
  const waiters = new Set<{ predicate: (line: LogLine) => boolean; resolve: (line: LogLine) => void }>();
  const exited = new Promise<Exit>((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  // stdio closes after 'exit'; everything the child wrote has been read by then.
  const drained = new Promise<void>((resolve) => child.on('close', () => resolve()));
  createInterface({ input: child.stdout as NodeJS.ReadableStream }).on('line', (text) => {
    stdout += text + '\n';
    let line: LogLine;
    try {
      line = JSON.parse(text) as LogLine;
    } catch {
      return;
    }
    lines.push(line);
    for (const waiter of waiters) if (waiter.predicate(line)) waiter.resolve(line);
  });
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  return {
    child,
    lines,
    exited: exited.then(async (exit) => {
      await drained;
      return exit;
    }),
    stdout: () => stdout,
    stderr: () => stderr,
    waitForLine: (predicate, what, timeoutMs = startTimeoutMs) => {
      const seen = lines.find(predicate);
      if (seen !== undefined) return Promise.resolve(seen);
      const { promise, resolve, reject } = Promise.withResolvers<LogLine>();
      const waiter = { predicate, resolve };
      waiters.add(waiter);
      void exited.then((exit) => reject(new Error(`fermata exited (${exit.code ?? exit.signal}) before ${what}\nstdout:\n${stdout}\nstderr:\n${stderr}`)));
      return withTimeout(promise, timeoutMs, what).finally(() => waiters.delete(waiter));
    },
  };
}

async function startService(dataDir: string, extraArgs: readonly string[] = [], env?: NodeJS.ProcessEnv): Promise<Service> {
  const fermata = spawnFermata(['serve', '--data', dataDir, '--listen', '127.0.0.1:0', ...extraArgs], env);
  return asService(fermata);
}

async function asService(fermata: Fermata): Promise<Service> {
  const listening = await fermata.waitForLine((line) => line.msg === 'listening', 'the "listening" line');
  assert.equal(typeof listening.url, 'string');
  const url = listening.url as string;
  assert.match(url, /^http:\/\/127\.0\.0\.1:\d+$/);
  return { ...fermata, url, port: Number(new URL(url).port) };
}

async function runToExit(args: readonly string[], env?: NodeJS.ProcessEnv): Promise<Exit & { stdout: string; stderr: string; lines: LogLine[] }> {
  const fermata = spawnFermata(args, env);
  const exit = await withTimeout(fermata.exited, exitTimeoutMs, `fermata ${args.join(' ')} to exit`);
  return { ...exit, stdout: fermata.stdout(), stderr: fermata.stderr(), lines: fermata.lines };
}

async function stop(service: Fermata): Promise<Exit> {
  service.child.kill('SIGTERM');
  return withTimeout(service.exited, exitTimeoutMs, 'fermata to exit after SIGTERM');
}

interface Answer {
  readonly status: number;
  readonly body: string;
}

function h2Connect(url: string | URL, options: http2.SecureClientSessionOptions = {}): Promise<http2.ClientHttp2Session> {
  const session = http2.connect(url, options);
  return withTimeout(
    new Promise((resolve, reject) => {
      session.once('connect', () => resolve(session));
      session.once('error', reject);
    }),
    5_000,
    'an HTTP/2 session',
  );
}

function h2Get(session: http2.ClientHttp2Session, path: string): Promise<Answer> {
  const answer = new Promise<Answer>((resolve, reject) => {
    const stream = session.request({ ':path': path });
    let status = 0;
    let body = '';
    stream.setEncoding('utf8');
    stream.on('response', (headers) => (status = Number(headers[':status'])));
    stream.on('data', (chunk: string) => (body += chunk));
    stream.on('end', () => resolve({ status, body }));
    stream.on('error', reject);
  });
  return withTimeout(answer, 5_000, `HTTP/2 GET ${path}`);
}

async function fetchAnswer(url: string): Promise<Answer> {
  const response = await fetch(url, { signal: AbortSignal.timeout(5_000) });
  return { status: response.status, body: await response.text() };
}

/** Sends `parts` on a raw TCP connection with `gapMs` between them; resolves with all it reads until the server closes. */
async function rawExchange(port: number, parts: readonly string[], gapMs: number): Promise<string> {
  const socket = net.connect({ port, host: '127.0.0.1', noDelay: true });
  let received = '';
  socket.setEncoding('latin1').on('data', (chunk: string) => (received += chunk));
  const closed = new Promise<void>((resolve, reject) => {
    socket.on('close', () => resolve());
    socket.on('error', reject);
  });
  try {
    await withTimeout(new Promise((resolve) => socket.once('connect', resolve)), 5_000, 'a TCP connection');
    for (const [i, part] of parts.entries()) {
      if (i > 0) await sleep(gapMs);
      socket.write(part);
    }
    await withTimeout(closed, 5_000, 'the server to answer and close');
    return received;
  } finally {
    socket.destroy();
  }
}

/** A TCP connection whose first write goes out in two packets, `gapMs` apart, split at byte `splitAt`. */
function connectionSplittingFirstWrite(port: number, splitAt: number, gapMs: number): Duplex {
  const tcp = net.connect({ port, host: '127.0.0.1', noDelay: true });
  let first = true;
  const duplex = new Duplex({
    write(chunk: Buffer, _encoding, callback) {
      if (!first) {
        tcp.write(chunk, callback);
        return;
      }
      first = false;
      assert.ok(chunk.length > splitAt, `the first write (${chunk.length} bytes) reaches past the split`);
      tcp.write(chunk.subarray(0, splitAt));
      setTimeout(() => tcp.write(chunk.subarray(splitAt), callback), gapMs);
    },
    read() {
      tcp.resume();
    },
    final(callback) {
      tcp.end(callback);
    },
    destroy(err, callback) {
      tcp.destroy();
      callback(err);
    },
  });
  tcp.on('data', (data: Buffer) => {
    if (!duplex.push(data)) tcp.pause();
  });
  tcp.on('end', () => duplex.push(null));
  tcp.on('error', (err) => duplex.destroy(err));
  return duplex;
}

/** A socket that has sent one complete keep-alive request and read its answer, and stays open. */
async function idleKeepAliveConnection(port: number): Promise<net.Socket> {
  const socket = net.connect({ port, host: '127.0.0.1' });
  socket.on('error', () => undefined);
  await withTimeout(new Promise((resolve) => socket.once('connect', resolve)), 5_000, 'a TCP connection');
  socket.write('GET /healthz HTTP/1.1\r\nHost: fermata\r\n\r\n');
  let received = '';
  await withTimeout(
    new Promise<void>((resolve) =>
      socket.setEncoding('latin1').on('data', (chunk: string) => {
        received += chunk;
        if (received.includes('{"status":"ok"}')) resolve();
      }),
    ),
    5_000,
    'the keep-alive answer',
  );
  assert.match(received, /^HTTP\/1\.1 200 /);
  assert.match(received, /keep-alive/i);
  return socket;
}

/** A socket in the middle of sending request headers: an active request, not an idle connection. */
async function halfSentRequest(port: number): Promise<net.Socket> {
  const socket = net.connect({ port, host: '127.0.0.1' });
  socket.on('error', () => undefined);
  await withTimeout(new Promise((resolve) => socket.once('connect', resolve)), 5_000, 'a TCP connection');
  socket.write('GET /healthz HTTP/1.1\r\nHost: fermata\r\n');
  await sleep(200);
  return socket;
}

function closedPromise(emitter: net.Socket | http2.ClientHttp2Session): Promise<void> {
  return new Promise((resolve) => {
    if (emitter.destroyed) resolve();
    emitter.once('close', () => resolve());
  });
}


/** What curl got: status, body and HTTP version. */
async function curlSeen(protocol: CurlProtocol, url: string): Promise<[number, string, string]> {
  const answer = await curlRequest({ protocol, url, timeoutMs: 5_000 });
  return [answer.status, text(answer), answer.httpVersion];
}

describe('fermata serve', { concurrency: 4 }, () => {
  test('answers /healthz and /readyz over HTTP/1.1 (fetch) and HTTP/2 prior knowledge (node:http2) on one port; fastify\'s own errors in fermata\'s shape', { timeout: 60_000 }, async () => {
    const service = await startService(tempDir('both'));
    try {
      assert.deepEqual(await fetchAnswer(`${service.url}/healthz`), { status: 200, body: '{"status":"ok"}' });
      // Nothing is due: the service listens first and warms its delivery workers up, /readyz red until then.
      await service.waitForLine((line) => line.msg === 'delivery workers warm', 'the warm-up');
      assert.deepEqual(await fetchAnswer(`${service.url}/readyz`), { status: 200, body: '{"status":"ready"}' });
      const missing = await fetchAnswer(`${service.url}/v1/nothing-here`);
      assert.equal(missing.status, 404);
      assert.deepEqual(JSON.parse(missing.body), { error: { code: 'ROUTE_NOT_FOUND', message: 'no route serves /v1/nothing-here: GET /openapi.json lists the routes' } });
      const malformed = await rawExchange(service.port, ['NOT HTTP AT ALL\r\n\r\n'], 0);
      assert.match(malformed, /^HTTP\/1\.1 400 /);
      assert.match(malformed, /\{"error":\{"code":"REQUEST_INVALID","message":"not a well-formed HTTP\/1\.1 request \(HPE_[A-Z_]+\)"\}\}$/, `a client error in the error shape: ${malformed}`);

      const session = await h2Connect(service.url);
      try {
        assert.deepEqual(await h2Get(session, '/healthz'), { status: 200, body: '{"status":"ok"}' });
        assert.deepEqual(await h2Get(session, '/readyz'), { status: 200, body: '{"status":"ready"}' });
        assert.equal((await h2Get(session, '/v1/nothing-here')).status, 404);
        assert.equal(session.alpnProtocol, 'h2c', 'the session is HTTP/2 over cleartext');
      } finally {
        session.close();
      }
      assert.deepEqual(await stop(service), { code: 0, signal: null });
    } finally {
      service.child.kill('SIGKILL');
    }
  });

  test('curl gets the same answers with --http1.1 and with --http2-prior-knowledge', { timeout: 60_000 }, async (t) => {
    if (toolOrSkip(t, 'curl') === undefined) return;
    const service = await startService(tempDir('curl'));
    try {
      // Nothing is due: the service listens first and warms its delivery workers up, /readyz red until then.
      await service.waitForLine((line) => line.msg === 'delivery workers warm', 'the warm-up');
      await t.test('--http1.1', async () => {
        assert.deepEqual(await curlSeen('http1.1', `${service.url}/healthz`), [200, '{"status":"ok"}', '1.1']);
        assert.deepEqual(await curlSeen('http1.1', `${service.url}/readyz`), [200, '{"status":"ready"}', '1.1']);
      });
      await t.test('--http2-prior-knowledge', async (st) => {
        if (!curl.http2) return skipOrFail(st, curlWithoutHttp2);
        assert.deepEqual(await curlSeen('http2', `${service.url}/healthz`), [200, '{"status":"ok"}', '2']);
        assert.deepEqual(await curlSeen('http2', `${service.url}/readyz`), [200, '{"status":"ready"}', '2']);
      });
      assert.equal((await stop(service)).code, 0);
    } finally {
      service.child.kill('SIGKILL');
    }
  });

  test('recognises an HTTP/2 preface split across packets, and an HTTP/1.1 request whose first byte could begin one', { timeout: 60_000 }, async () => {
    const service = await startService(tempDir('split'));
    try {
      const session = await h2Connect(service.url, { createConnection: () => connectionSplittingFirstWrite(service.port, 10, 150) });
      try {
        assert.deepEqual(await h2Get(session, '/healthz'), { status: 200, body: '{"status":"ok"}' });
      } finally {
        session.close();
      }
      assert.equal(http2Preface[0], 'P'.charCodeAt(0));
      const answer = await rawExchange(service.port, ['P', 'UT /healthz HTTP/1.1\r\nHost: fermata\r\nContent-Length: 0\r\nConnection: close\r\n\r\n'], 150);
      assert.match(answer, /^HTTP\/1\.1 405 /, 'the byte held back while sniffing reaches the HTTP/1.1 parser');
      assert.match(answer, /"message":"\/healthz does not serve PUT: it serves GET, HEAD"/);
      assert.equal((await stop(service)).code, 0);
    } finally {
      service.child.kill('SIGKILL');
    }
  });

  test(`closes a connection that says nothing for ${httpLimits.sniffTimeoutMs / 1000} s`, { timeout: 60_000 }, async () => {
    const service = await startService(tempDir('silent'));
    try {
      const socket = net.connect({ port: service.port, host: '127.0.0.1' });
      socket.on('error', () => undefined);
      const closed = closedPromise(socket);
      await withTimeout(new Promise((resolve) => socket.once('connect', resolve)), 5_000, 'a TCP connection');
      const started = Date.now();
      await withTimeout(closed, httpLimits.sniffTimeoutMs + 10_000, 'the server to close the silent connection');
      const elapsedMs = Date.now() - started;
      assert.ok(elapsedMs >= httpLimits.sniffTimeoutMs - 500, `closed after ${elapsedMs} ms, not before the bound`);
      assert.equal((await stop(service)).code, 0);
    } finally {
      service.child.kill('SIGKILL');
    }
  });

  test('a second serve on the same data directory exits 1 and names the lock holder', { timeout: 60_000 }, async () => {
    const dataDir = tempDir('locked');
    const first = await startService(dataDir);
    try {
      const second = await runToExit(['serve', '--data', dataDir, '--listen', '127.0.0.1:0']);
      assert.equal(second.code, 1, second.stdout + second.stderr);
      const fatal = second.lines.find((line) => line.level === 60);
      assert.ok(fatal !== undefined, `a fatal log line: ${second.stdout}`);
      assert.equal(fatal.code, 'DATA_DIR_LOCKED');
      assert.match(String(fatal.msg), new RegExp(`in use by process ${first.child.pid}\\b`));
      assert.ok(!second.lines.some((line) => line.msg === 'listening'));
      assert.deepEqual(await fetchAnswer(`${first.url}/healthz`), { status: 200, body: '{"status":"ok"}' }, 'the first one still serves');
      assert.equal((await stop(first)).code, 0);
    } finally {
      first.child.kill('SIGKILL');
    }
  });

  test('SIGTERM with idle HTTP/1.1 and HTTP/2 connections open: drains at once, exits 0, logs "stopped", releases the lock', { timeout: 60_000 }, async () => {
    const dataDir = tempDir('sigterm');
    const service = await startService(dataDir);
    const socket = await idleKeepAliveConnection(service.port);
    const session = await h2Connect(service.url);
    session.on('error', () => undefined);
    try {
      assert.equal((await h2Get(session, '/healthz')).status, 200);
      assert.ok(existsSync(join(dataDir, 'wal', 'LOCK')));
      const socketClosed = closedPromise(socket);
      const sessionClosed = closedPromise(session);
      const started = Date.now();
      const exit = await stop(service);
      const elapsedMs = Date.now() - started;
      assert.deepEqual(exit, { code: 0, signal: null });
      assert.ok(elapsedMs < drainTimeoutMs / 2, `idle connections were closed, not waited out: exit took ${elapsedMs} ms`);
      assert.ok(service.lines.some((line) => line.msg === 'stopping' && line.signal === 'SIGTERM'));
      assert.equal(service.lines.at(-1)?.msg, 'stopped');
      await withTimeout(Promise.all([socketClosed, sessionClosed]), 5_000, 'both client connections to be closed');
      assert.ok(!existsSync(join(dataDir, 'wal', 'LOCK')), 'the LOCK file is gone');

      const again = await startService(dataDir);
      assert.equal((await stop(again)).code, 0, 'a new serve starts on the same directory');
    } finally {
      socket.destroy();
      session.destroy();
      service.child.kill('SIGKILL');
    }
  });

  test(`a request still arriving at SIGTERM is cut after the ${drainTimeoutMs / 1000} s drain bound, and the exit is still 0`, { timeout: 60_000 }, async () => {
    const service = await startService(tempDir('drain'));
    const socket = await halfSentRequest(service.port);
    try {
      const socketClosed = closedPromise(socket);
      const started = Date.now();
      service.child.kill('SIGTERM');
      await service.waitForLine((line) => line.msg === 'stopping', 'the "stopping" line');
      await sleep(1_000);
      assert.ok(!socket.destroyed, 'an active request is not cut at once');
      const exit = await withTimeout(service.exited, drainTimeoutMs + 10_000, 'fermata to exit after the drain bound');
      const elapsedMs = Date.now() - started;
      assert.deepEqual(exit, { code: 0, signal: null });
      assert.ok(elapsedMs >= drainTimeoutMs - 500, `the drain waited for the bound: ${elapsedMs} ms`);
      assert.ok(service.lines.some((line) => line.level === 40 && /drain timeout/.test(String(line.msg))));
      assert.equal(service.lines.at(-1)?.msg, 'stopped');
      await withTimeout(socketClosed, 5_000, 'the cut connection to close');
    } finally {
      socket.destroy();
      service.child.kill('SIGKILL');
    }
  });

  test('a second signal while draining exits 1 at once', { timeout: 60_000 }, async () => {
    const service = await startService(tempDir('twice'));
    const socket = await halfSentRequest(service.port);
    try {
      service.child.kill('SIGTERM');
      await service.waitForLine((line) => line.msg === 'stopping', 'the "stopping" line');
      const started = Date.now();
      service.child.kill('SIGINT');
      const exit = await withTimeout(service.exited, 5_000, 'fermata to exit after the second signal');
      assert.deepEqual(exit, { code: 1, signal: null });
      assert.ok(Date.now() - started < drainTimeoutMs / 2);
      assert.ok(service.lines.some((line) => line.level === 60 && line.signal === 'SIGINT'));
    } finally {
      socket.destroy();
      service.child.kill('SIGKILL');
    }
  });

  test('a corrupt sealed WAL segment: exit 1, and the log names the file', { timeout: 60_000 }, async () => {
    const dataDir = tempDir('corrupt');
    mkdirSync(join(dataDir, 'wal'));
    writeFileSync(join(dataDir, 'wal', '0000000001.wal'), Buffer.from('FRMTWAL\ngarbage, cut short'));
    writeFileSync(join(dataDir, 'wal', '0000000002.wal'), Buffer.alloc(64, 0x5a));
    const result = await runToExit(['serve', '--data', dataDir, '--listen', '127.0.0.1:0']);
    assert.equal(result.code, 1, result.stdout + result.stderr);
    const fatal = result.lines.find((line) => line.level === 60);
    assert.ok(fatal !== undefined, `a fatal log line: ${result.stdout}`);
    assert.equal(fatal.code, 'WAL_CORRUPT');
    assert.match(String(fatal.msg), /0000000001\.wal/);
    assert.deepEqual(fatal.details, { file: join(dataDir, 'wal', '0000000001.wal'), offset: 0, reason: (fatal.details as { reason: string }).reason });
    assert.ok(!existsSync(join(dataDir, 'wal', 'LOCK')), 'the lock is released on the way out');
  });

  test('--config: a bad key, malformed JSON or a non-object exit 2 naming the file and the problem', { timeout: 60_000 }, async () => {
    const dir = tempDir('config');
    const cases = [
      { name: 'bad-key.json', text: '{"data": "d", "lisen": "127.0.0.1:0"}', problem: /unknown key "lisen"/ },
      { name: 'malformed.json', text: '{"data": ', problem: /not valid JSON/ },
      { name: 'array.json', text: '["data"]', problem: /must hold a JSON object/ },
      { name: 'number.json', text: '{"listen": 7070}', problem: /"listen" must be a string/ },
    ];
    for (const { name, text, problem } of cases) {
      const file = join(dir, name);
      writeFileSync(file, text);
      const result = await runToExit(['serve', '--config', file]);
      assert.equal(result.code, 2, `${name}: ${result.stderr}`);
      assert.ok(result.stderr.includes(file), `${name}: the message names the file: ${result.stderr}`);
      assert.match(result.stderr, problem);
      assert.equal(result.stdout, '', 'nothing started, nothing logged');
    }
    const missing = await runToExit(['serve', '--config', join(dir, 'absent.json')]);
    assert.equal(missing.code, 2);
    assert.match(missing.stderr, /absent\.json: cannot read it/);
  });

  test('settings: flags override the environment, which overrides the config file; a relative "data" is taken from the file\'s directory', { timeout: 60_000 }, async () => {
    const dir = tempDir('precedence');
    const file = join(dir, 'fermata.json');
    writeFileSync(file, JSON.stringify({ data: 'from-config', listen: 'not an address' }));

    const configOnly = await runToExit(['serve', '--config', file]);
    assert.equal(configOnly.code, 2);
    assert.match(configOnly.stderr, /fermata\.json, "listen": "not an address" is not HOST:PORT/);

    /** Starts fermata with `args` and `env`, and returns the data directory its "listening" line names. */
    const dataDirServed = async (args: readonly string[], env: NodeJS.ProcessEnv): Promise<unknown> => {
      const service = await asService(spawnFermata(args, env));
      const data = service.lines.find((line) => line.msg === 'listening')?.data;
      assert.equal((await stop(service)).code, 0);
      return data;
    };
    assert.equal(await dataDirServed(['serve', '--config', file], serviceEnv({ FERMATA_LISTEN: '127.0.0.1:0' })), join(dir, 'from-config'));
    const envData = join(dir, 'from-env');
    assert.equal(await dataDirServed(['serve', '--config', file], serviceEnv({ FERMATA_LISTEN: '127.0.0.1:0', FERMATA_DATA: envData })), envData);
    const flagData = join(dir, 'from-flag');
    assert.equal(
      await dataDirServed(['serve', '--config', file, '--data', flagData, '--listen', '127.0.0.1:0'], serviceEnv({ FERMATA_LISTEN: 'garbage', FERMATA_DATA: envData })),
      flagData,
    );
  });

  test('command line: --listen garbage, an unknown option or command exit 2 with a message; --help exits 0', { timeout: 120_000 }, async () => {
    const dataDir = tempDir('usage');
    for (const listen of ['garbage', '127.0.0.1', '127.0.0.1:99999', ':7070', '127.0.0.1:70x']) {
      const result = await runToExit(['serve', '--data', dataDir, '--listen', listen]);
      assert.equal(result.code, 2, `--listen ${listen}`);
      assert.match(result.stderr, new RegExp(`--listen: "${listen}" is not HOST:PORT`));
      assert.equal(result.stdout, '');
    }
    assert.ok(!existsSync(join(dataDir, 'wal')), 'a usage error touches no data');

    const unknownOption = await runToExit(['serve', '--port', '7070']);
    assert.equal(unknownOption.code, 2);
    assert.match(unknownOption.stderr, /--port/);

    const unknownCommand = await runToExit(['frobnicate']);
    assert.equal(unknownCommand.code, 2);
    assert.match(unknownCommand.stderr, /unknown command "frobnicate"/);
    assert.match(unknownCommand.stderr, /Usage: fermata <command>/);

    const noCommand = await runToExit([]);
    assert.equal(noCommand.code, 2);
    assert.match(noCommand.stderr, /Usage: fermata <command>/);

    const help = await runToExit(['--help']);
    assert.equal(help.code, 0);
    assert.match(help.stdout, /Usage: fermata <command>/);

    const serveHelp = await runToExit(['serve', '--help']);
    assert.equal(serveHelp.code, 0);
    assert.match(serveHelp.stdout, /Usage: fermata serve \[--data DIR\] \[--listen HOST:PORT\] \[--config FILE\]/);
  });

  test('bearer tokens: without one the API answers 401, with one it serves; health checks stay open; a non-loopback listen needs tokens', { timeout: 60_000 }, async () => {
    const token = 'tok-0123456789abcdef';
    const service = await startService(tempDir('auth'), [], serviceEnv({ FERMATA_TOKENS: `other-token-0000000000,${token}` }));
    try {
      const stats = `${service.url}/v1/stats`;
      const bare = await fetch(stats);
      assert.equal(bare.status, 401);
      assert.equal(bare.headers.get('www-authenticate'), 'Bearer');
      assert.equal(((await bare.json()) as { error: { code: string } }).error.code, 'UNAUTHORIZED');
      assert.equal((await fetch(stats, { headers: { authorization: 'Bearer wrong-token-000000000' } })).status, 401);
      assert.equal((await fetch(stats, { headers: { authorization: `Bearer ${token}` } })).status, 200);
      assert.equal((await fetch(`${service.url}/healthz`)).status, 200);
      const session = await h2Connect(service.url);
      try {
        assert.equal((await h2Get(session, '/v1/stats')).status, 401, 'HTTP/2 is guarded the same way');
      } finally {
        session.close();
      }
    } finally {
      await stop(service);
    }
    // The refusal comes before anything binds: no non-loopback address is ever served here.
    const exposed = await runToExit(['serve', '--data', tempDir('auth2'), '--listen', '0.0.0.0:0']);
    assert.equal(exposed.code, 2);
    assert.match(exposed.stderr, /not a loopback address, needs bearer tokens/);
    const short = await runToExit(['serve', '--data', tempDir('auth3')], serviceEnv({ FERMATA_TOKENS: 'short' }));
    assert.equal(short.code, 2);
    assert.match(short.stderr, /at least 16 characters/);
  });
});

test('/readyz is 503 with the poison message while the WAL is poisoned, over both protocols', { timeout: 30_000 }, async () => {
  const fs = new SimFileSystem({ seed: 11 });
  const engine = await Engine.open({ dataDir: '/data', fs });
  const wal = engine.log;
  const app = createHttpServer({ logger: pino({ level: 'silent' }), engine });
  try {
    await app.listen({ host: '127.0.0.1', port: 0 });
    const address = app.server.address() as net.AddressInfo;
    const url = `http://127.0.0.1:${address.port}`;
    assert.deepEqual(await fetchAnswer(`${url}/readyz`), { status: 200, body: '{"status":"ready"}' });

    fs.failAfter('datasync', 0, 'EIO');
    await assert.rejects(wal.append(1, new Uint8Array([1])), /WAL poisoned/);
    const poison = wal.poisoned;
    assert.ok(poison !== undefined);

    const expected = { status: 503, body: JSON.stringify({ status: 'not-ready', reason: poison.message }) };
    assert.deepEqual(await fetchAnswer(`${url}/readyz`), expected);
    const session = await h2Connect(url);
    try {
      assert.deepEqual(await h2Get(session, '/readyz'), expected);
      assert.deepEqual(await h2Get(session, '/healthz'), { status: 200, body: '{"status":"ok"}' }, 'the process still serves');
    } finally {
      session.close();
    }
  } finally {
    await app.close();
    await engine.close();
  }
});

test('HTTP/2 hardening: the stream limit and flow-control windows are advertised; oversized header lists are refused on both protocols', { timeout: 30_000 }, async () => {
  const engine = await Engine.open({ dataDir: '/data', fs: new SimFileSystem({ seed: 12 }) });
  const app = createHttpServer({ logger: pino({ level: 'silent' }), engine });
  try {
    await app.listen({ host: '127.0.0.1', port: 0 });
    const url = `http://127.0.0.1:${(app.server.address() as net.AddressInfo).port}`;
    const session = await h2Connect(url);
    try {
      assert.equal((await h2Get(session, '/healthz')).status, 200); // a round trip: the server's SETTINGS have arrived
      assert.equal(session.remoteSettings.maxConcurrentStreams, httpLimits.http2ConcurrentStreamsMax);
      assert.equal(session.remoteSettings.maxHeaderListSize, httpLimits.headerListBytesMax);
      // Flow-control windows sized for Arrow batches: per stream in SETTINGS, per session by WINDOW_UPDATE.
      assert.equal(session.remoteSettings.initialWindowSize, httpLimits.http2StreamWindowBytes);
      assert.equal(session.state.remoteWindowSize, httpLimits.http2SessionWindowBytes);
      const big = 'x'.repeat(httpLimits.headerListBytesMax);
      const refused = await new Promise<string>((resolve) => {
        const stream = session.request({ ':path': '/healthz', 'x-big': big });
        stream.on('response', (headers) => resolve(String(headers[':status'])));
        stream.on('error', (err: Error & { code?: string }) => resolve(err.code ?? err.message));
        stream.on('close', () => resolve(`closed ${stream.rstCode}`));
        stream.end();
      });
      assert.notEqual(refused, '200', 'a header list over the limit is not served');
    } finally {
      session.close();
    }
    const http1 = await fetch(`${url}/healthz`, { headers: { 'x-big': 'x'.repeat(httpLimits.headerListBytesMax + 1024) } }).then(
      (response) => response.status,
      () => 'refused',
    );
    assert.ok(http1 === 431 || http1 === 'refused', `HTTP/1.1 answered ${http1}`);
    assert.deepEqual(await fetchAnswer(`${url}/healthz`), { status: 200, body: '{"status":"ok"}' }, 'the server still serves');
  } finally {
    await app.close();
    await engine.close();
  }
});
