// ScratchArrays: one buffer a name, reused while it is long enough, grown when it is not, and
// a view of exactly the length asked for; two names never share memory.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ScratchArrays } from '../../engine/memory/scratch-arrays.ts';

test('a name keeps its buffer while it is long enough, and gets a longer one when not', () => {
  const scratch = new ScratchArrays();
  const first = scratch.int32('a', 10);
  assert.equal(first.length, 10);
  first.fill(7);
  const again = scratch.int32('a', 20);
  assert.equal(again.length, 20);
  assert.equal(again.buffer, first.buffer, 'the same buffer, reused');
  assert.equal(again[9], 7, 'contents are whatever the last user left');
  const longer = scratch.int32('a', 5000);
  assert.equal(longer.length, 5000);
  assert.notEqual(longer.buffer, first.buffer, 'grown');
  assert.equal(scratch.int32('a', 3000).buffer, longer.buffer);
});

test('names never share memory, whatever their kinds', () => {
  const scratch = new ScratchArrays();
  const views = [scratch.float64('x', 100), scratch.int32('y', 100), scratch.uint32('z', 100), scratch.uint8('w', 100), scratch.int32('v', 100)];
  assert.equal(new Set(views.map((view) => view.buffer)).size, views.length);
  assert.ok(views[0] instanceof Float64Array && views[3] instanceof Uint8Array);
});

test('a name asked for as two kinds is a bug', () => {
  const scratch = new ScratchArrays();
  scratch.int32('a', 10);
  assert.throws(() => scratch.float64('a', 10), /two kinds/);
});
