// ResidentStore and ByteArena against a Map model: contents, handles and generations, growth,
// shrinking, capacityMax, target interning and arena slab release, through random operation
// sequences.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { ByteArena } from '../../engine/store/byte-arena.ts';
import { ResidentStore, residentSlotBits, timerState, type TimerStateCode } from '../../engine/store/resident-store.ts';
import { propertyRuns } from '../helpers/property.ts';

interface ModelTimer {
  fireAt: number;
  dueAt: number;
  logSeq: number;
  row: number;
  queueIndex: number;
  target: string;
  payload: Uint8Array;
  headers: Uint8Array;
  key: Uint8Array;
  state: number;
  attempts: number;
  lastStatus: number;
}

type Op =
  | { kind: 'allocate'; raw: boolean; fireAt: number; logSeq: number; row: number; queueIndex: number; target: number; payload: Uint8Array; headers: Uint8Array }
  | { kind: 'allocateRows'; logSeq: number; targets: number[]; queueIndexes: number[]; rows: BatchRow[] }
  | { kind: 'release'; pick: number }
  | { kind: 'set'; pick: number; fireAt: number; state: TimerStateCode; attempts: number; lastStatus: number }
  | { kind: 'compact'; ratio: number }
  | { kind: 'shrink'; spare: number; order: number };

interface BatchRow {
  take: boolean;
  fireAt: number;
  target: number;
  queue: number;
  payload: Uint8Array;
  headers: Uint8Array;
  key: Uint8Array;
}

/** Byte strings as one values buffer and row offsets, the way a TimerBatch holds them. */
function column(parts: readonly Uint8Array[]): { values: Uint8Array; offsets: Int32Array } {
  const offsets = new Int32Array(parts.length + 1);
  parts.forEach((part, i) => (offsets[i + 1] = (offsets[i] as number) + part.length));
  const values = new Uint8Array(offsets[parts.length] as number);
  parts.forEach((part, i) => values.set(part, offsets[i] as number));
  return { values, offsets };
}

const slabBytes = 256;
const capacityMax = 37;
const targets = ['https://a.test/hook', 'https://b.test/hook', 'https://c.test/', 'https://d.test/x?y=1', ''];

// Payloads from empty to larger than a slab (those get a slab of their own).
const bytes = (maxLength: number): fc.Arbitrary<Uint8Array> =>
  fc.oneof(fc.constant(new Uint8Array(0)), fc.uint8Array({ maxLength, size: 'max' }));

const op: fc.Arbitrary<Op> = fc.oneof(
  {
    weight: 5,
    arbitrary: fc
      .record({
        raw: fc.boolean(),
        fireAt: fc.oneof(fc.integer({ min: 0, max: 2 ** 48 }), fc.double({ noNaN: true, noDefaultInfinity: true })),
        logSeq: fc.oneof(fc.integer({ min: 0, max: 1000 }), fc.constant(Number.MAX_SAFE_INTEGER)),
        row: fc.oneof(fc.integer({ min: 0, max: 10 }), fc.constant(2 ** 32 - 1)),
        queueIndex: fc.integer({ min: 0, max: 0xffff }),
        target: fc.integer({ min: 0, max: targets.length - 1 }),
        payload: bytes(300),
        headers: bytes(40),
      })
      .map((r): Op => ({ kind: 'allocate', ...r })),
  },
  {
    weight: 2,
    arbitrary: fc
      .record({
        logSeq: fc.integer({ min: 0, max: 1000 }),
        targets: fc.array(fc.integer({ min: 0, max: targets.length - 1 }), { minLength: 1, maxLength: 3 }),
        queueIndexes: fc.array(fc.integer({ min: 0, max: 0xffff }), { minLength: 1, maxLength: 2 }),
        rows: fc.array(
          fc.record({
            take: fc.oneof(fc.constant(true), fc.boolean()),
            fireAt: fc.integer({ min: 0, max: 2 ** 48 }),
            target: fc.nat(),
            queue: fc.nat(),
            payload: bytes(300),
            headers: bytes(40),
            key: bytes(20),
          }),
          { minLength: 1, maxLength: 6 },
        ),
      })
      .map((r): Op => ({ kind: 'allocateRows', ...r })),
  },
  { weight: 4, arbitrary: fc.nat().map((pick): Op => ({ kind: 'release', pick })) },
  {
    weight: 2,
    arbitrary: fc
      .record({
        pick: fc.nat(),
        fireAt: fc.integer(),
        state: fc.constantFrom<TimerStateCode>(1, 2, 3, 4, 5, 6),
        attempts: fc.integer({ min: 0, max: 0xffff }),
        lastStatus: fc.integer({ min: 0, max: 0xffff }),
      })
      .map((r): Op => ({ kind: 'set', ...r })),
  },
  { weight: 1, arbitrary: fc.double({ min: 0, max: 1, noNaN: true }).map((ratio): Op => ({ kind: 'compact', ratio })) },
  { weight: 1, arbitrary: fc.record({ spare: fc.nat({ max: 40 }), order: fc.nat() }).map((r): Op => ({ kind: 'shrink', ...r })) },
);

function checkAgainstModel(store: ResidentStore, model: Map<number, ModelTimer>, stale: number[]): void {
  assert.equal(store.count, model.size);
  assert.ok(store.capacity >= store.count && store.capacity <= store.capacityMax);
  const users = new Map<string, number>();
  let liveBytes = 0;
  let liveStrings = 0;
  for (const [handle, timer] of model) {
    const slot = store.slotOf(handle);
    assert.ok(slot >= 0, 'a live handle lost its slot');
    assert.equal(store.handleOf(slot), handle);
    assert.equal(store.fireAt[slot], timer.fireAt);
    assert.equal(store.dueAt[slot], timer.dueAt);
    assert.equal(store.logSeq[slot], timer.logSeq);
    assert.equal(store.row[slot], timer.row);
    assert.equal(store.queueIndex[slot], timer.queueIndex);
    assert.equal(store.state[slot], timer.state);
    assert.equal(store.attempts[slot], timer.attempts);
    assert.equal(store.lastStatus[slot], timer.lastStatus);
    assert.equal(store.targetOf(slot), timer.target);
    assert.deepEqual(store.payloadOf(slot), timer.payload);
    assert.deepEqual(store.headersOf(slot), timer.headers);
    assert.deepEqual(store.keyOf(slot), timer.key);
    users.set(timer.target, (users.get(timer.target) ?? 0) + 1);
    liveBytes += timer.payload.length + timer.headers.length + timer.key.length;
    if (timer.payload.length + timer.headers.length + timer.key.length > 0) liveStrings++;
  }
  for (const handle of stale) assert.equal(store.slotOf(handle), -1, 'a stale handle reached a slot');
  // Every target still used is interned once with the right count; no other target is kept.
  assert.equal(store.targetCount, users.size);
  for (const [handle, timer] of model) {
    const slot = store.slotOf(handle);
    assert.equal(store.targetRefCount(store.targetIndex[slot] as number), users.get(timer.target));
  }
  assert.equal(store.arena.bytesLive, liveBytes);
  // Payload and headers are one string; every slab but the current one holds a live string.
  assert.ok(store.arena.slabCount <= liveStrings + 1, 'the arena kept a slab with no live string');
  if (model.size === 0) assert.ok(store.arena.bytesReserved <= slabBytes, 'an empty store still holds released slabs');
}

test('ResidentStore matches a Map model through allocate, allocateRows, release, set, compact, growth and shrink', () => {
  fc.assert(
    fc.property(fc.array(op, { maxLength: 250, size: 'max' }), (ops) => {
      const store = new ResidentStore({ capacityInitial: 1, capacityMax, arena: { slabBytes } });
      const model = new Map<number, ModelTimer>();
      const stale: number[] = [];
      for (const o of ops) {
        if (o.kind === 'allocate') {
          const target = targets[o.target] as string;
          let slot: number;
          if (o.raw) {
            const targetIndex = store.internTarget(target);
            slot = store.allocateRaw(o.fireAt, o.logSeq, o.row, o.queueIndex, targetIndex, o.payload, o.headers);
            store.releaseTarget(targetIndex);
          } else {
            slot = store.allocate({ ...o, target });
          }
          if (model.size === capacityMax) {
            assert.equal(slot, -1, 'allocated past capacityMax');
            assert.equal(store.canAllocate(1), false);
            continue;
          }
          assert.ok(slot >= 0);
          const handle = store.handleOf(slot);
          assert.ok(!model.has(handle) && !stale.includes(handle), 'a handle was given out twice');
          model.set(handle, {
            fireAt: o.fireAt,
            dueAt: o.fireAt,
            logSeq: o.logSeq,
            row: o.row,
            queueIndex: o.queueIndex,
            target,
            payload: o.payload.slice(),
            headers: o.headers.slice(),
            key: new Uint8Array(0),
            state: timerState.pending,
            attempts: 0,
            lastStatus: 0,
          });
          // The store copied the bytes: the caller may reuse its buffers.
          o.payload.fill(0xee);
          o.headers.fill(0xee);
        } else if (o.kind === 'allocateRows') {
          const taken = o.rows.flatMap((row, i) => (row.take ? [i] : []));
          const rows = taken.length === o.rows.length ? undefined : Int32Array.from(taken);
          if (!store.canAllocate(taken.length)) {
            assert.ok(model.size + taken.length > capacityMax);
            continue;
          }
          const batch = {
            fireAtMs: Float64Array.from(o.rows, (row) => row.fireAt),
            targetIndex: Int32Array.from(o.rows, (row) => row.target % o.targets.length),
            queueIndex: Int32Array.from(o.rows, (row) => row.queue % o.queueIndexes.length),
            payload: column(o.rows.map((row) => row.payload)),
            headers: column(o.rows.map((row) => row.headers)),
            keys: column(o.rows.map((row) => row.key)),
          };
          const pins = o.targets.map((target) => store.internTarget(targets[target] as string));
          const slots = new Int32Array(taken.length);
          store.allocateRows(batch, o.logSeq, rows, taken.length, o.queueIndexes, pins, slots);
          for (const pin of pins) store.releaseTarget(pin);
          taken.forEach((row, i) => {
            const spec = o.rows[row] as BatchRow;
            const handle = store.handleOf(slots[i] as number);
            assert.ok(!model.has(handle) && !stale.includes(handle), 'a handle was given out twice');
            model.set(handle, {
              fireAt: spec.fireAt,
              dueAt: spec.fireAt,
              logSeq: o.logSeq,
              row,
              queueIndex: o.queueIndexes[spec.queue % o.queueIndexes.length] as number,
              target: targets[o.targets[spec.target % o.targets.length] as number] as string,
              payload: spec.payload.slice(),
              headers: spec.headers.slice(),
              key: spec.key.slice(),
              state: timerState.pending,
              attempts: 0,
              lastStatus: 0,
            });
          });
          // The store copied the bytes: the caller may reuse its buffers.
          batch.payload.values.fill(0xee);
          batch.keys.values.fill(0xee);
        } else if (o.kind === 'release' && model.size > 0) {
          const handle = [...model.keys()][o.pick % model.size] as number;
          store.release(store.slotOf(handle));
          model.delete(handle);
          stale.push(handle);
        } else if (o.kind === 'set' && model.size > 0) {
          const [handle, timer] = [...model][o.pick % model.size] as [number, ModelTimer];
          const slot = store.slotOf(handle);
          store.setDueAt(slot, o.fireAt);
          store.setState(slot, o.state);
          store.setAttempts(slot, o.attempts);
          store.setLastStatus(slot, o.lastStatus);
          Object.assign(timer, { dueAt: o.fireAt, state: o.state, attempts: o.attempts, lastStatus: o.lastStatus });
        } else if (o.kind === 'compact') {
          const reservedBefore = store.arena.bytesReserved;
          store.compact(o.ratio);
          assert.ok(store.arena.bytesReserved <= reservedBefore + slabBytes, 'compaction grew the arena by more than a slab');
        } else if (o.kind === 'shrink') {
          // An index column of each kind, filled as a heap fills its positions and entries.
          const bySlot = store.indexColumn('bySlot');
          const ofSlots = store.indexColumn('slots');
          const live = [...model.keys()].map((handle) => store.slotOf(handle));
          live.forEach((slot, i) => {
            bySlot.array[slot] = 1000 + slot;
            ofSlots.array[(i + o.order) % live.length] = slot;
          });
          const capacity = Math.min(store.capacity, Math.max(1, model.size) + o.spare);
          const moves = store.shrink(capacity);
          assert.ok(moves !== undefined);
          assert.equal(store.capacity, capacity);
          assert.equal(bySlot.array.length, capacity);
          const moved = [...model].map(([handle, timer]): [number, ModelTimer] => {
            const from = live[[...model.keys()].indexOf(handle)] as number;
            const to = moves[from] as number;
            assert.equal(bySlot.array[to], 1000 + from, 'a bySlot index column moves with its slot');
            return [store.handleOf(to), timer];
          });
          live.forEach((slot, i) => assert.equal(ofSlots.array[(i + o.order) % live.length], moves[slot], 'a slots index column holds the moved slots'));
          // In slot order, to the lowest slots.
          assert.deepEqual([...live].sort((a, b) => a - b).map((slot) => moves[slot]), live.map((_, i) => i));
          stale.push(...model.keys());
          model.clear();
          for (const [handle, timer] of moved) model.set(handle, timer);
        }
        checkAgainstModel(store, model, stale);
      }
    }),
    propertyRuns(200),
  );
});

test('shrinkCapacity: only columns `share` times larger than the live timers need, to the growth step holding twice them; no shrink under a snapshot', () => {
  const store = new ResidentStore({ capacityInitial: 4 });
  const fields = { fireAt: 1, logSeq: 1, row: 0, queueIndex: 0, target: 'https://a.test/', payload: new Uint8Array([1]), headers: new Uint8Array(0) };
  const slots = Array.from({ length: 100 }, (_, row) => store.allocate({ ...fields, row }));
  assert.equal(store.capacity, 128);
  assert.equal(store.shrinkCapacity(8, 4), undefined, '100 live in 128 slots');
  for (const slot of slots.slice(0, 90)) store.release(slot);
  assert.equal(store.shrinkCapacity(8, 4), 32, '10 live: 32 slots hold twice them (4, 8, 16, 32)');
  assert.equal(store.shrinkCapacity(16, 4), undefined, 'not 16 times larger');
  assert.equal(store.shrinkCapacity(8, 128), undefined, 'never below the initial capacity');
  const snapshot = store.snapshot(Int32Array.from(slots.slice(90)));
  assert.equal(store.shrink(32), undefined, 'a snapshot reads its timers by slot');
  assert.equal(store.capacity, 128);
  snapshot.release();
  assert.ok(store.shrink(32) !== undefined);
  assert.equal(store.capacity, 32);
  assert.equal(store.shrinkCapacity(8, 4), undefined);
});

test('a released slot is taken again with a new generation; the old handle answers -1', () => {
  const store = new ResidentStore();
  const first = store.allocate({ fireAt: 1, logSeq: 1, row: 0, queueIndex: 0, target: 'https://a.test/', payload: new Uint8Array([1]), headers: new Uint8Array(0) });
  const oldHandle = store.handleOf(first);
  assert.ok(oldHandle >= 2 ** residentSlotBits, 'handles carry a generation of at least 1, so 0 is never a handle');
  store.release(first);
  assert.equal(store.slotOf(oldHandle), -1);
  const second = store.allocate({ fireAt: 2, logSeq: 1, row: 1, queueIndex: 0, target: 'https://a.test/', payload: new Uint8Array([2]), headers: new Uint8Array(0) });
  assert.equal(second, first, 'the free list hands the released slot out again');
  assert.equal(store.slotOf(oldHandle), -1, 'the stale handle must not reach the reused slot');
  assert.equal(store.slotOf(store.handleOf(second)), second);
  for (const junk of [-1, 0.5, NaN, 2 ** 53, oldHandle + 1]) assert.equal(store.slotOf(junk), -1);
});

test('a slot whose generation is used up is retired, never handed out again', () => {
  const store = new ResidentStore({ generationMax: 3 });
  const target = store.internTarget('https://a.test/');
  const handles: number[] = [];
  for (let i = 0; i < 3; i++) {
    const slot = store.allocateRaw(1, 1, i, 0, target, new Uint8Array(0), new Uint8Array(0));
    assert.equal(slot, 0);
    handles.push(store.handleOf(slot));
    store.release(slot);
  }
  assert.equal(store.allocateRaw(1, 1, 9, 0, target, new Uint8Array(0), new Uint8Array(0)), 1);
  for (const handle of handles) assert.equal(store.slotOf(handle), -1);
});

test('growth keeps every column; capacityMax stops allocation with -1 and canAllocate agrees', () => {
  const store = new ResidentStore({ capacityInitial: 2, capacityMax: 100 });
  const target = store.internTarget('https://a.test/');
  const handles: number[] = [];
  for (let i = 0; i < 100; i++) {
    const slot = store.allocateRaw(1000 + i, 7 + i, i, i % 3, target, new Uint8Array([i, i + 1]), new TextEncoder().encode(`{"i":${i}}`));
    store.setAttempts(slot, i);
    handles.push(store.handleOf(slot));
  }
  assert.equal(store.capacity, 100, 'doubling stops at capacityMax');
  assert.equal(store.canAllocate(1), false);
  assert.equal(store.allocateRaw(1, 1, 0, 0, target, new Uint8Array(0), new Uint8Array(0)), -1);
  handles.forEach((handle, i) => {
    const slot = store.slotOf(handle);
    assert.deepEqual(
      [store.fireAt[slot], store.logSeq[slot], store.row[slot], store.queueIndex[slot], store.attempts[slot], store.state[slot]],
      [1000 + i, 7 + i, i, i % 3, i, timerState.pending],
    );
    assert.deepEqual(store.payloadOf(slot), new Uint8Array([i, i + 1]));
    assert.equal(new TextDecoder().decode(store.headersOf(slot)), `{"i":${i}}`);
  });
  store.release(store.slotOf(handles[50] as number));
  assert.equal(store.canAllocate(1), true);
  assert.equal(store.canAllocate(2), false);
  assert.ok(store.allocateRaw(1, 1, 0, 0, target, new Uint8Array(0), new Uint8Array(0)) >= 0);
});

test('a target is freed once no timer or pin holds it, and its index is reused', () => {
  const store = new ResidentStore();
  const a = store.internTarget('https://a.test/');
  const slots = [0, 1, 2].map((row) => store.allocateRaw(1, 1, row, 0, a, new Uint8Array(0), new Uint8Array(0)));
  assert.equal(store.targetRefCount(a), 4, 'three timers and the pin');
  store.releaseTarget(a);
  for (const slot of slots.slice(0, 2)) store.release(slot);
  assert.equal(store.targetRefCount(a), 1);
  assert.equal(store.targetCount, 1);
  store.release(slots[2] as number);
  assert.equal(store.targetCount, 0);
  assert.equal(store.targetRefCount(a), 0);
  assert.throws(() => store.allocateRaw(1, 1, 0, 0, a, new Uint8Array(0), new Uint8Array(0)), assert.AssertionError);
  assert.equal(store.internTarget('https://b.test/'), a, 'the freed index is reused');
  // allocate() at capacityMax must not leave its target behind.
  const full = new ResidentStore({ capacityInitial: 1, capacityMax: 1 });
  full.allocate({ fireAt: 1, logSeq: 1, row: 0, queueIndex: 0, target: 'https://a.test/', payload: new Uint8Array(0), headers: new Uint8Array(0) });
  assert.equal(full.allocate({ fireAt: 1, logSeq: 1, row: 1, queueIndex: 0, target: 'https://new.test/', payload: new Uint8Array(0), headers: new Uint8Array(0) }), -1);
  assert.equal(full.targetCount, 1);
});

test('bugs assert: releasing a free slot, reading a released one, bad column values', () => {
  const store = new ResidentStore();
  const target = store.internTarget('https://a.test/');
  const slot = store.allocateRaw(1, 1, 0, 0, target, new Uint8Array(0), new Uint8Array(0));
  store.release(slot);
  assert.throws(() => store.release(slot), assert.AssertionError);
  assert.throws(() => store.release(99), assert.AssertionError);
  assert.throws(() => store.release(-1), assert.AssertionError);
  assert.throws(() => store.release(0.5), assert.AssertionError);
  assert.throws(() => store.payloadOf(slot), assert.AssertionError);
  assert.throws(() => store.handleOf(slot), assert.AssertionError);
  assert.throws(() => store.setDueAt(slot, 5), assert.AssertionError);
  const live = store.allocateRaw(1, 1, 0, 0, target, new Uint8Array(0), new Uint8Array(0));
  assert.throws(() => store.setDueAt(live, NaN), assert.AssertionError);
  assert.throws(() => store.setState(live, timerState.free), assert.AssertionError);
  assert.throws(() => store.setAttempts(live, 0x10000), assert.AssertionError);
  assert.throws(() => store.allocateRaw(Infinity, 1, 0, 0, target, new Uint8Array(0), new Uint8Array(0)), assert.AssertionError);
  assert.throws(() => store.allocateRaw(1, 1, 0, 0x10000, target, new Uint8Array(0), new Uint8Array(0)), assert.AssertionError);
});

test('ByteArena releases a slab when its last string is freed and reuses its id', () => {
  const arena = new ByteArena({ slabBytes: 100 });
  const strings: Array<[number, number]> = [];
  for (let i = 0; i < 10; i++) {
    const bytes = new Uint8Array(30).fill(i);
    strings.push([arena.add(bytes), bytes.length]);
  }
  // 3 strings of 30 bytes fit a 100-byte slab: 4 slabs, the last one current.
  assert.equal(arena.slabCount, 4);
  assert.equal(arena.bytesReserved, 400);
  assert.equal(arena.bytesLive, 300);
  for (const [ref, length] of strings.slice(0, 2)) arena.free(ref, length);
  assert.equal(arena.bytesReserved, 400, 'slab 0 still holds one live string');
  const [ref2, length2] = strings[2] as [number, number];
  assert.deepEqual(arena.view(ref2, length2), new Uint8Array(30).fill(2));
  arena.free(ref2, length2);
  assert.equal(arena.bytesReserved, 300, 'slab 0 released with its last string');
  assert.equal(arena.slabCount, 3);
  // A string larger than a slab gets one of its own (taking the released id), freed alone.
  const big = new Uint8Array(250).fill(7);
  const bigRef = arena.add(big);
  assert.equal(arena.bytesReserved, 550);
  assert.deepEqual(arena.view(bigRef, big.length), big);
  arena.free(bigRef, big.length);
  assert.equal(arena.bytesReserved, 300);
  // Freeing everything leaves only the current slab, rewound for reuse.
  for (const [ref, length] of strings.slice(3)) arena.free(ref, length);
  assert.equal(arena.bytesReserved, 100);
  assert.equal(arena.bytesLive, 0);
  const again = arena.add(new Uint8Array(100).fill(1));
  assert.equal(arena.bytesReserved, 100, 'a rewound current slab takes a full slab again');
  assert.deepEqual(arena.view(again, 100), new Uint8Array(100).fill(1));
  assert.throws(() => arena.free(again, 101), assert.AssertionError);
  arena.free(again, 100);
  // Churn in the current slab rewinds it rather than walking on into new slabs.
  for (let i = 0; i < 10; i++) {
    const ref = arena.add(new Uint8Array(60).fill(i));
    assert.equal(ref, again, 'an emptied current slab is written again from its start');
    assert.deepEqual(arena.view(ref, 60), new Uint8Array(60).fill(i));
    arena.free(ref, 60);
  }
});

test('a small arena takes small slabs: the first of slabBytesMin, each next one as large as what it holds, up to slabBytes', () => {
  const arena = new ByteArena({ slabBytes: 4096, slabBytesMin: 256 });
  const reserved: number[] = [];
  const strings: Array<[number, Uint8Array]> = [];
  for (let i = 0; i < 120; i++) {
    const bytes = new Uint8Array(100).fill(i);
    strings.push([arena.add(bytes), bytes]);
    if (reserved.at(-1) !== arena.bytesReserved) reserved.push(arena.bytesReserved);
  }
  // Slabs of 256, 256, 512, 1024, 2048, then 4096 each: what the arena holds, doubled.
  assert.deepEqual(reserved.slice(0, 7), [256, 512, 1024, 2048, 4096, 8192, 12288]);
  for (const [ref, bytes] of strings) assert.deepEqual(arena.view(ref, bytes.length), bytes);
  // A string longer than the next small slab gets a slab it fits.
  const fresh = new ByteArena({ slabBytes: 4096, slabBytesMin: 256 });
  const long = new Uint8Array(1000).fill(9);
  const ref = fresh.add(long);
  assert.equal(fresh.bytesReserved, 1024);
  assert.deepEqual(fresh.view(ref, long.length), long);
});

test('a store of a thousand 200-byte strings holds well under one 4 MiB slab', () => {
  const arena = new ByteArena();
  for (let i = 0; i < 1000; i++) arena.add(new Uint8Array(200).fill(i & 0xff));
  assert.ok(arena.bytesReserved <= 512 * 1024, `${arena.bytesReserved} bytes reserved for 200,000 bytes of strings`);
  for (let i = 0; i < 30_000; i++) arena.add(new Uint8Array(200).fill(i & 0xff));
  assert.ok(arena.bytesReserved < 2 * arena.bytesLive, 'a large arena is not made of small slabs wasting their tails');
});

test('an arena hold keeps the strings it saw readable: no rewind over them, released slabs kept alive', () => {
  const arena = new ByteArena({ slabBytes: 100 });
  const first = arena.add(new Uint8Array(40).fill(1)); // slab 0
  const second = arena.add(new Uint8Array(40).fill(2));
  const third = arena.add(new Uint8Array(40).fill(3)); // slab 1, current
  const hold = arena.hold();
  // Every string freed: slab 0 is released, and the current slab would be rewound.
  arena.free(first, 40);
  arena.free(second, 40);
  arena.free(third, 40);
  // New strings: the released id is reused by a new slab; the current slab is not written over.
  const later = [arena.add(new Uint8Array(40).fill(7)), arena.add(new Uint8Array(40).fill(8)), arena.add(new Uint8Array(90).fill(9))];
  assert.deepEqual(hold.view(first, 40), new Uint8Array(40).fill(1));
  assert.deepEqual(hold.view(second, 40), new Uint8Array(40).fill(2));
  assert.deepEqual(hold.view(third, 40), new Uint8Array(40).fill(3), 'the current slab was not rewound under the hold');
  assert.deepEqual(arena.view(later[0] as number, 40), new Uint8Array(40).fill(7));
  hold.release();
  assert.throws(() => hold.view(first, 40), assert.AssertionError, 'a released hold is not read');
  // Released, the arena rewinds its emptied current slab again.
  for (const [ref, length] of [[later[0], 40], [later[1], 40], [later[2], 90]] as Array<[number, number]>) arena.free(ref, length);
  const reused = arena.add(new Uint8Array(10).fill(5));
  assert.equal(reused % 2 ** 32, 0, 'an emptied current slab is written from its start once no hold is left');
});

test('zero-length strings take no slab bytes', () => {
  const arena = new ByteArena({ slabBytes: 64 });
  const ref = arena.add(new Uint8Array(0));
  assert.equal(arena.view(ref, 0).length, 0);
  arena.free(ref, 0);
  assert.equal(arena.bytesReserved, 0);
  const store = new ResidentStore({ arena: { slabBytes: 64 } });
  const slot = store.allocate({ fireAt: 1, logSeq: 1, row: 0, queueIndex: 0, target: 'https://a.test/', payload: new Uint8Array(0), headers: new Uint8Array(0) });
  assert.equal(store.payloadOf(slot).length + store.headersOf(slot).length, 0);
  assert.equal(store.arena.bytesReserved, 0);
  store.release(slot);
});

test('compaction moves strings out of sparse slabs, releases them and keeps contents', () => {
  const store = new ResidentStore({ arena: { slabBytes: 1000 } });
  const target = store.internTarget('https://a.test/');
  const handles: number[] = [];
  for (let i = 0; i < 100; i++) {
    const slot = store.allocateRaw(i, 1, i, 0, target, new Uint8Array(90).fill(i), new Uint8Array([i, 255]));
    handles.push(store.handleOf(slot));
  }
  assert.equal(store.arena.bytesReserved, 10_000, '10 strings of 92 bytes a slab: 10 slabs');
  const kept = handles.filter((_, i) => i % 10 === 0);
  for (const handle of handles) if (!kept.includes(handle)) store.release(store.slotOf(handle));
  assert.equal(store.arena.bytesReserved, 10_000, 'every slab still holds one live string');
  const moved = store.compact(0.5);
  assert.equal(moved, 9, 'every kept string outside the current slab moved');
  assert.equal(store.arena.bytesReserved, 2000, 'sparse slabs released; the moved strings fill about one slab');
  for (const handle of kept) {
    const slot = store.slotOf(handle);
    const i = store.row[slot] as number;
    assert.deepEqual(store.payloadOf(slot), new Uint8Array(90).fill(i));
    assert.deepEqual(store.headersOf(slot), new Uint8Array([i, 255]));
  }
  assert.equal(store.compact(0.5), 1, 'the slab that was current is sparse now');
  assert.equal(store.arena.bytesReserved, 1000, 'all ten strings share one slab');
  assert.equal(store.compact(0.5), 0, 'the current slab is never evacuated');
});

test('reserveTowards grows the columns to the expected size in one step, keeping every column; never past capacityMax', () => {
  const store = new ResidentStore({ capacityInitial: 4, capacityMax: 1000 });
  const target = store.internTarget('https://a.test/');
  const allocate = (from: number, to: number): void => {
    for (let i = from; i < to; i++) store.allocateRaw(100 + i, 1, i, 0, target, new Uint8Array([i]), new Uint8Array(0));
  };
  allocate(0, 4);
  store.reserveTowards(2, 4);
  assert.equal(store.capacity, 6, 'at least what the rows need, whatever the expectation');
  allocate(4, 6);
  store.reserveTowards(1, 10);
  assert.equal(store.capacity, 10, 'grown straight to the expected size, not doubled');
  store.reserveTowards(3, 500);
  assert.equal(store.capacity, 10, 'no growth while there is room');
  allocate(6, 10);
  store.reserveTowards(1, 700.2);
  assert.equal(store.capacity, 701);
  for (let slot = 0; slot < 10; slot++) assert.deepEqual([store.fireAt[slot], store.row[slot], [...store.payloadOf(slot)]], [100 + slot, slot, [slot]]);
  store.reserveTowards(990, 5000);
  assert.equal(store.capacity, 1000, 'capped at capacityMax');

  const low = new ResidentStore({ capacityInitial: 8, capacityMax: 1000 });
  const lowTarget = low.internTarget('https://a.test/');
  for (let i = 0; i < 8; i++) low.allocateRaw(i, 1, i, 0, lowTarget, new Uint8Array(0), new Uint8Array(0));
  low.reserveTowards(1, 3);
  assert.equal(low.capacity, 12, 'an expectation below what is held still grows the columns by half');
});
