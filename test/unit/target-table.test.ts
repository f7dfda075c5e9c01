// The resident store's interned targets (engine/store/target-table.ts): one index a distinct
// target, pinned and counted; freed once nothing holds it, its index taken again first; the
// names array stays the same array for the table's life (the store reads it per delivery).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { TargetTable } from '../../engine/store/target-table.ts';

test('a target interned twice has one index and two references; it is freed at zero and its index reused', () => {
  const table = new TargetTable();
  const names = table.names;
  const a = table.intern('https://a.example/');
  assert.equal(table.intern('https://a.example/'), a);
  const b = table.intern('https://b.example/');
  assert.notEqual(a, b);
  assert.equal(table.size, 2);
  assert.equal(table.refCount(a), 2);
  table.addRef(a);
  assert.equal(table.refCount(a), 3);
  for (let i = 0; i < 3; i++) table.unref(a);
  assert.equal(table.isInterned(a), false);
  assert.equal(table.refCount(a), 0);
  assert.equal(table.size, 1);
  assert.equal(names[a], undefined);
  assert.equal(table.intern('https://c.example/'), a, 'a freed index is taken again first');
  assert.equal(names[a], 'https://c.example/');
  assert.equal(table.names, names, 'the same names array all along');
});

test('the refcounts grow past the initial table and keep every count; the array is replaced, so callers read it again', () => {
  const table = new TargetTable();
  const before = table.refs;
  const indexes: number[] = [];
  for (let i = 0; i < 100; i++) indexes.push(table.intern(`https://t${i}.example/`));
  assert.notEqual(table.refs, before);
  assert.equal(table.bytesUsed, table.refs.byteLength);
  for (const index of indexes) assert.equal(table.refCount(index), 1);
  const refs = table.refs;
  refs[indexes[7] as number] = (refs[indexes[7] as number] as number) + 1;
  assert.equal(table.refCount(indexes[7] as number), 2, 'a caller counts references into refs directly');
});

test('letting go of a target nobody holds is a bug', () => {
  const table = new TargetTable();
  const a = table.intern('https://a.example/');
  table.unref(a);
  assert.throws(() => table.unref(a), /target refcount below zero/);
});
