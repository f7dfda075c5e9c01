import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { test } from 'node:test';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { partitionOfKey } from '../../cluster/partitioning.ts';
import type { PartitionDirectory } from '../../cluster/partition-directory.ts';
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

test('the router: keyed adds by hash, unkeyed ones over the partitions owned here, routes by owner', async () => {
  const directory = new FixtureDirectory('n', 4);
  const router = new ClusterRouter(directory);
  try {
    assert.equal(router.partitionForAdd(undefined), undefined, 'owning none');
    directory.setAddress(1, '10.0.0.2:7070');
    directory.setAddress(3, '10.0.0.3:7070');
    assert.ok(['10.0.0.2:7070', '10.0.0.3:7070'].includes(router.anyOwnerAddress() as string));
    await directory.take(0, 1);
    await directory.take(2, 2);
    const unkeyed: (number | undefined)[] = [];
    for (let turn = 0; turn < 4; turn++) {
      unkeyed.push(router.partitionForAdd(undefined));
      await nextTurn();
    }
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

test('unkeyed adds stick to one owned partition for a turn and move on to the next each turn, over every owned partition', async () => {
  const directory = new FixtureDirectory('n', 8);
  const router = new ClusterRouter(directory);
  try {
    for (const partition of [1, 4, 6]) await directory.take(partition, partition + 1);
    const turns: number[] = [];
    for (let turn = 0; turn < 6; turn++) {
      const inTurn = Array.from({ length: 50 }, () => router.partitionForAdd(undefined));
      assert.equal(new Set(inTurn).size, 1, `turn ${turn}: one partition for all its adds, got ${[...new Set(inTurn)].join(', ')}`);
      turns.push(inTurn[0] as number);
      // A keyed add in the turn goes by its key and leaves the turn's partition as it is.
      assert.equal(router.partitionForAdd('order-7'), partitionOfKey('order-7', 8));
      assert.equal(router.partitionForAdd(undefined), inTurn[0]);
      await nextTurn();
    }
    const batches = Array.from({ length: 3 }, () => router.partitionForBatch());
    assert.deepEqual([...new Set(batches)].sort(), [1, 4, 6], 'unkeyed batches within one turn spread, a batch a partition');
    assert.deepEqual([...new Set(turns.slice(0, 3))].sort(), [1, 4, 6], 'three turns in a row take the three owned partitions');
    assert.deepEqual(turns.slice(3), turns.slice(0, 3), 'and again in the same order');
    for (let i = 1; i < turns.length; i++) assert.notEqual(turns[i], turns[i - 1], 'a turn never takes the partition of the one before');
  } finally {
    router.close();
    await directory.close();
  }
});

/** A directory of owned partitions alone (no engines): what partitionForAdd reads. */
class OwnedOnly implements PartitionDirectory {
  readonly partitions = 4;
  readonly nodeId = 'n';
  #owned: number[] = [];
  readonly #listeners = new Set<() => void>();
  engineOf(): undefined {
    return undefined;
  }
  owned(): readonly number[] {
    return this.#owned;
  }
  ownerAddress(): undefined {
    return undefined;
  }
  onChange(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }
  set(owned: number[]): void {
    this.#owned = owned;
    for (const listener of this.#listeners) listener();
  }
}

test('a change of ownership within a turn drops its partition: the next unkeyed add picks among those owned now', async () => {
  const directory = new OwnedOnly();
  const router = new ClusterRouter(directory);
  try {
    assert.equal(router.partitionForAdd(undefined), undefined, 'owning none, in a turn');
    await nextTurn();
    assert.equal(router.partitionForAdd(undefined), undefined, 'and in the next');
    directory.set([3]);
    assert.equal(router.partitionForAdd(undefined), 3, 'taken within a turn that found none: the next add in it finds it');
    directory.set([2]);
    assert.equal(router.partitionForAdd(undefined), 2, "the turn's partition lost: the one owned now");
    directory.set([]);
    assert.equal(router.partitionForAdd(undefined), undefined, 'all lost: none');
    assert.equal(router.partitionForBatch(), undefined, 'nor for a batch');
  } finally {
    router.close();
  }
});
