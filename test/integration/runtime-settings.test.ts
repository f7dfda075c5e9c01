// bin/runtime-settings.js, bin/huge-pages.js, bin/v8-pool.js: the `fermata` launcher starts
// itself again (process.execve: same pid, same arguments) with glibc.malloc.hugetlb=1 added to
// GLIBC_TUNABLES, keeping tunables already set, and V8's thread pool sized to the cores left
// after the main thread in NODE_OPTIONS, once; FERMATA_HUGE_PAGES=0 or a hugetlb choice already
// made leaves the pages alone, a pool size already given leaves the pool alone.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { availableParallelism } from 'node:os';
import { test } from 'node:test';
import { hugePagesEnvironment } from '../../bin/huge-pages.js';
import { runtimeEnvironment } from '../../bin/runtime-settings.js';
import { v8PoolSizeOption } from '../../bin/v8-pool.js';

const child = new URL('../helpers/runtime-settings-child.ts', import.meta.url).pathname;
/** What this machine's launcher puts in NODE_OPTIONS (none on five cores or more). */
const poolOption = v8PoolSizeOption({}, [], availableParallelism()) ?? null;

function thpAvailable(): boolean {
  if (process.platform !== 'linux') return false;
  const glibc = process.report.getReport() as { header?: { glibcVersionRuntime?: string } };
  const [major = 0, minor = 0] = (glibc.header?.glibcVersionRuntime ?? '0.0').split('.').map(Number);
  if (major < 2 || (major === 2 && minor < 35)) return false;
  try {
    return /\[(always|madvise)\]/.test(readFileSync('/sys/kernel/mm/transparent_hugepage/enabled', 'utf8'));
  } catch {
    return false;
  }
}

const skip = thpAvailable() ? false : 'needs Linux, glibc >= 2.35 and transparent huge pages not set to never';

interface ChildReport {
  readonly pid: number;
  readonly tunables: string | null;
  readonly nodeOptions: string | null;
  readonly argv: string[];
  readonly execArgv: string[];
}

async function runChild(env: NodeJS.ProcessEnv): Promise<{ spawnedPid: number; report: ChildReport }> {
  const started = spawn(process.execPath, ['--no-warnings', child, 'one', 'two'], { env, stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  started.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
  const code = await new Promise<number | null>((resolve) => started.on('exit', resolve));
  assert.equal(code, 0);
  return { spawnedPid: started.pid ?? -1, report: JSON.parse(out) as ChildReport };
}

test('the environment gains the tunable, keeping tunables already set', { skip }, () => {
  assert.equal(hugePagesEnvironment({ PATH: '/bin' })?.GLIBC_TUNABLES, 'glibc.malloc.hugetlb=1');
  const env = hugePagesEnvironment({ PATH: '/bin', GLIBC_TUNABLES: 'glibc.malloc.arena_max=2' });
  assert.equal(env?.GLIBC_TUNABLES, 'glibc.malloc.arena_max=2:glibc.malloc.hugetlb=1');
  assert.equal(env?.PATH, '/bin');
});

test('a choice already made, or FERMATA_HUGE_PAGES=0, leaves the process alone', () => {
  assert.equal(hugePagesEnvironment({ GLIBC_TUNABLES: 'glibc.malloc.hugetlb=0' }), undefined);
  assert.equal(hugePagesEnvironment({ FERMATA_HUGE_PAGES: '0' }), undefined);
});

test('the process starts again in place with huge pages on and the pool sized, arguments kept, once', { skip }, async () => {
  const env: NodeJS.ProcessEnv = { ...process.env, GLIBC_TUNABLES: 'glibc.malloc.arena_max=4' };
  delete env.FERMATA_HUGE_PAGES;
  delete env.NODE_OPTIONS;
  const { spawnedPid, report } = await runChild(env);
  assert.equal(report.pid, spawnedPid, 'execve keeps the pid: no second process');
  assert.equal(report.tunables, 'glibc.malloc.arena_max=4:glibc.malloc.hugetlb=1');
  assert.equal(report.nodeOptions, poolOption);
  assert.deepEqual(report.argv, ['one', 'two']);
  assert.deepEqual(report.execArgv, ['--no-warnings']);
});

test('FERMATA_HUGE_PAGES=0 runs without the tunable, the pool still sized', async () => {
  const env: NodeJS.ProcessEnv = { ...process.env, FERMATA_HUGE_PAGES: '0' };
  delete env.GLIBC_TUNABLES;
  delete env.NODE_OPTIONS;
  const { report } = await runChild(env);
  assert.equal(report.tunables, null);
  assert.equal(report.nodeOptions, poolOption);
});

test("V8's pool: the cores left after the main thread, at least one; Node's default of 4 from five cores up", () => {
  assert.equal(v8PoolSizeOption({}, [], 1), '--v8-pool-size=1');
  assert.equal(v8PoolSizeOption({}, [], 2), '--v8-pool-size=1');
  assert.equal(v8PoolSizeOption({}, [], 4), '--v8-pool-size=3');
  assert.equal(v8PoolSizeOption({}, [], 5), undefined);
  assert.equal(v8PoolSizeOption({}, [], 64), undefined);
});

test('a pool size already given, on the command line or in NODE_OPTIONS, wins', () => {
  assert.equal(v8PoolSizeOption({}, ['--v8-pool-size=8'], 2), undefined);
  assert.equal(v8PoolSizeOption({}, ['--v8-pool-size', '8'], 2), undefined);
  assert.equal(v8PoolSizeOption({ NODE_OPTIONS: '--max-old-space-size=512 --v8-pool-size=3' }, [], 2), undefined);
  assert.equal(v8PoolSizeOption({ NODE_OPTIONS: '--v8-pool-sizes=3' }, [], 2), '--v8-pool-size=1');
});

test('the pool option joins NODE_OPTIONS already set; nothing to add, no restart', () => {
  const env = runtimeEnvironment({ NODE_OPTIONS: '--max-old-space-size=512', FERMATA_HUGE_PAGES: '0' }, [], 2);
  assert.equal(env?.NODE_OPTIONS, '--max-old-space-size=512 --v8-pool-size=1');
  assert.equal(env?.FERMATA_HUGE_PAGES, '0', 'the rest of the environment is kept');
  assert.equal(runtimeEnvironment({ FERMATA_HUGE_PAGES: '0' }, [], 8), undefined);
});
