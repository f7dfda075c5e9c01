// `fermata serve`'s start-up as a newcomer meets it (issue 39): --version, a port someone else
// holds, the memory budget's floor and units, the config file's "http3" key, short bearer tokens.
// The real bin/fermata.js in a child process; a refused start is read from its exit status and
// stderr, an accepted one from its log lines. Every wait is bounded; every child is killed at the end.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:net';
import { join } from 'node:path';
import { test } from 'node:test';
import { selfSignedPair } from '../../ingest/http3/self-signed.ts';
import { freePort, waitFor } from '../helpers/chromium.ts';
import { testScratch } from '../helpers/scratch.ts';
import { binPath, serviceEnv, startService } from '../helpers/service.ts';
import { withTimeout } from '../helpers/timeout.ts';
import { toolOrSkip } from '../helpers/tools.ts';

const { children, tempDir } = testScratch('fermata-settings');
const exitTimeoutMs = 30_000;
const MiB = 1024 ** 2;

interface Run {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs `fermata ARGS` to its exit. */
async function runToExit(args: readonly string[], env: Record<string, string> = {}): Promise<Run> {
  const child = spawn(process.execPath, [binPath, ...args], { env: serviceEnv(env), stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const code = await withTimeout(new Promise<number | null>((resolve) => child.on('close', (exitCode) => resolve(exitCode))), exitTimeoutMs, `fermata ${args.join(' ')} to exit`);
  return { code, stdout, stderr };
}

/** A TCP port held by this process until `close`, as another program would hold it. */
async function heldPort(): Promise<{ port: number; server: Server }> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as { port: number }).port, server };
}

function writeConfig(dir: string, config: unknown): string {
  const file = join(dir, 'fermata.json');
  writeFileSync(file, JSON.stringify(config));
  return file;
}

/** The log line of an accepted start with the memory budget it settled. */
function memoryBudgetLine(output: string): { limitBytes: number; source: string } {
  const line = output.split('\n').find((text) => text.includes('"msg":"memory budget"'));
  assert.ok(line !== undefined, `a "memory budget" line: ${output}`);
  return JSON.parse(line) as { limitBytes: number; source: string };
}

test('fermata --version and -v print package.json\'s version and exit 0', { timeout: 60_000 }, async () => {
  const { version } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  for (const flag of ['--version', '-v']) {
    const run = await runToExit([flag]);
    assert.deepEqual(run, { code: 0, stdout: `${version}\n`, stderr: '' }, flag);
  }
  assert.match((await runToExit(['--help'])).stdout, /-v, --version/);
});

test('a port another process holds ends the start with one plain line on stderr and exit 2: cleartext, TLS and Flight ports', { timeout: 120_000 }, async (t) => {
  const { port, server } = await heldPort();
  try {
    const expected = `port ${port} on 127.0.0.1 is in use\n`;
    const assertRefused = (run: Run, dataDir: string, what: string): void => {
      assert.equal(run.code, 2, `${what}: ${run.stdout}${run.stderr}`);
      assert.equal(run.stderr, expected, `${what}: one plain line, no stack trace`);
      assert.ok(!run.stdout.includes('"level":60'), `${what}: no fatal log line with a stack: ${run.stdout}`);
      assert.ok(!existsSync(join(dataDir, 'wal', 'LOCK')), `${what}: the data directory is released`);
    };
    const cleartextData = tempDir('in-use');
    assertRefused(await runToExit(['serve', '--data', cleartextData, '--listen', `127.0.0.1:${port}`]), cleartextData, '--listen');

    const flightData = tempDir('in-use-flight');
    assertRefused(await runToExit(['serve', '--data', flightData, '--listen', '127.0.0.1:0', '--flight', `127.0.0.1:${port}`]), flightData, '--flight');

    await t.test('--tls-listen', async (st) => {
      if (toolOrSkip(st, 'openssl') === undefined) return;
      const pair = selfSignedPair(tempDir('certs'));
      const tlsData = tempDir('in-use-tls');
      const run = await runToExit(['serve', '--data', tlsData, '--listen', '127.0.0.1:0', '--tls-cert', pair.certFile, '--tls-key', pair.keyFile, '--tls-listen', `127.0.0.1:${port}`]);
      assertRefused(run, tlsData, '--tls-listen');
    });
  } finally {
    server.close();
  }
});

test('--memory-budget below 16 MiB is refused naming the floor; "memory_budget" in the config file takes the same units, or bytes', { timeout: 120_000 }, async () => {
  const dir = tempDir('budget');
  const data = join(dir, 'data');
  for (const [args, source] of [
    [['--memory-budget', '512'], '--memory-budget: "512"'],
    [['--memory-budget', '15MiB'], '--memory-budget: "15MiB"'],
  ] as const) {
    const run = await runToExit(['serve', '--data', data, '--listen', '127.0.0.1:0', ...args]);
    assert.equal(run.code, 2, run.stderr);
    assert.ok(run.stderr.startsWith(`fermata serve: ${source} is below the smallest memory budget, 16MiB (16777216 bytes)`), run.stderr);
  }
  const envRun = await runToExit(['serve', '--data', data, '--listen', '127.0.0.1:0'], { FERMATA_MEMORY_BUDGET: '1KiB' });
  assert.equal(envRun.code, 2);
  assert.match(envRun.stderr, /FERMATA_MEMORY_BUDGET: "1KiB" is below the smallest memory budget, 16MiB/);

  for (const [value, problem] of [
    ['12 parsecs', /"memory_budget": "12 parsecs" is not a size in bytes/],
    [1000, /"memory_budget": 1000 is below the smallest memory budget, 16MiB/],
    [true, /"memory_budget" must be a size such as "512MiB" or a number of bytes, not true/],
  ] as const) {
    const file = writeConfig(dir, { data: 'data', listen: '127.0.0.1:0', memory_budget: value });
    const run = await runToExit(['serve', '--config', file]);
    assert.equal(run.code, 2, `${value}: ${run.stderr}`);
    assert.ok(run.stderr.includes(`config file ${file}`), `${value}: the message names the file: ${run.stderr}`);
    assert.match(run.stderr, problem);
    assert.ok(!existsSync(join(dir, 'data', 'wal')), 'a refused setting touches no data');
  }

  // Accepted: the text with its unit, and a plain number as bytes (a machine with less RAM would
  // take its own limit instead, and say so in "source").
  for (const value of ['512MiB', 512 * MiB]) {
    const file = writeConfig(dir, { data: 'data', listen: '127.0.0.1:0', memory_budget: value });
    const service = await startService(join(dir, 'data'), (child) => children.add(child), { args: ['--config', file] });
    try {
      const budget = memoryBudgetLine(service.output());
      if (budget.source === 'configured') assert.equal(budget.limitBytes, 512 * MiB, String(value));
      else assert.ok(budget.limitBytes < 512 * MiB, `${value}: a smaller limit than the budget decided: ${JSON.stringify(budget)}`);
    } finally {
      service.child.kill('SIGTERM');
      await withTimeout(service.exited, exitTimeoutMs, 'fermata to stop');
    }
  }
});

test('"http3": {"port"} in the config file: checked as --http3 is, and serves HTTP/3 there', { timeout: 120_000 }, async (t) => {
  const dir = tempDir('http3');
  for (const [http3, problem] of [
    [{ port: 0 }, /"http3\.port": "0" is not a port from 1 to 65535/],
    [{ port: '7443' }, /"http3\.port" must be a port number, not "7443"/],
    [{ prot: 7443 }, /unknown key "http3\.prot" \(known keys: http3\.port\)/],
  ] as const) {
    const file = writeConfig(dir, { data: 'data', listen: '127.0.0.1:0', http3 });
    const run = await runToExit(['serve', '--config', file]);
    assert.equal(run.code, 2, run.stderr);
    assert.ok(run.stderr.includes(`config file ${file}`), run.stderr);
    assert.match(run.stderr, problem);
  }
  if (toolOrSkip(t, 'caddy') === undefined || toolOrSkip(t, 'openssl') === undefined) return;
  const port = await freePort();
  const file = writeConfig(dir, { data: 'data', listen: '127.0.0.1:0', http3: { port } });
  const service = await startService(join(dir, 'data'), (child) => children.add(child), { args: ['--config', file], tls: true });
  try {
    await waitFor('the "http3 listening" line', () => service.output().includes('"msg":"http3 listening"'));
    assert.ok(service.output().includes(`"url":"https://127.0.0.1:${port}","protocol":"h3"`), service.output());
  } finally {
    service.child.kill('SIGTERM');
    await withTimeout(service.exited, exitTimeoutMs, 'fermata to stop');
  }
});

test('a bearer token shorter than 16 characters is refused saying so, from FERMATA_TOKENS and from the config file', { timeout: 60_000 }, async () => {
  const dir = tempDir('tokens');
  const data = join(dir, 'data');
  const fromEnv = await runToExit(['serve', '--data', data, '--listen', '127.0.0.1:0'], { FERMATA_TOKENS: 'short' });
  assert.equal(fromEnv.code, 2);
  assert.match(fromEnv.stderr, /^fermata serve: FERMATA_TOKENS: the token is 5 characters long: a token must be at least 16 characters\n/);
  assert.ok(!fromEnv.stderr.includes('short\n') && !fromEnv.stderr.includes('"short"'), 'the token itself is not echoed');

  const trailingComma = await runToExit(['serve', '--data', data, '--listen', '127.0.0.1:0'], { FERMATA_TOKENS: '0123456789abcdef,' });
  assert.equal(trailingComma.code, 2);
  assert.match(trailingComma.stderr, /FERMATA_TOKENS: token 2 of 2 is 0 characters long: a token must be at least 16 characters/);

  const file = writeConfig(dir, { data: 'data', listen: '127.0.0.1:0', tokens: ['0123456789abcdef', 'fifteen-chars-x'] });
  const fromConfig = await runToExit(['serve', '--config', file]);
  assert.equal(fromConfig.code, 2);
  assert.ok(fromConfig.stderr.includes(`config file ${file}, "tokens": token 2 of 2 is 15 characters long: a token must be at least 16 characters`), fromConfig.stderr);
  assert.ok(!existsSync(join(data, 'wal')), 'a refused token touches no data');
});

test('package.json\'s engines admit the machine\'s older Node, under which the launcher starts the pinned one', { timeout: 60_000 }, async (t) => {
  const older = '/usr/bin/node';
  if (!existsSync(older)) return t.skip(`no ${older} on this machine`);
  const version = spawnSync(older, ['--version'], { encoding: 'utf8' }).stdout.trim();
  const [major = 0, minor = 0] = version.replace(/^v/, '').split('.').map(Number);
  if (major >= 26) return t.skip(`${older} is ${version}, not older than the pinned Node`);
  const { engines } = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { engines: { node: string } };
  const floor = /^>=(\d+)\.(\d+)\.\d+$/.exec(engines.node);
  assert.ok(floor !== null, `engines.node is a plain ">=" floor: ${engines.node}`);
  const [floorMajor, floorMinor] = [Number(floor[1]), Number(floor[2])];
  assert.ok(major > floorMajor || (major === floorMajor && minor >= floorMinor), `npm ci on ${version} would warn EBADENGINE for fermata itself (engines.node ${engines.node})`);
  const run = spawnSync(older, [binPath, '--version'], { encoding: 'utf8', timeout: 30_000 });
  assert.equal(run.status, 0, run.stderr);
  assert.match(run.stdout, /^\d+\.\d+\.\d+\n$/);
});
