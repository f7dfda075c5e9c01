// TimerHeap against a model that keeps the keys itself and sorts: same answers to every
// push, pushMany, pop, remove, removeMany, update and peek, with many ties so logSeq, row and slot decide the order.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { ResidentStore } from '../../engine/store/resident-store.ts';
import { TimerHeap } from '../../engine/store/timer-heap.ts';
import { propertyRuns } from '../helpers/property.ts';

interface Key {
  fireAt: number;
  logSeq: number;
  row: number;
}

type Op =
  | { kind: 'push'; key: Key }
  | { kind: 'pushMany'; keys: Key[] }
  | { kind: 'pop' }
  | { kind: 'peek' }
  | { kind: 'remove'; pick: number }
  | { kind: 'removeMany'; picks: number[] }
  | { kind: 'update'; pick: number; fireAt: number };

const empty = new Uint8Array(0);

// Few distinct values, so that ties on fireAt, then on logSeq, then on row are common.
const key: fc.Arbitrary<Key> = fc.record({
  fireAt: fc.oneof(fc.integer({ min: 0, max: 5 }), fc.constantFrom(-1e15, 1.5, 1.7e12, 1e15)),
  logSeq: fc.integer({ min: 1, max: 3 }),
  row: fc.integer({ min: 0, max: 2 }),
});

const op: fc.Arbitrary<Op> = fc.oneof(
  { weight: 4, arbitrary: key.map((k): Op => ({ kind: 'push', key: k })) },
  // A few keys sift each one up, many (next to the heap's size) take the O(n) rebuild.
  { weight: 1, arbitrary: fc.array(key, { maxLength: 60 }).map((keys): Op => ({ kind: 'pushMany', keys })) },
  { weight: 2, arbitrary: fc.constant<Op>({ kind: 'pop' }) },
  { weight: 1, arbitrary: fc.constant<Op>({ kind: 'peek' }) },
  { weight: 1, arbitrary: fc.nat().map((pick): Op => ({ kind: 'remove', pick })) },
  // Few picks take removals one by one, many the O(n) rebuild; repeats and absent slots too.
  { weight: 1, arbitrary: fc.array(fc.nat(), { maxLength: 80 }).map((picks): Op => ({ kind: 'removeMany', picks })) },
  {
    weight: 2,
    arbitrary: fc.record({ pick: fc.nat(), fireAt: fc.integer({ min: -1, max: 6 }) }).map((r): Op => ({ kind: 'update', ...r })),
  },
);

/** The model's order, written independently of the heap's comparison. */
function byKey(keys: Map<number, Key>): (a: number, b: number) => number {
  return (a, b) => {
    const ka = keys.get(a) as Key;
    const kb = keys.get(b) as Key;
    return ka.fireAt - kb.fireAt || ka.logSeq - kb.logSeq || ka.row - kb.row || a - b;
  };
}

function earliest(model: number[], keys: Map<number, Key>): number {
  return model.length === 0 ? -1 : ([...model].sort(byKey(keys))[0] as number);
}

test('TimerHeap gives the same answers as a sorted array through any sequence of operations', () => {
  fc.assert(
    fc.property(fc.array(op, { maxLength: 400, size: 'max' }), fc.boolean(), (ops, releasePopped) => {
      // A tiny initial capacity: the store (and with it the heap's entries and positions) grows mid-run.
      const store = new ResidentStore({ capacityInitial: 1 });
      const heap = new TimerHeap(store);
      const keys = new Map<number, Key>();
      let model: number[] = [];
      const target = store.internTarget('https://example.test/');
      for (const o of ops) {
        if (o.kind === 'push') {
          const slot = store.allocateRaw(o.key.fireAt, o.key.logSeq, o.key.row, 0, target, empty, empty);
          keys.set(slot, { ...o.key });
          heap.push(slot);
          model.push(slot);
        } else if (o.kind === 'pushMany') {
          const slots = new Int32Array(o.keys.length + 2).fill(-1);
          o.keys.forEach((k, i) => {
            const slot = store.allocateRaw(k.fireAt, k.logSeq, k.row, 0, target, empty, empty);
            keys.set(slot, { ...k });
            slots[i] = slot;
            model.push(slot);
          });
          // The slots array may be longer than count (as the engine's is): the rest is not pushed.
          heap.pushMany(slots, o.keys.length);
        } else if (o.kind === 'pop') {
          const expected = earliest(model, keys);
          assert.equal(heap.pop(), expected);
          model = model.filter((s) => s !== expected);
          // Released slots are taken again by later pushes: the heap must not remember them.
          if (expected >= 0 && releasePopped) store.release(expected);
        } else if (o.kind === 'peek') {
          assert.equal(heap.peek(), earliest(model, keys));
        } else if (o.kind === 'remove') {
          // Half the picks name a slot that is not in the heap (never was, or popped).
          const slot = o.pick % 2 === 0 && model.length > 0 ? (model[(o.pick >> 1) % model.length] as number) : o.pick % 64;
          const present = model.includes(slot);
          assert.equal(heap.remove(slot), present);
          model = model.filter((s) => s !== slot);
        } else if (o.kind === 'removeMany') {
          const slots = o.picks.map((pick) => (pick % 3 !== 0 && model.length > 0 ? (model[pick % model.length] as number) : pick % 64));
          const present = new Set(slots.filter((slot) => model.includes(slot)));
          assert.equal(heap.removeMany(Int32Array.from(slots)), present.size);
          model = model.filter((s) => !present.has(s));
        } else if (model.length > 0) {
          const slot = model[o.pick % model.length] as number;
          store.setDueAt(slot, o.fireAt);
          (keys.get(slot) as Key).fireAt = o.fireAt;
          heap.update(slot);
        }
        heap.assertValid();
        assert.equal(heap.size, model.length);
        for (const slot of model) assert.ok(heap.has(slot));
      }
      const drained: number[] = [];
      for (let slot = heap.pop(); slot >= 0; slot = heap.pop()) drained.push(slot);
      assert.deepEqual(drained, [...model].sort(byKey(keys)));
      assert.equal(heap.size, 0);
    }),
    propertyRuns(300),
  );
});

test('ties on fireAt are broken by logSeq, then by row', () => {
  const store = new ResidentStore();
  const heap = new TimerHeap(store);
  const target = store.internTarget('https://example.test/');
  const add = (fireAt: number, logSeq: number, row: number): number => {
    const slot = store.allocateRaw(fireAt, logSeq, row, 0, target, empty, empty);
    heap.push(slot);
    return slot;
  };
  const late = add(2000, 1, 0);
  const seq9row1 = add(1000, 9, 1);
  const seq9row0 = add(1000, 9, 0);
  const seq3row7 = add(1000, 3, 7);
  assert.deepEqual([heap.pop(), heap.pop(), heap.pop(), heap.pop(), heap.pop()], [seq3row7, seq9row0, seq9row1, late, -1]);
});

test('update moves an entry both ways; remove and has track membership', () => {
  const store = new ResidentStore();
  const heap = new TimerHeap(store);
  const target = store.internTarget('https://example.test/');
  const slots = [50, 40, 30, 20, 10].map((fireAt, row) => store.allocateRaw(fireAt, 1, row, 0, target, empty, empty));
  for (const slot of slots) heap.push(slot);
  const [s50, s40, s30, s20, s10] = slots as [number, number, number, number, number];
  assert.equal(heap.peek(), s10);
  store.setDueAt(s10, 60);
  heap.update(s10);
  assert.equal(heap.peek(), s20);
  store.setDueAt(s50, 0);
  heap.update(s50);
  assert.equal(heap.peek(), s50);
  assert.equal(heap.remove(s30), true);
  assert.equal(heap.remove(s30), false);
  assert.equal(heap.has(s30), false);
  heap.assertValid();
  assert.deepEqual([heap.pop(), heap.pop(), heap.pop(), heap.pop()], [s50, s20, s40, s10]);
  assert.equal(heap.peek(), -1);
});

test('pushing a slot twice, or a released slot, is a bug and asserts', () => {
  const store = new ResidentStore();
  const heap = new TimerHeap(store);
  const target = store.internTarget('https://example.test/');
  const slot = store.allocateRaw(1, 1, 0, 0, target, empty, empty);
  heap.push(slot);
  assert.throws(() => heap.push(slot), assert.AssertionError);
  const freed = store.allocateRaw(1, 1, 1, 0, target, empty, empty);
  store.release(freed);
  assert.throws(() => heap.push(freed), assert.AssertionError);
  assert.throws(() => heap.update(freed), assert.AssertionError);
});

test('a batch of consecutive slots in order is one run: popped in order, cut by removals', () => {
  const store = new ResidentStore();
  const heap = new TimerHeap(store);
  const target = store.internTarget('https://example.test/');
  // 1,000 rows of one batch due at one time, and a single timer due between two of them by row.
  const slots = Int32Array.from({ length: 1000 }, (_, row) => store.allocateRaw(5000, 7, row, 0, target, empty, empty));
  heap.pushMany(slots, slots.length);
  assert.equal(heap.runs, 1, 'consecutive slots due in order follow one another');
  const lone = store.allocateRaw(5000, 7, 1000, 0, target, empty, empty);
  heap.push(lone);
  assert.equal(heap.runs, 1, 'a slot pushed after the end of a run, due after it, follows it');
  const early = store.allocateRaw(10, 1, 0, 0, target, empty, empty);
  heap.push(early);
  assert.equal(heap.runs, 2, 'a slot due before the end of the run heads a run of its own');
  heap.assertValid();
  // Removed one at a time from the middle, then many at once (the rebuild): each cut starts a run.
  assert.equal(heap.remove(slots[500] as number), true);
  assert.equal(heap.runs, 3);
  // Rows 100–199 and 300–899 (500 among them, gone already).
  const many = Int32Array.from([...slots.subarray(100, 200), ...slots.subarray(300, 900)]);
  assert.equal(heap.removeMany(many), 699);
  heap.assertValid();
  assert.equal(heap.runs, 4, 'the early slot, rows 0–99, rows 200–299, and rows 900 on');
  const drained: number[] = [];
  for (let slot = heap.pop(); slot >= 0; slot = heap.pop()) drained.push(slot);
  const kept = [...slots.subarray(0, 100), ...slots.subarray(200, 300), ...slots.subarray(900)];
  assert.deepEqual(drained, [early, ...kept, lone]);
});

test('slots released in order are taken again in order, so a new batch is a run again', () => {
  const store = new ResidentStore();
  const heap = new TimerHeap(store);
  const target = store.internTarget('https://example.test/');
  const batch = (seq: number): Int32Array => {
    const rows = 100;
    const slots = new Int32Array(rows);
    const offsets = new Int32Array(rows + 1);
    store.allocateRows(
      { fireAtMs: new Float64Array(rows).fill(1000), queueIndex: new Int32Array(rows), targetIndex: new Int32Array(rows), payload: { values: empty, offsets }, headers: { values: empty, offsets }, keys: { values: empty, offsets } },
      seq,
      undefined,
      rows,
      [0],
      [target],
      slots,
    );
    return slots;
  };
  const first = batch(1);
  heap.pushMany(first, first.length);
  for (let slot = heap.pop(); slot >= 0; slot = heap.pop()) store.release(slot);
  const second = batch(2);
  assert.deepEqual([...second], [...first], 'the released slots, in the order they were released');
  heap.pushMany(second, second.length);
  assert.equal(heap.runs, 1);
});
