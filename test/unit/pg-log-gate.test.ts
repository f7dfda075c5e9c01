// The node's transaction gate (engine/pg-log/transaction-gate.ts) without a database: slots up
// to its capacity, waiting logs woken in the order they asked as slots come back, one wake a
// log however often it asked, and a woken log that takes no slot leaves it to the next.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { TransactionGate } from '../../engine/pg-log/transaction-gate.ts';

test('slots up to the capacity; waiting logs woken in order as slots come back, each once', () => {
  const gate = new TransactionGate(2);
  const woken: string[] = [];
  const wake = (name: string) => () => woken.push(name);
  const [a, b, c] = [wake('a'), wake('b'), wake('c')];
  assert.equal(gate.tryTake(a), true);
  assert.equal(gate.tryTake(a), true);
  assert.equal(gate.tryTake(b), false);
  assert.equal(gate.tryTake(c), false);
  assert.equal(gate.tryTake(b), false, 'asked again while waiting');
  assert.equal(gate.taken, 2);
  gate.release();
  // b was woken but took nothing (it did not ask again): its slot went on to c.
  assert.deepEqual(woken, ['b', 'c']);
  assert.equal(gate.taken, 1);
});

test('a woken log that takes the slot stops the waking', () => {
  const gate = new TransactionGate(1);
  const woken: string[] = [];
  assert.equal(gate.tryTake(() => undefined), true);
  const b = (): void => {
    woken.push('b');
    assert.equal(gate.tryTake(b), true);
  };
  const c = (): void => {
    woken.push('c');
  };
  assert.equal(gate.tryTake(b), false);
  assert.equal(gate.tryTake(c), false);
  gate.release();
  assert.deepEqual(woken, ['b'], 'c waits: b took the slot');
  assert.equal(gate.taken, 1);
  gate.release();
  assert.deepEqual(woken, ['b', 'c']);
  assert.throws(() => new TransactionGate(0), RangeError);
});
