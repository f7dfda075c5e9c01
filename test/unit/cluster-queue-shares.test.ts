// How a queue's rate_per_s and max_concurrent are divided among a cluster's partitions
// (cluster/cluster-queues.ts, docs/cluster.md "Queues"): the shares add up to the limit when it
// is at least P, each partition gets at least 1, and the other fields are the cluster's.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { partitionConfig, shareOf } from '../../cluster/cluster-queues.ts';
import { defaultQueueConfig } from '../../engine/queues.ts';

const sharesOf = (limit: number, partitions: number): number[] => Array.from({ length: partitions }, (_, partition) => shareOf(limit, partitions, partition));
const sum = (values: readonly number[]): number => values.reduce((total, value) => total + value, 0);

test('the shares of a limit of at least P add up to it, the remainder one each to the lowest partitions', () => {
  assert.deepEqual(sharesOf(10, 4), [3, 3, 2, 2]);
  assert.deepEqual(sharesOf(8, 4), [2, 2, 2, 2]);
  for (const [limit, partitions] of [[32, 32], [33, 32], [1000, 32], [10_000_000, 4096]] as const) assert.equal(sum(sharesOf(limit, partitions)), limit);
});

test('a limit below P gives every partition 1: the cluster allows P', () => {
  assert.deepEqual(sharesOf(2, 4), [1, 1, 1, 1]);
  assert.equal(sum(sharesOf(5, 32)), 32);
});

test("a partition's config divides the two flow limits and keeps the rest, null staying null", () => {
  const config = { ...defaultQueueConfig, rate_per_s: 100, max_concurrent: null, max_attempts: 3 };
  assert.deepEqual(partitionConfig(config, 32, 0), { ...config, rate_per_s: 4, max_concurrent: null });
  assert.deepEqual(partitionConfig(config, 32, 31), { ...config, rate_per_s: 3, max_concurrent: null });
  assert.equal(partitionConfig({ ...config, max_concurrent: 6 }, 4, 3).max_concurrent, 1);
});
