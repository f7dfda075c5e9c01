// The engine (store + heap + index + log + spill tier) against a plain model, under random
// sequences of admit, cancel, clock moves, takeDue, outcomes, checkpoints (which spill timers
// past the watermark to disk), promotions and restarts: both must agree on every answer.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { batchFromSpecs } from '../../engine/batch/timer-batch.ts';
import { type Clock, Engine, type TimerStateName } from '../../engine/engine.ts';
import { emptyOutcomes, outcomeKind } from '../../engine/records.ts';
import { simStoreOptions } from '../sim/power-loss-at.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';
import { propertyRuns } from '../helpers/property.ts';

const t0 = 1_796_220_000_000;

type Command =
  | { kind: 'admit'; offsets: number[] }
  | { kind: 'cancel'; pick: number }
  | { kind: 'advance'; ms: number }
  | { kind: 'take'; max: number }
  | { kind: 'settle'; choices: number[] }
  | { kind: 'checkpoint'; buckets: number }
  | { kind: 'promote'; buckets: number }
  | { kind: 'restart' };

/** Spill buckets this wide, so the watermark moves within the few hundred ms a run spans. */
const bucketWidthMs = 100;

const command: fc.Arbitrary<Command> = fc.oneof(
  fc.record({ kind: fc.constant('admit' as const), offsets: fc.array(fc.integer({ min: -50, max: 500 }), { minLength: 1, maxLength: 4 }) }),
  fc.record({ kind: fc.constant('cancel' as const), pick: fc.nat() }),
  fc.record({ kind: fc.constant('advance' as const), ms: fc.integer({ min: -100, max: 300 }) }),
  fc.record({ kind: fc.constant('take' as const), max: fc.integer({ min: 1, max: 5 }) }),
  fc.record({ kind: fc.constant('settle' as const), choices: fc.array(fc.integer({ min: 0, max: 2 }), { maxLength: 5 }) }),
  fc.record({ kind: fc.constant('checkpoint' as const), buckets: fc.integer({ min: 0, max: 6 }) }),
  fc.record({ kind: fc.constant('promote' as const), buckets: fc.integer({ min: 0, max: 6 }) }),
  fc.constant({ kind: 'restart' as const }),
);

interface ModelTimer {
  readonly id: string;
  readonly seq: number;
  readonly row: number;
  readonly fireAt: number;
  dueAt: number;
  state: TimerStateName;
  /** The last logged state, which a restart returns a delivering timer to. */
  loggedState: 'pending' | 'retrying';
  attempts: number;
}

test('the engine agrees with a plain model through admits, cancels, deliveries and restarts', { timeout: 300_000 }, async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(command, { maxLength: 60, size: 'max' }), fc.integer({ min: 1, max: 2 ** 30 }), async (commands, seed) => {
      let now = t0;
      const clock: Clock = { now: () => now };
      const fs = new SimFileSystem({ seed, maxExtraHops: 0 });
      const retention = { finishedMs: 200, deadMs: 400 };
      const options = { dataDir: '/data', fs, clock, retention, spillBucketWidthMs: bucketWidthMs, store: simStoreOptions };
      let engine = await Engine.open(options);
      let model: ModelTimer[] = [];
      /** The watermark: timers due at or past it wait for a promotion (and may be on disk). */
      let watermarkMs = Infinity;
      const bucketAfter = (buckets: number): number => (Math.floor(now / bucketWidthMs) + 1 + buckets) * bucketWidthMs;
      const isFinished = (t: ModelTimer): boolean => t.state === 'delivered' || t.state === 'dead' || t.state === 'cancelled';
      /** The latest expiry among released timers: an admit decides (and releases) no earlier. */
      let releasedMax = 0;
      /** What a restart knows of it: raised by admits (replayed) and checkpoints (recorded), not by sweeps. */
      let releasedMaxLogged = 0;
      /**
       * Finished timers released since the last checkpoint, while no logged ADD decided after
       * their expiry: releasing is not logged, so after a restart with the clock stepped back
       * before their expiry they are back until it (a harmless linger, at most the step back).
       */
      let releasedUnlogged: ModelTimer[] = [];
      const release = (gone: ReadonlySet<ModelTimer>): void => {
        for (const timer of gone) releasedMax = Math.max(releasedMax, timer.dueAt);
        releasedUnlogged.push(...gone);
        model = model.filter((t) => !gone.has(t));
      };
      const live = (t: ModelTimer): boolean => t.state !== 'delivering';
      const byDue = (a: ModelTimer, b: ModelTimer): number => a.dueAt - b.dueAt || a.seq - b.seq || a.row - b.row;
      try {
        for (const step of commands) {
          if (step.kind === 'admit') {
            // An admit first releases the finished timers whose retention ended by its decision time.
            const decidedAt = Math.max(now, releasedMax);
            release(new Set(model.filter((t) => isFinished(t) && t.dueAt <= decidedAt)));
            // Replay releases all of these when it reaches this ADD, those a sweep released first too.
            for (const timer of releasedUnlogged) if (timer.dueAt <= decidedAt) releasedMaxLogged = Math.max(releasedMaxLogged, timer.dueAt);
            releasedUnlogged = releasedUnlogged.filter((t) => t.dueAt > decidedAt);
            const admitted = await engine.admit(batchFromSpecs(step.offsets.map((offset) => ({ fireAtMs: Math.max(0, now + offset), target: 'https://a.example/' }))));
            step.offsets.forEach((offset, row) =>
              model.push({ id: admitted.idOf(row), seq: admitted.seq, row, fireAt: Math.max(0, now + offset), dueAt: Math.max(0, now + offset), state: 'pending', loggedState: 'pending', attempts: 0 }),
            );
          } else if (step.kind === 'cancel') {
            const timer = model[step.pick % Math.max(1, model.length)];
            const outcome = await engine.cancel(timer?.id ?? 'zzzzzzzzzzzzzzzzzzzzzzzz');
            const expected = timer === undefined ? 'not-found' : timer.state === 'pending' || timer.state === 'retrying' || timer.state === 'cancelled' ? 'cancelled' : 'too-late';
            assert.equal(outcome, expected);
            if (timer !== undefined && expected === 'cancelled' && timer.state !== 'cancelled') {
              timer.state = 'cancelled';
              timer.dueAt = now + retention.finishedMs;
            }
          } else if (step.kind === 'advance') {
            now += step.ms;
          } else if (step.kind === 'take') {
            // Finished timers whose retention ended are released first (up to 4 × max), then due ones go out.
            const released = new Set(model.filter((t) => isFinished(t) && t.dueAt <= now).sort(byDue).slice(0, step.max * 4));
            const expected = model.filter((t) => (t.state === 'pending' || t.state === 'retrying') && t.dueAt <= now && t.dueAt < watermarkMs).sort(byDue).slice(0, step.max);
            const slice = engine.takeDue(now, step.max);
            assert.deepEqual(
              Array.from({ length: slice.count }, (_, i) => `${slice.seqs[i]}/${slice.rows[i]}@${slice.attempts[i]}`),
              expected.map((t) => `${t.seq}/${t.row}@${t.attempts + 1}`),
            );
            for (const timer of expected) timer.state = 'delivering';
            for (const timer of released) assert.equal(engine.get(timer.id), undefined, 'a finished timer is gone once its retention ended');
            release(released);
          } else if (step.kind === 'settle') {
            const delivering = model.filter((t) => t.state === 'delivering').slice(0, step.choices.length);
            const outcomes = emptyOutcomes(delivering.length);
            delivering.forEach((timer, i) => {
              const kind = [outcomeKind.delivered, outcomeKind.retry, outcomeKind.dead][step.choices[i] as number] as number;
              outcomes.seqs[i] = timer.seq;
              outcomes.rows[i] = timer.row;
              outcomes.kinds[i] = kind;
              outcomes.statuses[i] = 500;
              outcomes.attempts[i] = timer.attempts + 1;
              outcomes.retryAtMs[i] = now + 100;
              timer.attempts++;
              if (kind === outcomeKind.retry) {
                timer.state = timer.loggedState = 'retrying';
                timer.dueAt = now + 100;
              } else {
                timer.state = kind === outcomeKind.delivered ? 'delivered' : 'dead';
                timer.dueAt = now + (kind === outcomeKind.delivered ? retention.finishedMs : retention.deadMs);
              }
            });
            outcomes.count = delivering.length;
            await engine.settle(outcomes);
          } else if (step.kind === 'checkpoint') {
            const report = await engine.checkpoint(bucketAfter(step.buckets));
            // The checkpoint holds only what was still in memory, and the release horizon.
            releasedUnlogged = [];
            releasedMaxLogged = releasedMax;
            watermarkMs = Math.min(watermarkMs, bucketAfter(step.buckets));
            assert.equal(report.watermarkMs, watermarkMs);
          } else if (step.kind === 'promote') {
            await engine.promote(bucketAfter(step.buckets));
            watermarkMs = Math.max(watermarkMs, bucketAfter(step.buckets));
          } else {
            await engine.close();
            engine = await Engine.open(options);
            for (const timer of model) if (timer.state === 'delivering') timer.state = timer.loggedState;
            const back = releasedUnlogged.filter((t) => t.dueAt > now);
            model.push(...back);
            releasedUnlogged = releasedUnlogged.filter((t) => !back.includes(t));
            // Opening releases finished timers whose retention has ended; the engine knows only the
            // releases it replayed, and those it makes now: replay brings back the unlogged ones,
            // and those that ended by now are released again, which raises its horizon as well.
            releasedMax = releasedMaxLogged;
            for (const timer of releasedUnlogged) if (timer.dueAt <= now) releasedMax = Math.max(releasedMax, timer.dueAt);
            release(new Set(model.filter((t) => isFinished(t) && t.dueAt <= now)));
          }
          assert.equal(engine.stats().spill.watermarkMs, watermarkMs);
          for (const timer of model) {
            const view = await engine.lookup(timer.id);
            assert.deepEqual([view?.state, view?.fireAtMs, view?.dueAtMs, view?.attempts], [timer.state, timer.fireAt, timer.dueAt, timer.attempts], `timer ${timer.id}`);
          }
          const waiting = (t: ModelTimer): boolean => t.state === 'pending' || t.state === 'retrying';
          assert.equal(engine.nextDueMs(), model.filter((t) => live(t) && (!waiting(t) || t.dueAt < watermarkMs)).sort(byDue)[0]?.dueAt);
          assert.equal(engine.stats().pending, model.filter((t) => t.state === 'pending' || t.state === 'retrying').length);
        }
      } finally {
        await engine.close();
      }
    }),
    {
      ...propertyRuns(150),
      // Found by `npm run soak` (seed -1795428179): a cancelled timer released by a sweep, a
      // restart (whose open released it again), the clock a step back, an admit, a restart. The
      // model had not raised its release horizon at the open as the engine does.
      examples: [[[{ kind: 'admit', offsets: [0] }, { kind: 'cancel', pick: 0 }, { kind: 'advance', ms: 200 }, { kind: 'take', max: 1 }, { kind: 'restart' }, { kind: 'advance', ms: -1 }, { kind: 'admit', offsets: [0] }, { kind: 'restart' }], 1]],
    },
  );
});
