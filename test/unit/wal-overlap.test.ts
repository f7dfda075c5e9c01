// Two groups written at once on a write-through segment (walLimits.writesInFlightMax): appends
// made while a group's write is under way start the next group's write then, flagged
// overlapped, and are acknowledged only after the group ahead of them; a failure of the group
// ahead refuses both. Without write-through, or with writesInFlightMax 1, one write at a time.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { errorCodes, isFermataError } from '../../engine/errors.ts';
import { decodeFrame } from '../../engine/wal/decoder.ts';
import { segmentFileName, segmentHeaderBytes } from '../../engine/wal/format.ts';
import { Wal } from '../../engine/wal/wal.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';
import { withTimeout } from '../helpers/timeout.ts';
import { wrappedFileSystem } from '../helpers/wrapped-file-system.ts';

const dir = '/data/wal';
const body = (text: string): Uint8Array => new TextEncoder().encode(text);
const poisoned = (err: unknown): boolean => isFermataError(err, errorCodes.walPoisoned);

/** A simulated disk whose record writes finish only when the test lets each go (in any order). */
function gatedDisk(options: { writeThrough?: boolean } = {}) {
  const sim = new SimFileSystem({ seed: 3, maxExtraHops: 0, ...options });
  /** Writes issued and done on the disk, waiting to be let go; oldest first. */
  const held: Array<{ position: number; release: (err?: Error) => void }> = [];
  let holding = false;
  const fs = wrappedFileSystem(
    (handle) => ({
      async writev(chunks, position) {
        const hold = holding;
        await handle.writev(chunks, position);
        if (!hold) return;
        const { promise, resolve, reject } = Promise.withResolvers<void>();
        held.push({ position, release: (err) => (err === undefined ? resolve() : reject(err)) });
        await promise;
      },
    }),
    sim,
  );
  return {
    sim,
    fs,
    held,
    hold: (on: boolean) => {
      holding = on;
    },
  };
}

/** Settles promise callbacks and the simulated disk's calls. */
async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await nextTurn();
}

/** Records' sequence and overlapped flag, read from the durable bytes of segment 1. */
function durableFrames(sim: SimFileSystem): Array<{ seq: number; overlapped: boolean }> {
  const bytes = sim.durableBytes(`${dir}/${segmentFileName(1)}`) as Uint8Array;
  const frames: Array<{ seq: number; overlapped: boolean }> = [];
  for (let at = segmentHeaderBytes, seq = 1; ; seq++) {
    const frame = decodeFrame(bytes, at, 1, seq);
    if (frame.verdict !== 'record') break;
    frames.push({ seq, overlapped: frame.overlapped });
    at = frame.next;
  }
  return frames;
}

test('appends made while a group is being written are written at once, flagged overlapped, and acknowledged after the group ahead', async () => {
  const disk = gatedDisk();
  const wal = await Wal.open({ dir, fs: disk.fs });
  disk.hold(true);
  const order: string[] = [];
  const tracked = (text: string, append: Promise<number>): Promise<number> => append.then((seq) => (order.push(text), seq));
  const first = tracked('a', wal.append(1, body('a')));
  await settle();
  assert.equal(disk.held.length, 1, 'the first group is written');
  const behind = [tracked('b', wal.append(1, body('b'))), tracked('c', wal.append(1, body('c')))];
  await settle();
  assert.equal(disk.held.length, 2, 'the next group is written while the first is under way');
  assert.equal(wal.counters.overlappedGroups, 1);
  const third = tracked('d', wal.append(1, body('d'), { startNow: true }));
  await settle();
  assert.equal(disk.held.length, 2, 'no third write while two are under way');

  // The later write finishes first: its appends still wait for the group ahead.
  (disk.held[1] as (typeof disk.held)[number]).release();
  await settle();
  assert.deepEqual(order, [], 'nothing is acknowledged before the group ahead is durable');
  assert.equal(wal.lastSeq, 0);
  disk.hold(false);
  (disk.held[0] as (typeof disk.held)[number]).release();
  assert.deepEqual(await Promise.all([first, ...behind, third]), [1, 2, 3, 4]);
  assert.deepEqual(order, ['a', 'b', 'c', 'd'], 'acknowledged in log order');
  await wal.close();
  assert.deepEqual(durableFrames(disk.sim), [
    { seq: 1, overlapped: false },
    { seq: 2, overlapped: true },
    { seq: 3, overlapped: true },
    // Started when the first group was acknowledged, beside the second (not yet acknowledged).
    { seq: 4, overlapped: true },
  ]);
});

for (const [name, writeThrough, writesInFlightMax] of [
  ['without write-through', false, 2],
  ['with writesInFlightMax 1', true, 1],
] as const) {
  test(`${name}, appends made while a group is being written wait for it`, async () => {
    const disk = gatedDisk({ writeThrough });
    const wal = await Wal.open({ dir, fs: disk.fs, limits: { writesInFlightMax } });
    disk.hold(true);
    const first = wal.append(1, body('a'));
    await settle();
    const behind = [wal.append(1, body('b')), wal.append(1, body('c'), { startNow: true })];
    await settle();
    assert.equal(disk.held.length, 1, 'one write at a time');
    disk.hold(false);
    (disk.held[0] as (typeof disk.held)[number]).release();
    assert.deepEqual(await Promise.all([first, ...behind]), [1, 2, 3]);
    assert.equal(wal.counters.overlappedGroups, 0);
    await wal.close();
    assert.ok(durableFrames(disk.sim).every((frame) => !frame.overlapped));
  });
}

test('a failed write of the group ahead refuses the group written behind it too, and the cut takes both', async () => {
  const disk = gatedDisk();
  const wal = await Wal.open({ dir, fs: disk.fs });
  assert.equal(await wal.append(1, body('kept')), 1);
  disk.hold(true);
  const ahead = wal.append(1, body('ahead'));
  await settle();
  const behind = wal.append(1, body('behind'));
  await settle();
  assert.equal(disk.held.length, 2);
  // The group behind reached the disk; the one ahead fails (its bytes landed all the same).
  (disk.held[1] as (typeof disk.held)[number]).release();
  await settle();
  disk.hold(false);
  (disk.held[0] as (typeof disk.held)[number]).release(Object.assign(new Error('EIO'), { code: 'EIO' }));
  await assert.rejects(withTimeout(ahead, 5000, 'the refusal of the failed group'), poisoned);
  await assert.rejects(withTimeout(behind, 5000, 'the refusal of the group behind it'), poisoned, 'a group behind a failed one is refused, though its write succeeded');
  await assert.rejects(wal.append(1, body('later')), poisoned);
  await wal.cutToSynced();
  await wal.close();

  const seen: string[] = [];
  const reopened = await Wal.open({ dir, fs: disk.sim, replay: (_seq, _type, record) => void seen.push(new TextDecoder().decode(record)) });
  assert.deepEqual(seen, ['kept'], 'neither refused group is read back');
  assert.equal(await reopened.append(1, body('next')), 2);
  await reopened.close();
});

test('a power loss with the group ahead lost and the overlapped one behind it durable: recovery cuts both', async () => {
  const disk = gatedDisk();
  const wal = await Wal.open({ dir, fs: disk.fs });
  assert.equal(await wal.append(1, body('kept')), 1);
  // The write ahead is held before it reaches the disk; the one behind it is durable.
  let holdAhead = true;
  const sim = disk.sim;
  const fs = wrappedFileSystem(
    (handle) => ({
      async writev(chunks, position) {
        if (holdAhead) {
          holdAhead = false;
          await new Promise(() => undefined);
        }
        await handle.writev(chunks, position);
      },
    }),
    sim,
  );
  await wal.close();
  const again = await Wal.open({ dir, fs });
  const ahead = again.append(1, body('ahead: never on disk'));
  await settle();
  const behind = again.append(1, body('behind'));
  await settle();
  assert.equal(again.counters.overlappedGroups, 1);
  let settled = false;
  void Promise.allSettled([ahead, behind]).then(() => (settled = true));
  await settle();
  assert.equal(settled, false, 'neither is acknowledged');

  const image = sim.powerLoss({ mode: 'keep-none' });
  const seen: string[] = [];
  const recovered = await Wal.open({ dir, fs: image, replay: (_seq, _type, record) => void seen.push(new TextDecoder().decode(record)) });
  assert.deepEqual(seen, ['kept']);
  assert.match(recovered.recovery.repair?.reason ?? '', /overlapped group from sequence 3/);
  assert.equal(await recovered.append(1, body('next')), 2);
  await recovered.close();
});
