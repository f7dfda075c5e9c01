// The length of each read into a buffer being made ahead (engine/memory/read-length.ts), for a
// buffer past 2 GiB after the function ran hot on small Buffers: the resident store asks for
// one (2,080 MiB) when its columns grow from 2^24 to 2^25 slots, long after the arena's 4 MiB
// slabs made it hot. Computed from a Buffer's `length`, Node 26's V8 gave -2,080,374,784 here
// (32 bits), fs.read threw on it, and the 10,000,000-row `fermata import` bench met a 500 on
// the batch that asked for the growth. Then a supply (prefaulted-buffers.ts) starting such a
// buffer. Its own file: the warm-up must be the first to optimise the function, with nothing
// else of the engine loaded.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { readBytesMax, readLength } from '../../engine/memory/read-length.ts';

/** Past 2^31 bytes, as the 2^25-slot columns are (allocated; only the supply's first read maps pages). */
const largeBytes = 2 ** 31 + 64 * 1024 * 1024;

test('the read length of a buffer past 2 GiB is right after it was computed hot for small Buffers', () => {
  const slabs = Buffer.allocUnsafeSlow(64 * 1024);
  // Enough calls for V8 to optimise it, as a filling arena's slabs make it in a service.
  for (let i = 0; i < 20_000; i++) assert.ok(readLength(slabs.subarray(0, 4096 + (i & 7)), 0) > 0);
  const large = Buffer.allocUnsafeSlow(largeBytes).subarray(0, largeBytes);
  assert.equal(readLength(large, 0), readBytesMax);
  assert.equal(readLength(large, largeBytes - 100), 100);
});

test('a supply starts making a buffer past 2 GiB without a throw', async () => {
  // Imported here, after the test above: loaded first, its code changed how V8 optimised readLength.
  const { PrefaultedBuffers } = await import('../../engine/memory/prefaulted-buffers.ts');
  const large = new PrefaultedBuffers(largeBytes);
  assert.doesNotThrow(() => large.request());
  // Let go before it is made: only the read under way (16 MiB) maps pages.
  large.dropAll();
  await large.whenIdle();
  assert.equal(large.ready, 0);
});
