import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { RunBucket, RunMeta } from '../../engine/spill/run-meta.ts';
import { BucketGroups } from '../../engine/spill/spilled-scan.ts';
import type { SpilledRun } from '../../engine/spill/spilled-timers.ts';

const width = 100;

function run(runId: number, starts: readonly number[], validFromMs = -Infinity): SpilledRun {
  const buckets: RunBucket[] = starts.map((startMs, i) => ({ startMs, rows: 10 + i, keyed: 0, fileOffset: 0, byteLength: 0, crc32: 0 }));
  const meta: RunMeta = { runId, version: 3, stamp: 0, bucketWidthMs: width, rows: 0, bytes: 0, headBytes: 0, headCrc32: 0, tailOffset: 0, tailCrc32: 0, keysBytes: 0, buckets };
  return { meta, validFromMs, keyHashes: [] };
}

function groupsOf(runs: readonly SpilledRun[], watermarkMs: number, fromMs: number, beforeMs: number): Array<[number, number, Array<[number, number]>]> {
  const groups = new BucketGroups({ runs, watermarkMs, bucketStartOf: (ms) => Math.floor(ms / width) * width }, fromMs, beforeMs);
  const out: Array<[number, number, Array<[number, number]>]> = [];
  for (let g = 0; groups.at(g) !== undefined; g++) {
    const group = groups.at(g);
    assert.ok(group !== undefined);
    out.push([group.startMs, group.rows, group.batches.map(({ run: meta, bucket }) => [meta.runId, bucket])]);
  }
  return out;
}

test('bucket groups merge the runs by start, from the position\'s bucket, past the watermark and each run\'s validFromMs, before the end', () => {
  // run 1: [0][100][100][300]  (a large bucket at 100 in two batches)   run 2: [100][200][300][500]
  const runs = [run(1, [0, 100, 100, 300]), run(2, [100, 200, 300, 500], 200)];
  assert.deepEqual(groupsOf(runs, 0, -Infinity, Infinity), [
    [0, 10, [[1, 0]]],
    [100, 23, [[1, 1], [1, 2]]],
    [200, 11, [[2, 1]]],
    [300, 25, [[1, 3], [2, 2]]],
    [500, 13, [[2, 3]]],
  ]);
  // From inside bucket 100 (its bucket is read whole), before 500.
  assert.deepEqual(groupsOf(runs, 0, 150, 500).map(([start]) => start), [100, 200, 300]);
  // The watermark hides what is resident now.
  assert.deepEqual(groupsOf(runs, 250, -Infinity, Infinity).map(([start]) => start), [300, 500]);
  assert.deepEqual(groupsOf([], 0, -Infinity, Infinity), []);
});

test('a group asked for again is the same group, and asking past the last is undefined', () => {
  const groups = new BucketGroups({ runs: [run(1, [0, 100])], watermarkMs: 0, bucketStartOf: (ms) => Math.floor(ms / width) * width }, 0, Infinity);
  assert.equal(groups.at(5), undefined);
  assert.equal(groups.at(1)?.startMs, 100);
  assert.equal(groups.at(0), groups.at(0));
  assert.equal(groups.at(2), undefined);
});
