import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { SlotIndex, slotIndexRunRowsMin } from '../../engine/store/slot-index.ts';
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

type BatchOp =
  | { kind: 'batch'; rows: number; firstRow: number; scattered: boolean }
  | { kind: 'delete' | 'get'; pick: number; row: number };

// Batches of a fresh sequence each, some big enough to be runs, some spread over scattered
// slots (as free-list reuse leaves them), then deletes and lookups of rows inside and around them.
const batchOp = fc.oneof(
  fc.record({ kind: fc.constant('batch'), rows: fc.integer({ min: 1, max: 3 * slotIndexRunRowsMin }), firstRow: fc.integer({ min: 0, max: 3 }), scattered: fc.boolean() }),
  fc.record({ kind: fc.constantFrom('delete', 'get'), pick: fc.nat({ max: 2 }), row: fc.integer({ min: 0, max: 3 * slotIndexRunRowsMin + 4 }) }),
) as fc.Arbitrary<BatchOp>;

test('SlotIndex with batches (runs and row by row) behaves like a Map through deletes and lookups', () => {
  let runsSeen = 0;
  fc.assert(
    fc.property(fc.array(batchOp, { minLength: 1, maxLength: 400, size: 'large' }), (ops) => {
      const capacity = 400 * 3 * slotIndexRunRowsMin * 2 + 1;
      const keys = keyColumns(capacity);
      const index = new SlotIndex(keys, 4);
      const model = new Map<string, number>();
      const seqs: number[] = [];
      let nextSlot = 0;
      for (const op of ops) {
        if (op.kind === 'batch') {
          const seq = 1 + seqs.length;
          seqs.push(seq);
          const slots = new Int32Array(op.rows);
          for (let i = 0; i < op.rows; i++) {
            // Scattered: every other slot, so the slots are not consecutive.
            const slot = op.scattered ? nextSlot + 2 * i : nextSlot + i;
            keys.logSeq[slot] = seq;
            keys.row[slot] = op.firstRow + i;
            slots[i] = slot;
            model.set(`${seq}/${op.firstRow + i}`, slot);
          }
          nextSlot += op.scattered ? 2 * op.rows : op.rows;
          index.insertBatch(slots, op.rows);
          runsSeen = Math.max(runsSeen, index.runCount);
          continue;
        }
        if (seqs.length === 0) continue;
        // Mostly the latest batches, so that rows are deleted and then looked up again.
        const seq = seqs[Math.max(0, seqs.length - 1 - op.pick)] as number;
        const key = `${seq}/${op.row}`;
        if (op.kind === 'delete') {
          assert.equal(index.delete(seq, op.row), model.get(key) ?? -1);
          model.delete(key);
        } else {
          assert.equal(index.get(seq, op.row), model.get(key) ?? -1);
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
  assert.ok(runsSeen > 0, 'some batches were indexed as runs');
});

test('a bulk load in consecutive slots costs the index about a bit a timer, and deleting every row drops its run', () => {
  const rows = 10_000;
  const keys = keyColumns(100 * rows);
  const index = new SlotIndex(keys);
  const emptyBytes = index.bytesUsed;
  for (let batch = 0; batch < 100; batch++) {
    const slots = new Int32Array(rows);
    for (let i = 0; i < rows; i++) {
      const slot = batch * rows + i;
      keys.logSeq[slot] = batch + 1;
      keys.row[slot] = i;
      slots[i] = slot;
    }
    index.insertBatch(slots, rows);
  }
  assert.equal(index.size, 100 * rows);
  assert.equal(index.runCount, 100);
  assert.ok(index.bytesUsed - emptyBytes <= (100 * rows) / 8 + 100 * 4, `${index.bytesUsed - emptyBytes} bytes for ${100 * rows} timers`);
  assert.equal(index.get(42, 1234), 41 * rows + 1234);
  assert.equal(index.delete(42, 1234), 41 * rows + 1234);
  assert.equal(index.get(42, 1234), -1, 'a deleted row of a run that still has others');
  assert.equal(index.get(42, 1235), 41 * rows + 1235);
  for (let i = 0; i < rows; i++) assert.equal(index.delete(7, i), 6 * rows + i);
  assert.equal(index.delete(7, 0), -1, 'a deleted row is gone');
  assert.equal(index.get(7, 5), -1);
  assert.equal(index.runCount, 99, 'the run whose rows were all deleted is dropped');
  assert.equal(index.size, 99 * rows - 1);
});

test('a row inside a run cannot be indexed again one by one', () => {
  const keys = keyColumns(64);
  const index = new SlotIndex(keys);
  const slots = Int32Array.from({ length: slotIndexRunRowsMin }, (_, i) => i);
  for (const slot of slots) {
    keys.logSeq[slot] = 9;
    keys.row[slot] = slot;
  }
  index.insertBatch(slots, slots.length);
  keys.logSeq[40] = 9;
  keys.row[40] = 3;
  assert.throws(() => index.insert(40), /run/);
});

test('a row deleted from its run comes back row by row in another slot (a spilled timer promoted), and goes again', () => {
  const rows = slotIndexRunRowsMin * 2;
  const keys = keyColumns(rows + 4);
  const index = new SlotIndex(keys, 4);
  const slots = new Int32Array(rows);
  for (let i = 0; i < rows; i++) {
    keys.logSeq[i] = 7;
    keys.row[i] = i;
    slots[i] = i;
  }
  index.insertBatch(slots, rows);
  assert.equal(index.runCount, 1);
  assert.equal(index.delete(7, 5), 5);
  assert.equal(index.get(7, 5), -1);
  // Promoted into slot rows + 1.
  keys.logSeq[rows + 1] = 7;
  keys.row[rows + 1] = 5;
  index.insert(rows + 1);
  assert.equal(index.get(7, 5), rows + 1);
  assert.equal(index.get(7, 6), 6, 'its run neighbours are untouched');
  assert.equal(index.size, rows);
  assert.equal(index.delete(7, 5), rows + 1);
  assert.equal(index.get(7, 5), -1);
  assert.equal(index.delete(7, 5), -1);
  assert.throws(() => index.insert(6), /the key lies in an indexed run/, 'a row live in its run cannot be indexed twice');
});
