// The memory-aware loader on the real file system with an injected clock, over a simulated month:
// a budget of a few MiB holds the near future while the far future waits on disk, a restart
// halfway brings back the same state, and as the clock advances every timer fires once, on time,
// never early. A million timers under 4 MiB runs under `npm run soak`; the default is a quarter
// of both, which keeps the file within its time budget.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { batchFromSpecs, type TimerSpec } from '../../engine/batch/timer-batch.ts';
import { type Clock, Engine } from '../../engine/engine.ts';
import { MemoryLoader } from '../../engine/spill/memory-loader.ts';
import { outcomeKind } from '../../engine/records.ts';
import { outcomesFor } from '../helpers/outcomes.ts';
import { testScratch } from '../helpers/scratch.ts';
import { soak } from '../helpers/soak.ts';

const scratch = testScratch('fermata-memory-budget');
const hour = 3600_000;
const day = 24 * hour;
const t0 = 1_796_220_000_000 - (1_796_220_000_000 % hour);
const timers = soak ? 1_000_000 : 250_000;
const budgetMiB = soak ? 4 : 1;

test(`a budget of ${budgetMiB} MiB: ${timers.toLocaleString('en')} timers over 30 days stay under it, and each fires once, on time`, { timeout: 600_000 }, async () => {
  const budgetBytes = budgetMiB * 1024 * 1024;
  let now = t0;
  const clock: Clock = { now: () => now };
  const dataDir = scratch.tempDir('budget');
  // Delivered timers leave memory a minute after they finish, as their retention ends.
  let engine = await Engine.open({ dataDir, clock, retention: { finishedMs: 60_000 } });
  const budget = { bytes: budgetBytes, source: 'configured', limitBytes: budgetBytes } as const;
  let loader = new MemoryLoader(engine, { budget, clock });
  const batchRows = 10_000;
  const spanMs = 30 * day;
  const fireAtOf = (i: number): number => t0 + hour + Math.floor((i * 7919) % timers) * (spanMs / timers);
  const batchSeqs: number[] = [];
  let residentMax = 0;
  for (let from = 0; from < timers; from += batchRows) {
    const specs: TimerSpec[] = [];
    for (let i = from; i < Math.min(timers, from + batchRows); i++) specs.push({ fireAtMs: fireAtOf(i), target: 'https://a.example/hook', payload: 'sixteen bytes...' });
    batchSeqs.push((await engine.admit(batchFromSpecs(specs))).seq);
    await loader.step();
    residentMax = Math.max(residentMax, engine.residentBytes());
  }
  assert.ok(residentMax <= budgetBytes * 1.5, `while adding, resident bytes peaked at ${residentMax} (budget ${budgetBytes}): spills must keep up`);
  assert.equal(engine.stats().pending, timers);
  assert.ok(engine.stats().spill.spilled > timers * 0.9, `most timers are on disk: ${engine.stats().spill.spilled}`);
  const spillBytes = engine.stats().spill.metadataBytes;
  assert.ok(spillBytes / engine.stats().spill.spilled <= 8, `spilled timers cost ${spillBytes / engine.stats().spill.spilled} B of memory each`);

  // Halfway, a restart: the checkpoint and the log's tail bring back the same state.
  const fired = new Uint8Array(timers);
  const seqBase = new Map(batchSeqs.map((seq, batch) => [seq, batch * batchRows]));
  let firedCount = 0;
  let latenessMaxMs = 0;
  const stepMs = 10 * 60_000;
  const sliceMax = 50_000;
  let restarted = false;
  for (now = t0; now <= t0 + hour + spanMs + stepMs; now += stepMs) {
    if (!restarted && now >= t0 + spanMs / 2) {
      await engine.close();
      engine = await Engine.open({ dataDir, clock, retention: { finishedMs: 60_000 } });
      loader = new MemoryLoader(engine, { budget, clock });
      restarted = true;
    }
    await loader.step();
    for (;;) {
      const slice = engine.takeDue(now, sliceMax);
      if (slice.count === 0) break;
      for (let i = 0; i < slice.count; i++) {
        const index = (seqBase.get(slice.seqs[i] as number) as number) + (slice.rows[i] as number);
        assert.equal(fired[index], 0, `timer ${index} fired twice`);
        fired[index] = 1;
        const fireAtMs = slice.fireAtMs[i] as number;
        assert.ok(fireAtMs <= now, `timer ${index} fired early`);
        latenessMaxMs = Math.max(latenessMaxMs, now - fireAtMs);
      }
      firedCount += slice.count;
      await engine.settle(outcomesFor(slice, outcomeKind.delivered));
      // A slice short of its max took all that was due: asking again (takeDue allocates its
      // columns at the max every call) would only answer nothing.
      if (slice.count < sliceMax) break;
    }
    const resident = engine.residentBytes();
    assert.ok(resident <= budgetBytes, `at +${(now - t0) / hour} h resident bytes ${resident} exceed the budget ${budgetBytes}`);
  }
  assert.equal(firedCount, timers, 'every timer fired');
  assert.ok(latenessMaxMs < stepMs, `a timer fired ${latenessMaxMs} ms late: promotion must come before the due time`);
  await engine.close();
});
