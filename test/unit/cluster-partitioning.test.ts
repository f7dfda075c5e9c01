import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { clusterIdLength, clusterIdOf, clusterIdParts, partitionOfId, partitionOfKey } from '../../cluster/partitioning.ts';
import { encodeTimerId, idFireAtMax, idRowMax, idSequenceMax } from '../../engine/ids.ts';
import { propertyRuns } from '../helpers/property.ts';

const engineIds = fc
  .record({ seq: fc.integer({ min: 0, max: idSequenceMax }), row: fc.integer({ min: 0, max: idRowMax }), fireAtMs: fc.integer({ min: 0, max: idFireAtMax }) })
  .map(({ seq, row, fireAtMs }) => encodeTimerId(seq, row, fireAtMs));

test('a key names the same partition everywhere: SHA-256 of its UTF-8, first four bytes big-endian, modulo P', () => {
  // Pinned: a change here moves every keyed timer of every cluster to another partition.
  assert.deepEqual(
    ['order-1', 'order-2', '', 'é-ключ'].map((key) => [partitionOfKey(key, 32), partitionOfKey(key, 4096), partitionOfKey(key, 7)]),
    [
      [1, 545, 3],
      [6, 262, 3],
      [2, 1090, 1],
      [9, 3561, 0],
    ],
  );
  assert.equal(partitionOfKey(new TextEncoder().encode('é-ключ'), 4096), 3561, 'a key as bytes hashes as its string does');
  assert.equal(partitionOfKey('anything', 1), 0);
});

test('keys spread evenly over the partitions', () => {
  for (const partitions of [3, 32, 100]) {
    const counts = new Array<number>(partitions).fill(0);
    const keys = 1000 * partitions;
    for (let i = 0; i < keys; i++) {
      const partition = partitionOfKey(`key-${i}`, partitions);
      counts[partition] = (counts[partition] as number) + 1;
    }
    // 1000 expected per partition; the standard deviation is about 32, so ±15% is over 4 sigma.
    for (const count of counts) assert.ok(count > 850 && count < 1150, `P=${partitions}: a partition got ${count} of ${keys} keys`);
  }
});

test('a cluster id is the partition in three characters and the engine id, and round-trips', () => {
  assert.equal(clusterIdOf(31, '0000000004000001m8vgw5r0'), '00z0000000004000001m8vgw5r0');
  assert.equal(clusterIdOf(4095, '0000000004000001m8vgw5r0'), '3zz0000000004000001m8vgw5r0');
  fc.assert(
    fc.property(fc.integer({ min: 0, max: 4095 }), engineIds, (partition, engineId) => {
      const id = clusterIdOf(partition, engineId);
      assert.equal(id.length, clusterIdLength);
      assert.deepEqual(clusterIdParts(id, 4096), { partition, engineId });
      assert.equal(partitionOfId(id, 4096), partition);
    }),
    propertyRuns(5000),
  );
});

test("today's 24-character ids are cluster ids of partition 0", () => {
  assert.deepEqual(clusterIdParts('0000000004000001m8vgw5r0', 32), { partition: 0, engineId: '0000000004000001m8vgw5r0' });
  assert.equal(partitionOfId('0000000004000001m8vgw5r0', 1), 0);
});

test('anything else is no id: wrong length or alphabet, or a partition the cluster does not have', () => {
  for (const id of ['', 'abc', '00z000000000400000', '00Z0000000004000001m8vgw5r0', '00i0000000004000001m8vgw5r0', '00z000000000400000im8vgw5r0', '0000000004000001M8VGW5R0', `${'0'.repeat(28)}`]) {
    assert.equal(partitionOfId(id, 4096), undefined, id);
  }
  assert.equal(partitionOfId('0100000000004000001m8vgw5r0', 32), undefined, 'partition 32 of 32');
  assert.equal(partitionOfId('00z0000000004000001m8vgw5r0', 32), 31);
  assert.throws(() => clusterIdOf(32768, '0000000004000001m8vgw5r0'), RangeError);
});
