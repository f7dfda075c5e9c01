// Pausing and resuming a queue (engine/queue-registry.ts, engine/queue-pause.ts): the QUEUE
// record's pause variant and its malformed combinations; a pause that is durable across replay
// and across a checkpoint's manifest; a PUT that leaves it paused and a delete that forgets it;
// takeDue holding a paused queue's due timers (retrying ones too) while another queue's go out,
// without keeping the scheduler looking; a resume that releases them oldest first, counted as
// held, and within the queue's rate: the token bucket's burst, not the backlog.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import pino from 'pino';
import { batchFromSpecs } from '../../engine/batch/timer-batch.ts';
import { type Clock, Engine } from '../../engine/engine.ts';
import { dispatchLimits } from '../../engine/limits.ts';
import { decodeQueueRecord, defaultQueueConfig, encodeQueuePaused } from '../../engine/queues.ts';
import { outcomeKind } from '../../engine/records.ts';
import { decodeManifest, encodeManifest, type Manifest } from '../../engine/spill/manifest-codec.ts';
import { FlowControl } from '../../dispatch/flow-control.ts';
import { createHttpServer } from '../../ingest/http/server.ts';
import { PullQueues } from '../../dispatch/pull-queues.ts';
import { outcomesFor } from '../helpers/outcomes.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';

const dataDir = '/data';
const t0 = 1_796_220_000_000;
const utf8 = new TextEncoder();

function manualClock(start = t0): Clock & { set(ms: number): void } {
  let now = start;
  return { now: () => now, set: (ms) => (now = ms) };
}

const spec = (fireAtMs: number, queue: string) => ({ fireAtMs, target: `https://${queue}.example/`, queue });
const record = (value: unknown): Uint8Array => utf8.encode(JSON.stringify(value));

test('the QUEUE record pause variant: encoded, decoded, and its malformed combinations refused', () => {
  assert.equal(new TextDecoder().decode(encodeQueuePaused('billing', true)), '{"name":"billing","paused":true}');
  assert.deepEqual(decodeQueueRecord(encodeQueuePaused('billing', true)), { kind: 'paused', name: 'billing', paused: true });
  assert.deepEqual(decodeQueueRecord(encodeQueuePaused('billing', false)), { kind: 'paused', name: 'billing', paused: false });
  assert.deepEqual(decodeQueueRecord(record({ name: 'b', deleted: true })), { kind: 'deleted', name: 'b' });
  assert.deepEqual(decodeQueueRecord(record({ name: 'b', config: {} })), { kind: 'config', name: 'b', config: defaultQueueConfig });
  const malformed = [
    { name: 'b', paused: 'yes' },
    { name: 'b', paused: 1 },
    { name: 'b', paused: null },
    { name: 'b', paused: true, config: {} },
    { name: 'b', paused: false, deleted: true },
    { name: 'b', paused: true, deleted: false },
    { name: 7, paused: true },
    { paused: true },
    { name: 'b', deleted: true, config: {} },
    { name: 'b' },
  ];
  for (const body of malformed) assert.equal(decodeQueueRecord(record(body)), undefined, JSON.stringify(body));
});

test('a manifest keeps paused queues beside configs, and one without any pause (an older one) still reads', () => {
  const run = { runId: 1, version: 2, stamp: 3, bucketWidthMs: 3_600_000, rows: 0, bytes: 1300, headBytes: 800, headCrc32: 1, tailOffset: 800, tailCrc32: 2, keysBytes: 32, buckets: [] };
  const base: Omit<Manifest, 'queues'> = {
    checkpointSeq: 3,
    watermarkMs: Infinity,
    releasedExpiryMaxMs: -Infinity,
    nextRunId: 2,
    residentRun: run,
    spilledRuns: [],
    tombstones: { seqs: new Float64Array(0), rows: new Uint32Array(0), fireAtMs: new Float64Array(0) },
  };
  const withPause: Manifest = { ...base, queues: [{ name: 'billing', config: defaultQueueConfig }, { name: 'emails', paused: true }] };
  assert.deepEqual(decodeManifest(encodeManifest(withPause)).queues, withPause.queues);
  const older: Manifest = { ...base, queues: [{ name: 'billing', config: defaultQueueConfig }] };
  assert.deepEqual(decodeManifest(encodeManifest(older)).queues, older.queues);
});

test('pause and resume are durable (replay and checkpoint), logged once, kept by a PUT and forgotten by a delete', async () => {
  const fs = new SimFileSystem({ seed: 4101 });
  let engine = await Engine.open({ dataDir, fs });
  assert.equal(await engine.setQueuePaused('nowhere', true), undefined, 'an unknown queue');
  await engine.setQueue('billing', { max_attempts: 5 });
  await engine.admit(batchFromSpecs([spec(t0 + 3_600_000, 'emails')]));
  assert.deepEqual(await engine.setQueuePaused('billing', true), { name: 'billing', config: { ...defaultQueueConfig, max_attempts: 5 }, paused: true });
  const seq = engine.log.lastSeq;
  assert.equal((await engine.setQueuePaused('billing', true))?.paused, true);
  assert.equal(engine.log.lastSeq, seq, 'pausing a paused queue logs nothing');
  assert.equal((await engine.setQueuePaused('emails', true))?.paused, true, 'a queue named by an add');
  assert.equal((await engine.setQueuePaused('default', true))?.paused, true);
  assert.equal((await engine.setQueuePaused('default', false))?.paused, false);
  await engine.setQueue('billing', { max_attempts: 6 });
  assert.equal(engine.findQueueView('billing')?.paused, true, 'a PUT does not resume');
  await engine.close();

  engine = await Engine.open({ dataDir, fs });
  assert.deepEqual(
    engine.queues().map(({ name, paused }) => [name, paused]),
    [
      ['billing', true],
      ['default', false],
      ['emails', true],
    ],
    'replayed (a pause names the default queue)',
  );
  assert.equal(engine.queueConfig('billing').max_attempts, 6);
  await engine.checkpoint();
  await engine.close();

  engine = await Engine.open({ dataDir, fs });
  assert.deepEqual(
    engine.queues().map(({ name, paused }) => [name, paused]),
    [
      ['billing', true],
      ['emails', true],
    ],
    'restored from the manifest (the log before it is gone; default, neither configured nor paused, is not in it)',
  );
  assert.equal((await engine.setQueuePaused('emails', false))?.paused, false);
  assert.equal(await engine.deleteQueue('billing'), true);
  assert.equal(engine.findQueueView('billing'), undefined);
  await engine.close();

  engine = await Engine.open({ dataDir, fs });
  assert.equal(engine.findQueueView('emails')?.paused, false, 'the resume was replayed over the manifest');
  await engine.admit(batchFromSpecs([spec(t0 + 3_600_000, 'billing')]));
  assert.deepEqual(engine.findQueueView('billing'), { name: 'billing', config: defaultQueueConfig, paused: false }, 'named again after its delete: defaults, not paused');
  await engine.close();
});

test('a paused queue holds its due timers (retrying ones too) while another queue goes on; a resume releases them oldest first, counted as held', async () => {
  const clock = manualClock();
  const engine = await Engine.open({ dataDir, fs: new SimFileSystem({ seed: 4102 }), clock });
  // A timer handed out before the pause lands: its attempt finishes (fails) as it would have, and its retry is held.
  const retried = await engine.admit(batchFromSpecs([spec(t0 - 5000, 'held')]));
  const first = engine.takeDue(t0, 10);
  await engine.setQueuePaused('held', true);
  const outcomes = outcomesFor(first, outcomeKind.retry, 1, 503);
  outcomes.retryAtMs[0] = t0 + 500;
  await engine.settle(outcomes);
  assert.equal(engine.get(retried.idOf(0))?.attempts, 1, 'its outcome was recorded');
  await engine.admit(batchFromSpecs(Array.from({ length: 10 }, (_, i) => spec(t0 + i, 'held'))));
  await engine.admit(batchFromSpecs(Array.from({ length: 5 }, (_, i) => spec(t0 + 100 + i, 'free'))));

  clock.set(t0 + 1000);
  const room = (): number => 1000;
  const slice = engine.takeDue(t0 + 1000, 100, room);
  assert.deepEqual(Array.from(slice.queues, (q) => engine.queueNameAt(q)), Array(5).fill('free'), 'only the running queue goes out');
  assert.equal(engine.takeDue(t0 + 1000, 100).count, 0, 'held without a queueRoom too');
  assert.equal(engine.get(retried.idOf(0))?.state, 'retrying', 'the retrying timer is held as it is');
  assert.equal(engine.stats().counts.pending, 10, 'held timers stay pending');
  assert.deepEqual(engine.queueHoldStats(), { pausedQueues: 1, held: 11, heldReleased: 0 });
  assert.equal(engine.nextDueMs(), undefined, 'nothing keeps the scheduler looking while only a pause holds timers');

  let woken = 0;
  engine.setDueChangedHook(() => woken++);
  clock.set(t0 + 2000);
  await engine.setQueuePaused('held', false);
  assert.equal(woken, 1, 'a resume wakes the scheduler');
  assert.equal(engine.nextDueMs(), t0 + 2000, 'released timers are due now');
  const released = engine.takeDue(t0 + 2000, 100, room);
  assert.equal(released.count, 11);
  const due = Array.from(released.dueAtMs);
  assert.deepEqual(due, [...due].sort((a, b) => a - b), 'oldest first');
  assert.deepEqual(engine.queueHoldStats(), { pausedQueues: 0, held: 0, heldReleased: 11 });
  await engine.close();
});

test('a cancelled held timer leaves the held count; timers due after a resume are not counted as held', async () => {
  const clock = manualClock();
  const engine = await Engine.open({ dataDir, fs: new SimFileSystem({ seed: 4103 }), clock });
  await engine.setQueue('q', {});
  await engine.setQueuePaused('q', true);
  const admitted = await engine.admit(batchFromSpecs([spec(t0, 'q'), spec(t0 + 1, 'q'), spec(t0 + 5000, 'q')]));
  clock.set(t0 + 10);
  assert.equal(engine.takeDue(t0 + 10, 10, () => 10).count, 0);
  assert.equal(await engine.cancel(admitted.idOf(0)), 'cancelled');
  assert.equal(engine.queueHoldStats().held, 1);
  await engine.setQueuePaused('q', false);
  assert.deepEqual(Array.from(engine.takeDue(t0 + 10, 10, () => 10).rows), [1]);
  clock.set(t0 + 6000);
  assert.deepEqual(Array.from(engine.takeDue(t0 + 6000, 10, () => 10).rows), [2]);
  assert.equal(engine.queueHoldStats().heldReleased, 1);
  await engine.close();
});

test('on resume a rate-limited queue gets its token bucket\'s burst, not the backlog, then its rate', async () => {
  const clock = manualClock();
  const engine = await Engine.open({ dataDir, fs: new SimFileSystem({ seed: 4104 }), clock });
  await engine.setQueue('slow', { rate_per_s: 5 });
  await engine.setQueuePaused('slow', true);
  await engine.admit(batchFromSpecs(Array.from({ length: 20 }, (_, i) => spec(t0 + i, 'slow'))));
  const pull = new PullQueues({ engine, clock, logger: pino({ level: 'silent' }), record: async () => undefined, roomFreed: () => undefined });
  const flow = new FlowControl(engine, clock, { ...dispatchLimits }, pull);
  const take = (): number => {
    const slice = engine.takeDue(clock.now(), 100, (queue) => flow.queueRoom(queue));
    for (const queue of slice.queues) flow.tokenSpent(queue);
    return slice.count;
  };
  try {
    clock.set(t0 + 60_000);
    assert.equal(take(), 0, 'paused: nothing, however long it was');
    await engine.setQueuePaused('slow', false);
    assert.equal(take(), 5, 'the burst: one second\'s worth of tokens');
    assert.equal(take(), 0);
    clock.set(t0 + 60_400);
    assert.equal(take(), 2, 'then the rate');
    clock.set(t0 + 61_000);
    assert.equal(take(), 3);
    clock.set(t0 + 63_000);
    assert.equal(take(), 5, 'a full bucket is one second\'s worth');
    clock.set(t0 + 64_000);
    assert.equal(take(), 5);
    assert.equal(engine.queueHoldStats().heldReleased, 20);
  } finally {
    pull.close();
    await engine.close();
  }
});

test('a paused pull queue leases nothing, even timers already waiting for a DoGet; after the resume it leases them', async () => {
  const clock = manualClock();
  const engine = await Engine.open({ dataDir, fs: new SimFileSystem({ seed: 4105 }), clock });
  await engine.setQueue('pulled', { delivery: 'pull' });
  await engine.admit(batchFromSpecs(Array.from({ length: 3 }, (_, i) => spec(t0 - 100 + i, 'pulled'))));
  const pull = new PullQueues({ engine, clock, logger: pino({ level: 'silent' }), record: (outcomes) => engine.settle(outcomes), roomFreed: () => undefined });
  const handOut = (): number => {
    const slice = engine.takeDue(clock.now(), 100, (queue) => pull.room(queue, engine.queueConfig(engine.queueNameAt(queue))));
    for (let i = 0; i < slice.count; i++) pull.add(slice, i);
    return slice.count;
  };
  try {
    assert.equal(handOut(), 3);
    await engine.setQueuePaused('pulled', true);
    await engine.admit(batchFromSpecs(Array.from({ length: 2 }, (_, i) => spec(t0 + i, 'pulled'))));
    clock.set(t0 + 10);
    assert.equal(handOut(), 0, 'due timers of a paused pull queue stay in the engine');
    assert.equal((await pull.lease('pulled', undefined, 0)).rows, 0, 'nothing leased at once');
    const startedAt = performance.now();
    const waited = await pull.lease('pulled', undefined, 60);
    assert.equal(waited.rows, 0);
    assert.ok(performance.now() - startedAt >= 50, 'a DoGet with wait_ms waits, as with nothing to lease');
    assert.equal(engine.queueHoldStats().held, 2);
    await engine.setQueuePaused('pulled', false);
    assert.equal((await pull.lease('pulled', undefined, 0)).rows, 3, 'the waiting ones once resumed');
    assert.equal(handOut(), 2, 'and the held ones');
  } finally {
    pull.close();
    await engine.close();
  }
});

test('/v1/stats and /metrics count paused queues, held timers and timers released after a hold', async () => {
  const clock = manualClock();
  const engine = await Engine.open({ dataDir, fs: new SimFileSystem({ seed: 4106 }), clock });
  const app = createHttpServer({ logger: pino({ level: 'silent' }), engine });
  try {
    await engine.admit(batchFromSpecs([spec(t0 - 10, 'a'), spec(t0 - 9, 'a'), spec(t0 - 8, 'b')]));
    await engine.setQueuePaused('a', true);
    await engine.setQueuePaused('b', true);
    await engine.setQueuePaused('b', false);
    assert.equal(engine.takeDue(t0, 10).count, 1, 'b\'s timer goes out');
    const stats = (await app.inject({ method: 'GET', url: '/v1/stats' })).json();
    assert.deepEqual([stats.paused_queues, stats.held, stats.held_released], [1, 2, 1]);
    const lines = (await app.inject({ method: 'GET', url: '/metrics' })).body.split('\n');
    for (const line of ['fermata_queues_paused 1', 'fermata_timers_held 2', 'fermata_timers_held_released_total 1']) assert.ok(lines.includes(line), `missing ${line}`);
  } finally {
    await app.close();
    await engine.close();
  }
});

test('pauses and resumes asked for at once are logged in the order asked, each change once', async () => {
  const fs = new SimFileSystem({ seed: 4107 });
  let engine = await Engine.open({ dataDir, fs });
  await engine.setQueue('q', {});
  const seq = engine.log.lastSeq;
  const answers = await Promise.all([engine.setQueuePaused('q', true), engine.setQueuePaused('q', true), engine.setQueuePaused('q', false), engine.setQueuePaused('q', false), engine.setQueuePaused('q', true)]);
  assert.equal(engine.log.lastSeq, seq + 3, 'pause, resume, pause: the repeats logged nothing');
  assert.deepEqual(answers.map((answer) => answer?.paused), [true, true, false, false, true]);
  assert.equal(engine.findQueueView('q')?.paused, true, 'the last asked for holds');
  await engine.close();
  engine = await Engine.open({ dataDir, fs });
  assert.equal(engine.findQueueView('q')?.paused, true, 'and after replay');
  await engine.close();
});
