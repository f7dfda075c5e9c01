// A failed write or fdatasync poisons the log: the group in flight, everything queued behind
// it and every later append reject with WAL_POISONED; nothing is retried in place, and only a
// reopen (recovery re-reading the disk) takes appends again.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { errorCodes, isFermataError } from '../../engine/errors.ts';
import { Wal } from '../../engine/wal/wal.ts';
import { SimFileSystem, type SimOp } from '../sim/sim-file-system.ts';

const dir = '/data/wal';
const body = (n: number): Uint8Array => new TextEncoder().encode(`record ${n}`);
const poisoned = (err: unknown): boolean => isFermataError(err, errorCodes.walPoisoned);

for (const [op, code] of [
  ['writev', 'EIO'],
  ['datasync', 'EIO'],
  ['writev', 'ENOSPC'],
  ['datasync', 'ENOSPC'],
] as const) {
  test(`${code} from ${op} poisons the log; appends queued behind it and after it reject; a reopen recovers`, async () => {
    const fs = new SimFileSystem({ seed: 5 });
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
    assert.equal(calls, 1, 'the failed call was not retried');
    await wal.close();

    const reopened = await Wal.open({ dir, fs });
    const seqs: number[] = [];
    for await (const record of reopened.records()) seqs.push(record.seq);
    assert.equal(seqs[0], 1, 'the acknowledged record survives');
    assert.equal(await reopened.append(1, body(5)), reopened.lastSeq);
    await reopened.close();
  });
}

test('a failure creating the next segment poisons the log too', async () => {
  const fs = new SimFileSystem({ seed: 6 });
  const wal = await Wal.open({ dir, fs, limits: { segmentBytes: 4096 } });
  await wal.append(1, new Uint8Array(3000));
  fs.failAfter('open', 0, 'ENOSPC');
  await assert.rejects(wal.append(1, new Uint8Array(3000)), poisoned);
  await assert.rejects(wal.append(1, new Uint8Array(1)), poisoned);
  await wal.close();
});
