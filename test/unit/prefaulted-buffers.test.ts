// Memory made ahead off the main thread (engine/memory/): a supply of prefaulted buffers hands
// over each buffer it made once its read of /dev/zero is done and never blocks; dropAll() lets go
// of the ready and the unfinished. Through the structures that use them: an arena makes only
// the slabs it was told it will need beyond its current one (further when it fills fast), takes
// them as it opens slabs, and keeps every string (slabs-ahead.ts); a resident store makes its
// next columns ahead once the rows on their way near its capacity (for large columns, as early
// as its fill rate and the timed pace of making memory say) (columns-ahead.ts).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { batchFromSpecs, type TimerBatch } from '../../engine/batch/timer-batch.ts';
import { Engine } from '../../engine/engine.ts';
import { ByteArena } from '../../engine/store/byte-arena.ts';
import { groupBuffersMax, PrefaultedBuffers, prefaultMsPerByte } from '../../engine/memory/prefaulted-buffers.ts';
import { columnsBytes, ResidentStore, type ResidentStoreOptions, timerState } from '../../engine/store/resident-store.ts';
import { TimerHeap } from '../../engine/store/timer-heap.ts';
import { wrappedFileSystem } from '../helpers/wrapped-file-system.ts';

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

test('the pace of making a byte ahead follows the reads as they are timed', async () => {
  const before = prefaultMsPerByte();
  assert.ok(before > 0 && Number.isFinite(before));
  const supply = new PrefaultedBuffers(1024 * 1024);
  supply.request();
  assert.ok(await eventually(() => supply.ready === 1, readyWaitMs));
  const after = prefaultMsPerByte();
  assert.ok(after > 0 && Number.isFinite(after), `${after} ms a byte`);
  assert.notEqual(after, before, 'the read moved the estimate');
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

test('buffers asked for with more to come are allocated together, each made when requested', async () => {
  const bytes = 64 * 1024;
  const supply = new PrefaultedBuffers(bytes);
  const takeMade = async (count: number): Promise<Uint8Array[]> => {
    const taken: Uint8Array[] = [];
    assert.ok(
      await eventually(() => {
        const buffer = supply.take();
        if (buffer !== undefined) taken.push(buffer);
        return taken.length === count;
      }, readyWaitMs),
    );
    return taken;
  };
  supply.request(3);
  assert.equal(supply.outstanding, 1, 'one requested, two more expected');
  const [first] = (await takeMade(1)) as [Uint8Array];
  supply.request();
  supply.request();
  const rest = await takeMade(2);
  const group = [first, ...rest];
  for (const buffer of group) {
    assert.equal(buffer.buffer, first.buffer, 'one allocation for the three');
    assert.equal(buffer.length, bytes);
  }
  assert.deepEqual(group.map((buffer) => buffer.byteOffset - first.byteOffset).sort((a, b) => a - b), [0, bytes, 2 * bytes], 'each its own part of it');
  assert.ok(group.every((buffer) => buffer.every((byte) => byte === 0)));
  // The group is used up: the next request allocates anew, and so does one after dropAll().
  supply.request(2);
  const [next] = (await takeMade(1)) as [Uint8Array];
  assert.notEqual(next.buffer, first.buffer);
  supply.dropAll();
  supply.request();
  const [afterDrop] = (await takeMade(1)) as [Uint8Array];
  assert.notEqual(afterDrop.buffer, next.buffer, 'the dropped group is not carved further');
  // At most groupBuffersMax to an allocation, however many are coming.
  supply.request(1000);
  const [big] = (await takeMade(1)) as [Uint8Array];
  assert.equal(big.buffer.byteLength, groupBuffersMax * bytes);
});

test('a supply that cannot allocate makes nothing, and does not throw', () => {
  // More than any ArrayBuffer may hold: allocUnsafeSlow throws, request() must not.
  const supply = new PrefaultedBuffers(2 ** 53);
  assert.doesNotThrow(() => supply.request(3));
  assert.equal(supply.outstanding, 0);
  assert.equal(supply.take(), undefined);
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

test('an arena filling fast asks for its next slab as far ahead as it fills while one is made', async () => {
  const slabBytes = 16 * 1024;
  const string = new Uint8Array(1024);
  /**
   * Whether a slab is made ahead for a 100-byte admit when the current slab has `room` left,
   * after 244 KiB were added over `windowMs` (the first rate window); making a slab takes 4 ms.
   */
  const madeAhead = async (windowMs: number, room: number, waitMs: number): Promise<boolean> => {
    let now = 0;
    const arena = new ByteArena({ slabBytes, now: () => now, prefaultMsPerByte: () => 4 / slabBytes });
    arena.prefaultFor(0);
    for (let i = 0; i < 244; i++) arena.add(string);
    now = windowMs;
    // 244 strings of 1 KiB, 16 to a slab: 4 in the current one. Filled on to leave `room`.
    for (let used = 4 * 1024; slabBytes - used > room; used += 1024) arena.add(string);
    arena.prefaultFor(100);
    return eventually(() => arena.slabsMadeAhead === 1, waitMs);
  };
  // 999 bytes a ms: it fills 8,000 bytes while a slab is made, twice over.
  assert.equal(await madeAhead(250, 8 * 1024, 50), false, '8 KiB of room: more than the lead');
  assert.equal(await madeAhead(250, 7 * 1024, readyWaitMs), true, '7 KiB of room: less than the lead');
  // A hundred times slower: 80 bytes of lead, and the admit's own 100 bytes fit.
  assert.equal(await madeAhead(25_000, 7 * 1024, 50), false, 'slow: nothing ahead');
});

test('a large arena allocates the slabs it makes ahead several at a time; a small one, one at a time', async () => {
  const slabBytes = 16 * 1024;
  const arena = new ByteArena({ slabBytes });
  const strings: Array<{ ref: number; bytes: Uint8Array }> = [];
  for (let slab = 0; slab < 140; slab++) {
    arena.prefaultFor(slabBytes);
    assert.ok(await eventually(() => arena.slabsMadeAhead >= 1, readyWaitMs), `slab ${slab} made ahead`);
    for (let i = 0; i < 16; i++) {
      const bytes = new Uint8Array(1024).fill(slab & 0xff);
      bytes[1] = i;
      strings.push({ ref: arena.add(bytes), bytes });
    }
  }
  assert.equal(arena.slabCount, 140);
  // One string of each slab: which allocation (ArrayBuffer) its slab came from.
  const memoryOf = (slab: number): ArrayBufferLike => arena.view((strings[slab * 16] as { ref: number }).ref, 1).buffer;
  const small = new Set(Array.from({ length: 64 }, (_, slab) => memoryOf(slab)));
  assert.equal(small.size, 64, 'under 64 slabs, each slab is an allocation of its own');
  const large = new Set(Array.from({ length: 20 }, (_, i) => memoryOf(120 + i)));
  assert.ok(large.size <= 4, `past 120 slabs, groups of ${groupBuffersMax}: 20 slabs came from ${large.size} allocations`);
  for (const { ref, bytes } of strings) assert.deepEqual(arena.view(ref, bytes.length), bytes);
});

test('an emptied arena gives back a current slab cut from a group; a slab of its own is rewound and kept', async () => {
  const slabBytes = 16 * 1024;
  const fill = async (arena: ByteArena, slabs: number, madeAhead: boolean): Promise<Array<{ ref: number; bytes: Uint8Array }>> => {
    const strings: Array<{ ref: number; bytes: Uint8Array }> = [];
    for (let slab = 0; slab < slabs; slab++) {
      if (madeAhead) {
        arena.prefaultFor(slabBytes);
        assert.ok(await eventually(() => arena.slabsMadeAhead >= 1, readyWaitMs), `slab ${slab} made ahead`);
      }
      for (let i = 0; i < 16; i++) strings.push({ ref: arena.add(new Uint8Array(1024).fill(slab & 0xff)), bytes: new Uint8Array(1024).fill(slab & 0xff) });
    }
    return strings;
  };
  // Past 64 slabs the slabs made ahead come several to an allocation: the current one is among them.
  const grouped = new ByteArena({ slabBytes });
  const groupedStrings = await fill(grouped, 140, true);
  const last = groupedStrings.at(-1) as { ref: number };
  assert.ok(grouped.view(last.ref, 1).buffer.byteLength > slabBytes, 'the current slab is a part of a larger allocation');
  grouped.close();
  for (const { ref, bytes } of groupedStrings) grouped.free(ref, bytes.length);
  assert.equal(grouped.bytesReserved, 0, 'every slab released, the current one too');
  const again = grouped.add(new Uint8Array([1, 2, 3]));
  assert.deepEqual([...grouped.view(again, 3)], [1, 2, 3]);
  assert.equal(grouped.view(again, 3).buffer.byteLength, grouped.bytesReserved, 'the next add opens a slab of its own allocation, as an empty arena does');

  const own = new ByteArena({ slabBytes });
  const ownStrings = await fill(own, 3, false);
  for (const { ref, bytes } of ownStrings) own.free(ref, bytes.length);
  assert.equal(own.bytesReserved, slabBytes, 'the current slab, an allocation of its own, is kept');
  const reused = own.add(new Uint8Array([4, 5]));
  assert.deepEqual([...own.view(reused, 2)], [4, 5]);
  assert.equal(own.bytesReserved, slabBytes, 'and written again from its start');
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

test('slabs made ahead are let go once no bytes have been said to be coming for slabsAheadIdleMs', async () => {
  const slabBytes = 16 * 1024;
  let now = 0;
  const arena = new ByteArena({ slabBytes, now: () => now, slabsAheadIdleMs: 50 });
  arena.prefaultFor(10 * slabBytes);
  assert.ok(await eventually(() => arena.slabsMadeAhead === 2, readyWaitMs));
  // Still being told of bytes (what the current slab holds, even): kept.
  now = 40;
  arena.prefaultFor(0);
  now = 80;
  await sleep(120);
  assert.equal(arena.slabsMadeAhead, 2, 'told 40 ms ago, within the 50');
  // Nothing said since: let go, and the arena allocates its own slabs from there.
  now = 90 + 50;
  assert.ok(await eventually(() => arena.slabsMadeAhead === 0, readyWaitMs), 'dropped after 50 ms without a word');
  for (let i = 0; i < 400; i++) arena.add(new Uint8Array(100));
  assert.equal(arena.slabsPrefaulted, 0);
  // A fill that starts again has them made again.
  arena.prefaultFor(10 * slabBytes);
  assert.ok(await eventually(() => arena.slabsMadeAhead === 2, readyWaitMs));
  arena.close();
});

test('an engine makes the slabs ahead that the admits in flight need together', async () => {
  // Three admits of ~30 KiB each are logged at once into 64 KiB slabs: each alone fits one slab,
  // together they need two. Each admit asks for what the admits ahead of it still bring too, so
  // both slabs are made while the records sync (a slow disk here: 300 ms a sync, and a write,
  // which is the sync on a write-through segment).
  const dir = mkdtempSync(join(tmpdir(), 'fermata-prefault-'));
  const fs = wrappedFileSystem((handle) => ({
    writev: async (chunks, position) => {
      await sleep(300);
      await handle.writev(chunks, position);
    },
    datasync: async () => {
      await sleep(300);
      await handle.datasync();
    },
  }));
  try {
    const engine = await Engine.open({ dataDir: dir, fs, store: { arena: { slabBytes: 64 * 1024 } } });
    const batch = (): TimerBatch => batchFromSpecs(Array.from({ length: 30 }, (_, row) => ({ fireAtMs: Date.now() + 3_600_000 + row, target: 'https://a.example/', payload: new Uint8Array(1000).fill(row) })));
    const admitted = await Promise.all([engine.admit(batch()), engine.admit(batch()), engine.admit(batch())]);
    assert.equal(engine.stats().resident, 90);
    assert.equal(engine.stats().slabsPrefaulted, 2, 'both slabs the three batches filled were made ahead');
    const payload = engine.payloadOf(admitted[2]?.idOf(29) as string);
    assert.deepEqual(payload, new Uint8Array(1000).fill(29));
    await engine.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});

/** A store holding `count` timers whose every column differs by slot, and a check of them all. */
function filledStore(capacityInitial: number, options: Omit<ResidentStoreOptions, 'capacityInitial' | 'capacityMax'> = {}): { store: ResidentStore; add: (count: number) => void; check: () => void } {
  // Columns made ahead stay while a test waits for them (unless it says otherwise).
  const store = new ResidentStore({ capacityInitial, capacityMax: 100_000, columnsAheadIdleMs: 60_000, ...options });
  const targets = [store.internTarget('https://a.test/'), store.internTarget('https://b.test/')];
  const handles: number[] = [];
  const add = (count: number): void => {
    for (let i = 0; i < count; i++) {
      const n = handles.length;
      const slot = store.allocateRaw(1000 + n, 7 * n, n, n % 3, targets[n % 2] as number, Uint8Array.of(n & 0xff, 1), Uint8Array.of(2, n >> 8), Uint8Array.of(3, 3, n & 0x7f));
      store.setDueAt(slot, 5000 + n);
      store.setAttempts(slot, n % 9);
      store.setLastStatus(slot, 200 + n);
      handles.push(store.handleOf(slot));
    }
  };
  const check = (): void => {
    handles.forEach((handle, n) => {
      const slot = store.slotOf(handle);
      assert.ok(slot >= 0, `timer ${n} still live`);
      const fields = [store.fireAt[slot], store.dueAt[slot], store.logSeq[slot], store.row[slot], store.queueIndex[slot], store.state[slot], store.attempts[slot], store.lastStatus[slot], store.targetOf(slot)];
      assert.deepEqual(fields, [1000 + n, 5000 + n, 7 * n, n, n % 3, timerState.pending, n % 9, 200 + n, n % 2 === 0 ? 'https://a.test/' : 'https://b.test/'], `timer ${n}`);
      assert.deepEqual([...store.payloadOf(slot), ...store.headersOf(slot), ...store.keyOf(slot)], [n & 0xff, 1, 2, n >> 8, 3, 3, n & 0x7f], `timer ${n}'s bytes`);
    });
    // Slots never used are as new columns leave them: free, generation 0.
    for (let slot = handles.length; slot < store.capacity; slot++) assert.equal(store.state[slot], timerState.free);
  };
  return { store, add, check };
}

test('a store told that rows on their way near its capacity makes its next columns ahead and grows into them, keeping every column', async () => {
  const { store, add, check } = filledStore(64);
  add(30);
  store.prefaultColumnsFor(32);
  assert.equal(store.columnsAheadCapacity, 0, '2 of 64 slots left free: a 32nd, not less');
  store.prefaultColumnsFor(33);
  assert.equal(store.columnsAheadCapacity, 128, 'less than a 32nd left: the doubled columns');
  assert.ok(await eventually(() => store.columnsAheadReady, readyWaitMs));
  add(70);
  assert.equal(store.capacity, 128);
  assert.equal(store.columnGrowthsMadeAhead, 1);
  assert.equal(store.columnsAheadCapacity, 0, 'taken');
  check();
  // Rows far beyond the next doubling ask for the capacity reserve() would double to: 1,000 slots.
  store.prefaultColumnsFor(900);
  assert.equal(store.columnsAheadCapacity, 1024);
});

test('a timer heap keeps its entries and positions in the store: none until its first push, then grown (and made ahead) with the columns', async () => {
  const { store, add, check } = filledStore(64);
  add(30);
  const bytesBefore = store.bytesUsed();
  const heap = new TimerHeap(store);
  assert.equal(store.bytesUsed(), bytesBefore, 'a heap never pushed to holds no columns');
  for (let slot = 0; slot < 30; slot++) heap.push(slot);
  assert.equal(store.bytesUsed(), bytesBefore + 2 * 4 * 64, 'two Int32 columns of the capacity');
  store.prefaultColumnsFor(33);
  assert.equal(store.columnsAheadCapacity, 128);
  assert.ok(await eventually(() => store.columnsAheadReady, readyWaitMs));
  add(70);
  assert.equal(store.columnGrowthsMadeAhead, 1, 'the growth took the columns made ahead, the heap’s among them');
  for (let slot = 30; slot < 100; slot++) heap.push(slot);
  heap.assertValid();
  check();
  // Pushed in fire-time order (5000 + n), popped in it, across the growth.
  for (let slot = 0; slot < 100; slot++) assert.equal(heap.pop(), slot);
  assert.equal(heap.pop(), -1);
});

test('columns made ahead are let go once no rows have been said to be coming for columnsAheadIdleMs', async () => {
  let now = 0;
  const { store, add } = filledStore(64, { now: () => now, columnsAheadIdleMs: 50 });
  add(40);
  store.prefaultColumnsFor(30);
  assert.equal(store.columnsAheadCapacity, 128);
  // Still being told of rows (less than the lead asks for, even): kept.
  now = 40;
  store.prefaultColumnsFor(0);
  now = 80;
  await sleep(120);
  assert.equal(store.columnsAheadCapacity, 128, 'asked for 40 ms ago, within the 50');
  // Nothing said since: let go.
  now = 90 + 50;
  assert.ok(await eventually(() => store.columnsAheadCapacity === 0, readyWaitMs), 'dropped after 50 ms without a word');
  // A fill that starts again asks again.
  store.prefaultColumnsFor(30);
  assert.equal(store.columnsAheadCapacity, 128);
  store.close();
});

test('a store filling fast asks for large columns as far ahead as making them takes, or 10 s of its fill, up to half its capacity', () => {
  // 20 slots fill over `windowMs` (the fill rate is measured over 250 ms windows) of a 64-slot
  // store whose 128-slot columns take `makingMs` to make.
  const filledOver = (windowMs: number, makingMs: number, earlyBytesMin?: number): { store: ResidentStore; add: (count: number) => void } => {
    let now = 0;
    const msPerByte = makingMs / columnsBytes(128);
    const filled = filledStore(64, { now: () => now, prefaultMsPerByte: () => msPerByte, ...(earlyBytesMin === undefined ? {} : { columnsEarlyBytesMin: earlyBytesMin }) });
    filled.store.prefaultColumnsFor(0);
    filled.add(20);
    now = windowMs;
    filled.store.prefaultColumnsFor(0);
    return filled;
  };
  const aheadAfter = (filled: { store: ResidentStore; add: (count: number) => void }, count: number): number => {
    filled.add(count);
    filled.store.prefaultColumnsFor(0);
    return filled.store.columnsAheadCapacity;
  };
  // 0.0008 slots a ms, over the 10 s the columns take, twice over: asked for with 16 slots to go.
  const slowMaking = filledOver(25_000, 10_000, 0);
  assert.equal(aheadAfter(slowMaking, 27), 0, '17 slots free, 64 - 47: not yet');
  assert.equal(aheadAfter(slowMaking, 2), 128, '15 slots free: less than the lead');
  // Columns made at once: what the same fill takes in 10 s (8 slots) is the lead.
  const quickMaking = filledOver(25_000, 0, 0);
  assert.equal(aheadAfter(quickMaking, 35), 0, '9 slots free: not yet');
  assert.equal(aheadAfter(quickMaking, 2), 128, '7 slots free: a growth within 10 s');
  // The same slots filled a thousand times slower: the 32nd of the capacity (2 slots) as before.
  assert.equal(aheadAfter(filledOver(25_000_000, 10_000, 0), 29), 0, 'slow fill: 15 slots free is plenty');
  // Columns below the early size (1 MiB by default) keep the 32nd, however fast the fill.
  assert.equal(aheadAfter(filledOver(250, 100), 29), 0, 'small columns: not early');
  // However long making them takes, or fast the fill is, never before half the capacity is in use.
  for (const [windowMs, makingMs] of [[250, 100_000], [250, 0]] as const) {
    const early = filledOver(windowMs, makingMs, 0);
    assert.equal(aheadAfter(early, 12), 0, `${windowMs} ms, ${makingMs} ms: 32 slots free, half the capacity`);
    assert.equal(aheadAfter(early, 1), 128, `${windowMs} ms, ${makingMs} ms: 31 slots free, less than half`);
  }
});

test('a growth before the columns are made allocates its own; dropPrefaulted and close let go of them', async () => {
  const early = filledStore(64);
  early.store.prefaultColumnsFor(64);
  assert.equal(early.store.columnsAheadCapacity, 128);
  // The read of /dev/zero ends on a later turn of the event loop: this growth comes first.
  early.add(100);
  assert.equal(early.store.columnGrowthsMadeAhead, 0);
  assert.equal(early.store.columnsAheadCapacity, 0, 'dropped, not kept for a later growth');
  early.check();

  for (const end of ['drop', 'close'] as const) {
    const { store, add, check } = filledStore(64);
    store.prefaultColumnsFor(64);
    assert.ok(await eventually(() => store.columnsAheadReady, readyWaitMs));
    if (end === 'drop') store.dropPrefaulted();
    else store.close();
    assert.equal(store.columnsAheadCapacity, 0, end);
    add(100);
    assert.equal(store.columnGrowthsMadeAhead, 0, end);
    check();
    store.prefaultColumnsFor(900);
    assert.equal(store.columnsAheadCapacity, end === 'drop' ? 1024 : 0, `${end}: a dropped store is told again, a closed one is not`);
  }
});

test('whenIdle settles once every read under way has ended, made or dropped', { timeout: 10_000 }, async () => {
  const supply = new PrefaultedBuffers(256 * 1024);
  await supply.whenIdle();
  supply.request();
  assert.equal(supply.ready, 0, 'a read of /dev/zero ends on a later turn');
  await supply.whenIdle();
  assert.equal(supply.ready, 1, 'settled with the buffer made');
  supply.request();
  const dropped = supply.whenIdle();
  supply.dropAll();
  await dropped;
  assert.equal(supply.outstanding, 0, 'settled with the read dropped');
});

test('an allocation that would grow the columns while their successors are being made is told to wait for them', { timeout: 10_000 }, async () => {
  const { store, add, check } = filledStore(64);
  add(60);
  assert.equal(store.columnsAheadPending(100), undefined, 'nothing is being made');
  store.prefaultColumnsFor(40);
  assert.equal(store.columnsAheadCapacity, 128);
  assert.equal(store.columnsAheadPending(4), undefined, 'no growth: go on');
  assert.equal(store.columnsAheadPending(200), undefined, 'a growth past what is being made: go on');
  const pending = store.columnsAheadPending(40);
  assert.ok(pending !== undefined, 'the growth they are made for waits');
  await pending;
  assert.ok(store.columnsAheadReady);
  assert.equal(store.columnsAheadPending(40), undefined, 'made: go on');
  add(40);
  assert.equal(store.columnGrowthsMadeAhead, 1);
  check();
  store.close();
});

test('an admit that would grow the columns while they are being made ahead waits for them, so the growth takes them', async () => {
  // After 500,000 rows, two batches logged together: the first leaves 100 slots of 2^19, the
  // second needs 200. The first's admit asks for the columns of 2^20 slots (~70 MB, made by the
  // threadpool for tens of ms; the store's clock stands still, so its fill rate reads 0 and it
  // asks no sooner); the second's record (on a disk whose syncs return at once) is durable well
  // before they are made.
  const dir = mkdtempSync(join(tmpdir(), 'fermata-prefault-'));
  const fs = wrappedFileSystem((handle) => ({ datasync: async () => {}, sync: async () => {}, writev: (chunks, position) => handle.writev(chunks, position) }));
  try {
    const engine = await Engine.open({ dataDir: dir, fs, store: { capacityInitial: 2 ** 19, capacityMax: 2 ** 21, now: () => 0 } });
    const rows = (count: number): TimerBatch => ({
      rows: count,
      fireAtMs: new Float64Array(count).fill(Date.now() + 3_600_000),
      targets: ['https://a.example/'],
      targetIndex: new Int32Array(count),
      queues: ['default'],
      queueIndex: new Int32Array(count),
      payload: { values: new Uint8Array(count), offsets: Int32Array.from({ length: count + 1 }, (_, i) => i) },
      headers: { values: new Uint8Array(0), offsets: new Int32Array(count + 1) },
      keys: { values: new Uint8Array(0), offsets: new Int32Array(count + 1) },
    });
    for (let batch = 0; batch < 5; batch++) await engine.admit(rows(100_000));
    assert.equal(engine.stats().columnGrowthsMadeAhead, 0);
    await Promise.all([engine.admit(rows(2 ** 19 - 100 - 500_000)), engine.admit(rows(200))]);
    assert.equal(engine.stats().resident, 2 ** 19 + 100);
    assert.equal(engine.stats().columnGrowthsMadeAhead, 1, 'the growth to 2^20 slots took the columns made ahead');
    await engine.close();
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
