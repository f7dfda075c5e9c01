// bin/heap-growth.js: the launcher pins V8's old-generation growth factor at 4, and has external
// memory limits grow with what is held, unless the command line already chose.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { externalMemoryFlag, heapGrowingPercent, heapGrowthFlag } from '../../bin/heap-growth.js';

test('the launcher asks V8 for a growth factor of 4 when nothing else is set', () => {
  assert.equal(heapGrowingPercent, 300);
  assert.equal(heapGrowthFlag([]), '--heap-growing-percent=300');
  assert.equal(heapGrowthFlag(['--expose-gc', '--max-old-space-size=4096']), '--heap-growing-percent=300');
});

test('a growth factor given on the command line wins, in either spelling', () => {
  assert.equal(heapGrowthFlag(['--heap-growing-percent=50']), undefined);
  assert.equal(heapGrowthFlag(['--heap_growing_percent=50']), undefined);
  assert.equal(heapGrowthFlag(['--heap-growing-percent', '50']), undefined);
  assert.equal(heapGrowthFlag(['--heap-growing-percentage=50']), '--heap-growing-percent=300');
});

test('the launcher has external memory limits set as the heap limit is, unless the command line chose', () => {
  const flag = '--external-memory-accounted-in-global-limit';
  assert.equal(externalMemoryFlag([]), flag);
  assert.equal(externalMemoryFlag(['--external-memory-max-growing-factor=2']), flag);
  for (const given of [flag, '--no-external-memory-accounted-in-global-limit', '--external_memory_accounted_in_global_limit', '--no_external_memory_accounted_in_global_limit']) {
    assert.equal(externalMemoryFlag([given]), undefined, given);
  }
});

// A child that holds 1 GiB of ArrayBuffers made 4 MiB at a time (as the store's arena grows),
// counting V8's full collections: tuned by the launcher, or as Node starts.
const holdingChild = `
  import { PerformanceObserver, constants } from 'node:perf_hooks';
  if (process.argv[1] === 'tuned') (await import(process.argv[2])).tuneHeapGrowth();
  let full = 0;
  new PerformanceObserver((list) => { for (const entry of list.getEntries()) if (entry.detail.kind === constants.NODE_PERFORMANCE_GC_MAJOR) full++; }).observe({ entryTypes: ['gc'] });
  const held = [];
  for (let i = 0; i < 256; i++) held.push(Buffer.allocUnsafeSlow(4 * 1024 * 1024));
  setTimeout(() => console.log(JSON.stringify({ full, held: held.length })), 100);
`;

function fullCollections(mode: 'tuned' | 'plain'): number {
  const launcher = fileURLToPath(new URL('../../bin/heap-growth.js', import.meta.url));
  const output = execFileSync(process.execPath, ['--input-type=module', '-e', holdingChild, mode, launcher], { encoding: 'utf8', timeout: 60_000 });
  const { full, held } = JSON.parse(output) as { full: number; held: number };
  assert.equal(held, 256);
  return full;
}

test('memory the process keeps (the arena growing) starts far fewer full collections once the launcher has tuned V8', () => {
  const plain = fullCollections('plain');
  const tuned = fullCollections('tuned');
  // Measured: 8 plain (one each 64 MB grown, after the first few), 1-2 tuned.
  assert.ok(plain >= 4, `plain Node collects as held memory grows (${plain})`);
  assert.ok(tuned * 2 <= plain, `tuned: ${tuned} full collections against ${plain}`);
});
