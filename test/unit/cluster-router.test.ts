import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { test } from 'node:test';
import { partitionOfKey } from '../../cluster/partitioning.ts';
import { ClusterRouter, derivedKeyPrefix, splitBatch } from '../../cluster/router.ts';
import { FixtureDirectory } from '../helpers/partition-fixture.ts';

const body = new TextEncoder().encode('{"fire_at":"2027-01-01T00:00:00Z","target":"https://example.com/"}\n');

test('a batch without keys goes whole to the partition given, with no derived keys', () => {
  const split = splitBatch([undefined, undefined, undefined], 8, 5, body);
  assert.deepEqual([...split.partitionOfRow], [5, 5, 5]);
  assert.equal(split.derivedKeys, undefined);
});

test('keyed rows go by their key; unkeyed rows beside them get keys derived from the body and their row', () => {
  const split = splitBatch(['order-1', undefined, 'order-2', undefined], 32, undefined, body);
  const prefix = `fermata-batch:${createHash('sha256').update(body).digest('hex').slice(0, 32)}:`;
  assert.equal(derivedKeyPrefix(body), prefix);
  assert.deepEqual(split.derivedKeys, [undefined, `${prefix}1`, undefined, `${prefix}3`]);
  assert.deepEqual([...split.partitionOfRow], [1, partitionOfKey(`${prefix}1`, 32), 6, partitionOfKey(`${prefix}3`, 32)]);
  // The same body gives the same keys: a resend finds the rows that landed.
  assert.deepEqual(splitBatch(['order-1', undefined, 'order-2', undefined], 32, undefined, body).derivedKeys, split.derivedKeys);
});

test('the router: keyed adds by hash, unkeyed ones round-robin over the partitions owned here, routes by owner', async () => {
  const directory = new FixtureDirectory('n', 4);
  const router = new ClusterRouter(directory);
  try {
    assert.equal(router.partitionForAdd(undefined), undefined, 'owning none');
    directory.setAddress(1, '10.0.0.2:7070');
    directory.setAddress(3, '10.0.0.3:7070');
    assert.ok(['10.0.0.2:7070', '10.0.0.3:7070'].includes(router.anyOwnerAddress() as string));
    await directory.take(0, 1);
    await directory.take(2, 2);
    const unkeyed = Array.from({ length: 4 }, () => router.partitionForAdd(undefined));
    assert.deepEqual([...new Set(unkeyed)].sort(), [0, 2]);
    assert.equal(router.partitionForAdd('order-1'), partitionOfKey('order-1', 4));
    assert.deepEqual(
      router.routes().map((route) => route.kind),
      ['local', 'remote', 'local', 'remote'],
    );
    directory.setAddress(3, undefined);
    assert.deepEqual(router.route(3), { kind: 'moving', partition: 3 });
    const engine = directory.engineOf(0);
    assert.ok(engine !== undefined);
    assert.equal(router.coalescerOf(0, engine), router.coalescerOf(0, engine), 'one coalescer a partition');
  } finally {
    router.close();
    await directory.close();
  }
});
