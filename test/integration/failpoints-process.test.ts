// FERMATA_FAILPOINTS in a real process: it kills itself by SIGKILL at the armed hit (and not
// before it, and never when the variable is unset), and stops at start on an unknown name.
import assert from 'node:assert/strict';
import { spawnSync, type SpawnSyncReturns } from 'node:child_process';
import { test } from 'node:test';

const moduleUrl = new URL('../../engine/failpoints.ts', import.meta.url).href;

/** A child that hits `name` `hits` times, writing "hit N" to stdout after each one that returns. */
function hitInChild(failpoints: string | undefined, name: string, hits: number): SpawnSyncReturns<string> {
  const script = [
    `import { writeSync } from 'node:fs';`,
    `const { failpoint, failpointsArmed } = await import(${JSON.stringify(moduleUrl)});`,
    `writeSync(1, 'armed ' + failpointsArmed + '\\n');`,
    `for (let i = 1; i <= ${hits}; i++) { failpoint(${JSON.stringify(name)}); writeSync(1, 'hit ' + i + '\\n'); }`,
  ].join('\n');
  const env: NodeJS.ProcessEnv = { ...process.env };
  delete env.FERMATA_FAILPOINTS;
  if (failpoints !== undefined) env.FERMATA_FAILPOINTS = failpoints;
  return spawnSync(process.execPath, ['--input-type=module', '-e', script], { env, encoding: 'utf8', timeout: 20_000 });
}

test('a process with the variable unset passes every failpoint', () => {
  const result = hitInChild(undefined, 'wal.synced-before-ack', 50);
  assert.equal(result.status, 0, result.stderr);
  assert.equal(result.stdout, `armed false\n${Array.from({ length: 50 }, (_, i) => `hit ${i + 1}\n`).join('')}`);
});

test('an armed process passes N-1 hits, then says which failpoint and dies by SIGKILL at the Nth', () => {
  const result = hitInChild('checkpoint.runs-written,wal.synced-before-ack@3', 'wal.synced-before-ack', 10);
  assert.equal(result.signal, 'SIGKILL');
  assert.equal(result.stdout, 'armed true\nhit 1\nhit 2\n');
  const line = JSON.parse(result.stderr.trim()) as { msg: string; failpoint: string; hit: number };
  assert.deepEqual({ msg: line.msg, failpoint: line.failpoint, hit: line.hit }, { msg: 'failpoint: SIGKILL', failpoint: 'wal.synced-before-ack', hit: 3 });
});

test('a process given an unknown failpoint stops at start, naming the known ones', () => {
  const result = hitInChild('wal.synced-before-akc', 'wal.synced-before-ack', 1);
  assert.notEqual(result.status, 0);
  assert.equal(result.signal, null);
  assert.equal(result.stdout, '');
  assert.match(result.stderr, /unknown failpoint "wal\.synced-before-akc"; known: wal\.written-before-sync, /);
});
