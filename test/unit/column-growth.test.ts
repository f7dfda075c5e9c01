// The resident store's column growth (engine/store/column-growth.ts): the capacities a growth
// goes to, the bytes one buffer of columns takes, and the carving of such a buffer into aligned
// columns that keep what the old ones held.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { capacityTowards, ColumnMemory, columnsBytes, doubledCapacity } from '../../engine/store/column-growth.ts';

test('growth doubles to the capacities one slot at a time reaches; a replay grows towards what it expects, by half at least', () => {
  assert.equal(doubledCapacity(1024, 1024), 1024);
  assert.equal(doubledCapacity(1024, 1025), 2048);
  assert.equal(doubledCapacity(1024, 5000), 8192);
  assert.equal(capacityTowards(1024, 1100, 100_000), 100_000, 'one copy into the expected size');
  assert.equal(capacityTowards(1024, 1100, 1200), 1536, 'a low guess still grows by half');
  assert.equal(capacityTowards(1024, 2000, 10), 2000, 'never less than needed');
});

test('one buffer of columnsBytes carves into aligned columns, each widened with its old contents and zero beyond', () => {
  const capacity = 37;
  const memory = new Uint8Array(columnsBytes(capacity, 1));
  const columns = new ColumnMemory(memory, capacity, 1);
  const made: Array<Float64Array | Uint32Array | Uint16Array | Uint8Array | Int32Array> = [];
  for (let i = 0; i < 3; i++) made.push(columns.widen(Float64Array, Float64Array.of(1.5, i)));
  for (let i = 0; i < 2; i++) made.push(columns.widen(Uint32Array, Uint32Array.of(7, i)));
  made.push(columns.widen(Uint8Array, Uint8Array.of(3)));
  for (let i = 0; i < 2; i++) made.push(columns.widen(Uint16Array, Uint16Array.of(9)));
  for (const Type of [Uint32Array, Uint16Array, Uint32Array, Uint16Array, Uint32Array, Uint16Array, Uint16Array]) made.push(columns.widen(Type, new Type(2).fill(4)));
  made.push(columns.widen(Int32Array, Int32Array.of(-1, -2)));
  let end = 0;
  for (const column of made) {
    assert.equal(column.buffer, memory.buffer, 'a view into the buffer made ahead');
    assert.equal(column.byteOffset % 8, 0, 'aligned');
    assert.ok(column.byteOffset >= end, 'columns do not overlap');
    end = column.byteOffset + column.byteLength;
    assert.equal(column.length, capacity);
    assert.equal(column[capacity - 1], 0);
  }
  assert.ok(end <= memory.length);
  assert.deepEqual([...(made[1] as Float64Array).subarray(0, 2)], [1.5, 1]);
  assert.deepEqual([...(made.at(-1) as Int32Array).subarray(0, 3)], [-1, -2, 0]);
  assert.throws(() => columns.widen(Uint8Array, new Uint8Array(0)), /more columns carved than columnsBytes counts/);
});

test('without memory made ahead, each column is an array of its own', () => {
  const columns = new ColumnMemory(undefined, 8, 0);
  const a = columns.widen(Float64Array, Float64Array.of(2));
  const b = columns.widen(Float64Array, Float64Array.of(3));
  assert.notEqual(a.buffer, b.buffer);
  assert.deepEqual([...a], [2, 0, 0, 0, 0, 0, 0, 0]);
  assert.equal(columns.capacity, 8);
});

test('memory too small for its capacity is a bug', () => {
  assert.throws(() => new ColumnMemory(new Uint8Array(columnsBytes(100) - 8), 100, 0), /column memory too small/);
});

test('columnsBytes holds every column of any capacity, each aligned', () => {
  for (const capacity of [1, 3, 7, 8, 9, 1023, 1_100_001]) {
    const bytes = columnsBytes(capacity);
    assert.ok(bytes >= 57 * capacity && bytes <= 57 * capacity + 15 * 7, `capacity ${capacity}: ${bytes} bytes`);
    assert.equal(bytes % 8, 0);
  }
  assert.equal(columnsBytes(1024, 2) - columnsBytes(1024), 2 * 4 * 1024, 'an index column is an Int32 a slot');
});
