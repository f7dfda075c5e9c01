// offHarness runs a function in a worker thread: its answer comes back, and so does its failure,
// with the message that names the seed, so a simulation moved there still fails its test.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { offHarness } from '../helpers/off-harness.ts';

const calls = new URL('../fixtures/off-harness-calls.ts', import.meta.url);

test('the function runs in a worker thread and its answer comes back', async () => {
  assert.equal(await offHarness<number>({ module: calls, name: 'double', input: 21 }), 42);
});

test('a failed assertion rejects with its message, as an AssertionError', async () => {
  await assert.rejects(offHarness({ module: calls, name: 'failsWithSeed', input: 7 }), (err: Error) => err.name === 'AssertionError' && /seed 7: the invariant broke/.test(err.message));
});

test('a missing function is an error naming it', async () => {
  await assert.rejects(offHarness({ module: calls, name: 'nothing' }), /exports no function nothing/);
});
