// The memory-aware loader on the real file system with an injected clock: what it spills, when,
// and where the budget comes from. The month-long run of a million timers under a budget of a few
// MiB is test/sim/memory-budget.test.ts.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { batchFromSpecs, type TimerSpec } from '../../engine/batch/timer-batch.ts';
import { type Clock, Engine } from '../../engine/engine.ts';
import { memoryLimits, storeLimits } from '../../engine/limits.ts';
import { cgroupMemoryLimit, memoryBudget, residentSlotsFor } from '../../engine/memory-budget.ts';
import { columnsBytes, residentCapacityLimit } from '../../engine/store/resident-store.ts';
import { MemoryLoader } from '../../engine/spill/memory-loader.ts';
import { outcomeKind } from '../../engine/records.ts';
import { outcomesFor } from '../helpers/outcomes.ts';
import { testScratch } from '../helpers/scratch.ts';

const scratch = testScratch('fermata-loader');
const hour = 3600_000;
const day = 24 * hour;
const t0 = 1_796_220_000_000 - (1_796_220_000_000 % hour);

test('the budget is the smallest of the configured size, the cgroup limit and the machine, times the resident share', () => {
  const dir = scratch.tempDir('cgroup');
  const v2 = join(dir, 'memory.max');
  writeFileSync(v2, 'max\n');
  assert.equal(cgroupMemoryLimit([v2]), undefined, '"max" is no limit');
  writeFileSync(v2, '2147483648\n');
  assert.equal(cgroupMemoryLimit([join(dir, 'absent'), v2]), 2 ** 31);
  writeFileSync(v2, '9223372036854771712\n');
  assert.equal(cgroupMemoryLimit([v2]), undefined, "cgroup v1's huge number is no limit");
  const share = memoryLimits.residentShare;
  assert.deepEqual(memoryBudget(undefined, 2 ** 31, 2 ** 34), { bytes: 2 ** 31 * share, source: 'cgroup', limitBytes: 2 ** 31 });
  assert.deepEqual(memoryBudget(2 ** 30, 2 ** 31, 2 ** 34), { bytes: 2 ** 30 * share, source: 'configured', limitBytes: 2 ** 30 });
  assert.deepEqual(memoryBudget(2 ** 40, undefined, 2 ** 34), { bytes: 2 ** 34 * share, source: 'machine', limitBytes: 2 ** 34 });
});

test('the slot limit follows the budget: columns at the limit, during a growth, within a quarter of it; never below the fixed floor nor past a handle', () => {
  const gib = 2 ** 30;
  const budget = 12 * gib;
  const slots = residentSlotsFor(budget);
  assert.equal(slots, 2 * storeLimits.residentTimersMax, `a 12 GiB budget holds ${slots} slots`);
  assert.ok(Number.isInteger(Math.log2(slots)), 'a power of two: the columns double up to it');
  assert.ok(columnsBytes(slots) * 1.5 <= budget / 4, 'old and new columns at the limit fit a quarter of the budget');
  assert.ok(columnsBytes(slots * 2) * 1.5 > budget / 4, 'twice as many would not');
  assert.equal(residentSlotsFor(4 * gib), storeLimits.residentTimersMax, 'a small budget keeps the floor');
  assert.equal(residentSlotsFor(4096 * gib), residentCapacityLimit, 'capped at the slots a handle carries');
});

test('a log holding more timers than the slot limit of this life (a smaller budget) is replayed whole, and the limit rises to it', async () => {
  const dataDir = scratch.tempDir('smaller-limit');
  let engine = await Engine.open({ dataDir, store: { capacityMax: 8 } });
  const ids: string[] = [];
  const admitted = await engine.admit(batchFromSpecs(Array.from({ length: 6 }, (_, i) => ({ fireAtMs: t0 + day + i, target: 'https://example.com/hook', payload: `timer ${i}` }))));
  for (let row = 0; row < 6; row++) ids.push(admitted.idOf(row));
  await engine.close();
  engine = await Engine.open({ dataDir, store: { capacityMax: 4, capacityInitial: 4 } });
  try {
    assert.equal(engine.stats().resident, 6);
    for (const id of ids) assert.equal(engine.get(id)?.state, 'pending');
    assert.ok(engine.stats().residentMax >= 6, `the limit rose to ${engine.stats().residentMax}`);
  } finally {
    await engine.close();
  }
  // A log that fits the limit leaves it where it is, though the replay's sizing (from the log's
  // bytes, here mostly queue records) expects more timers than that.
  const fitting = scratch.tempDir('fitting-limit');
  engine = await Engine.open({ dataDir: fitting, store: { capacityMax: 8 } });
  for (let i = 0; i < 5; i++) await engine.admit(batchFromSpecs([{ fireAtMs: t0 + day + i, target: 'https://example.com/hook', payload: `one ${i}` }]));
  for (let i = 0; i < 40; i++) await engine.setQueue(`q${i}`, { max_attempts: 3 + i });
  await engine.close();
  engine = await Engine.open({ dataDir: fitting, store: { capacityMax: 7, capacityInitial: 1 } });
  try {
    assert.equal(engine.stats().resident, 5);
    assert.equal(engine.stats().residentMax, 7);
  } finally {
    await engine.close();
  }
});

test('over budget with nothing that could spill, the loader does not rewrite memory to disk every step', async () => {
  const clock: Clock = { now: () => t0 };
  const engine = await Engine.open({ dataDir: scratch.tempDir('near'), clock });
  const returns: boolean[] = [];
  const loader = new MemoryLoader(engine, { budget: { bytes: 64 * 1024, source: 'configured', limitBytes: 64 * 1024 }, clock, limits: { collectAfterSpilledRows: 2 }, returnMemory: (thorough) => void returns.push(thorough) });
  // All due within the promotion lead: they must stay in memory.
  await engine.admit(batchFromSpecs(Array.from({ length: 2000 }, (_, i) => ({ fireAtMs: t0 + 1000 + i, target: 'https://a.example/hook', payload: 'x'.repeat(100) }))));
  assert.ok(engine.residentBytes() > 64 * 1024);
  const step = await loader.step();
  assert.equal(step.checkpointed, undefined, 'no checkpoint: nothing past the lead to spill');
  assert.equal(engine.stats().spill.spilled, 0);
  // One far timer makes it worth it: that one spills.
  await engine.admit(batchFromSpecs([{ fireAtMs: t0 + 5 * day, target: 'https://a.example/hook', payload: 'far' }]));
  const spilled = await loader.step();
  assert.equal(spilled.checkpointed, true);
  assert.equal(engine.stats().spill.spilled, 1);
  assert.deepEqual(returns, [], 'one timer spilled: below collectAfterSpilledRows, no collection');
  // Two more reach it: a spill for the budget, so a plain return (deliveries may be going on).
  await engine.admit(batchFromSpecs([4, 6].map((days) => ({ fireAtMs: t0 + days * day, target: 'https://a.example/hook', payload: 'far' }))));
  assert.equal((await loader.step()).spilled, 2);
  assert.deepEqual(returns, [false], 'a budget spill of collectAfterSpilledRows timers: a regular collection');
  await engine.close();
});

test('a budget that shrinks while the service runs (a lowered cgroup limit) spills at the next step', async () => {
  const clock: Clock = { now: () => t0 };
  const engine = await Engine.open({ dataDir: scratch.tempDir('shrink'), clock });
  let limitBytes = 64 * 1024 * 1024;
  const loader = new MemoryLoader(engine, { budget: () => ({ bytes: limitBytes, source: 'cgroup', limitBytes }), clock });
  await engine.admit(batchFromSpecs(Array.from({ length: 2000 }, (_, i) => ({ fireAtMs: t0 + 2 * day + i, target: 'https://a.example/hook', payload: 'x'.repeat(100) }))));
  assert.equal((await loader.step()).checkpointed, undefined, 'well under the budget');
  limitBytes = 64 * 1024;
  assert.equal((await loader.step()).checkpointed, true);
  assert.equal(engine.stats().spill.spilled, 2000);
  assert.equal(engine.stats().spill.budgetBytes, 64 * 1024);
  await engine.close();
});

test('near the store\'s slot limit the loader spills the far future, whatever the byte budget, so adds go on being accepted', async () => {
  const clock: Clock = { now: () => t0 };
  const residentMax = 4000;
  const engine = await Engine.open({ dataDir: scratch.tempDir('slots'), clock, store: { capacityMax: residentMax } });
  const budget = { bytes: 1024 ** 3, source: 'configured', limitBytes: 1024 ** 3 } as const;
  const loader = new MemoryLoader(engine, { budget, clock });
  // 100 near timers (inside the promotion lead: they stay) and far ones spread over 30 days.
  const batch = (count: number, first: number): TimerSpec[] =>
    Array.from({ length: count }, (_, i) => ({ fireAtMs: first + i < 100 ? t0 + 1000 + i : t0 + 2 * hour + ((first + i) * 7919 % (30 * day)), target: 'https://a.example/hook', payload: 'x'.repeat(100) }));
  await engine.admit(batchFromSpecs(batch(2900, 0)));
  assert.equal((await loader.step()).checkpointed, undefined, `${engine.stats().resident} of ${residentMax} slots: under ${memoryLimits.demoteAboveSlotShare} of them`);
  await engine.admit(batchFromSpecs(batch(300, 2900)));
  const step = await loader.step();
  assert.equal(step.checkpointed, true, `3,200 of ${residentMax} slots: past ${memoryLimits.demoteAboveSlotShare} of them, spilled`);
  assert.ok(engine.stats().resident <= residentMax * memoryLimits.demoteToShare, `resident ${engine.stats().resident} after the spill`);
  assert.ok(engine.stats().resident >= 100, 'the near future stays in memory');
  assert.equal(engine.stats().resident + engine.stats().spill.spilled, 3200);
  // Without the spill these 2,000 would have been refused (CAPACITY_FULL): 5,200 > 4,000 slots.
  await engine.admit(batchFromSpecs(batch(2000, 3200)));
  assert.ok(engine.stats().resident <= residentMax);
  await engine.close();
});

test('the log is checkpointed once it outgrows both checkpointWalBytes and the resident timers a checkpoint rewrites', async () => {
  const clock: Clock = { now: () => t0 };
  const engine = await Engine.open({ dataDir: scratch.tempDir('wal-scaled'), clock });
  const budget = { bytes: 1024 ** 3, source: 'configured', limitBytes: 1024 ** 3 } as const;
  const checkpointWalBytes = 64 * 1024;
  await engine.admit(batchFromSpecs(Array.from({ length: 2000 }, (_, i) => ({ fireAtMs: t0 + 2 * hour + i, target: 'https://a.example/hook', payload: 'x'.repeat(100) }))));
  const logged = engine.log.bytesToReplay;
  const resident = engine.residentBytes();
  assert.ok(logged > checkpointWalBytes && logged < resident && logged > resident / 2, `log ${logged} B, resident ${resident} B`);
  const loader = new MemoryLoader(engine, { budget, clock, limits: { checkpointWalBytes } });
  assert.equal((await loader.step()).checkpointed, undefined, 'a checkpoint now would rewrite more than was logged');
  assert.equal(engine.log.bytesToReplay, logged);
  // Counting half a byte of log per resident byte, the log is the larger: it is checkpointed.
  const halved = new MemoryLoader(engine, { budget, clock, limits: { checkpointWalBytes, checkpointWalPerResidentByte: 0.5 } });
  assert.equal((await halved.step()).checkpointed, true);
  assert.ok(engine.log.bytesToReplay < checkpointWalBytes, 'the covered segments are gone');
  await engine.close();
});

test('with memory to spare, timers due past the far horizon go to disk once adds and deliveries go quiet, never during a burst of either nor with a delivery due soon; a large spill is followed by a collection', async () => {
  let now = t0;
  const clock: Clock = { now: () => now };
  const engine = await Engine.open({ dataDir: scratch.tempDir('far-horizon'), clock });
  const budget = { bytes: 1024 ** 3, source: 'configured', limitBytes: 1024 ** 3 } as const;
  const limits = { farSpillBytesMin: 64 * 1024, farSpillQuietRowsMax: 100, farSpillQuietSteps: 2, collectAfterSpilledRows: 1500 };
  const timers = (count: number, firstMs: number, stepMs: number): TimerSpec[] =>
    Array.from({ length: count }, (_, i) => ({ fireAtMs: firstMs + i * stepMs, target: 'https://a.example/hook', payload: 'x'.repeat(100) }));
  // Near: due within the far horizon (an hour, to the end of its bucket), but not within farSpillDueClearMs. Far: days out.
  const near = await engine.admit(batchFromSpecs(timers(1000, t0 + 10 * 60_000, 1)));
  // Due now: delivered later, 500 a step.
  await engine.admit(batchFromSpecs(timers(1500, t0 - 1000, 0)));
  let collections = 0;
  let thorough: boolean | undefined;
  const loader = new MemoryLoader(engine, {
    budget,
    clock,
    limits,
    returnMemory: (far) => {
      collections++;
      thorough = far;
    },
  });
  let far = 0;
  let lastFar = near;
  for (let burst = 0; burst < 4; burst++) {
    lastFar = await engine.admit(batchFromSpecs(timers(500, t0 + 2 * day + far * 1000, 1000)));
    far += 500;
    const step = await loader.step();
    assert.equal(step.checkpointed, undefined, `step ${burst}: 500 adds since the last step is not quiet`);
  }
  for (let round = 0; round < 3; round++) {
    const slice = engine.takeDue(t0, 500);
    assert.equal(slice.count, 500);
    await engine.settle(outcomesFor(slice, outcomeKind.delivered));
    assert.equal((await loader.step()).checkpointed, undefined, `step ${round}: 500 deliveries since the last step is not quiet`);
  }
  assert.equal(engine.stats().resident, 1000 + far + 1500, 'the delivered timers wait out their retention');
  // A delivery due within farSpillDueClearMs holds the spill back, however quiet it is.
  const soon = await engine.admit(batchFromSpecs(timers(1, t0 + 30_000, 0)));
  for (let i = 0; i < 3; i++) assert.equal((await loader.step()).checkpointed, undefined, `quiet step ${i}: a delivery is due in 30 s`);
  now = t0 + 31_000;
  const slice = engine.takeDue(now, 10);
  assert.deepEqual([slice.count, slice.seqs[0]], [1, soon.seq]);
  await engine.settle(outcomesFor(slice, outcomeKind.delivered));
  assert.equal(collections, 0);
  const spilled = await loader.step();
  assert.equal(collections, 1, 'a spill of 2,000 timers (at least collectAfterSpilledRows) is followed by a collection');
  assert.equal(thorough, true, 'a thorough one: nothing is due for a minute');
  assert.equal(spilled.farFuture, true, 'the second quiet step spills the far future');
  assert.equal(spilled.spilled, far);
  assert.equal(engine.stats().spill.spilled, far);
  assert.equal(engine.stats().resident, 1000 + 1501, 'the near future (and the finished timers) stay in memory');
  assert.equal(engine.stats().spill.watermarkMs, t0 + 2 * hour, 'the watermark is the end of the bucket holding now + an hour');
  assert.equal((await engine.lookup(lastFar.idOf(499)))?.state, 'pending', 'a spilled timer is found on disk');
  assert.equal(engine.get(near.idOf(0))?.state, 'pending');
  assert.equal((await loader.step()).checkpointed, undefined, 'nothing added since: nothing more to spill');
  // A few far timers more are not worth rewriting the thousand that stay.
  await engine.admit(batchFromSpecs(timers(10, t0 + 3 * day, 1000)));
  for (let i = 0; i < 3; i++) assert.equal((await loader.step()).checkpointed, undefined, `step ${i}: 10 far timers are below the minimum`);
  assert.equal(engine.stats().resident, 2511);
  assert.equal(collections, 1, 'no spill, no collection');
  await engine.close();
});

test('a far horizon of Infinity keeps the far future in memory while the budget allows', async () => {
  const clock: Clock = { now: () => t0 };
  const engine = await Engine.open({ dataDir: scratch.tempDir('far-horizon-off'), clock });
  const budget = { bytes: 1024 ** 3, source: 'configured', limitBytes: 1024 ** 3 } as const;
  await engine.admit(batchFromSpecs(Array.from({ length: 3000 }, (_, i) => ({ fireAtMs: t0 + 2 * day + i, target: 'https://a.example/hook', payload: 'x'.repeat(100) }))));
  const loader = new MemoryLoader(engine, { budget, clock, limits: { farHorizonMs: Infinity, farSpillBytesMin: 64 * 1024 } });
  for (let i = 0; i < 4; i++) assert.equal((await loader.step()).checkpointed, undefined);
  assert.equal(engine.stats().resident, 3000);
  assert.equal(engine.stats().spill.spilled, 0);
  await engine.close();
});

test('while quiet, the loader hands free memory back to the kernel every idleTrimIntervalMs, never during a burst, and not again right after a memory return', async () => {
  let now = t0;
  const clock: Clock = { now: () => now };
  const engine = await Engine.open({ dataDir: scratch.tempDir('idle-trim'), clock });
  const budget = { bytes: 1024 ** 3, source: 'configured', limitBytes: 1024 ** 3 } as const;
  const limits = { farSpillQuietRowsMax: 100, farSpillQuietSteps: 2, idleTrimIntervalMs: 10_000, farSpillBytesMin: 64 * 1024, collectAfterSpilledRows: 1000 };
  let trims = 0;
  let returns = 0;
  const loader = new MemoryLoader(engine, { budget, clock, trimClock: clock, limits, trimMemory: () => void trims++, returnMemory: () => void returns++ });
  const timers = (count: number, firstMs: number): TimerSpec[] => Array.from({ length: count }, (_, i) => ({ fireAtMs: firstMs + i, target: 'https://a.example/hook', payload: 'x'.repeat(100) }));
  const steps = async (count: number): Promise<number> => {
    let trimmed = 0;
    for (let i = 0; i < count; i++) {
      now += 1000;
      if ((await loader.step()).trimmed === true) trimmed++;
    }
    return trimmed;
  };
  // A burst: 500 adds a step is never quiet.
  for (let i = 0; i < 5; i++) {
    await engine.admit(batchFromSpecs(timers(500, t0 + 10 * 60_000 + i * 1000)));
    now += 1000;
    assert.equal((await loader.step()).trimmed, undefined, `busy step ${i}`);
  }
  assert.equal(trims, 0);
  // Quiet from here: the second quiet step trims, then one every 10 s (10 steps of 1 s).
  assert.equal(await steps(2), 1, 'the second quiet step trims');
  assert.equal(await steps(9), 0, 'not again within 10 s');
  assert.equal(await steps(1), 1, '10 s later, again');
  assert.equal(trims, 2);
  // A spill large enough for a memory return (collection and trim) counts as a trim.
  now += 10_000;
  await engine.admit(batchFromSpecs(timers(2000, t0 + 5 * day)));
  now += 1000;
  assert.equal((await loader.step()).trimmed, undefined, '2,000 adds: busy');
  assert.equal(await steps(2), 0, 'the second quiet step spills the far future instead');
  assert.equal(returns, 1, 'its memory returned');
  assert.equal(await steps(9), 0, 'no trim within 10 s of the return');
  assert.equal(await steps(1), 1, 'the next trim comes 10 s after the return');
  await engine.close();
});
