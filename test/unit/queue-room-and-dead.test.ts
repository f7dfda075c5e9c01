// Per-queue room in takeDue (a full queue never stands in front of another queue's timers), and
// the dead-letter list and redrive: both durable across a restart.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { batchFromSpecs } from '../../engine/batch/timer-batch.ts';
import { type Clock, Engine } from '../../engine/engine.ts';
import { deadReason, outcomeKind } from '../../engine/records.ts';
import { outcomesFor } from '../helpers/outcomes.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';

const dataDir = '/data';
const t0 = 1_796_220_000_000;

function manualClock(start = t0): Clock & { set(ms: number): void } {
  let now = start;
  return { now: () => now, set: (ms) => (now = ms) };
}

const spec = (fireAtMs: number, queue: string) => ({ fireAtMs, target: `https://${queue}.example/`, queue });

test('a queue without room is held back in order while other queues go on; it resumes oldest first', async () => {
  const clock = manualClock();
  const engine = await Engine.open({ dataDir, fs: new SimFileSystem({ seed: 41 }), clock });
  // slow's 100 timers are all due before fast's: a single heap would hand out only slow's.
  await engine.admit(batchFromSpecs(Array.from({ length: 100 }, (_, i) => spec(t0 - 1000 + i, 'slow'))));
  await engine.admit(batchFromSpecs(Array.from({ length: 50 }, (_, i) => spec(t0 - 500 + i, 'fast'))));
  clock.set(t0);
  let slowRoom = 3;
  const room = (queue: number): number => (engine.queueNameAt(queue) === 'slow' ? slowRoom : Infinity);

  const first = engine.takeDue(t0, 20, room);
  const queuesOf = (slice: typeof first): string[] => Array.from(slice.queues, (q) => engine.queueNameAt(q));
  assert.deepEqual(queuesOf(first), [...Array(3).fill('slow'), ...Array(17).fill('fast')], 'slow takes its room, fast the rest');
  assert.ok(engine.stats().heldBack > 0, 'slow timers past its room are held back');

  slowRoom = 0; // its three are in flight
  const second = engine.takeDue(t0, 100, room);
  assert.deepEqual(queuesOf(second), Array(33).fill('fast'), 'no room for slow: fast goes on');
  assert.equal(engine.nextDueMs(), t0, 'held-back timers keep the scheduler looking');

  slowRoom = 1000;
  const third = engine.takeDue(t0, 1000, room);
  assert.deepEqual(queuesOf(third), Array(97).fill('slow'));
  for (let i = 1; i < third.count; i++) assert.ok((third.fireAtMs[i - 1] as number) < (third.fireAtMs[i] as number), 'held-back timers resume oldest first');
  assert.equal((third.fireAtMs[0] as number) - (first.fireAtMs[2] as number), 1, 'none skipped, none twice');
  assert.equal(engine.takeDue(t0, 1000, room).count, 0);
  assert.equal(engine.stats().heldBack, 0);
  assert.equal(engine.stats().counts.delivering, 150);
  await engine.close();
});

test('a held-back timer that is cancelled is never handed out', async () => {
  const clock = manualClock();
  const engine = await Engine.open({ dataDir, fs: new SimFileSystem({ seed: 42 }), clock });
  const admitted = await engine.admit(batchFromSpecs(Array.from({ length: 4 }, (_, i) => spec(t0 + i, 'q'))));
  clock.set(t0 + 10);
  assert.equal(engine.takeDue(t0 + 10, 10, () => 0).count, 0);
  assert.equal(await engine.cancel(admitted.idOf(1)), 'cancelled');
  const slice = engine.takeDue(t0 + 10, 10, () => 10);
  assert.deepEqual(Array.from(slice.rows), [0, 2, 3]);
  await engine.close();
});

test('dead timers are listed with their reason, redriven with fresh attempts, and both survive a restart', async () => {
  const clock = manualClock();
  const fs = new SimFileSystem({ seed: 43 });
  let engine = await Engine.open({ dataDir, fs, clock });
  const admitted = await engine.admit(batchFromSpecs([spec(t0, 'billing'), spec(t0, 'billing'), spec(t0, 'emails')]));
  const slice = engine.takeDue(t0, 10);
  const outcomes = outcomesFor(slice, outcomeKind.dead, 0, 410);
  outcomes.reasons[0] = deadReason.gone;
  outcomes.kinds[1] = outcomeKind.delivered;
  outcomes.statuses[1] = 200;
  outcomes.reasons[2] = deadReason.attemptsExhausted;
  outcomes.statuses[2] = 503;
  await engine.settle(outcomes);

  const expectDead = [
    { id: admitted.idOf(0), revision: 1, queue: 'billing', target: 'https://billing.example/', fireAtMs: t0, attempts: 1, lastStatus: 410, reason: 'gone', lastError: null, lastAttemptAtMs: null, headers: {}, payload: new Uint8Array(0), createdAtMs: t0 },
    { id: admitted.idOf(2), revision: 1, queue: 'emails', target: 'https://emails.example/', fireAtMs: t0, attempts: 1, lastStatus: 503, reason: 'attempts_exhausted', lastError: null, lastAttemptAtMs: null, headers: {}, payload: new Uint8Array(0), createdAtMs: t0 },
  ];
  assert.deepEqual(engine.listDead(100), expectDead);
  assert.deepEqual(engine.listDead(100, 'emails'), [expectDead[1]]);
  assert.deepEqual(engine.listDead(1), [expectDead[0]], 'limit');
  assert.deepEqual(engine.listDead(100, 'nope'), []);
  await engine.close();

  engine = await Engine.open({ dataDir, fs, clock });
  assert.deepEqual(engine.listDead(100), expectDead, 'the dead list is rebuilt from the log');
  assert.equal(await engine.redrive(admitted.idOf(1)), 'not-dead');
  assert.equal(await engine.redrive('0000000000000000000000ZZ'), 'not-found');
  clock.set(t0 + 5000);
  assert.equal(await engine.redrive(admitted.idOf(2)), 'redriven');
  assert.deepEqual(engine.listDead(100), [expectDead[0]]);
  assert.equal(engine.get(admitted.idOf(2))?.state, 'pending');
  assert.equal(engine.get(admitted.idOf(2))?.attempts, 0);
  await engine.close();

  engine = await Engine.open({ dataDir, fs, clock });
  assert.equal(engine.get(admitted.idOf(2))?.state, 'pending', 'the redrive is durable');
  const again = engine.takeDue(t0 + 5000, 10);
  assert.equal(again.count, 1);
  assert.equal(again.attempts[0], 1, 'a redriven timer starts its attempts over');
  assert.deepEqual(engine.listDead(100), [expectDead[0]]);
  await engine.close();
});
