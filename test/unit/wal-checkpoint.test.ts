// The WAL's side of checkpoints: sealed segments a checkpoint covers are deleted, the log then
// starts later than segment 1, and reopening with the checkpoint's sequence accepts that (and
// nothing shorter); replay may be asynchronous.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { errorCodes, isFermataError } from '../../engine/errors.ts';
import { Wal } from '../../engine/wal/wal.ts';
import { testScratch } from '../helpers/scratch.ts';

const scratch = testScratch('fermata-wal-checkpoint');
const record = (i: number): Uint8Array => new TextEncoder().encode(`record ${i}`.padEnd(400, '.'));

async function logWithSegments(dir: string, records: number): Promise<Wal> {
  const wal = await Wal.open({ dir, limits: { segmentBytes: 4096 } });
  for (let i = 1; i <= records; i++) await wal.append(1, record(i));
  return wal;
}

test('deleteCoveredSegments deletes only sealed segments wholly at or below the sequence', async () => {
  const dir = scratch.tempDir('delete');
  const wal = await logWithSegments(dir, 40);
  const before = wal.segmentCount;
  assert.ok(before >= 4, `expected several segments, got ${before}`);
  assert.equal(await wal.deleteCoveredSegments(0), 0);
  const deleted = await wal.deleteCoveredSegments(20);
  assert.ok(deleted >= 1 && deleted < before);
  assert.ok(wal.firstSeq <= 21, `the log must still hold sequence 21, it starts at ${wal.firstSeq}`);
  // Everything covered or not, the segment being written stays.
  await wal.deleteCoveredSegments(1_000);
  assert.equal(wal.segmentCount, 1);
  assert.equal(await wal.append(1, record(41)), 41);
  await wal.close();
});

test('a log whose first segments were deleted opens only with a checkpoint that covers them', async () => {
  const dir = scratch.tempDir('reopen');
  let wal = await logWithSegments(dir, 40);
  await wal.deleteCoveredSegments(20);
  const firstSeq = wal.firstSeq;
  await wal.close();
  await assert.rejects(Wal.open({ dir }), (err) => isFermataError(err, errorCodes.walCorrupt) && /earlier segments are missing/.test(err.message));
  await assert.rejects(Wal.open({ dir, coveredSeq: firstSeq - 2 }), (err) => isFermataError(err, errorCodes.walCorrupt));
  const seen: number[] = [];
  wal = await Wal.open({ dir, coveredSeq: 20, replay: (seq) => void seen.push(seq) });
  assert.equal(seen[0], firstSeq);
  assert.equal(seen.at(-1), 40);
  assert.equal(await wal.append(1, record(41)), 41);
  await wal.close();
});

test('an empty log directory with a checkpoint is refused: the segment being written is never deleted', async () => {
  const dir = scratch.tempDir('empty');
  await assert.rejects(Wal.open({ dir, coveredSeq: 5 }), (err) => isFermataError(err, errorCodes.walCorrupt) && /holds no segment/.test(err.message));
});

test('an asynchronous replay is awaited record by record, in order', async () => {
  const dir = scratch.tempDir('async');
  const wal = await logWithSegments(dir, 30);
  await wal.close();
  const seen: number[] = [];
  let active = 0;
  const reopened = await Wal.open({
    dir,
    replay: async (seq) => {
      active++;
      assert.equal(active, 1, 'one record at a time');
      await new Promise((resolve) => setImmediate(resolve));
      seen.push(seq);
      active--;
    },
  });
  assert.deepEqual(seen, Array.from({ length: 30 }, (_, i) => i + 1));
  await reopened.close();
});

test('sealCovered starts a new segment only when a checkpoint covers every record and no append is waiting', async () => {
  const dir = scratch.tempDir('seal');
  const wal = await Wal.open({ dir, limits: { segmentBytes: 1024 * 1024 } });
  for (let i = 1; i <= 5; i++) await wal.append(1, record(i));
  await wal.sealCovered(4);
  assert.equal(wal.segmentCount, 1, 'record 5 is not covered: the segment stays open');
  const waiting = wal.append(1, record(6));
  await wal.sealCovered(5);
  assert.equal(await waiting, 6);
  assert.equal(wal.segmentCount, 1, 'an append was waiting: it went into the open segment');
  await wal.sealCovered(6);
  assert.equal(wal.segmentCount, 2);
  const afterSeal = wal.append(1, record(7));
  assert.equal(await wal.deleteCoveredSegments(6), 1);
  assert.equal(await afterSeal, 7);
  assert.equal(wal.firstSeq, 7);
  await wal.close();
  const seen: number[] = [];
  const reopened = await Wal.open({ dir, coveredSeq: 6, replay: (seq) => void seen.push(seq) });
  assert.deepEqual(seen, [7], 'reopening reads only what came after the checkpoint');
  await reopened.close();
});

test('sealCovered of an empty segment does nothing', async () => {
  const wal = await Wal.open({ dir: scratch.tempDir('seal-empty') });
  await wal.sealCovered(0);
  assert.equal(wal.segmentCount, 1);
  await wal.close();
});
