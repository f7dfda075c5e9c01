// A timer's created_at (engine/add-times.ts): the accept time of its ADD record, for resident
// and spilled timers, the same after a restart that replays the log and after a checkpoint
// truncated it (the manifest keeps it); entries of ADDs no timer holds are dropped at a
// checkpoint; a manifest without the field gives null. The table keeps resident timers' ADDs
// only: a spilled timer's created_at is in its run row, read from there, and back in the table
// when the timer comes back into memory (promotion, cancel).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { batchFromSpecs } from '../../engine/batch/timer-batch.ts';
import { type Clock, Engine } from '../../engine/engine.ts';
import { decodeManifest, encodeManifest, readManifest, writeManifest } from '../../engine/spill/manifest.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';

const dataDir = '/data';
const spillDir = '/data/spill';
const hour = 3600_000;
const t0 = 1_796_220_000_000 - (1_796_220_000_000 % hour);
const target = 'https://a.example/hook';

function manualClock(): Clock & { set(ms: number): void } {
  let now = t0;
  return { now: () => now, set: (ms) => (now = ms) };
}

const open = (fs: SimFileSystem, clock: Clock): Promise<Engine> => Engine.open({ dataDir, fs, clock, walLimits: { segmentBytes: 4096 } });

async function createdAt(engine: Engine, id: string): Promise<number | null | undefined> {
  return (await engine.lookup(id))?.createdAtMs;
}

test('created_at is the add\'s accept time, resident and spilled, after a restart and after a checkpoint and a restart', async () => {
  const fs = new SimFileSystem({ seed: 5 });
  const clock = manualClock();
  let engine = await open(fs, clock);
  const first = await engine.admit(batchFromSpecs([{ fireAtMs: t0 + 60_000, target }, { fireAtMs: t0 + 10 * hour, target }]));
  clock.set(t0 + 5000);
  const second = await engine.admit(batchFromSpecs([{ fireAtMs: t0 + 120_000, target, key: 'k' }]));
  const expected = new Map([
    [first.idOf(0), t0],
    [first.idOf(1), t0],
    [second.idOf(0), t0 + 5000],
  ]);
  const check = async (what: string): Promise<void> => {
    for (const [id, ms] of expected) assert.equal(await createdAt(engine, id), ms, `${what}: ${id}`);
  };
  await check('live');
  await engine.close();
  engine = await open(fs, clock);
  await check('after a restart (replayed)');

  await engine.checkpoint(t0 + 3 * hour);
  assert.equal(engine.stats().spill.spilled, 1, 'the far timer is on disk');
  await check('after the checkpoint (one spilled)');
  clock.set(t0 + 9000);
  const third = await engine.admit(batchFromSpecs([{ fireAtMs: t0 + 180_000, target }]));
  expected.set(third.idOf(0), t0 + 9000);
  await engine.close();
  engine = await open(fs, clock);
  await check('after the checkpoint and a restart (manifest and log)');
  assert.equal(engine.stats().addTimes.entries, 3);
  await engine.close();
});

test('an entry goes at the checkpoint after its last timer is released; a manifest from before the field gives null', async () => {
  const fs = new SimFileSystem({ seed: 6 });
  const clock = manualClock();
  let engine = await open(fs, clock);
  const gone = await engine.admit(batchFromSpecs([{ fireAtMs: t0 + 60_000, target }]));
  const kept = await engine.admit(batchFromSpecs([{ fireAtMs: t0 + 60_000, target }]));
  assert.equal(await engine.cancel(gone.idOf(0)), 'cancelled');
  // Past the cancelled timer's retention: the next admit releases it.
  clock.set(t0 + 2 * 24 * hour);
  await engine.admit(batchFromSpecs([{ fireAtMs: t0 + 3 * 24 * hour, target }]));
  assert.equal(engine.get(gone.idOf(0)), undefined, 'released');
  assert.equal(engine.stats().addTimes.entries, 3);
  await engine.checkpoint();
  assert.equal(engine.stats().addTimes.entries, 2, 'the released timer\'s ADD has no entry left');
  assert.equal(await createdAt(engine, kept.idOf(0)), t0);
  await engine.close();

  // The manifest as an earlier release wrote it: no addTimes.
  const manifest = await readManifest(fs, spillDir);
  assert.ok(manifest?.addTimes !== undefined && manifest.addTimes.seqs.length === 2, 'the checkpoint kept both entries');
  const { addTimes: _dropped, ...before } = manifest;
  await writeManifest(fs, spillDir, decodeManifest(encodeManifest(before)));
  engine = await open(fs, clock);
  assert.equal(await createdAt(engine, kept.idOf(0)), null, 'unknown: null');
  await engine.close();
});

test('a checkpoint keeps the entries of resident timers only, even while timers are spilled; a spilled timer\'s created_at comes from its run, after a restart and after its promotion, cancel or PATCH', async () => {
  const fs = new SimFileSystem({ seed: 7 });
  const clock = manualClock();
  let engine = await open(fs, clock);
  const expected = new Map<string, number>();
  const admit = async (fireAtMs: number, at: number): Promise<string> => {
    clock.set(at);
    const id = (await engine.admit(batchFromSpecs([{ fireAtMs, target }]))).idOf(0);
    expected.set(id, at);
    return id;
  };
  await admit(t0 + 60_000, t0);
  await admit(t0 + 120_000, t0 + 1000);
  const far = [await admit(t0 + 10 * hour, t0 + 2000), await admit(t0 + 10 * hour + 1, t0 + 3000), await admit(t0 + 20 * hour, t0 + 4000), await admit(t0 + 30 * hour, t0 + 5000)];
  const check = async (what: string): Promise<void> => {
    for (const [id, ms] of expected) assert.equal(await createdAt(engine, id), ms, `${what}: ${id}`);
  };
  assert.equal(engine.stats().addTimes.entries, 6);

  await engine.checkpoint(t0 + 3 * hour);
  assert.equal(engine.stats().spill.spilled, 4);
  assert.equal(engine.stats().addTimes.entries, 2, 'only the two resident timers\' ADDs are kept');
  assert.equal((await readManifest(fs, spillDir))?.addTimes?.seqs.length, 2, 'and only they are in the manifest');
  await check('spilled, read from the run');
  await engine.checkpoint();
  assert.equal(engine.stats().addTimes.entries, 2, 'a later checkpoint keeps none for the spilled timers either');

  await engine.close();
  engine = await open(fs, clock);
  assert.equal(engine.stats().addTimes.entries, 2);
  await check('after a restart');

  await engine.promote(t0 + 11 * hour);
  assert.equal(engine.stats().spill.spilled, 2);
  assert.equal(engine.stats().addTimes.entries, 4, 'the promoted timers\' entries are back');
  await check('after the promotion');
  assert.equal(await engine.cancel(far[2] as string), 'cancelled');
  assert.equal(engine.stats().addTimes.entries, 5, 'the cancelled spilled timer\'s entry is back');
  await check('after a cancel of the spilled timer');
  assert.equal((await engine.reschedule(far[3] as string, { payload: 'moved' })).outcome, 'rescheduled');
  assert.equal(engine.stats().addTimes.entries, 6, 'the PATCHed spilled timer\'s entry is back');
  await check('after a PATCH of the spilled timer');
  await engine.close();
  engine = await open(fs, clock);
  await check('after a restart replaying the promotion, the cancel and the PATCH');

  await engine.checkpoint();
  assert.equal(engine.stats().addTimes.entries, 6, 'every timer is resident: every entry is kept');
  await engine.close();
  engine = await open(fs, clock);
  await check('after a checkpoint and a restart');
  await engine.close();
});
