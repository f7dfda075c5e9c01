// The manual test clock (engine/clock.ts): it stands still between moves and never goes back; a
// worker's view reads the same position through shared memory; the scheduler looks at once
// after a move; a retry counts from the service's clock.
import assert from 'node:assert/strict';
import { setImmediate as turn } from 'node:timers/promises';
import { test } from 'node:test';
import { Worker } from 'node:worker_threads';
import { batchFromSpecs } from '../../engine/batch/timer-batch.ts';
import { ManualClock, SharedClockView, sharedClockOf } from '../../engine/clock.ts';
import { Engine, systemClock } from '../../engine/engine.ts';
import { decideOutcome } from '../../dispatch/retry-policy.ts';
import { Scheduler } from '../../dispatch/scheduler.ts';
import { defaultQueueConfig } from '../../engine/queues.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';

const dataDir = '/data';
const t0 = 1_800_000_000_000;
const day = 86_400_000;

test('a manual clock stands still between moves, moves forward only, and tells its watchers', () => {
  const clock = new ManualClock(t0);
  assert.equal(clock.now(), t0);
  let told = 0;
  const unwatch = clock.watch(() => told++);
  clock.moveTo(t0 + 30 * day);
  assert.equal(clock.now(), t0 + 30 * day);
  assert.equal(told, 1);
  assert.throws(() => clock.moveTo(t0), /never moves backwards/);
  clock.moveTo(t0, true); // replay restoring a logged position may put it below its start
  assert.equal(clock.now(), t0);
  unwatch();
  clock.moveTo(t0 + 1);
  assert.equal(told, 2, 'the restore told the watcher; the unwatched move did not');
});

test('a delivery worker reads the main thread\'s manual clock through shared memory; without it, the real time', async () => {
  const clock = new ManualClock(t0);
  const shared = sharedClockOf(clock);
  assert.ok(shared !== undefined);
  assert.equal(sharedClockOf(systemClock), undefined);
  const view = new SharedClockView(shared);
  assert.equal(view.now(), t0);
  assert.equal(view.at(Date.now()), t0, 'a request sent at any real instant was sent at the position');
  clock.moveTo(t0 + day);
  assert.equal(view.now(), t0 + day);
  const real = new SharedClockView(undefined);
  const before = Date.now();
  assert.ok(real.now() >= before && real.at(before) === before);
  // Another thread sees the move too.
  const worker = new Worker(
    `const { parentPort, workerData } = require('node:worker_threads');
     parentPort.once('message', () => parentPort.postMessage(Number(Atomics.load(new BigInt64Array(workerData), 0))));`,
    { eval: true, workerData: shared },
  );
  clock.moveTo(t0 + 2 * day);
  const seen = new Promise<number>((resolve) => worker.once('message', resolve));
  worker.postMessage('read');
  assert.equal(await seen, t0 + 2 * day);
  await worker.terminate();
});

test('after a move the scheduler looks at once: a timer 30 days out is handed over within a turn, not after its armed sleep', async () => {
  const clock = new ManualClock(t0);
  const engine = await Engine.open({ dataDir, fs: new SimFileSystem({ seed: 106 }), clock });
  await engine.admit(batchFromSpecs([{ fireAtMs: t0 + 30 * day, target: 'https://a.example/' }]));
  const handed: number[] = [];
  const scheduler = new Scheduler(engine, { room: () => 10, deliver: (slice) => void handed.push(clock.now(), slice.fireAtMs[0] as number) }, clock, { sleepMsMax: 60_000 });
  scheduler.start();
  await turn();
  assert.deepEqual(handed, [], 'not due');
  clock.moveTo(t0 + 30 * day);
  for (let i = 0; i < 3 && handed.length === 0; i++) await turn();
  assert.deepEqual(handed, [t0 + 30 * day, t0 + 30 * day]);
  scheduler.stop();
  await engine.close();
});

test('a retry counts from the service\'s clock; an HTTP-date Retry-After is the target\'s real time, a wait measured against the real time', () => {
  const realMs = Date.UTC(2026, 11, 7, 9, 0, 0);
  const clockMs = realMs + 30 * day;
  const policy = { ...defaultQueueConfig, min_backoff_ms: 1000, max_backoff_ms: 1000 };
  const inTwoMinutes = new Date(realMs + 120_000).toUTCString();
  assert.deepEqual(decideOutcome(1, 503, inTwoMinutes, policy, clockMs, 0, realMs), { kind: 2, retryAtMs: clockMs + 120_000, reason: 0 });
  assert.deepEqual(decideOutcome(1, 503, '30', policy, clockMs, 0, realMs), { kind: 2, retryAtMs: clockMs + 30_000, reason: 0 });
  assert.deepEqual(decideOutcome(1, 503, undefined, policy, clockMs, 0, realMs), { kind: 2, retryAtMs: clockMs + 1000, reason: 0 });
});
