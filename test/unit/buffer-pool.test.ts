// BufferPool (dispatch/buffer-pool.ts): a buffer given back is taken again, contents and all,
// for any request it holds with no more than half of it to spare, the smallest such first; other
// requests get new buffers of whole pages; the pool keeps no more than its bytes and nothing
// empty or detached; and it lets go of everything once idle.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { BufferPool } from '../../dispatch/buffer-pool.ts';

function pool(bytesMax: number, idleMs = 60_000) {
  const clock = { ms: 0, now: () => clock.ms };
  return { clock, buffers: new BufferPool({ bytesMax, idleMs, clock }) };
}

test('new buffers are whole pages', () => {
  const { buffers } = pool(1 << 30);
  assert.equal(buffers.take(5000).byteLength, 8192);
  assert.equal(buffers.take(8192).byteLength, 8192);
});

test('a buffer given back is the one taken next for a request it fits, contents kept; the smallest fitting first', () => {
  const { buffers } = pool(1 << 30);
  const large = buffers.take(400_000);
  const first = buffers.take(100_000);
  new Uint8Array(first)[7] = 42;
  buffers.give(large);
  buffers.give(first);
  assert.equal(buffers.bytes, first.byteLength + large.byteLength);
  const loose = buffers.take(40_000);
  assert.ok(loose !== first && loose !== large, 'more than twice the request: not taken');
  assert.equal(buffers.take(90_000), first, 'the smallest that fits');
  assert.equal(new Uint8Array(first)[7], 42);
  assert.notEqual(buffers.take(90_000), first, 'taken already: a new one');
  assert.equal(buffers.take(300_000), large);
  assert.equal(buffers.bytes, 0);
});

test('the pool keeps no more than its bytes, and nothing empty or detached', () => {
  const { buffers } = pool(3 * 8192);
  for (let i = 0; i < 5; i++) buffers.give(new ArrayBuffer(8192));
  assert.equal(buffers.bytes, 3 * 8192);
  const small = pool(1 << 20).buffers;
  small.give(new ArrayBuffer(0));
  const detached = new ArrayBuffer(8192);
  structuredClone(detached, { transfer: [detached] });
  small.give(detached);
  assert.equal(small.bytes, 0);
});

test('everything is let go once no buffer has been taken for idleMs', async () => {
  const { clock, buffers } = pool(1 << 20, 30);
  buffers.give(new ArrayBuffer(8192));
  await sleep(60);
  // The clock says only 10 ms have passed since the last take: kept.
  clock.ms = 10;
  await sleep(60);
  assert.equal(buffers.bytes, 8192, 'not idle long enough by the clock');
  clock.ms = 100;
  await sleep(80);
  assert.equal(buffers.bytes, 0);
});
