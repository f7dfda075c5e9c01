// The engine's spill tier over the simulated file system: checkpoints that spill far-future
// timers to disk and delete covered log segments, lookups and cancels of spilled timers,
// idempotency keys held on disk, logged promotions, the watermark as a fence, recovery from a
// checkpoint plus the log's tail, and power loss at every step of a checkpoint.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { batchFromSpecs, type TimerSpec } from '../../engine/batch/timer-batch.ts';
import { type Clock, Engine } from '../../engine/engine.ts';
import { decodeTimerId } from '../../engine/ids.ts';
import { deadReason, outcomeKind } from '../../engine/records.ts';
import { outcomesFor } from '../helpers/outcomes.ts';
import { dataDir, hour, idsOf, manualClock, openEngine, t0, target } from '../helpers/sim-engine.ts';
import type { FileHandle, FileSystem } from '../../engine/fs/file-system.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';
import { Wal } from '../../engine/wal/wal.ts';
import { withOpen } from '../helpers/wrapped-file-system.ts';

/** The engine's log as the local WAL it is by default, for its segments. */
function walOf(engine: Engine): Wal {
  assert.ok(engine.log instanceof Wal);
  return engine.log;
}

/** Timers every `stepMs` from `fromMs`, with payloads naming them. */
function spread(count: number, fromMs: number, stepMs: number, extra: (i: number) => Partial<TimerSpec> = () => ({})): TimerSpec[] {
  return Array.from({ length: count }, (_, i) => ({ fireAtMs: fromMs + i * stepMs, target, payload: `timer ${i}`, ...extra(i) }));
}

test('a checkpoint spills far-future timers, deletes covered segments, and reopening restores both sides', async () => {
  const fs = new SimFileSystem({ seed: 11 });
  const clock = manualClock();
  let engine = await openEngine(fs, clock);
  const near = idsOf(await engine.admit(batchFromSpecs(spread(20, t0 + 1000, 60_000))));
  const far = idsOf(await engine.admit(batchFromSpecs(spread(50, t0 + 10 * hour, hour / 2))));
  for (let i = 0; i < 30; i++) await engine.admit(batchFromSpecs(spread(1, t0 + 2 * hour + i, 1)));
  const segmentsBefore = walOf(engine).segmentCount;
  const report = await engine.checkpoint(t0 + 3 * hour);
  assert.equal(report.spilledRows, 50);
  assert.equal(report.residentRows, 50);
  assert.ok(report.segmentsDeleted >= 1 && walOf(engine).segmentCount < segmentsBefore, 'the log segments the checkpoint covers are deleted');
  assert.equal(engine.stats().resident, 50);
  assert.equal(engine.stats().pending, 100);
  assert.equal(engine.stats().spill.spilled, 50);
  assert.equal(engine.get(far[0] as string), undefined, 'a spilled timer is not in memory');
  assert.equal((await engine.lookup(far[7] as string))?.state, 'pending');
  assert.equal((await engine.lookup(near[3] as string))?.state, 'pending');
  await engine.close();

  engine = await openEngine(fs, clock);
  assert.equal(engine.stats().resident, 50);
  assert.equal(engine.stats().spill.spilled, 50);
  assert.equal(engine.stats().pending, 100);
  const view = await engine.lookup(far[49] as string);
  assert.equal(view?.fireAtMs, t0 + 10 * hour + 49 * (hour / 2));
  assert.equal(view?.target, target);
  await engine.close();
});

test('a checkpoint of a quiet log seals its last segment too: reopening reads no record the checkpoint holds', async () => {
  const fs = new SimFileSystem({ seed: 12 });
  const clock = manualClock();
  // Segments large enough that every record is in the one being written.
  let engine = await openEngine(fs, clock, { walLimits: { segmentBytes: 1024 * 1024 } });
  const ids = idsOf(await engine.admit(batchFromSpecs(spread(40, t0 + 10 * hour, hour))));
  assert.equal(walOf(engine).segmentCount, 1);
  const lastSeq = engine.log.lastSeq;
  const report = await engine.checkpoint(t0 + 20 * hour);
  assert.equal(report.segmentsDeleted, 1, 'the sealed segment is deleted with the covered ones');
  assert.equal(walOf(engine).segmentCount, 1);
  assert.equal(engine.log.firstSeq, lastSeq + 1, 'the log goes on in a new, empty segment');
  const added = idsOf(await engine.admit(batchFromSpecs(spread(1, t0 + hour, 1))));
  await engine.close();

  engine = await openEngine(fs, clock, { walLimits: { segmentBytes: 1024 * 1024 } });
  let replayed = 0;
  for await (const record of engine.log.records()) replayed += record.seq <= lastSeq ? 1 : 0;
  assert.equal(replayed, 0, 'no record the checkpoint covers is read again');
  assert.equal(engine.stats().pending, 41);
  assert.equal((await engine.lookup(ids[39] as string))?.state, 'pending');
  assert.equal(engine.get(added[0] as string)?.state, 'pending');
  await engine.close();
});

test('spilled timers are not handed out until promoted; promotion is logged and replayed', async () => {
  const fs = new SimFileSystem({ seed: 12 });
  const clock = manualClock();
  let engine = await openEngine(fs, clock);
  const ids = idsOf(await engine.admit(batchFromSpecs(spread(10, t0 + 5 * hour, 60_000))));
  await engine.checkpoint(t0 + 2 * hour);
  clock.set(t0 + 6 * hour);
  assert.equal(engine.takeDue(clock.now(), 100).count, 0, 'due, but spilled: the watermark fences it');
  assert.equal(engine.nextDueMs(), undefined);
  assert.equal(await engine.promote(t0 + 6 * hour), 10);
  assert.equal(engine.stats().spill.spilled, 0);
  const slice = engine.takeDue(clock.now(), 4);
  assert.equal(slice.count, 4);
  await engine.settle(outcomesFor(slice, outcomeKind.delivered));
  await engine.close();

  // The log's tail holds PROMOTE then the OUTCOME: replay brings the bucket back in, then delivers.
  engine = await openEngine(fs, clock);
  assert.equal(engine.get(ids[0] as string)?.state, 'delivered');
  assert.equal(engine.get(ids[3] as string)?.state, 'delivered');
  assert.equal(engine.get(ids[4] as string)?.state, 'pending');
  assert.equal(engine.takeDue(clock.now(), 100).count, 6, 'the rest fire once, none twice');
  await engine.close();
});

test('a spilled timer is cancelled on disk: never promoted, still cancelled after reopening', async () => {
  const fs = new SimFileSystem({ seed: 13 });
  const clock = manualClock();
  let engine = await openEngine(fs, clock);
  const ids = idsOf(await engine.admit(batchFromSpecs(spread(5, t0 + 5 * hour, 60_000))));
  await engine.checkpoint(t0 + 2 * hour);
  assert.equal(await engine.cancel(ids[2] as string), 'cancelled');
  assert.equal(await engine.cancel(ids[2] as string), 'cancelled');
  assert.equal(engine.get(ids[2] as string)?.state, 'cancelled', 'a cancelled spilled timer is in memory for its retention');
  assert.equal(engine.stats().spill.spilled, 4);
  assert.equal(engine.stats().pending, 4);
  await engine.close();

  engine = await openEngine(fs, clock);
  assert.equal(engine.get(ids[2] as string)?.state, 'cancelled');
  assert.equal(engine.stats().spill.spilled, 4);
  clock.set(t0 + 6 * hour);
  await engine.promote(t0 + 6 * hour);
  const slice = engine.takeDue(clock.now(), 100);
  assert.equal(slice.count, 4);
  assert.ok(!Array.from(slice.rows).includes(2), 'the cancelled timer never fires');
  // And after a checkpoint of that state, the tombstone still holds.
  await engine.checkpoint();
  await engine.close();
  engine = await openEngine(fs, clock);
  assert.equal(engine.get(ids[2] as string)?.state, 'cancelled');
  await engine.close();
});

test('an idempotency key held by a spilled timer deduplicates, live and after reopening', async () => {
  const fs = new SimFileSystem({ seed: 14 });
  const clock = manualClock();
  let engine = await openEngine(fs, clock);
  const original = idsOf(await engine.admit(batchFromSpecs(spread(3, t0 + 5 * hour, 60_000, (i) => ({ key: `order-${i}` })))));
  await engine.checkpoint(t0 + 2 * hour);
  assert.equal(engine.stats().resident, 0);
  const again = await engine.admit(batchFromSpecs([{ fireAtMs: t0 + 9 * hour, target, key: 'order-1' }, { fireAtMs: t0 + 9 * hour, target, key: 'order-9' }]));
  assert.ok(again.isDuplicate(0));
  assert.equal(again.idOf(0), original[1]);
  assert.ok(!again.isDuplicate(1));
  await engine.close();

  engine = await openEngine(fs, clock);
  const third = await engine.admit(batchFromSpecs([{ fireAtMs: t0 + 9 * hour, target, key: 'order-2' }, { fireAtMs: t0 + 9 * hour, target, key: 'order-9' }]));
  assert.equal(third.idOf(0), original[2]);
  assert.equal(third.idOf(1), again.idOf(1), 'the key added after the checkpoint is replayed from the log');
  assert.equal(engine.stats().pending, 4);
  await engine.close();
});

test('power loss at every step of a checkpoint: nothing acknowledged is lost, nothing cancelled comes back', async () => {
  // Count the file-system operations one checkpoint makes, then fail each one in turn.
  const prepare = async (seed: number): Promise<{ fs: SimFileSystem; engine: Engine; clock: Clock & { set(ms: number): void }; ids: string[]; cancelled: string }> => {
    const fs = new SimFileSystem({ seed });
    const clock = manualClock();
    const engine = await openEngine(fs, clock);
    const ids = [
      ...idsOf(await engine.admit(batchFromSpecs(spread(8, t0 + 1000, 60_000)))),
      ...idsOf(await engine.admit(batchFromSpecs(spread(12, t0 + 5 * hour, 60_000, (i) => ({ key: `k${i}` }))))),
    ];
    await engine.checkpoint(t0 + 3 * hour);
    // After the first checkpoint: a spilled cancel, new far-future adds, a delivery.
    const cancelled = ids[10] as string;
    assert.equal(await engine.cancel(cancelled), 'cancelled');
    ids.push(...idsOf(await engine.admit(batchFromSpecs(spread(6, t0 + 7 * hour, 60_000)))));
    clock.set(t0 + 2000);
    const slice = engine.takeDue(clock.now(), 1);
    await engine.settle(outcomesFor(slice, outcomeKind.delivered));
    return { fs, engine, clock, ids, cancelled };
  };
  const probe = await prepare(100);
  const before = probe.fs.opCount;
  await probe.engine.checkpoint(t0 + 2 * hour);
  const opsPerCheckpoint = probe.fs.opCount - before;
  await probe.engine.close();
  assert.ok(opsPerCheckpoint > 10, `a checkpoint made only ${opsPerCheckpoint} file-system operations`);

  for (let failAt = 1; failAt <= opsPerCheckpoint; failAt++) {
    const { fs, engine, clock, ids, cancelled } = await prepare(100 + failAt);
    let ops = 0;
    fs.setFault(() => (++ops === failAt ? 'EIO' : undefined));
    await engine.checkpoint(t0 + 2 * hour).catch(() => undefined);
    fs.setFault(undefined);
    const after = fs.powerLoss({ mode: 'random' });
    const reopened = await openEngine(after, clock);
    const context = `failing operation ${failAt} of ${opsPerCheckpoint}`;
    for (const id of ids) {
      const view = await reopened.lookup(id);
      assert.ok(view !== undefined, `${context}: acknowledged timer ${id} lost`);
      if (id === cancelled) assert.equal(view.state, 'cancelled', `${context}: the cancel was lost`);
    }
    assert.equal(reopened.stats().pending, ids.length - 2, `${context}: one cancelled, one delivered`);
    // Fire everything: each once, the cancelled one never.
    clock.set(t0 + 10 * hour);
    await reopened.promote(t0 + 10 * hour);
    const fired = reopened.takeDue(clock.now(), 1000);
    assert.equal(fired.count, ids.length - 2, context);
    const cancelledRow = (decodeTimerId(cancelled) as { seq: number; row: number }).row;
    const cancelledSeq = (decodeTimerId(cancelled) as { seq: number; row: number }).seq;
    for (let i = 0; i < fired.count; i++) assert.ok(!(fired.seqs[i] === cancelledSeq && fired.rows[i] === cancelledRow), `${context}: a cancelled timer fired`);
    await reopened.close();
  }
});

/** Every acknowledged timer is found, the cancelled one as cancelled, and firing everything fires each once, the cancelled one never. */
async function assertRecovered(engine: Engine, clock: Clock & { set(ms: number): void }, ids: readonly string[], cancelled: string, delivered: number, context: string): Promise<void> {
  for (const id of ids) {
    const view = await engine.lookup(id);
    assert.ok(view !== undefined, `${context}: acknowledged timer ${id} lost`);
    if (id === cancelled) assert.equal(view.state, 'cancelled', `${context}: the cancel was lost`);
  }
  const waiting = ids.length - 1 - delivered;
  assert.equal(engine.stats().pending, waiting, `${context}: pending count`);
  clock.set(t0 + 400 * hour);
  await engine.promote(engine.bucketWidthMs * Math.ceil((t0 + 401 * hour) / engine.bucketWidthMs));
  const fired = engine.takeDue(clock.now(), 100_000);
  assert.equal(fired.count, waiting, `${context}: fired`);
  const parts = decodeTimerId(cancelled) as { seq: number; row: number };
  const seen = new Set<string>();
  for (let i = 0; i < fired.count; i++) {
    const name = `${fired.seqs[i]}:${fired.rows[i]}`;
    assert.ok(!seen.has(name), `${context}: ${name} fired twice`);
    seen.add(name);
    assert.ok(!(fired.seqs[i] === parts.seq && fired.rows[i] === parts.row), `${context}: a cancelled timer fired`);
  }
}

test('compaction merges many runs into one: lookups, keys, cancels and power loss at every step of it', async () => {
  const runsToMake = 9; // one more than memoryLimits.spilledRunsMax
  const prepare = async (seed: number): Promise<{ fs: SimFileSystem; engine: Engine; clock: Clock & { set(ms: number): void }; ids: string[]; cancelled: string }> => {
    const fs = new SimFileSystem({ seed });
    const clock = manualClock();
    const engine = await openEngine(fs, clock);
    const ids: string[] = [];
    await engine.checkpoint(t0 + 2 * hour);
    for (let run = 0; run < runsToMake; run++) {
      ids.push(...idsOf(await engine.admit(batchFromSpecs(spread(4, t0 + (3 + run * 7) * hour, 20 * 60_000, (i) => ({ key: `run${run}-${i}` }))))));
      // The last run's timers wait in memory for the checkpoint under test.
      if (run < runsToMake - 1) await engine.checkpoint();
    }
    const cancelled = ids[5] as string;
    assert.equal(await engine.cancel(cancelled), 'cancelled');
    return { fs, engine, clock, ids, cancelled };
  };
  const probe = await prepare(300);
  assert.equal(probe.engine.stats().spill.runs, runsToMake - 1, 'the checkpoint before the last one made a run each');
  const before = probe.fs.opCount;
  await probe.engine.checkpoint();
  const ops = probe.fs.opCount - before;
  assert.equal(probe.engine.stats().spill.runs, 1, 'merged into one run');
  assert.equal(probe.engine.stats().spill.tombstones, 0, 'the merge left the cancelled row out: no tombstone needed');
  const again = await probe.engine.admit(batchFromSpecs([{ fireAtMs: t0 + 500 * hour, target, key: 'run3-2' }]));
  assert.equal(again.idOf(0), probe.ids[14], 'a key held on disk still deduplicates after the merge');
  await probe.engine.close();

  for (let failAt = 1; failAt <= ops; failAt++) {
    const { fs, engine, clock, ids, cancelled } = await prepare(300 + failAt);
    let count = 0;
    fs.setFault(() => (++count === failAt ? 'EIO' : undefined));
    await engine.checkpoint().catch(() => undefined);
    fs.setFault(undefined);
    const reopened = await openEngine(fs.powerLoss({ mode: 'random' }), clock);
    await assertRecovered(reopened, clock, ids, cancelled, 0, `compaction, failing operation ${failAt} of ${ops}`);
    await reopened.close();
  }
});

test('power loss at every step of a promotion: the promoted timers fire once, after reopening too', async () => {
  const prepare = async (seed: number): Promise<{ fs: SimFileSystem; engine: Engine; clock: Clock & { set(ms: number): void }; ids: string[]; cancelled: string }> => {
    const fs = new SimFileSystem({ seed });
    const clock = manualClock();
    const engine = await openEngine(fs, clock);
    const ids = idsOf(await engine.admit(batchFromSpecs(spread(30, t0 + 4 * hour, 10 * 60_000))));
    await engine.checkpoint(t0 + 2 * hour);
    const cancelled = ids[3] as string;
    assert.equal(await engine.cancel(cancelled), 'cancelled');
    return { fs, engine, clock, ids, cancelled };
  };
  const probe = await prepare(500);
  const before = probe.fs.opCount;
  assert.equal(await probe.engine.promote(t0 + 6 * hour), 11, 'the two buckets before 6 h, less the cancelled timer');
  const ops = probe.fs.opCount - before;
  await probe.engine.close();
  for (let failAt = 1; failAt <= ops; failAt++) {
    const { fs, engine, clock, ids, cancelled } = await prepare(500 + failAt);
    let count = 0;
    fs.setFault(() => (++count === failAt ? 'EIO' : undefined));
    await engine.promote(t0 + 6 * hour).catch(() => undefined);
    fs.setFault(undefined);
    const reopened = await openEngine(fs.powerLoss({ mode: 'random' }), clock);
    await assertRecovered(reopened, clock, ids, cancelled, 0, `promotion, failing operation ${failAt} of ${ops}`);
    await reopened.close();
  }
});

test('a damaged run is refused with SPILL_CORRUPT naming the file, never read as timers', async () => {
  const fs = new SimFileSystem({ seed: 15 });
  const clock = manualClock();
  let engine = await openEngine(fs, clock);
  const ids = idsOf(await engine.admit(batchFromSpecs([...spread(5, t0 + 1000, 60_000), ...spread(5, t0 + 9 * hour, 60_000)])));
  await engine.checkpoint(t0 + 2 * hour);
  const [resident, spilled] = engine.stats().spill.runs === 1 ? ['run-0000000001.arrow', 'run-0000000002.arrow'] : ['', ''];
  await engine.close();
  const flip = (name: string, offset: number): void => {
    const path = `${dataDir}/spill/${name}`;
    const byte = (fs.durableBytes(path) as Uint8Array)[offset] as number;
    fs.corrupt(path, offset, Uint8Array.of(byte ^ 0x10));
  };
  const isSpillCorrupt = (file: string) => (err: unknown) => err instanceof Error && (err as { code?: string }).code === 'SPILL_CORRUPT' && err.message.includes(file);

  // A spilled run: reopening reads only its metadata, so the damage shows when its bucket is read.
  const spilledBytes = (fs.durableBytes(`${dataDir}/spill/${spilled}`) as Uint8Array).length;
  flip(spilled, Math.floor(spilledBytes / 2));
  engine = await openEngine(fs, clock);
  await assert.rejects(engine.lookup(ids[7] as string), isSpillCorrupt(spilled));
  clock.set(t0 + 9 * hour);
  await assert.rejects(engine.promote(t0 + 10 * hour), isSpillCorrupt(spilled));
  assert.equal(engine.takeDue(clock.now(), 100).count, 5, 'only the resident timers fire; nothing is read from the damaged run');
  await engine.close();

  // The resident run is read whole at open: refused there.
  const residentBytes = (fs.durableBytes(`${dataDir}/spill/${resident}`) as Uint8Array).length;
  flip(resident, Math.floor(residentBytes / 2));
  await assert.rejects(openEngine(fs, clock), isSpillCorrupt(resident));
});

test('regression: an admit whose key may be held in a damaged spilled run fails with SPILL_CORRUPT instead of spinning', async () => {
  const fs = new SimFileSystem({ seed: 16 });
  const clock = manualClock();
  let engine = await openEngine(fs, clock);
  await engine.admit(batchFromSpecs(spread(3, t0 + 9 * hour, 60_000, (i) => ({ key: `k${i}` }))));
  await engine.checkpoint(t0 + 2 * hour);
  await engine.close();
  const path = `${dataDir}/spill/run-0000000002.arrow`;
  const bytes = fs.durableBytes(path) as Uint8Array;
  const offset = Math.floor(bytes.length / 2);
  fs.corrupt(path, offset, Uint8Array.of((bytes[offset] as number) ^ 0x10));
  engine = await openEngine(fs, clock);
  await assert.rejects(engine.admit(batchFromSpecs([{ fireAtMs: t0 + 9 * hour, target, key: 'k1' }])), (err: unknown) => (err as { code?: string }).code === 'SPILL_CORRUPT');
  await engine.close();
});

test('regression: an admit racing the cancel of the spilled timer holding its key is a duplicate of it', async () => {
  const fs = new SimFileSystem({ seed: 17 });
  const clock = manualClock();
  const engine = await openEngine(fs, clock, { retention: { finishedMs: 100 * hour } });
  const original = idsOf(await engine.admit(batchFromSpecs([{ fireAtMs: t0 + 6 * hour, target, key: 'key4' }])))[0] as string;
  await engine.checkpoint(t0 + 2 * hour);
  const [cancelled, racing] = await Promise.all([engine.cancel(original), engine.admit(batchFromSpecs([{ fireAtMs: t0 + 151, target, key: 'key4' }]))]);
  assert.equal(cancelled, 'cancelled');
  assert.ok(racing.isDuplicate(0), 'the cancelled timer keeps its key for its retention');
  assert.equal(racing.idOf(0), original);
  await engine.close();
});

test('regression: a checkpoint that evicts most timers gives their arena slabs back', async () => {
  const fs = new SimFileSystem({ seed: 18 });
  const clock = manualClock();
  const engine = await openEngine(fs, clock);
  // One near timer in fifty: after the spill each slab would hold a few live timers and stay whole.
  for (let b = 0; b < 4; b++) {
    await engine.admit(batchFromSpecs(Array.from({ length: 10_000 }, (_, i) => ({ fireAtMs: i % 50 === 0 ? t0 + 60_000 : t0 + 48 * hour + i, target, payload: 'x'.repeat(128) }))));
  }
  const before = engine.stats().spill.residentReservedBytes;
  await engine.checkpoint(t0 + 24 * hour);
  const after = engine.stats().spill.residentReservedBytes;
  assert.ok(after < before * 0.75, `the store still holds ${after} of ${before} bytes after 98% of its timers left`);
  await engine.close();
});

/** Runs `during` at the checkpoint's first file-system call (after its snapshot), and waits for both. */
async function duringCheckpoint<T>(fs: SimFileSystem, engine: Engine, watermarkMs: number, during: () => Promise<T>): Promise<T> {
  let started: Promise<T> | undefined;
  fs.setFault(() => {
    started ??= during();
    return undefined;
  });
  await engine.checkpoint(watermarkMs);
  fs.setFault(undefined);
  return started as Promise<T>;
}

test('regression: a cancel while a checkpoint writes a spilled copy of the timer survives the restart (it is logged as CANCEL_SPILLED)', async () => {
  const fs = new SimFileSystem({ seed: 19 });
  const clock = manualClock();
  let engine = await openEngine(fs, clock);
  const ids = idsOf(await engine.admit(batchFromSpecs(spread(5, t0 + 5 * hour, 60_000))));
  assert.equal(await duringCheckpoint(fs, engine, t0 + 2 * hour, () => engine.cancel(ids[2] as string)), 'cancelled');
  assert.equal(engine.stats().pending, 4);
  await engine.close();
  engine = await openEngine(fs, clock);
  assert.equal((await engine.lookup(ids[2] as string))?.state, 'cancelled');
  assert.equal(engine.stats().pending, 4);
  clock.set(t0 + 6 * hour);
  await engine.promote(t0 + 6 * hour);
  const fired = engine.takeDue(clock.now(), 100);
  assert.equal(fired.count, 4);
  assert.ok(!Array.from(fired.rows).includes(2), 'the cancelled timer never fires');
  await engine.close();
});

test('regression: a timer cancelled and released while a checkpoint writes its spilled copy is tombstoned, never promoted', async () => {
  const fs = new SimFileSystem({ seed: 20 });
  const clock = manualClock();
  const engine = await openEngine(fs, clock, { retention: { finishedMs: 1 } });
  const ids = idsOf(await engine.admit(batchFromSpecs(spread(5, t0 + 5 * hour, 60_000))));
  await duringCheckpoint(fs, engine, t0 + 2 * hour, async () => {
    assert.equal(await engine.cancel(ids[2] as string), 'cancelled');
    clock.set(clock.now() + 10);
    engine.takeDue(clock.now(), 10); // the sweep releases it: its retention is over
  });
  assert.equal(await engine.lookup(ids[2] as string), undefined);
  assert.equal(engine.stats().spill.spilled, 4);
  clock.set(t0 + 6 * hour);
  await engine.promote(t0 + 6 * hour);
  const fired = engine.takeDue(clock.now(), 100);
  assert.equal(fired.count, 4);
  assert.ok(!Array.from(fired.rows).includes(2), 'the cancelled timer never fires');
  await engine.close();
});

test('regression: a held-back (parked) timer is not spilled by a checkpoint below it, so it is delivered once', async () => {
  const fs = new SimFileSystem({ seed: 21 });
  const clock = manualClock();
  let engine = await openEngine(fs, clock, { spillBucketWidthMs: 1000 });
  const [id] = idsOf(await engine.admit(batchFromSpecs(spread(1, t0 + 1000, 1))));
  clock.set(t0 + 1500);
  assert.equal(engine.takeDue(clock.now(), 10, () => 0).count, 0, 'held back: its queue has no room');
  assert.equal((await engine.checkpoint(t0 + 1000)).spilledRows, 0);
  const slice = engine.takeDue(clock.now(), 10, () => 10);
  assert.equal(slice.count, 1);
  await engine.settle(outcomesFor(slice, outcomeKind.delivered));
  await engine.close();
  engine = await openEngine(fs, clock, { spillBucketWidthMs: 1000 });
  assert.equal((await engine.lookup(id as string))?.state, 'delivered');
  await engine.promote(t0 + 2000);
  assert.equal(engine.takeDue(clock.now(), 10).count, 0, 'delivered once');
  await engine.close();
});

/** The simulated disk with some file handles' calls held at a gate while it is closed: `holds(call, path)` picks them. */
function gatedDisk(fs: SimFileSystem, holds: (call: 'open' | 'datasync' | 'read', path: string) => boolean): { fs: FileSystem; close(): void; open(): void; held(): number } {
  let gate: PromiseWithResolvers<void> | undefined;
  let held = 0;
  const atGate = async (): Promise<void> => {
    if (gate === undefined) return;
    held++;
    await gate.promise;
  };
  const gated = withOpen(fs, async (path, mode, options) => {
    if (holds('open', path)) await atGate();
    // A write-through handle (the log's segments) is a plain one that syncs within each writev,
    // so that the sync can be held at the gate too.
    const handle = await fs.open(path, mode);
    const writeThrough = options?.writeThrough === true && mode !== 'read';
    const datasync = async (): Promise<void> => {
      if (holds('datasync', path)) await atGate();
      return handle.datasync();
    };
    return {
      writeThrough,
      writev: async (chunks, position) => {
        await handle.writev(chunks, position);
        if (writeThrough) await datasync();
      },
      read: async (into, position) => {
        if (holds('read', path)) await atGate();
        return handle.read(into, position);
      },
      datasync,
      truncate: (length) => handle.truncate(length),
      size: () => handle.size(),
      close: () => handle.close(),
    } satisfies FileHandle;
  });
  return {
    fs: gated,
    close: () => {
      gate ??= Promise.withResolvers<void>();
    },
    open: () => {
      gate?.resolve();
      gate = undefined;
    },
    held: () => held,
  };
}

test('regression (B7): a checkpoint taken while the cancel of a spilled timer is being logged keeps the timer', async () => {
  // The cancel of a spilled timer tombstones it before its record is durable. A checkpoint taken
  // in that gap wrote the tombstone into its manifest and its merge of the runs dropped the row:
  // after a power loss that cut the cancel, an acknowledged add was gone; with the cancel
  // durable, the timer was gone instead of cancelled (GET 404).
  for (const cancelSurvives of [false, true]) {
    const sim = new SimFileSystem({ seed: 23 });
    const wal = gatedDisk(sim, (call, path) => call === 'datasync' && path.includes('/wal/'));
    const clock = manualClock();
    let engine = await Engine.open({ dataDir, fs: wal.fs, clock, walLimits: { segmentBytes: 4096 } });
    const ids = idsOf(await engine.admit(batchFromSpecs(spread(10, t0 + 5 * hour, 60_000))));
    // Nine spilled runs: the next checkpoint merges them, leaving out tombstoned rows.
    for (let run = 0; run < 9; run++) {
      await engine.admit(batchFromSpecs(spread(1, t0 + 30 * hour + run, 1)));
      await engine.checkpoint(t0 + 2 * hour);
    }
    wal.close();
    const cancel = engine.cancel(ids[4] as string);
    while (wal.held() === 0) await new Promise<void>((resolve) => setImmediate(resolve));
    // The cancel's record is written, its fdatasync held: the checkpoint runs in that gap.
    const checkpoint = engine.checkpoint(t0 + 2 * hour);
    let manifestInstalled = false;
    sim.setFault((op, path) => {
      if (op === 'rename' && path.endsWith('MANIFEST.tmp')) manifestInstalled = true;
      return undefined;
    });
    while (!manifestInstalled) await new Promise<void>((resolve) => setImmediate(resolve));
    sim.setFault(undefined);
    let disk: SimFileSystem;
    if (cancelSurvives) {
      wal.open();
      assert.equal(await cancel, 'cancelled');
      await checkpoint;
      await engine.close();
      disk = sim;
    } else {
      // Power lost before the cancel's fdatasync: the cancel was never acknowledged.
      disk = sim.powerLoss({ mode: 'keep-none' });
      wal.open();
      await Promise.allSettled([cancel, checkpoint]);
    }
    engine = await openEngine(disk, clock);
    const view = await engine.lookup(ids[4] as string);
    assert.equal(view?.state, cancelSurvives ? 'cancelled' : 'pending', cancelSurvives ? 'the cancelled timer is still there, cancelled' : 'an add whose cancel was never acknowledged is still pending');
    assert.equal((await engine.lookup(ids[5] as string))?.state, 'pending');
    await engine.close();
  }
});

test('regression: a lookup about to read a spilled run that a checkpoint merges away still finds its timer (the file is deleted after the read)', async () => {
  const sim = new SimFileSystem({ seed: 29 });
  let holdNext = false;
  const disk = gatedDisk(sim, (call, path) => {
    const hold = holdNext && call === 'open' && /\/spill\/run-\d+\.arrow$/.test(path);
    if (hold) holdNext = false;
    return hold;
  });
  const clock = manualClock();
  const engine = await Engine.open({ dataDir, fs: disk.fs, clock, walLimits: { segmentBytes: 4096 } });
  const ids = idsOf(await engine.admit(batchFromSpecs(spread(10, t0 + 5 * hour, 60_000))));
  // Eight spilled runs; with a ninth, the next checkpoint merges them and deletes their files.
  for (let run = 0; run < 8; run++) {
    await engine.admit(batchFromSpecs(spread(1, t0 + 30 * hour + run, 1)));
    await engine.checkpoint(t0 + 2 * hour);
  }
  // The lookup's open of the run holding the timer is held while the merging checkpoint runs.
  disk.close();
  holdNext = true;
  const lookup = engine.lookup(ids[3] as string);
  while (disk.held() === 0) await new Promise<void>((resolve) => setImmediate(resolve));
  let runsDeleted = false;
  sim.setFault((op, path) => {
    if (op === 'unlink' && /run-\d+\.arrow$/.test(path)) runsDeleted = true;
    return undefined;
  });
  await engine.admit(batchFromSpecs(spread(1, t0 + 40 * hour, 1)));
  const checkpoint = engine.checkpoint(t0 + 2 * hour);
  // Without the fix the checkpoint deletes the run now; with it, it waits for the lookup.
  for (let turn = 0; turn < 5_000 && !runsDeleted; turn++) await new Promise<void>((resolve) => setImmediate(resolve));
  disk.open();
  sim.setFault(undefined);
  const [view] = await Promise.all([lookup, checkpoint]);
  assert.equal(view?.state, 'pending', 'the lookup read its run before the run was deleted');
  await engine.close();
});

test('regression: while a checkpoint evicts in slices, its timers are counted once (memory or disk, not both)', async () => {
  const fs = new SimFileSystem({ seed: 31 });
  const clock = manualClock();
  const engine = await openEngine(fs, clock, { walLimits: { segmentBytes: 1024 * 1024 } });
  const timers = 40_000; // more than two eviction slices
  for (let from = 0; from < timers; from += 10_000) await engine.admit(batchFromSpecs(spread(10_000, t0 + 5 * hour + from, 1)));
  const seen = new Set<number>();
  let done = false;
  const checkpoint = engine.checkpoint(t0 + 2 * hour).finally(() => (done = true));
  while (!done) {
    seen.add(engine.stats().pending);
    seen.add(engine.stats().counts.pending);
    seen.add(engine.stats().resident + engine.stats().spill.spilled);
    await new Promise<void>((resolve) => setImmediate(resolve));
  }
  assert.equal((await checkpoint).spilledRows, timers);
  assert.deepEqual([...seen], [timers], 'pending and resident + spilled stay the number of timers throughout');
  await engine.close();
});

test('a checkpoint written over many slices restores every timer field for field: targets, queues, keys, headers and payloads', async () => {
  const fs = new SimFileSystem({ seed: 37 });
  const clock = manualClock();
  let engine = await openEngine(fs, clock, { walLimits: { segmentBytes: 1024 * 1024 } });
  // More than two checkpoint slices (16,384 rows) on each side of the watermark, so both of the
  // run builders are reused; a target first seen in a later slice, headers on some rows only.
  const perSide = 36_000;
  const watermarkMs = t0 + 10 * hour;
  const spec = (i: number): TimerSpec => ({
    fireAtMs: i < perSide ? t0 + hour + i * 100 : watermarkMs + (i - perSide) * 100,
    target: `https://t${Math.floor(i / 5000)}.example/hook`,
    queue: `q${i % 3}`,
    payload: `timer ${i} `.repeat(1 + (i % 4)),
    key: `key-${i}`,
    ...(i % 3 === 0 ? { headers: { 'x-row': String(i) } } : {}),
  });
  const ids: string[] = [];
  for (let from = 0; from < 2 * perSide; from += 9_000) {
    ids.push(...idsOf(await engine.admit(batchFromSpecs(Array.from({ length: 9_000 }, (_, j) => spec(from + j))))));
  }
  const report = await engine.checkpoint(watermarkMs);
  assert.deepEqual([report.residentRows, report.spilledRows], [perSide, perSide]);
  // The spilled side is one bucket (an hour of due times) cut into batches at the slices: a
  // lookup and a key find their timer in any of them.
  for (let i = perSide; i < 2 * perSide; i += 997) {
    const view = await engine.lookup(ids[i] as string);
    assert.deepEqual([view?.state, view?.fireAtMs, view?.target, view?.key], ['pending', spec(i).fireAtMs, spec(i).target, spec(i).key], `spilled timer ${i} found on disk`);
  }
  const again = await engine.admit(batchFromSpecs([spec(2 * perSide - 1), spec(perSide + 16_384)]));
  assert.deepEqual(idsOf(again), [ids[2 * perSide - 1], ids[perSide + 16_384]], 'keys held on disk answer with the original ids');
  await engine.close();

  engine = await openEngine(fs, clock, { walLimits: { segmentBytes: 1024 * 1024 } });
  assert.equal(engine.stats().resident, perSide, 'the resident run is back in memory');
  assert.equal(await engine.promote(watermarkMs + 4 * hour), perSide, 'every spilled timer comes back from the spilled run');
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i] as string;
    const expected = spec(i);
    const view = engine.get(id);
    assert.ok(view !== undefined, `timer ${i} is in memory`);
    assert.deepEqual([view.fireAtMs, view.target, view.queue, view.key], [expected.fireAtMs, expected.target, expected.queue, expected.key], `timer ${i}'s fields`);
    const { seq, row } = decodeTimerId(id) as { seq: number; row: number };
    const delivery = engine.deliveryOf(seq, row);
    assert.ok(delivery !== undefined, `timer ${i} can be delivered`);
    const { bytes, payloadLength, headersLength } = delivery;
    const headers = bytes.subarray(payloadLength, payloadLength + headersLength);
    assert.equal(Buffer.from(bytes.subarray(0, payloadLength)).toString(), expected.payload, `timer ${i}'s payload`);
    assert.equal(headers.length === 0 ? undefined : JSON.parse(Buffer.from(headers).toString())['x-row'], expected.headers?.['x-row'], `timer ${i}'s headers`);
    assert.equal(Buffer.from(bytes.subarray(payloadLength + headersLength)).toString(), expected.key ?? '', `timer ${i}'s key`);
  }
  await engine.close();
});

test('regression: slots released while a checkpoint is written are not reused until it is done; after a restart every timer is as the log has it', async () => {
  const fs = new SimFileSystem({ seed: 41 });
  const clock = manualClock();
  const options = { retention: { finishedMs: 1 }, walLimits: { segmentBytes: 1024 * 1024 } };
  let engine = await openEngine(fs, clock, options);
  // Enough resident timers that the checkpoint writes its run over many turns.
  const nearSpec = (i: number): TimerSpec => ({ fireAtMs: t0 + hour + i, target, payload: `near ${i}`, key: `near-${i}` });
  const near: string[] = [];
  for (let from = 0; from < 40_000; from += 10_000) near.push(...idsOf(await engine.admit(batchFromSpecs(Array.from({ length: 10_000 }, (_, j) => nearSpec(from + j))))));
  const far = idsOf(await engine.admit(batchFromSpecs(spread(1000, t0 + 5 * hour, 1000))));
  const newSpec = (i: number): TimerSpec => ({ fireAtMs: t0 + 2 * hour + i, target: 'https://other.example/new', payload: `new ${i}`, key: `new-${i}` });
  let checkpointDone = false;
  let during: Promise<string[]> | undefined;
  fs.setFault(() => {
    // While the run is written: 100 near timers cancelled and released (their retention is
    // 1 ms), then 100 new timers admitted, which would take those slots if they were free.
    during ??= (async () => {
      await Promise.all(near.slice(0, 100).map(async (id) => assert.equal(await engine.cancel(id), 'cancelled')));
      clock.set(clock.now() + 10);
      engine.takeDue(clock.now(), 100);
      const added = idsOf(await engine.admit(batchFromSpecs(Array.from({ length: 100 }, (_, i) => newSpec(i)))));
      assert.ok(!checkpointDone, 'the releases and the admit happened while the checkpoint was being written');
      return added;
    })();
    return undefined;
  });
  await engine.checkpoint(t0 + 3 * hour);
  checkpointDone = true;
  fs.setFault(undefined);
  const added = await (during as Promise<string[]>);
  await engine.close();

  engine = await openEngine(fs, clock, options);
  engine.takeDue(clock.now(), 100);
  for (let i = 0; i < near.length; i++) {
    const view = engine.get(near[i] as string);
    if (i < 100) {
      assert.ok(view === undefined || view.state === 'cancelled', `near timer ${i} stays cancelled`);
      continue;
    }
    assert.deepEqual([view?.state, view?.fireAtMs, view?.key], ['pending', nearSpec(i).fireAtMs, nearSpec(i).key], `near timer ${i}`);
    const { seq, row } = decodeTimerId(near[i] as string) as { seq: number; row: number };
    const delivery = engine.deliveryOf(seq, row);
    assert.equal(Buffer.from(delivery?.bytes.subarray(0, delivery.payloadLength) ?? []).toString(), `near ${i}`);
  }
  for (let i = 0; i < added.length; i++) {
    const view = engine.get(added[i] as string);
    assert.deepEqual([view?.state, view?.target, view?.key], ['pending', newSpec(i).target, newSpec(i).key], `new timer ${i}`);
  }
  assert.equal(engine.stats().pending, near.length - 100 + far.length + added.length);
  await engine.close();
});

test('a checkpoint that spills most timers shrinks the store; those that stay keep their ids, keys, order, reasons and deliveries', async () => {
  const fs = new SimFileSystem({ seed: 31 });
  const clock = manualClock();
  let engine = await openEngine(fs, clock, { walLimits: { segmentBytes: 1024 * 1024 } });
  // 3,000 near timers (every tenth with a key) between 20,000 far ones: 32,768 slots, and
  // the near ones in slots 10,000–12,999, so that the shrink moves them.
  const far = idsOf(await engine.admit(batchFromSpecs(spread(10_000, t0 + 10 * hour, 1000))));
  const near = idsOf(await engine.admit(batchFromSpecs(spread(3000, t0 + 1000, 10, (i) => (i % 10 === 0 ? { key: `near-${i}` } : {})))));
  far.push(...idsOf(await engine.admit(batchFromSpecs(spread(10_000, t0 + 20 * hour, 1000)))));
  assert.equal(engine.stats().residentCapacity, 32_768);
  // Five handed out and still being delivered across the checkpoint; one dead, with its reason.
  clock.set(t0 + 1000 + 50);
  const inFlight = engine.takeDue(clock.now(), 5);
  assert.equal(inFlight.count, 5);
  const dying = engine.takeDue(clock.now(), 1);
  const dead = outcomesFor(dying, outcomeKind.dead, 0, 410);
  dead.reasons[0] = deadReason.gone;
  await engine.settle(dead);

  const report = await engine.checkpoint(t0 + 3 * hour);
  assert.equal(report.spilledRows, 20_000);
  assert.equal(report.residentShrunkTo, 8192, 'the columns shrink to the smallest growth step holding twice the 3,000 that stayed');
  assert.equal(engine.stats().residentCapacity, 8192);
  assert.equal(engine.stats().resident, 3000);

  // Deliveries under way when the timers moved settle by id as before.
  await engine.settle(outcomesFor(inFlight, outcomeKind.delivered));
  for (let i = 0; i < 5; i++) assert.equal(engine.get(near[i] as string)?.state, 'delivered');
  assert.deepEqual(
    engine.listDead(10).map((timer) => [timer.id, timer.reason]),
    [[near[5], 'gone']],
  );
  // Keys still find their timers: a second add of one is a duplicate of the first.
  const again = await engine.admit(batchFromSpecs([{ fireAtMs: t0 + 5000, target, key: 'near-100' }]));
  assert.ok(again.isDuplicate(0));
  assert.equal(again.idOf(0), near[100]);
  assert.equal(await engine.cancel(near[7] as string), 'cancelled');
  assert.equal((await engine.lookup(far[19_999] as string))?.state, 'pending');

  // The rest fire once each, earliest first, with their own payloads.
  clock.set(t0 + hour);
  const rest = engine.takeDue(clock.now(), 10_000);
  assert.equal(rest.count, 3000 - 5 - 1 - 1);
  const fired = Array.from({ length: rest.count }, (_, i) => Number(rest.fireAtMs[i]));
  assert.deepEqual(fired, [...fired].sort((a, b) => a - b), 'in fire-time order');
  const firstRest = decodeTimerId(near[6] as string);
  assert.equal(rest.seqs[0], firstRest?.seq);
  assert.equal(rest.rows[0], 6);
  assert.equal(new TextDecoder().decode(engine.payloadOf(near[2999] as string)), 'timer 2999');
  // Grows again as timers come.
  await engine.admit(batchFromSpecs(spread(10_000, t0 + 2 * hour, 1)));
  assert.equal(engine.stats().resident, 13_000);
  await engine.close();

  engine = await openEngine(fs, clock, { walLimits: { segmentBytes: 1024 * 1024 } });
  assert.equal(engine.get(near[7] as string)?.state, 'cancelled');
  assert.equal(engine.get(near[0] as string)?.state, 'delivered');
  assert.equal(engine.stats().spill.spilled, 20_000);
  await engine.close();
});

test('large columns do not shrink while a delivery falls due; the next checkpoint with none due shrinks them', async () => {
  const fs = new SimFileSystem({ seed: 32 });
  const clock = manualClock();
  const shrinkLimits = { residentShrinkBusySlots: 4096, residentShrinkDueClearMs: 1000 };
  const engine = await openEngine(fs, clock, { walLimits: { segmentBytes: 1024 * 1024 }, shrinkLimits });
  await engine.admit(batchFromSpecs(spread(10_000, t0 + 10 * hour, 1000)));
  await engine.admit(batchFromSpecs(spread(100, t0 + 500, 1000)));
  assert.equal(engine.stats().residentCapacity, 16_384);
  const busy = await engine.checkpoint(t0 + 3 * hour);
  assert.equal(busy.spilledRows, 10_000);
  assert.equal(busy.residentShrunkTo, undefined, 'a timer falls due within 1 s: no shrink of 16,384 slots');
  assert.equal(engine.stats().residentCapacity, 16_384);
  clock.set(t0 - 2000);
  const quiet = await engine.checkpoint();
  assert.equal(quiet.residentShrunkTo, 1024, 'none due within 1 s: 100 timers in 1,024 slots');
  assert.equal(engine.stats().residentCapacity, 1024);
  await engine.close();
});
