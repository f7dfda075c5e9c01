// Pause and resume through the real dispatcher (one worker, an HTTP/2 sink on loopback): a
// paused queue's due timers are not delivered while another queue's are; once resumed they are
// delivered, all of them once, no faster than the queue's rate_per_s allows. The rate is checked
// by bounds that load cannot break: a request reaches the sink after the dispatcher took it, so
// the sink's count at any time is at most what the token bucket allowed by then, and the last of
// them cannot arrive before the bucket had tokens for it. Held timers count as late and held.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import pino from 'pino';
import { batchFromSpecs } from '../../engine/batch/timer-batch.ts';
import { Engine, systemClock } from '../../engine/engine.ts';
import { Dispatcher } from '../../dispatch/dispatcher.ts';
import { startH2Sink } from '../helpers/sinks.ts';

async function until(what: string, ms: number, done: () => boolean): Promise<void> {
  const deadline = Date.now() + ms;
  while (!done()) {
    assert.ok(Date.now() < deadline, `timed out after ${ms} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

test('a paused queue delivers nothing while another goes on; resumed, it delivers every held timer at its rate', { timeout: 60_000 }, async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'fermata-pause-'));
  const engine = await Engine.open({ dataDir });
  const dispatcher = new Dispatcher({ engine, clock: systemClock, logger: pino({ level: 'silent' }), threads: 1, allowLoopback: true });
  const sink = await startH2Sink();
  try {
    const ratePerS = 5;
    const held = 20;
    await engine.setQueue('held', { rate_per_s: ratePerS });
    await engine.setQueuePaused('held', true);
    const now = Date.now();
    await engine.admit(batchFromSpecs(Array.from({ length: held }, (_, i) => ({ fireAtMs: now + i, target: `${sink.url}/held/${i}`, queue: 'held' }))));
    await engine.admit(batchFromSpecs(Array.from({ length: 10 }, (_, i) => ({ fireAtMs: now + i, target: `${sink.url}/free/${i}`, queue: 'free' }))));
    dispatcher.start();
    await dispatcher.ready();
    const heldRequests = (): number => sink.requests.filter((request) => request.path.startsWith('/held/')).length;
    await until('the running queue\'s deliveries', 20_000, () => engine.stats().counts.delivered === 10);
    // A few scheduler looks later, still nothing of the paused queue.
    await new Promise((resolve) => setTimeout(resolve, 300));
    assert.equal(heldRequests(), 0, 'a paused queue delivers nothing');
    assert.deepEqual(engine.queueHoldStats(), { pausedQueues: 1, held, heldReleased: 0 });
    assert.equal(engine.stats().counts.pending, held, 'held timers stay pending');

    const resumedAtMs = Date.now();
    await engine.setQueuePaused('held', false);
    // One second's worth at once, then the rate: by resumedAtMs + t at most burst + rate·t.
    const sampleAtMs = resumedAtMs + 1500;
    await new Promise((resolve) => setTimeout(resolve, sampleAtMs - Date.now()));
    const byThen = sink.requests.filter((request) => request.path.startsWith('/held/') && request.atMs <= sampleAtMs).length;
    assert.ok(byThen <= ratePerS + Math.ceil(1.5 * ratePerS), `${byThen} delivered within 1.5 s of the resume: more than the bucket allows`);
    await until('every held timer delivered', 30_000, () => engine.stats().counts.delivered === 10 + held);
    assert.equal(heldRequests(), held, 'each held timer once');
    const lastAtMs = Math.max(...sink.requests.filter((request) => request.path.startsWith('/held/')).map((request) => request.atMs));
    const earliestMs = resumedAtMs + ((held - ratePerS) / ratePerS) * 1000;
    assert.ok(lastAtMs >= earliestMs - 50, `the last held timer arrived ${earliestMs - lastAtMs} ms before the rate allows`);
    assert.deepEqual(engine.queueHoldStats(), { pausedQueues: 0, held: 0, heldReleased: held });
    const lateness = dispatcher.stats().get('held')?.lateness;
    assert.equal(lateness?.totalCount, held, 'their lateness is in the queue\'s histogram');
    assert.ok((lateness?.minNonZeroValue ?? 0) >= 300, 'and they were late by the pause at least');
  } finally {
    await dispatcher.close();
    await sink.close();
    await engine.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});
