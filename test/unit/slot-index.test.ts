import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { SlotIndex } from '../../engine/store/slot-index.ts';
import { propertyRuns } from '../helpers/property.ts';

/** Key columns standing in for the store's: slot s holds (logSeq[s], row[s]). */
function keyColumns(capacity: number): { logSeq: Float64Array; row: Uint32Array } {
  return { logSeq: new Float64Array(capacity), row: new Uint32Array(capacity) };
}

type Op = { kind: 'insert' | 'delete' | 'get'; seq: number; row: number };

// Few distinct keys so that collisions, probe runs and backward shifts happen constantly.
const op = fc.record({
  kind: fc.constantFrom('insert', 'delete', 'get'),
  seq: fc.oneof(fc.integer({ min: 1, max: 40 }), fc.integer({ min: 2 ** 40, max: 2 ** 40 + 5 })),
  row: fc.integer({ min: 0, max: 6 }),
}) as fc.Arbitrary<Op>;

test('SlotIndex behaves like a Map keyed by (seq, row) through inserts, deletes and growth', () => {
  fc.assert(
    fc.property(fc.array(op, { maxLength: 3000 }), (ops) => {
      const keys = keyColumns(ops.length);
      const index = new SlotIndex(keys, 4); // small, so growth, collisions and wrap-around all happen
      const model = new Map<string, number>();
      let nextSlot = 0;
      for (const { kind, seq, row } of ops) {
        const key = `${seq}/${row}`;
        if (kind === 'insert' && !model.has(key)) {
          keys.logSeq[nextSlot] = seq;
          keys.row[nextSlot] = row;
          index.insert(nextSlot);
          model.set(key, nextSlot++);
        } else if (kind === 'delete') {
          assert.equal(index.delete(seq, row), model.get(key) ?? -1);
          model.delete(key);
        } else {
          assert.equal(index.get(seq, row), model.get(key) ?? -1);
        }
        assert.equal(index.size, model.size);
      }
      for (const [key, slot] of model) {
        const [seq, row] = key.split('/').map(Number) as [number, number];
        assert.equal(index.get(seq, row), slot);
      }
    }),
    propertyRuns(300),
  );
});

test('SlotIndex holds 1,000,000 keys with lookups intact after deleting half', () => {
  const keys = keyColumns(1_000_000);
  const index = new SlotIndex(keys);
  for (let i = 0; i < 1_000_000; i++) {
    keys.logSeq[i] = 1 + Math.floor(i / 100);
    keys.row[i] = i % 100;
    index.insert(i);
  }
  for (let i = 0; i < 1_000_000; i += 2) assert.equal(index.delete(1 + Math.floor(i / 100), i % 100), i);
  for (let i = 0; i < 1_000_000; i++) assert.equal(index.get(1 + Math.floor(i / 100), i % 100), i % 2 === 0 ? -1 : i);
  assert.equal(index.size, 500_000);
});
