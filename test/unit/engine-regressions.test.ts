// Regressions, each named after the bug a review found (and that these tests caught before the fix).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { batchFromSpecs, type TimerSpec } from '../../engine/batch/timer-batch.ts';
import { type Clock, Engine } from '../../engine/engine.ts';
import { outcomeKind } from '../../engine/records.ts';
import { Scheduler } from '../../engine/scheduler.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';
import { outcomesFor } from '../helpers/outcomes.ts';

const dataDir = '/data';
const target = 'https://a.example/';

function movingClock(start = 1_796_220_000_000): Clock & { advance(ms: number): void } {
  let now = start;
  return { now: () => now, advance: (ms) => void (now += ms) };
}

test('replay-capacity: a log that added more timers over its life than the store holds still reopens', async () => {
  const clock = movingClock();
  const options = { dataDir, fs: new SimFileSystem({ seed: 61 }), clock, store: { capacityMax: 4, capacityInitial: 4 }, retention: { finishedMs: 10, deadMs: 10 } };
  let engine = await Engine.open(options);
  for (let round = 0; round < 3; round++) {
    await engine.admit(batchFromSpecs([0, 1, 2, 3].map(() => ({ fireAtMs: clock.now(), target }))));
    await engine.settle(outcomesFor(engine.takeDue(clock.now(), 10), outcomeKind.delivered));
    clock.advance(100);
    engine.takeDue(clock.now(), 10); // the sweep releases the four finished timers
  }
  assert.equal(engine.resident, 0);
  await engine.close();
  engine = await Engine.open(options); // before the fix: "capacity was reserved before the append"
  assert.equal(engine.pending, 0);
  engine.takeDue(clock.now(), 10);
  assert.equal(engine.resident, 0, 'what is left over from the last round expires as it did live');
  await engine.close();
});

test('key-decided-after-wait: a key freed by the sweep while an admit waited is decided the same on replay', async () => {
  const clock = movingClock();
  const options = { dataDir, fs: new SimFileSystem({ seed: 62 }), clock, retention: { finishedMs: 1000, deadMs: 1000 } };
  let engine = await Engine.open(options);
  const spec = (key: string): TimerSpec => ({ fireAtMs: clock.now() + 1e7, target, key });
  const holder = await engine.admit(batchFromSpecs([spec('K')]));
  await engine.cancel(holder.idOf(0));
  clock.advance(999);
  const first = engine.admit(batchFromSpecs([spec('A')]));
  const waiting = engine.admit(batchFromSpecs([spec('A'), spec('K')])); // waits for the admit holding A
  clock.advance(1);
  engine.takeDue(clock.now(), 10); // K's holder expires and is released meanwhile
  await first;
  const decided = await waiting;
  const live = [decided.isDuplicate(1), engine.get(decided.idOf(1))?.state, engine.pending];
  await engine.close();
  engine = await Engine.open(options);
  assert.deepEqual([decided.isDuplicate(1), engine.get(decided.idOf(1))?.state, engine.pending], live);
  await engine.close();
});

test('key-holder-cancel-in-flight: an admit whose key holder is being cancelled decides after the cancel, live and on replay', async () => {
  const clock = movingClock();
  const options = { dataDir, fs: new SimFileSystem({ seed: 63 }), clock };
  let engine = await Engine.open(options);
  const holder = await engine.admit(batchFromSpecs([{ fireAtMs: clock.now() + 1e10, target, key: 'K' }]));
  const cancelling = engine.cancel(holder.idOf(0));
  clock.advance(25 * 3600_000); // the clock steps past the cancel's retention before it is synced
  const admitted = await engine.admit(batchFromSpecs([{ fireAtMs: clock.now() + 1e6, target, key: 'K' }]));
  await cancelling;
  const live = [admitted.isDuplicate(0), engine.pending];
  await engine.close();
  engine = await Engine.open(options);
  assert.deepEqual([admitted.isDuplicate(0), engine.pending], live);
  assert.equal(engine.get(admitted.idOf(0))?.state, 'pending');
  await engine.close();
});

test('settle-rejected-without-poison: timers whose outcome was not logged go back to waiting', async () => {
  const clock = movingClock();
  const engine = await Engine.open({ dataDir, fs: new SimFileSystem({ seed: 64 }), clock, walLimits: { recordBodyBytesMax: 400, queueBytesMax: 400 } });
  const ten = (): TimerSpec[] => Array.from({ length: 10 }, () => ({ fireAtMs: clock.now(), target }));
  const admitted = await engine.admit(batchFromSpecs(ten()));
  await engine.admit(batchFromSpecs(ten()));
  const slice = engine.takeDue(clock.now(), 100);
  await assert.rejects(engine.settle(outcomesFor(slice, outcomeKind.retry, clock.now() + 1000)), { code: 'WAL_RECORD_TOO_LARGE' });
  assert.equal(engine.log.poisoned, undefined);
  assert.equal(engine.get(admitted.idOf(0))?.state, 'pending');
  assert.equal(engine.takeDue(clock.now(), 100).count, 20, 'they are handed out again');
  await engine.close();
});

test('scheduler-wake-in-deliver: a dispatcher that wakes the scheduler from deliver() does not stack timer loops', async () => {
  const clock: Clock = { now: () => Date.now() };
  const engine = await Engine.open({ dataDir, fs: new SimFileSystem({ seed: 65, maxExtraHops: 0 }), clock });
  await engine.admit(batchFromSpecs([{ fireAtMs: Date.now() + 3_600_000, target }])); // keeps the loop armed
  let ticks = 0;
  const scheduler: Scheduler = new Scheduler(engine, { room: () => 1000, deliver: () => scheduler.wake() }, clock, { sleepMsMax: 100 });
  const tick = scheduler.tick.bind(scheduler);
  scheduler.tick = () => {
    ticks++;
    return tick();
  };
  scheduler.start();
  const window = async (): Promise<number> => {
    ticks = 0;
    await new Promise((resolve) => setTimeout(resolve, 350));
    return ticks;
  };
  const before = await window();
  for (let i = 0; i < 5; i++) await engine.admit(batchFromSpecs([{ fireAtMs: Date.now(), target }]));
  await new Promise((resolve) => setTimeout(resolve, 50));
  const after = await window();
  scheduler.stop();
  await engine.close();
  assert.ok(after <= before + 2, `ticks per window grew from ${before} to ${after}: loops are stacking`);
});

test('swept-timer-returns-after-restart: a finished timer released before a restart stays gone after it', async () => {
  const clock = movingClock();
  const options = { dataDir, fs: new SimFileSystem({ seed: 66 }), clock, retention: { finishedMs: 200, deadMs: 200 } };
  let engine = await Engine.open(options);
  const admitted = await engine.admit(batchFromSpecs([{ fireAtMs: clock.now(), target }]));
  await engine.cancel(admitted.idOf(0));
  clock.advance(200);
  engine.takeDue(clock.now(), 1);
  assert.equal(engine.get(admitted.idOf(0)), undefined);
  await engine.close();
  engine = await Engine.open(options);
  assert.equal(engine.get(admitted.idOf(0)), undefined, 'before the fix it came back as cancelled until the next sweep');
  assert.equal(engine.nextDueMs(), undefined);
  await engine.close();
});
