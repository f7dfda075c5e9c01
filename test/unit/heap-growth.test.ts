// bin/heap-growth.js: the launcher pins V8's old-generation growth factor at 4 unless the
// command line already chose one.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { heapGrowingPercent, heapGrowthFlag } from '../../bin/heap-growth.js';

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
