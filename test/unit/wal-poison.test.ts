// A failed write or fdatasync (on a write-through segment, the sync within its write) poisons
// the log: the group in flight, everything queued behind it and every later append reject with
// WAL_POISONED; nothing is retried in place, and only a reopen (recovery re-reading the disk)
// takes appends again.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { errorCodes, isFermataError } from '../../engine/errors.ts';
import { Wal } from '../../engine/wal/wal.ts';
import { withTimeout } from '../helpers/timeout.ts';
import { SimFileSystem, type SimOp } from '../sim/sim-file-system.ts';

const dir = '/data/wal';
const body = (n: number): Uint8Array => new TextEncoder().encode(`record ${n}`);
const poisoned = (err: unknown): boolean => isFermataError(err, errorCodes.walPoisoned);

// On a write-through (O_DSYNC) disk the sync is part of the writev: 'datasync' fails it after
// the write landed; without write-through it is the fdatasync after the write.
for (const [op, code, writeThrough] of [
  ['writev', 'EIO', true],
  ['datasync', 'EIO', true],
  ['writev', 'ENOSPC', true],
  ['datasync', 'ENOSPC', true],
  ['writev', 'EIO', false],
  ['datasync', 'EIO', false],
] as const) {
  test(`${code} from ${op} poisons the log${writeThrough ? '' : ' (no write-through)'}; appends queued behind it and after it reject; a reopen recovers`, async () => {
    const fs = new SimFileSystem({ seed: 5, writeThrough });
    const wal = await Wal.open({ dir, fs });
    assert.equal(await wal.append(1, body(1)), 1);

    let queuedBehind: Promise<number> | undefined;
    let calls = 0;
    fs.setFault((faultOp: SimOp) => {
      if (faultOp !== op) return undefined;
      // While the failing call is in flight, another append queues behind the group.
      queuedBehind ??= wal.append(1, body(99));
      return ++calls === 1 ? code : undefined;
    });
    const group = [wal.append(1, body(2)), wal.append(1, body(3))];
    for (const append of group) await assert.rejects(append, poisoned);
    await assert.rejects(queuedBehind as Promise<number>, poisoned);
    assert.ok(wal.poisoned !== undefined);
    assert.equal(wal.poisoned.details.cause, code);
    if (code === 'ENOSPC') assert.match(wal.poisoned.message, /disk is full/);

    fs.setFault(undefined);
    await assert.rejects(wal.append(1, body(4)), poisoned, 'a healthy disk does not un-poison the log');
    // A group written beside the failing one (write-through) makes a call of its own.
    assert.equal(calls - wal.counters.overlappedGroups, 1, 'the failed call was not retried');
    await wal.close();

    const reopened = await Wal.open({ dir, fs });
    const seqs: number[] = [];
    for await (const record of reopened.records()) seqs.push(record.seq);
    assert.equal(seqs[0], 1, 'the acknowledged record survives');
    assert.equal(await reopened.append(1, body(5)), reopened.lastSeq);
    await reopened.close();
  });
}

test('a failed write of a group started before the one ahead was acknowledged poisons that group only', async () => {
  const fs = new SimFileSystem({ seed: 11 });
  const wal = await Wal.open({ dir, fs });
  let queuedBehind: Array<Promise<number>> = [];
  let writes = 0;
  fs.setFault((faultOp: SimOp) => {
    if (faultOp !== 'writev') return undefined;
    writes++;
    // The first group's write is in flight: two appends queue behind it, and their group's
    // write (started as soon as the first group is synced) fails.
    if (writes === 1) queuedBehind = [wal.append(1, body(2)), wal.append(1, body(3))];
    return writes === 2 ? 'EIO' : undefined;
  });
  assert.equal(await wal.append(1, body(1)), 1, 'the group ahead is synced and acknowledged');
  for (const append of queuedBehind) await assert.rejects(withTimeout(append, 5000, 'the refusal of an append written early'), poisoned);
  assert.equal(writes, 2);
  assert.equal(wal.poisoned?.details.cause, 'EIO');
  fs.setFault(undefined);
  await wal.cutToSynced();
  await wal.close();

  const reopened = await Wal.open({ dir, fs });
  const seqs: number[] = [];
  for await (const record of reopened.records()) seqs.push(record.seq);
  assert.deepEqual(seqs, [1], 'the acknowledged record is there, the refused ones are not');
  assert.equal(await reopened.append(1, body(4)), 2);
  await reopened.close();
});

test('a failure creating the next segment poisons the log too', async () => {
  const fs = new SimFileSystem({ seed: 6 });
  const wal = await Wal.open({ dir, fs, limits: { segmentBytes: 4096 } });
  await wal.append(1, new Uint8Array(3000));
  fs.failAfter('open', 0, 'ENOSPC');
  await assert.rejects(wal.append(1, new Uint8Array(3000)), poisoned);
  await assert.rejects(wal.append(1, new Uint8Array(1)), poisoned);
  await wal.close();
});

test('regression: cut back to its last synced record, a poisoned log is reopened without the refused records and appends after them', async () => {
  // A group whose fdatasync failed was written all the same: reopened as it was, the log read
  // those records back (their clients had been refused, and the service delivered them), and
  // appended after bytes that, after a real EIO, the kernel may have dropped.
  const fs = new SimFileSystem({ seed: 7 });
  const wal = await Wal.open({ dir, fs });
  assert.equal(await wal.append(1, body(1)), 1);
  let failed = false;
  fs.setFault((op) => (op === 'datasync' && !failed ? ((failed = true), 'EIO') : undefined));
  await assert.rejects(wal.append(1, body(2)), poisoned);
  fs.setFault(() => 'EIO');
  await assert.rejects(wal.cutToSynced(), /EIO/, 'while the disk fails the cut fails, and is tried again');
  fs.setFault(undefined);
  await wal.cutToSynced();
  await wal.close();

  const seen: string[] = [];
  const reopened = await Wal.open({ dir, fs, replay: (_seq, _type, record) => void seen.push(new TextDecoder().decode(record)) });
  assert.deepEqual(seen, ['record 1'], 'the refused record is not read back');
  assert.equal(await reopened.append(1, body(3)), 2, 'the next record follows the last synced one');
  await reopened.close();
  const powerLost = fs.powerLoss({ mode: 'keep-none' });
  const again: string[] = [];
  const last = await Wal.open({ dir, fs: powerLost, replay: (_seq, _type, record) => void again.push(new TextDecoder().decode(record)) });
  assert.deepEqual(again, ['record 1', 'record 3']);
  await last.close();
});
