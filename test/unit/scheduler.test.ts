// The scheduler and delivery outcomes: never early under a jumping clock, bounded slices,
// a bounded release rate for overdue timers, outcomes durable across a restart, and the real
// timer loop firing on time.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { batchFromSpecs } from '../../engine/batch/timer-batch.ts';
import { type Clock, type DueSlice, Engine } from '../../engine/engine.ts';
import { emptyOutcomes, outcomeKind } from '../../engine/records.ts';
import { type DispatchPort, Scheduler } from '../../dispatch/scheduler.ts';
import { Prng } from '../helpers/prng.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';

const dataDir = '/data';
const t0 = 1_796_220_000_000;

function manualClock(start = t0): Clock & { set(ms: number): void } {
  let now = start;
  return { now: () => now, set: (ms) => (now = ms) };
}

/** A dispatcher double that records what it was handed, and when by the clock. */
function recordingPort(clock: Clock, room = Infinity): DispatchPort & { slices: Array<{ atMs: number; slice: DueSlice }> } {
  const slices: Array<{ atMs: number; slice: DueSlice }> = [];
  return { slices, room: () => room, deliver: (slice) => void slices.push({ atMs: clock.now(), slice }) };
}

const spec = (fireAtMs: number) => ({ fireAtMs, target: 'https://a.example/' });

test('never early: under a clock that jumps back and forth, each timer goes out only once the clock has reached it', async () => {
  const prng = new Prng(21);
  const clock = manualClock();
  const engine = await Engine.open({ dataDir, fs: new SimFileSystem({ seed: 21 }), clock });
  await engine.admit(batchFromSpecs(Array.from({ length: 2000 }, () => spec(t0 + prng.below(60_000)))));
  const port = recordingPort(clock);
  const scheduler = new Scheduler(engine, port, clock, { sliceTimersMax: 64, releasePerSecondMax: 1e9 });
  let delivered = 0;
  for (let step = 0; step < 5000 && delivered < 2000; step++) {
    clock.set(clock.now() + prng.below(400) - 150); // mostly forward, sometimes back
    delivered += scheduler.tick();
  }
  assert.equal(delivered, 2000);
  for (const { atMs, slice } of port.slices) {
    assert.ok(slice.count <= 64, 'slices are bounded');
    for (let i = 0; i < slice.count; i++) assert.ok((slice.fireAtMs[i] as number) <= atMs, `timer due ${slice.fireAtMs[i]} went out at ${atMs}`);
    for (let i = 1; i < slice.count; i++) assert.ok((slice.fireAtMs[i - 1] as number) <= (slice.fireAtMs[i] as number), 'earliest first');
  }
  await engine.close();
});

test('overdue timers after a restart are released at the configured rate, and only into dispatcher room', async () => {
  const clock = manualClock();
  const fs = new SimFileSystem({ seed: 22 });
  let engine = await Engine.open({ dataDir, fs, clock });
  await engine.admit(batchFromSpecs(Array.from({ length: 1000 }, (_, i) => spec(t0 + i))));
  await engine.close();
  clock.set(t0 + 3_600_000); // an hour of downtime: all 1000 are overdue
  engine = await Engine.open({ dataDir, fs, clock });
  const port = recordingPort(clock);
  const scheduler = new Scheduler(engine, port, clock, { releasePerSecondMax: 100, sliceTimersMax: 1000 }, clock);
  assert.equal(scheduler.tick(), 100, 'one second of tokens at most');
  assert.equal(scheduler.tick(), 0, 'no tokens left without time passing');
  clock.set(clock.now() + 500);
  assert.equal(scheduler.tick(), 50);
  const full = new Scheduler(engine, recordingPort(clock, 0), clock);
  assert.equal(full.tick(), 0, 'a dispatcher without room gets nothing');
  await engine.close();
});

test('outcomes: delivered and dead are final, a retry comes back at its time; all survive a restart', async () => {
  const clock = manualClock();
  const fs = new SimFileSystem({ seed: 23 });
  let engine = await Engine.open({ dataDir, fs, clock });
  const admitted = await engine.admit(batchFromSpecs([spec(t0), spec(t0), spec(t0)]));
  const slice = engine.takeDue(t0, 10);
  assert.equal(slice.count, 3);
  assert.deepEqual(Array.from(slice.attempts), [1, 1, 1]);
  assert.equal(engine.get(admitted.idOf(0))?.state, 'delivering');
  assert.equal(await engine.cancel(admitted.idOf(0)), 'too-late', 'a delivery in progress cannot be cancelled');
  const outcomes = emptyOutcomes(3);
  const kinds = [outcomeKind.delivered, outcomeKind.retry, outcomeKind.dead];
  for (let i = 0; i < 3; i++) {
    outcomes.seqs[i] = slice.seqs[i] as number;
    outcomes.rows[i] = slice.rows[i] as number;
    outcomes.kinds[i] = kinds[i] as number;
    outcomes.statuses[i] = [200, 503, 410][i] as number;
    outcomes.attempts[i] = 1;
    outcomes.retryAtMs[i] = t0 + 30_000;
  }
  outcomes.count = 3;
  await engine.settle(outcomes);
  const states = (e: Engine): unknown[] => [0, 1, 2].map((row) => [e.get(admitted.idOf(row))?.state, e.get(admitted.idOf(row))?.lastStatus, e.get(admitted.idOf(row))?.attempts]);
  const expected = [
    ['delivered', 200, 1],
    ['retrying', 503, 1],
    ['dead', 410, 1],
  ];
  assert.deepEqual(states(engine), expected);
  assert.equal(engine.nextDueMs(), t0 + 30_000, 'the retry is back in the heap at its time');
  assert.deepEqual([engine.get(admitted.idOf(1))?.fireAtMs, engine.get(admitted.idOf(1))?.dueAtMs], [t0, t0 + 30_000], 'the fire time its id carries stays');
  assert.equal(engine.takeDue(t0 + 29_999, 10).count, 0);
  await engine.close();
  engine = await Engine.open({ dataDir, fs, clock });
  assert.deepEqual(states(engine), expected, 'the same after replaying the log');
  const retry = engine.takeDue(t0 + 30_000, 10);
  assert.deepEqual(Array.from(retry.attempts), [2], 'the next attempt is the second');
  await engine.close();
});

test('the running loop fires on the wall clock, never before fire time, and picks up earlier timers admitted later', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'fermata-sched-'));
  const clock: Clock = { now: () => Date.now() };
  const engine = await Engine.open({ dataDir: dir, clock });
  const fired: Array<{ atMs: number; dueMs: number }> = [];
  const done = Promise.withResolvers<void>();
  const port: DispatchPort = {
    room: () => Infinity,
    deliver: (slice) => {
      for (let i = 0; i < slice.count; i++) fired.push({ atMs: Date.now(), dueMs: slice.fireAtMs[i] as number });
      if (fired.length === 3) done.resolve();
    },
  };
  const scheduler = new Scheduler(engine, port, clock);
  scheduler.start();
  const now = Date.now();
  await engine.admit(batchFromSpecs([spec(now + 400)]));
  await engine.admit(batchFromSpecs([spec(now + 60), spec(now + 120)])); // earlier than the armed timer
  await Promise.race([done.promise, new Promise((_, reject) => setTimeout(() => reject(new Error('timers did not fire')), 5000))]);
  scheduler.stop();
  assert.deepEqual(
    fired.map((f) => f.dueMs - now),
    [60, 120, 400],
  );
  for (const { atMs, dueMs } of fired) assert.ok(atMs >= dueMs, `fired ${dueMs - atMs} ms early`);
  await engine.close();
  rmSync(dir, { recursive: true, force: true });
});

test('take-ahead: a port that holds timers gets those of its queues up to its lead early, others only when due', async () => {
  const clock = manualClock();
  const engine = await Engine.open({ dataDir, fs: new SimFileSystem({ seed: 24 }), clock });
  await engine.admit(batchFromSpecs([spec(t0 + 5), spec(t0 + 10), { ...spec(t0 + 15), queue: 'held' }, spec(t0 + 20), spec(t0 + 40)]));
  const port = { ...recordingPort(clock), takeAhead: { ms: 20, queue: (queue: number) => engine.queueNameAt(queue) !== 'held' } };
  const scheduler = new Scheduler(engine, port, clock);
  assert.equal(scheduler.tick(), 2, 'the two default timers within the lead; the "held" queue’s timer stops the walk');
  const first = port.slices[0]?.slice;
  assert.deepEqual(Array.from(first?.dueAtMs ?? []), [t0 + 5, t0 + 10], 'each with its due time, for the port to wait for');
  assert.equal(scheduler.tick(), 0, 'the "held" timer is not due yet');
  clock.set(t0 + 15);
  assert.equal(scheduler.tick(), 2, 'due now: the "held" timer, then the default one 5 ms ahead');
  assert.deepEqual(Array.from(port.slices[1]?.slice.fireAtMs ?? []), [t0 + 15, t0 + 20]);
  assert.equal(scheduler.tick(), 0, 'the last timer is 25 ms away: past the lead');
  clock.set(t0 + 20);
  assert.equal(engine.takeDue(t0 + 20, 10, () => 0, port.takeAhead).count, 0, 'a queue without room takes nothing ahead…');
  assert.equal(engine.stats().heldBack, 0, '…and holds back nothing that is not due');
  assert.equal(scheduler.tick(), 1, 'within the lead again');
  await engine.close();
});
