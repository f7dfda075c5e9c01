// Buffers made ahead off the main thread (prefaulted-buffers.ts) and the arena's use of them:
// a supply hands over each buffer it made once its read of /dev/zero is done and never blocks;
// dropAll() lets go of the ready and the unfinished; an arena makes only the slabs it was told
// it will need beyond its current one, takes them as it opens slabs, and keeps every string.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { ByteArena } from '../../engine/store/byte-arena.ts';
import { PrefaultedBuffers } from '../../engine/store/prefaulted-buffers.ts';

/** How long a test waits for the threadpool's reads (they take microseconds; CI machines are slow). */
const readyWaitMs = 10_000;

/** Waits until `ready()` holds or the wait is over; returns whether it held. */
async function eventually(ready: () => boolean, waitMs: number): Promise<boolean> {
  const deadline = performance.now() + waitMs;
  while (!ready()) {
    if (performance.now() > deadline) return false;
    await sleep(2);
  }
  return true;
}

test('a supply hands over each requested buffer once it is made, of its size, and nothing unrequested', async () => {
  const supply = new PrefaultedBuffers(64 * 1024);
  assert.equal(supply.take(), undefined, 'nothing was requested');
  supply.request();
  supply.request();
  assert.equal(supply.outstanding, 2);
  const taken: Uint8Array[] = [];
  assert.ok(
    await eventually(() => {
      const buffer = supply.take();
      if (buffer !== undefined) taken.push(buffer);
      return taken.length === 2;
    }, readyWaitMs),
    'both requests answered',
  );
  const [first, second] = taken as [Uint8Array, Uint8Array];
  assert.equal(first.length, 64 * 1024);
  assert.equal(second.length, 64 * 1024);
  assert.notEqual(first.buffer, second.buffer);
  // Read from /dev/zero: every byte written, to zero.
  assert.ok(first.every((byte) => byte === 0));
  assert.equal(supply.outstanding, 0);
  assert.equal(supply.taken, 2);
  await sleep(20);
  assert.equal(supply.take(), undefined, 'a third buffer was never requested');
});

test('dropAll lets go of the buffers ready and of those still being made', async () => {
  const supply = new PrefaultedBuffers(256 * 1024);
  supply.request();
  // After 50 ms the first read has most likely ended (its buffer ready) and the second is under
  // way: dropAll drops both, whichever state each is in.
  await sleep(50);
  supply.request();
  supply.dropAll();
  assert.ok(await eventually(() => supply.outstanding === 0, readyWaitMs), 'the unfinished read ends');
  assert.equal(supply.take(), undefined);
  // Still usable afterwards.
  supply.request();
  assert.ok(await eventually(() => supply.take() !== undefined, readyWaitMs));
});

test('an arena told what is coming opens slabs made ahead, and keeps every string', async () => {
  const slabBytes = 16 * 1024;
  const arena = new ByteArena({ slabBytes });
  // 40 KiB to come, no current slab: three slabs, two of them made ahead (the most it keeps).
  arena.prefaultFor(40 * 1024);
  assert.ok(await eventually(() => arena.slabsMadeAhead === 2, readyWaitMs));
  const strings: Array<{ ref: number; bytes: Uint8Array }> = [];
  for (let i = 0; i < 400; i++) {
    const bytes = new Uint8Array(100).fill(i & 0xff);
    bytes[0] = i >> 8;
    strings.push({ ref: arena.add(bytes), bytes });
  }
  assert.equal(arena.slabCount, 3, '40,000 bytes in slabs of 16 KiB');
  assert.equal(arena.slabsPrefaulted, 2);
  for (const { ref, bytes } of strings) assert.deepEqual(arena.view(ref, bytes.length), bytes);
  assert.equal(arena.bytesReserved, arena.slabCount * slabBytes, 'a slab made ahead is counted as any other');
});

test('an arena makes nothing ahead for what its current slab holds, or when never told', async () => {
  const slabBytes = 16 * 1024;
  const arena = new ByteArena({ slabBytes });
  arena.add(new Uint8Array(100));
  arena.prefaultFor(slabBytes - 100);
  await sleep(50);
  assert.equal(arena.slabsMadeAhead, 0);
  for (let i = 0; i < 400; i++) arena.add(new Uint8Array(100));
  assert.ok(arena.slabCount >= 3);
  assert.equal(arena.slabsPrefaulted, 0);
});

test('dropPrefaulted and close let go of slabs made for a guess that fell short', async () => {
  const slabBytes = 16 * 1024;
  for (const end of ['drop', 'close'] as const) {
    const arena = new ByteArena({ slabBytes });
    arena.prefaultFor(10 * slabBytes);
    await sleep(50);
    if (end === 'drop') arena.dropPrefaulted();
    else arena.close();
    await sleep(50);
    for (let i = 0; i < 400; i++) arena.add(new Uint8Array(100));
    assert.equal(arena.slabsPrefaulted, 0, end);
    // A closed arena is never told again; a dropped one is.
    arena.prefaultFor(10 * slabBytes);
    if (end === 'drop') assert.ok(await eventually(() => arena.slabsMadeAhead === 2, readyWaitMs));
    else await sleep(50);
    for (let i = 0; i < 400; i++) arena.add(new Uint8Array(100));
    assert.equal(arena.slabsPrefaulted, end === 'drop' ? 2 : 0, end);
  }
});
