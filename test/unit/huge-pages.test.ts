// bin/huge-pages.js: the `fermata` launcher starts itself again (process.execve: same pid,
// same arguments) with glibc.malloc.hugetlb=1 added to GLIBC_TUNABLES, keeping tunables already
// set, once; FERMATA_HUGE_PAGES=0 or a hugetlb choice already made leaves the process alone.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { hugePagesEnvironment } from '../../bin/huge-pages.js';

const child = new URL('../helpers/huge-pages-child.ts', import.meta.url).pathname;

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

test('the process starts again in place with huge pages on, arguments kept, once', { skip }, async () => {
  const env: NodeJS.ProcessEnv = { ...process.env, GLIBC_TUNABLES: 'glibc.malloc.arena_max=4' };
  delete env.FERMATA_HUGE_PAGES;
  const { spawnedPid, report } = await runChild(env);
  assert.equal(report.pid, spawnedPid, 'execve keeps the pid: no second process');
  assert.equal(report.tunables, 'glibc.malloc.arena_max=4:glibc.malloc.hugetlb=1');
  assert.deepEqual(report.argv, ['one', 'two']);
  assert.deepEqual(report.execArgv, ['--no-warnings']);
});

test('FERMATA_HUGE_PAGES=0 runs without the tunable', async () => {
  const env: NodeJS.ProcessEnv = { ...process.env, FERMATA_HUGE_PAGES: '0' };
  delete env.GLIBC_TUNABLES;
  const { report } = await runChild(env);
  assert.equal(report.tunables, null);
});
