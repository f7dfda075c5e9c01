// FERMATA_FAILPOINTS: what it arms and what it refuses (a real process killing itself at the
// armed hit is test/integration/failpoints-process.test.ts).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { failpointNames, parseFailpoints } from '../../engine/failpoints.ts';

test('unset or empty arms nothing', () => {
  assert.equal(parseFailpoints(undefined).size, 0);
  assert.equal(parseFailpoints('').size, 0);
  assert.equal(parseFailpoints('  ').size, 0);
});

test('NAME arms the first hit, NAME@N the Nth; a list arms several', () => {
  assert.deepEqual([...parseFailpoints('wal.synced-before-ack')], [['wal.synced-before-ack', 1]]);
  assert.deepEqual(
    [...parseFailpoints('wal.synced-before-ack@3, checkpoint.runs-written,delivery.outcome-before-append@12')],
    [
      ['wal.synced-before-ack', 3],
      ['checkpoint.runs-written', 1],
      ['delivery.outcome-before-append', 12],
    ],
  );
});

test('an unknown name is refused, naming every known one', () => {
  assert.throws(
    () => parseFailpoints('wal.synced-before-ack,wal.synced-before-ak@2'),
    (err: Error) => {
      assert.match(err.message, /unknown failpoint "wal\.synced-before-ak"/);
      for (const name of failpointNames) assert.ok(err.message.includes(name), `the message names ${name}`);
      return true;
    },
  );
});

test('a count that is not a whole number from 1 is refused', () => {
  for (const text of ['wal.synced-before-ack@0', 'wal.synced-before-ack@', 'wal.synced-before-ack@x', 'wal.synced-before-ack@-1', 'wal.synced-before-ack@1.5', 'wal.synced-before-ack@1@2']) {
    assert.throws(() => parseFailpoints(text), /must be NAME or NAME@N/, text);
  }
});
