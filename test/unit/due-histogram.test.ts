// The due histogram (engine/due-histogram.ts) equals a brute-force count: under random sequences
// of adds, cancels, deliveries (delivered, retried, dead), redrives, reschedules, clock moves,
// checkpoints that spill the far future, promotions and restarts, every bucket holds exactly the
// pending and retrying timers (resident or spilled) whose next due time falls between its edges,
// as looking each timer up says; the queue's counts of waiting and in-flight timers agree. A
// checkpoint that evicts in several turns leaves the histogram the same at each turn (a timer
// spilled and not yet evicted is counted once). Plus the edges' rounding, and the slot counts alone.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { batchFromSpecs } from '../../engine/batch/timer-batch.ts';
import { type Clock, Engine } from '../../engine/engine.ts';
import { dueHistogramEdges } from '../../engine/due-histogram.ts';
import { emptyOutcomes, outcomeKind } from '../../engine/records.ts';
import { DueSlotCounts } from '../../engine/store/due-slot-counts.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';
import { propertyRuns } from '../helpers/property.ts';

const hour = 3_600_000;
const day = 24 * hour;
const t0 = 1_796_220_000_000 - (1_796_220_000_000 % hour) + 1234;

type Command =
  | { kind: 'admit'; offsets: number[] }
  | { kind: 'cancel'; pick: number }
  | { kind: 'advance'; ms: number }
  | { kind: 'take'; max: number }
  | { kind: 'settle'; choices: number[]; retryInMs: number }
  | { kind: 'redrive'; pick: number }
  | { kind: 'reschedule'; pick: number; offset: number }
  | { kind: 'checkpoint'; hours: number }
  | { kind: 'promote'; hours: number }
  | { kind: 'restart' };

/** When a timer is due relative to now: overdue, within a minute, an hour, a day, 40 days. */
const offset = fc.oneof(
  fc.integer({ min: -2 * hour, max: 120_000 }),
  fc.integer({ min: -60_000, max: 2 * hour }),
  fc.integer({ min: 0, max: 2 * day }),
  fc.integer({ min: 0, max: 40 * day }),
);

const command: fc.Arbitrary<Command> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('admit' as const), offsets: fc.array(offset, { minLength: 1, maxLength: 6 }) }) },
  fc.record({ kind: fc.constant('cancel' as const), pick: fc.nat() }),
  fc.record({ kind: fc.constant('advance' as const), ms: fc.oneof(fc.integer({ min: 0, max: 90_000 }), fc.integer({ min: 0, max: 3 * day })) }),
  fc.record({ kind: fc.constant('take' as const), max: fc.integer({ min: 1, max: 5 }) }),
  fc.record({ kind: fc.constant('settle' as const), choices: fc.array(fc.integer({ min: 0, max: 2 }), { maxLength: 5 }), retryInMs: offset }),
  fc.record({ kind: fc.constant('redrive' as const), pick: fc.nat() }),
  fc.record({ kind: fc.constant('reschedule' as const), pick: fc.nat(), offset }),
  fc.record({ kind: fc.constant('checkpoint' as const), hours: fc.integer({ min: 1, max: 24 * 35 }) }),
  fc.record({ kind: fc.constant('promote' as const), hours: fc.integer({ min: 0, max: 24 * 35 }) }),
  fc.constant({ kind: 'restart' as const }),
);

/** The bucket a due time falls in, by the edges the histogram answered with. */
const bucketOf = (edges: readonly number[], dueMs: number): number => edges.filter((edge) => edge <= dueMs).length;

test('the due histogram equals a count of every timer looked up, through adds, cancels, deliveries, spills and restarts', { timeout: 300_000 }, async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(command, { maxLength: 40, size: 'max' }), fc.integer({ min: 1, max: 2 ** 30 }), async (commands, seed) => {
      let now = t0;
      const clock: Clock = { now: () => now };
      const fs = new SimFileSystem({ seed, maxExtraHops: 0 });
      const options = { dataDir: '/data', fs, clock, retention: { finishedMs: hour, deadMs: 2 * hour } };
      let engine = await Engine.open(options);
      const ids: string[] = [];
      const pick = (n: number): string => ids[n % Math.max(1, ids.length)] ?? 'zzzzzzzzzzzzzzzzzzzzzzzz';
      /** Handed out and not yet settled: (seq, row, attempt). */
      let delivering: Array<{ seq: number; row: number; attempt: number }> = [];
      const hourAfter = (hours: number): number => (Math.floor(now / hour) + hours) * hour;
      try {
        for (const step of commands) {
          if (step.kind === 'admit') {
            const admitted = await engine.admit(batchFromSpecs(step.offsets.map((ms) => ({ fireAtMs: now + ms, target: 'https://a.example/' }))));
            for (let row = 0; row < admitted.rows; row++) ids.push(admitted.idOf(row));
          } else if (step.kind === 'cancel') {
            await engine.cancel(pick(step.pick));
          } else if (step.kind === 'advance') {
            now += step.ms;
          } else if (step.kind === 'take') {
            const slice = engine.takeDue(now, step.max);
            for (let i = 0; i < slice.count; i++) delivering.push({ seq: slice.seqs[i] as number, row: slice.rows[i] as number, attempt: slice.attempts[i] as number });
          } else if (step.kind === 'settle') {
            const settled = delivering.slice(0, step.choices.length);
            delivering = delivering.slice(settled.length);
            const outcomes = emptyOutcomes(settled.length);
            settled.forEach((timer, i) => {
              outcomes.seqs[i] = timer.seq;
              outcomes.rows[i] = timer.row;
              outcomes.kinds[i] = [outcomeKind.delivered, outcomeKind.retry, outcomeKind.dead][step.choices[i] as number] as number;
              outcomes.statuses[i] = 500;
              outcomes.attempts[i] = timer.attempt;
              outcomes.retryAtMs[i] = now + Math.max(1, step.retryInMs);
            });
            outcomes.count = settled.length;
            await engine.settle(outcomes);
          } else if (step.kind === 'redrive') {
            await engine.redrive(pick(step.pick));
          } else if (step.kind === 'reschedule') {
            await engine.reschedule(pick(step.pick), { fireAtMs: now + step.offset });
          } else if (step.kind === 'checkpoint') {
            await engine.checkpoint(hourAfter(step.hours));
          } else if (step.kind === 'promote') {
            const watermark = engine.stats().spill.watermarkMs;
            if (Number.isFinite(watermark)) await engine.promote(Math.max(watermark, hourAfter(step.hours)));
          } else {
            await engine.close();
            engine = await Engine.open(options);
            delivering = [];
          }
          const histogram = engine.dueHistogram();
          const expected = [0, 0, 0, 0, 0];
          for (const id of ids) {
            const view = await engine.lookup(id);
            if (view === undefined || (view.state !== 'pending' && view.state !== 'retrying')) continue;
            const k = bucketOf(histogram.edgesMs, view.dueAtMs);
            expected[k] = (expected[k] as number) + 1;
          }
          assert.deepEqual(histogram.counts, expected, `edges ${histogram.edgesMs.map((edge) => edge - now)} after ${step.kind}`);
          assert.equal(histogram.resident + histogram.spilled, engine.stats().pending, 'the histogram holds every pending timer /v1/stats counts');
          // Every timer is in the default queue: its counts are the engine's states, resident and spilled.
          const stats = engine.stats();
          assert.deepEqual(engine.queueCounts('default'), { waiting: histogram.resident + histogram.spilled, inFlight: stats.counts.delivering, spilled: histogram.spilled }, 'the queue\'s counts');
        }
      } finally {
        await engine.close();
      }
    }),
    propertyRuns(30),
  );
});

test('edges: now + each span, rounded up to a slot below the watermark and to a spill bucket past it', () => {
  const now = t0; // 1234 ms past an hour
  assert.deepEqual(dueHistogramEdges(now, 60_000, hour, Infinity), [now - 1234 + 120_000, now - 1234 + hour + 60_000, now - 1234 + day + 60_000, now - 1234 + 30 * day + 60_000]);
  const watermark = now - 1234 + 5 * hour;
  assert.deepEqual(dueHistogramEdges(now, 60_000, hour, watermark), [now - 1234 + 120_000, now - 1234 + hour + 60_000, now - 1234 + day + hour, now - 1234 + 30 * day + hour]);
  // On a boundary: the edge is the boundary itself.
  assert.deepEqual(dueHistogramEdges(t0 - 1234, 60_000, hour, Infinity)[0], t0 - 1234 + 60_000);
});

test('slot counts: groups come and go with their timers, and slots tile the spill bucket width', () => {
  const counts = new DueSlotCounts(hour);
  assert.equal(counts.slotWidthMs, 60_000);
  assert.equal(new DueSlotCounts(1000).slotWidthMs, 1000);
  assert.equal(new DueSlotCounts(90_000).slotWidthMs, 30_000);
  counts.add(t0, 1);
  counts.add(t0 + 61_000, 1);
  counts.add(t0 + 3 * hour, 1);
  const into = [0, 0, 0];
  counts.countInto([t0 - 1234 + 120_000, t0 - 1234 + 2 * hour], into);
  assert.deepEqual(into, [2, 0, 1]);
  counts.add(t0, -1);
  counts.add(t0 + 61_000, -1);
  counts.add(t0 + 3 * hour, -1);
  assert.equal(counts.total, 0);
  const empty = [0, 0, 0];
  counts.countInto([t0], empty);
  assert.deepEqual(empty, [0, 0, 0]);
});

test('through a checkpoint that spills in several slices, the histogram stays the same at every turn', { timeout: 120_000 }, async () => {
  let now = t0;
  const fs = new SimFileSystem({ seed: 7, maxExtraHops: 0 });
  const engine = await Engine.open({ dataDir: '/data', fs, clock: { now: () => now } });
  try {
    // Enough far timers that eviction takes several turns (spillLimits.checkpointSliceRows a turn).
    const rows = 3 * 16_384;
    for (let from = 0; from < rows; from += 8192) {
      await engine.admit(batchFromSpecs(Array.from({ length: 8192 }, (_, i) => ({ fireAtMs: now + 2 * day + ((from + i) % 500) * 60_000, target: 'https://a.example/' }))));
    }
    await engine.admit(batchFromSpecs([{ fireAtMs: now + 30_000, target: 'https://a.example/' }]));
    const before = engine.dueHistogram();
    let turns = 0;
    let done = false;
    const checkpoint = engine.checkpoint((Math.floor(now / hour) + 2) * hour).finally(() => (done = true));
    while (!done) {
      const during = engine.dueHistogram();
      assert.deepEqual([during.counts, during.resident + during.spilled], [before.counts, rows + 1], `turn ${turns}`);
      turns++;
      await new Promise((resolve) => setImmediate(resolve));
    }
    await checkpoint;
    const after = engine.dueHistogram();
    assert.deepEqual(after.counts, before.counts);
    assert.deepEqual([after.resident, after.spilled], [1, rows]);
    assert.ok(turns > 3, `the checkpoint took ${turns} turns`);
  } finally {
    await engine.close();
  }
});
