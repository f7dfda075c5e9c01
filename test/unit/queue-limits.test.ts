// A queue's retention and pending cap (engine/queue-limits.ts): the cap refuses a batch whole,
// counts admits in flight, frees a place on a cancel or a delivery; retention_ms and
// dead_retention_ms release a queue's finished timers when their queue says; both replay the
// same from the log and from a checkpoint; a queue without them keeps today's defaults and its
// QUEUE record does not name them; coalesced one-timer admits are refused for their own queue
// only; a schedule's occurrences are not refused; a bulk cancel keeps the longest retention of
// its timers' queues.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AdmitCoalescer } from '../../engine/admit-coalescer.ts';
import { batchFromSpecs, type TimerSpec } from '../../engine/batch/timer-batch.ts';
import { ManualClock } from '../../engine/clock.ts';
import { type Clock, Engine } from '../../engine/engine.ts';
import { errorCodes, FermataError, isFermataError } from '../../engine/errors.ts';
import { retentionDefaults } from '../../engine/limits.ts';
import { decodeQueueRecord, defaultQueueConfig, encodeQueueRecord } from '../../engine/queues.ts';
import { outcomeKind } from '../../engine/records.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';
import { outcomesFor } from '../helpers/outcomes.ts';

const target = 'https://a.example/';

function movingClock(start = 1_796_220_000_000): Clock & { advance(ms: number): void } {
  let now = start;
  return { now: () => now, advance: (ms) => void (now += ms) };
}

const timers = (clock: Clock, ...queues: string[]): TimerSpec[] => queues.map((queue, i) => ({ fireAtMs: clock.now() + 60_000 + i, target, queue }));

function assertQueueFull(err: unknown, queue: string, pending: number): true {
  assert.ok(isFermataError(err, errorCodes.queueFull), `QUEUE_FULL, not ${String(err)}`);
  assert.equal((err as FermataError).details.queue, queue);
  assert.equal((err as FermataError).details.pending, pending);
  return true;
}

test('max_pending refuses a batch that would pass it whole, counts admits in flight, and a cancel or a delivery frees a place', async () => {
  const clock = movingClock();
  const engine = await Engine.open({ dataDir: '/data', fs: new SimFileSystem({ seed: 47 }), clock });
  await engine.setQueue('capped', { max_pending: 3 });
  const first = await engine.admit(batchFromSpecs(timers(clock, 'capped', 'capped', 'other')));
  const resident = engine.stats().resident;
  // Two rows for the capped queue where one place is left, beside a row of another queue: none is added.
  await assert.rejects(engine.admit(batchFromSpecs(timers(clock, 'other', 'capped', 'capped'))), (err) => assertQueueFull(err, 'capped', 2));
  assert.equal(engine.stats().resident, resident, 'nothing of the refused batch was added');
  // Two admits at once for the last place: the second counts the first's rows while its record is written.
  const both = await Promise.allSettled([engine.admit(batchFromSpecs(timers(clock, 'capped'))), engine.admit(batchFromSpecs(timers(clock, 'capped')))]);
  assert.equal(both[0].status, 'fulfilled');
  assert.equal(both[1].status, 'rejected');
  assertQueueFull((both[1] as PromiseRejectedResult).reason, 'capped', 3);
  // A duplicate of a timer it holds adds nothing: not refused.
  await engine.setQueue('keyed', { max_pending: 1 });
  await engine.admit(batchFromSpecs([{ fireAtMs: clock.now() + 1000, target, queue: 'keyed', key: 'k' }]));
  const again = await engine.admit(batchFromSpecs([{ fireAtMs: clock.now() + 1000, target, queue: 'keyed', key: 'k' }]));
  assert.equal(again.isDuplicate(0), true);
  // A cancel frees a place.
  assert.equal(await engine.cancel(first.idOf(0)), 'cancelled');
  await engine.admit(batchFromSpecs(timers(clock, 'capped')));
  await assert.rejects(engine.admit(batchFromSpecs(timers(clock, 'capped'))), (err) => assertQueueFull(err, 'capped', 3));
  // Being delivered still counts; delivered, it frees its place.
  clock.advance(120_000);
  const slice = engine.takeDue(clock.now(), 100);
  await assert.rejects(engine.admit(batchFromSpecs(timers(clock, 'capped'))), (err) => assertQueueFull(err, 'capped', 3));
  await engine.settle(outcomesFor(slice, outcomeKind.delivered));
  await engine.admit(batchFromSpecs(timers(clock, 'capped', 'capped', 'capped')));
  // Lifted by a PUT without it (a whole replacement).
  await engine.setQueue('capped', {});
  await engine.admit(batchFromSpecs(timers(clock, 'capped', 'capped')));
  await engine.close();
});

test('retention_ms and dead_retention_ms release a queue\'s finished timers and keys when it says, live and after a reopen', async () => {
  const clock = movingClock();
  const options = { dataDir: '/data', fs: new SimFileSystem({ seed: 48 }), clock };
  let engine = await Engine.open(options);
  await engine.setQueue('short', { retention_ms: 1_000, dead_retention_ms: 2_000 });
  const add = (queue: string, key: string) => engine.admit(batchFromSpecs([{ fireAtMs: clock.now() + 10, target, queue, key }]));
  const delivered = await add('short', 'd');
  const dead = await add('short', 'x');
  const cancelled = await add('short', 'c');
  const kept = await add('default', 'k');
  assert.equal(await engine.cancel(cancelled.idOf(0)), 'cancelled');
  clock.advance(10);
  const slice = engine.takeDue(clock.now(), 10);
  assert.equal(slice.count, 3);
  const outcomes = outcomesFor(slice, outcomeKind.delivered);
  for (let i = 0; i < slice.count; i++) if (slice.seqs[i] === dead.seq) outcomes.kinds[i] = outcomeKind.dead;
  await engine.settle(outcomes);
  await engine.close();

  // Replayed: the expiry each finish logged.
  engine = await Engine.open(options);
  assert.deepEqual(engine.queueConfig('short'), { ...defaultQueueConfig, retention_ms: 1_000, dead_retention_ms: 2_000 });
  clock.advance(1_000);
  engine.takeDue(clock.now(), 10);
  assert.equal(engine.get(delivered.idOf(0)), undefined, 'delivered, released after its queue\'s retention_ms');
  assert.equal(engine.get(cancelled.idOf(0)), undefined, 'cancelled, released after its queue\'s retention_ms');
  assert.equal(engine.get(dead.idOf(0))?.state, 'dead', 'dead timers keep dead_retention_ms');
  assert.equal(engine.get(kept.idOf(0))?.state, 'delivered', 'another queue keeps the service\'s retention');
  assert.equal((await add('short', 'd')).isDuplicate(0), false, 'its key is free');
  clock.advance(1_000);
  engine.takeDue(clock.now(), 10);
  assert.equal(engine.get(dead.idOf(0)), undefined);
  clock.advance(retentionDefaults.finishedMs);
  engine.takeDue(clock.now(), 10);
  assert.equal(engine.get(kept.idOf(0)), undefined, 'the service\'s 24 h');
  await engine.close();
});

test('the new fields replay the same from a checkpoint\'s manifest, and the cap holds after it', async () => {
  const clock = movingClock();
  const options = { dataDir: '/data', fs: new SimFileSystem({ seed: 49 }), clock };
  let engine = await Engine.open(options);
  const config = await engine.setQueue('capped', { max_pending: 2, retention_ms: 5_000, dead_retention_ms: 6_000 });
  await engine.admit(batchFromSpecs(timers(clock, 'capped', 'capped')));
  await engine.checkpoint();
  await engine.close();
  engine = await Engine.open(options);
  assert.deepEqual(engine.queueConfig('capped'), config);
  await assert.rejects(engine.admit(batchFromSpecs(timers(clock, 'capped'))), (err) => assertQueueFull(err, 'capped', 2));
  await engine.close();
});

test('a queue without the new fields keeps today\'s defaults, and its QUEUE record does not name them (an older build reads it)', () => {
  assert.equal(defaultQueueConfig.retention_ms, null);
  assert.equal(defaultQueueConfig.dead_retention_ms, null);
  assert.equal(defaultQueueConfig.max_pending, null);
  const body = encodeQueueRecord('plain', { ...defaultQueueConfig, max_attempts: 5 });
  const stored = JSON.parse(new TextDecoder().decode(body)) as { config: Record<string, unknown> };
  for (const field of ['retention_ms', 'dead_retention_ms', 'max_pending']) assert.equal(field in stored.config, false, `${field} left out`);
  assert.deepEqual(decodeQueueRecord(body), { kind: 'config', name: 'plain', config: { ...defaultQueueConfig, max_attempts: 5 } });
  const set = encodeQueueRecord('set', { ...defaultQueueConfig, max_pending: 7, retention_ms: 9 });
  assert.deepEqual(decodeQueueRecord(set), { kind: 'config', name: 'set', config: { ...defaultQueueConfig, max_pending: 7, retention_ms: 9 } });
});

test('the new fields are validated naming the field', async () => {
  const engine = await Engine.open({ dataDir: '/data', fs: new SimFileSystem({ seed: 50 }) });
  for (const [input, field] of [[{ max_pending: 0 }, 'max_pending'], [{ retention_ms: 0 }, 'retention_ms'], [{ dead_retention_ms: 1.5 }, 'dead_retention_ms'], [{ max_pending: '3' }, 'max_pending']] as const) {
    await assert.rejects(engine.setQueue('q', input), (err) => isFermataError(err, errorCodes.queueInvalid) && err.details.field === field);
  }
  await engine.close();
});

test('one-timer admits coalesced into one record: a queue at its cap refuses only its own timers, in call order', async () => {
  const clock = movingClock();
  const engine = await Engine.open({ dataDir: '/data', fs: new SimFileSystem({ seed: 51 }), clock });
  await engine.setQueue('capped', { max_pending: 1 });
  const coalescer = new AdmitCoalescer(engine);
  const settled = await Promise.allSettled(timers(clock, 'capped', 'capped', 'default').map((spec) => coalescer.admitOne(spec)));
  assert.deepEqual(settled.map((result) => result.status), ['fulfilled', 'rejected', 'fulfilled'], 'the first of the turn takes the place; another queue\'s timer is added');
  assertQueueFull((settled[1] as PromiseRejectedResult).reason, 'capped', 1);
  await engine.close();
});

test('a schedule\'s occurrences are not refused by a full queue, and count once in', async () => {
  const t0 = 1_800_000_000_000;
  const engine = await Engine.open({ dataDir: '/data', fs: new SimFileSystem({ seed: 52 }), clock: new ManualClock(t0 + 10_000) });
  await engine.setQueue('capped', { max_pending: 1 });
  await engine.admit(batchFromSpecs([{ fireAtMs: t0 + 3_600_000, target, queue: 'capped' }]));
  await engine.putSchedule('minutely', { everyMs: 60_000, startAtMs: t0, target, queue: 'capped', payload: new Uint8Array(0), headers: '' });
  await waitFor(async () => (await engine.listTimers({ keyPrefix: new TextEncoder().encode('schedule:minutely:') }, 10)).timers.length === 2);
  await assert.rejects(engine.admit(batchFromSpecs([{ fireAtMs: t0 + 3_600_000, target, queue: 'capped' }])), (err) => assertQueueFull(err, 'capped', 3));
  await engine.close();
});

/** Polls `done` between event-loop turns (the materializer runs on timers of 0 ms), up to a second. */
async function waitFor(done: () => Promise<boolean>): Promise<void> {
  for (let i = 0; i < 200; i++) {
    if (await done()) return;
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  assert.fail('not done within a second');
}

test('a bulk cancel keeps what it took for its queue\'s retention, the longest of them when it took several queues', async () => {
  const clock = movingClock();
  const engine = await Engine.open({ dataDir: '/data', fs: new SimFileSystem({ seed: 53 }), clock });
  await engine.setQueue('short', { retention_ms: 1_000 });
  await engine.setQueue('longer', { retention_ms: 5_000 });
  const purged = await engine.admit(batchFromSpecs(timers(clock, 'short', 'short')));
  assert.equal((await engine.bulkCancel({ filter: { queue: 'short' } })).cancelled, 2);
  const mixed = await engine.admit(batchFromSpecs(timers(clock, 'short', 'longer')));
  assert.equal((await engine.bulkCancel({ ids: [mixed.idOf(0), mixed.idOf(1)] })).cancelled, 2);
  clock.advance(1_000);
  engine.takeDue(clock.now(), 10);
  assert.equal(engine.get(purged.idOf(0)), undefined, 'a purge of one queue: its retention');
  assert.equal(engine.get(mixed.idOf(0))?.state, 'cancelled', 'taken with a timer of a queue that keeps them longer');
  clock.advance(4_000);
  engine.takeDue(clock.now(), 10);
  assert.equal(engine.get(mixed.idOf(0)), undefined);
  assert.equal(engine.get(mixed.idOf(1)), undefined);
  await engine.close();
});
