// PATCH in the engine (engine/reschedule.ts) over the simulated file system: revisions, the
// compare-and-set, which states may change, the old fire time never firing, the id and key
// kept, content moved through the arena and target table, queue accounting, restart (replay)
// and checkpoints (the manifest's table), and spilled timers: brought in by a PATCH, spilled
// again at their new time and found there by GET, PATCH, DELETE, keys and promotion; callbacks
// kept by a content change, live, spilled and on replay, and set or removed by a PATCH.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { batchFromSpecs, type TimerSpec } from '../../engine/batch/timer-batch.ts';
import { Engine } from '../../engine/engine.ts';
import { errorCodes, isFermataError } from '../../engine/errors.ts';
import { emptyOutcomes, outcomeKind } from '../../engine/records.ts';
import { outcomesFor } from '../helpers/outcomes.ts';
import { hour, manualClock, openEngine, t0, target } from '../helpers/sim-engine.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';

async function addOne(engine: Engine, spec: Partial<TimerSpec> = {}): Promise<string> {
  const admitted = await engine.admit(batchFromSpecs([{ fireAtMs: t0 + 10_000, target, payload: 'first', ...spec }]));
  return admitted.idOf(0);
}

const text = (bytes: Uint8Array | undefined): string => new TextDecoder().decode(bytes);

test('a PATCH moves the fire time: revision 2, the same id, the old time no longer due, the new one due', async () => {
  const fs = new SimFileSystem({ seed: 1 });
  const clock = manualClock();
  const engine = await openEngine(fs, clock);
  const id = await addOne(engine, { key: 'order-1' });
  assert.equal(engine.get(id)?.revision, 1);
  const outcome = await engine.reschedule(id, { fireAtMs: t0 + 50_000 });
  assert.equal(outcome.outcome, 'rescheduled');
  assert.ok(outcome.outcome === 'rescheduled');
  assert.equal(outcome.view.id, id);
  assert.equal(outcome.view.revision, 2);
  assert.equal(outcome.view.fireAtMs, t0 + 50_000);
  assert.equal(outcome.view.dueAtMs, t0 + 50_000);
  assert.equal(engine.takeDue(t0 + 10_000, 10).count, 0, 'the old fire time does not fire');
  assert.equal(engine.nextDeliveryDueMs(), t0 + 50_000);
  // The key still names the same timer.
  const again = await engine.admit(batchFromSpecs([{ fireAtMs: t0 + 10_000, target, payload: 'first', key: 'order-1' }]));
  assert.equal(again.idOf(0), id);
  assert.equal(again.duplicateOf(0)?.state, 'pending');
  const due = engine.takeDue(t0 + 50_000, 10);
  assert.equal(due.count, 1);
  await engine.close();
});

test('If-Match: a listed revision or * matches, another is a mismatch that changes nothing', async () => {
  const engine = await openEngine(new SimFileSystem({ seed: 2 }), manualClock());
  const id = await addOne(engine);
  assert.deepEqual(await engine.reschedule(id, { fireAtMs: t0 + 20_000 }, [2, 3]), { outcome: 'revision-mismatch', revision: 1 });
  assert.equal(engine.get(id)?.fireAtMs, t0 + 10_000);
  assert.equal((await engine.reschedule(id, { fireAtMs: t0 + 20_000 }, [5, 1])).outcome, 'rescheduled');
  assert.equal((await engine.reschedule(id, { fireAtMs: t0 + 30_000 }, '*')).outcome, 'rescheduled');
  assert.deepEqual(await engine.reschedule(id, { fireAtMs: t0 + 40_000 }, [2]), { outcome: 'revision-mismatch', revision: 3 });
  assert.deepEqual(await engine.reschedule(id, { fireAtMs: t0 + 40_000 }, []), { outcome: 'revision-mismatch', revision: 3 });
  assert.equal(engine.get(id)?.revision, 3);
  assert.equal(engine.get(id)?.fireAtMs, t0 + 30_000);
  await engine.close();
});

test('two PATCHes of one timer at once: the second decides on what the first left (one compare-and-set wins)', async () => {
  const engine = await openEngine(new SimFileSystem({ seed: 3 }), manualClock());
  const id = await addOne(engine);
  const [first, second] = await Promise.all([engine.reschedule(id, { fireAtMs: t0 + 20_000 }, [1]), engine.reschedule(id, { fireAtMs: t0 + 30_000 }, [1])]);
  assert.equal(first.outcome, 'rescheduled');
  assert.deepEqual(second, { outcome: 'revision-mismatch', revision: 2 });
  const [third, fourth] = await Promise.all([engine.reschedule(id, { payload: 'a' }), engine.reschedule(id, { payload: 'b' })]);
  assert.equal(third.outcome, 'rescheduled');
  assert.equal(fourth.outcome === 'rescheduled' ? fourth.view.revision : 0, 4);
  assert.equal(text(engine.payloadOf(id)), 'b');
  await engine.close();
});

test('content: payload, headers, target and queue change through the arena and target table; attempts are kept', async () => {
  const engine = await openEngine(new SimFileSystem({ seed: 4 }), manualClock());
  const id = await addOne(engine, { key: 'k', headers: { 'x-a': '1' }, queue: 'billing' });
  const outcome = await engine.reschedule(id, { payload: 'second', headers: { 'x-b': '2' }, target: 'https://b.example/x', queue: 'mail' });
  assert.ok(outcome.outcome === 'rescheduled');
  assert.equal(outcome.view.target, 'https://b.example/x');
  assert.equal(outcome.view.queue, 'mail');
  assert.equal(outcome.view.key, 'k');
  assert.equal(outcome.view.fireAtMs, t0 + 10_000, 'fire_at left out keeps its time');
  assert.equal(text(engine.payloadOf(id)), 'second');
  const due = engine.takeDue(t0 + 10_000, 10);
  assert.equal(due.count, 1);
  assert.equal(engine.queueNameAt(due.queues[0] as number), 'mail');
  const delivery = engine.deliveryOf(due.seqs[0] as number, due.rows[0] as number);
  assert.equal(delivery?.target, 'https://b.example/x');
  assert.ok(delivery !== undefined);
  assert.equal(text(delivery.bytes.subarray(delivery.payloadLength, delivery.payloadLength + delivery.headersLength)), '{"x-b":"2"}');
  assert.equal(text(delivery.bytes.subarray(delivery.payloadLength + delivery.headersLength)), 'k', 'the key kept');
  assert.ok(engine.queues().some((queue) => queue.name === 'mail'));
  await engine.close();
});

test('a PATCH refuses what an add refuses (the same rules), and a PATCH of nothing', async () => {
  const engine = await openEngine(new SimFileSystem({ seed: 5 }), manualClock(), { checkTarget: (t) => (t.includes('internal') ? 'refused: internal' : undefined) });
  const id = await addOne(engine);
  await assert.rejects(engine.reschedule(id, { target: 'ftp://x' }), (err) => isFermataError(err, errorCodes.batchInvalid));
  await assert.rejects(engine.reschedule(id, { target: 'https://internal.example/' }), (err) => isFermataError(err, errorCodes.targetRefused));
  await assert.rejects(engine.reschedule(id, { queue: 'no spaces allowed' }), (err) => isFermataError(err, errorCodes.batchInvalid));
  await assert.rejects(engine.reschedule(id, { fireAtMs: t0 + 100 * 365 * 24 * hour }), (err) => isFermataError(err, errorCodes.batchInvalid));
  await assert.rejects(engine.reschedule(id, {}), (err) => isFermataError(err, errorCodes.batchInvalid));
  assert.equal(engine.get(id)?.revision, 1, 'nothing half-applied');
  assert.deepEqual(await engine.reschedule('0'.repeat(24), { fireAtMs: t0 }), { outcome: 'not-found' });
  await engine.close();
});

test('which timers: pending and retrying change (attempts kept, next attempt moved); delivering, delivered and cancelled do not', async () => {
  const clock = manualClock();
  const engine = await openEngine(new SimFileSystem({ seed: 6 }), clock);
  const id = await addOne(engine);
  const other = await addOne(engine, { fireAtMs: t0 + 10_001 });
  clock.set(t0 + 10_001);
  const due = engine.takeDue(t0 + 10_001, 10);
  assert.equal(due.count, 2);
  // Handed out and not withdrawable (the default hook): too late.
  assert.deepEqual(await engine.reschedule(id, { fireAtMs: t0 + 60_000 }), { outcome: 'not-pending', state: 'delivering' });
  const outcomes = emptyOutcomes(2);
  for (let i = 0; i < 2; i++) {
    outcomes.seqs[i] = due.seqs[i] as number;
    outcomes.rows[i] = due.rows[i] as number;
    outcomes.attempts[i] = 1;
  }
  // Row 0 of the slice is the first timer (due first).
  outcomes.kinds[0] = outcomeKind.retry;
  outcomes.statuses[0] = 503;
  outcomes.retryAtMs[0] = t0 + 20_000;
  outcomes.kinds[1] = outcomeKind.delivered;
  outcomes.statuses[1] = 200;
  outcomes.retryAtMs[1] = t0 + 99 * hour;
  outcomes.count = 2;
  await engine.settle(outcomes);
  const retrying = await engine.reschedule(id, { fireAtMs: t0 + 90_000 });
  assert.ok(retrying.outcome === 'rescheduled');
  assert.equal(retrying.view.state, 'retrying');
  assert.equal(retrying.view.attempts, 1);
  assert.equal(retrying.view.nextAttemptAtMs, t0 + 90_000);
  assert.deepEqual(await engine.reschedule(other, { fireAtMs: t0 + 90_000 }), { outcome: 'not-pending', state: 'delivered' });
  assert.equal(await engine.cancel(id), 'cancelled');
  assert.deepEqual(await engine.reschedule(id, { fireAtMs: t0 + 90_000 }), { outcome: 'not-pending', state: 'cancelled' });
  assert.equal(engine.get(id)?.revision, 2, 'a cancel keeps the revision');
  await engine.close();
});

test('a timer handed out ahead of its time is withdrawn and rescheduled', async () => {
  const engine = await openEngine(new SimFileSystem({ seed: 7 }), manualClock());
  const id = await addOne(engine);
  assert.equal(engine.takeDue(t0 + 10_000, 10).count, 1);
  const withdrawn: string[] = [];
  engine.setWithdrawHook((seq, row) => {
    withdrawn.push(`${seq}:${row}`);
    return true;
  });
  const outcome = await engine.reschedule(id, { fireAtMs: t0 + 70_000 });
  assert.ok(outcome.outcome === 'rescheduled');
  assert.equal(outcome.view.state, 'pending');
  assert.equal(withdrawn.length, 1);
  assert.equal(engine.nextDeliveryDueMs(), t0 + 70_000);
  await engine.close();
});

test('a failed append puts the timer back as it was', async () => {
  const fs = new SimFileSystem({ seed: 8 });
  const engine = await openEngine(fs, manualClock());
  const id = await addOne(engine);
  fs.failAfter('datasync', 0, 'EIO');
  await assert.rejects(engine.reschedule(id, { fireAtMs: t0 + 70_000 }));
  assert.equal(engine.get(id)?.revision, 1);
  assert.equal(engine.get(id)?.fireAtMs, t0 + 10_000);
  assert.equal(engine.nextDeliveryDueMs(), t0 + 10_000, 'back in the heap at its old time');
  await engine.close().catch(() => undefined);
});

test('restart: replay applies RESCHEDULE exactly (revision, fire time, content); after a checkpoint the manifest keeps it', async () => {
  const fs = new SimFileSystem({ seed: 9 });
  const clock = manualClock();
  let engine = await openEngine(fs, clock);
  const id = await addOne(engine, { key: 'k1' });
  await engine.reschedule(id, { fireAtMs: t0 + 30_000, payload: 'two', target: 'https://c.example/' });
  await engine.reschedule(id, { fireAtMs: t0 + 40_000 });
  const before = engine.get(id);
  await engine.close();
  engine = await openEngine(fs, clock);
  assert.deepEqual(engine.get(id), before);
  assert.equal(text(engine.payloadOf(id)), 'two');
  assert.equal(engine.stats().reschedules.redirects, 1);
  await engine.checkpoint();
  await engine.close();
  engine = await openEngine(fs, clock);
  assert.deepEqual(engine.get(id), before);
  assert.equal(engine.nextDeliveryDueMs(), t0 + 40_000);
  assert.equal(engine.stats().reschedules.redirects, 1);
  assert.ok(engine.stats().reschedules.redirectBytes > 0);
  await engine.close();
});

test('spilled: a PATCH brings a far timer into memory; moved far again it spills into the bucket of its new time and GET, PATCH, DELETE, keys and promotion find it there', async () => {
  const fs = new SimFileSystem({ seed: 10 });
  const clock = manualClock();
  let engine = await openEngine(fs, clock);
  const far = await addOne(engine, { fireAtMs: t0 + 30 * hour, key: 'far' });
  const near = await addOne(engine, { fireAtMs: t0 + 1000, key: 'near' });
  await engine.checkpoint(t0 + 3 * hour);
  assert.equal(engine.get(far), undefined, 'spilled');
  assert.equal((await engine.lookup(far))?.revision, 1);
  const moved = await engine.reschedule(far, { fireAtMs: t0 + 2000, payload: 'changed' }, [1]);
  assert.ok(moved.outcome === 'rescheduled');
  assert.equal(moved.view.revision, 2);
  assert.equal(engine.get(far)?.fireAtMs, t0 + 2000, 'resident now, at its new time');
  // The near one moves far past the watermark, and the next checkpoint spills it there.
  const away = await engine.reschedule(near, { fireAtMs: t0 + 40 * hour + 5, payload: 'away' });
  assert.ok(away.outcome === 'rescheduled');
  const width = engine.bucketWidthMs;
  assert.ok((await engine.spillableBytesByBucket()).has(Math.floor((t0 + 40 * hour + 5) / width) * width), 'the loader counts it as spillable at its new time');
  const report = await engine.checkpoint(t0 + 3 * hour);
  assert.equal(report.spilledRows, 1);
  assert.equal(engine.get(near), undefined, 'spilled at its new time');
  const onDisk = await engine.lookup(near);
  assert.deepEqual([onDisk?.revision, onDisk?.fireAtMs, onDisk?.state], [2, t0 + 40 * hour + 5, 'pending']);
  // Its key still names it, with its revision and fire time now.
  const retry = await engine.admit(batchFromSpecs([{ fireAtMs: t0 + 40 * hour + 5, target, payload: 'away', key: 'near' }]));
  assert.deepEqual([retry.idOf(0), retry.duplicateOf(0)?.revision, retry.duplicateOf(0)?.fireAtMs, retry.duplicateOf(0)?.differs], [near, 2, t0 + 40 * hour + 5, []]);
  // A PATCH of it on disk finds it through its new time, and moves it once more (far, another bucket).
  const again = await engine.reschedule(near, { fireAtMs: t0 + 50 * hour }, [2]);
  assert.ok(again.outcome === 'rescheduled');
  assert.equal(again.view.revision, 3);
  await engine.checkpoint(t0 + 3 * hour);
  // Its copy at 40 h is tombstoned, and a tombstone names (seq, row): it stays in memory meanwhile.
  assert.equal(engine.get(near)?.revision, 3);
  await engine.promote(t0 + 45 * hour);
  await engine.checkpoint(t0 + 45 * hour);
  assert.equal(engine.get(near), undefined, 'the old copy promoted away: it spills at 50 h');
  assert.equal(engine.stats().reschedules.redirects, 2, 'the redirects stay while the timers are on disk');
  await engine.close();
  engine = await openEngine(fs, clock);
  assert.equal(engine.get(far)?.revision, 2);
  assert.deepEqual([(await engine.lookup(near))?.revision, (await engine.lookup(near))?.fireAtMs], [3, t0 + 50 * hour]);
  assert.equal(engine.stats().counts.pending, 2, 'no old copy loads as pending');
  await engine.promote(t0 + 60 * hour);
  assert.equal(engine.stats().counts.pending, 2, 'promotion brings each timer once');
  assert.equal(text(engine.payloadOf(near)), 'away');
  assert.equal(engine.get(near)?.fireAtMs, t0 + 50 * hour);
  assert.equal(engine.nextDeliveryDueMs(), t0 + 2000);
  await engine.close();
});

test('spilled and patched: a DELETE finds it by its new time, and the cancel survives a restart', async () => {
  const fs = new SimFileSystem({ seed: 12 });
  const clock = manualClock();
  let engine = await openEngine(fs, clock);
  const id = await addOne(engine, { fireAtMs: t0 + 1000 });
  await engine.reschedule(id, { fireAtMs: t0 + 20 * hour });
  await engine.checkpoint(t0 + 3 * hour);
  assert.equal(engine.get(id), undefined);
  assert.equal(await engine.cancel(id), 'cancelled');
  assert.equal(engine.get(id)?.state, 'cancelled');
  await engine.close();
  engine = await openEngine(fs, clock);
  assert.equal((await engine.lookup(id))?.state, 'cancelled');
  await engine.promote(t0 + 30 * hour);
  assert.equal(engine.stats().counts.pending, 0);
  await engine.close();
});

test('a PATCH while a checkpoint copies the timer into its spilled run: the stale copy is tombstoned, the change stands', async () => {
  const fs = new SimFileSystem({ seed: 13 });
  const clock = manualClock();
  let engine = await openEngine(fs, clock);
  const id = await addOne(engine, { fireAtMs: t0 + 20 * hour });
  const checkpoint = engine.checkpoint(t0 + 3 * hour);
  // Let the checkpoint take its snapshot, then change the timer while its runs are written.
  await new Promise((resolve) => setImmediate(resolve));
  await new Promise((resolve) => setImmediate(resolve));
  const patched = await engine.reschedule(id, { fireAtMs: t0 + 21 * hour });
  assert.ok(patched.outcome === 'rescheduled');
  await checkpoint;
  assert.equal((await engine.lookup(id))?.fireAtMs, t0 + 21 * hour);
  await engine.close();
  engine = await openEngine(fs, clock);
  assert.equal((await engine.lookup(id))?.fireAtMs, t0 + 21 * hour);
  await engine.promote(t0 + 30 * hour);
  assert.equal(engine.stats().counts.pending, 1, 'the copy the checkpoint made of the old timer never loads');
  assert.equal(engine.get(id)?.fireAtMs, t0 + 21 * hour);
  await engine.close();
});

test('spilled, no checkpoint since: replay finds the timer on disk by its id and applies the PATCH once', async () => {
  const fs = new SimFileSystem({ seed: 11 });
  const clock = manualClock();
  let engine = await openEngine(fs, clock);
  const far = await addOne(engine, { fireAtMs: t0 + 30 * hour });
  await engine.checkpoint(t0 + 3 * hour);
  await engine.reschedule(far, { fireAtMs: t0 + 31 * hour });
  await engine.close();
  engine = await openEngine(fs, clock);
  assert.equal(engine.get(far)?.fireAtMs, t0 + 31 * hour);
  assert.equal(engine.stats().counts.pending, 1);
  await engine.promote(t0 + 40 * hour);
  assert.equal(engine.stats().counts.pending, 1);
  await engine.close();
});

test('regression (sim seed 3276): an add of the key of a spilled timer whose PATCH is being synced waits for it, and is a duplicate', async () => {
  const engine = await openEngine(new SimFileSystem({ seed: 14 }), manualClock());
  const id = await addOne(engine, { fireAtMs: t0 + 20 * hour, key: 'k' });
  await engine.checkpoint(t0 + 3 * hour);
  assert.equal(engine.get(id), undefined, 'spilled');
  const patching = engine.reschedule(id, { fireAtMs: t0 + 21 * hour, payload: 'new' });
  // Let the PATCH read the bucket and tombstone the copy on disk, its record not yet durable.
  for (let i = 0; i < 200 && engine.stats().spill.tombstones === 0; i++) await Promise.resolve();
  assert.equal(engine.stats().spill.tombstones, 1);
  assert.equal(engine.get(id), undefined, 'its record is not durable yet');
  const again = engine.admit(batchFromSpecs([{ fireAtMs: t0 + 20 * hour, target, payload: 'first', key: 'k' }]));
  const [, admitted] = await Promise.all([patching, again]);
  assert.equal(admitted.idOf(0), id);
  assert.equal(admitted.isDuplicate(0), true);
  assert.equal(admitted.duplicateOf(0)?.revision, 2);
  assert.equal(engine.stats().counts.pending, 1);
  await engine.close();
});

const callbackUrl = 'https://cb.example/done';
const failureUrl = 'https://cb.example/dead';

/** Delivers timer `id` (due at `atMs`) and returns the payload of the follow-up it made, or undefined. */
async function deliverAndFollow(engine: Engine, clock: ReturnType<typeof manualClock>, atMs: number): Promise<{ target: string; payload: string } | undefined> {
  clock.set(atMs);
  const due = engine.takeDue(atMs, 10);
  assert.equal(due.count, 1);
  await engine.settle(outcomesFor(due, outcomeKind.delivered));
  const follow = engine.takeDue(atMs, 10);
  if (follow.count === 0) return undefined;
  const delivery = engine.deliveryOf(follow.seqs[0] as number, follow.rows[0] as number);
  assert.ok(delivery !== undefined);
  return { target: delivery.target, payload: text(delivery.bytes.subarray(0, delivery.payloadLength)) };
}

test('a PATCH of content keeps the callbacks: the view shows both, and the delivery makes the follow-up', async () => {
  const fs = new SimFileSystem({ seed: 15 });
  const clock = manualClock();
  let engine = await openEngine(fs, clock);
  const id = await addOne(engine, { callback: callbackUrl, failureCallback: failureUrl, key: 'k' });
  const outcome = await engine.reschedule(id, { fireAtMs: t0 + 5000, payload: 'second', headers: { 'x-b': '2' }, target: 'https://b.example/x', queue: 'mail' });
  assert.ok(outcome.outcome === 'rescheduled');
  assert.deepEqual([outcome.view.callback, outcome.view.failureCallback], [callbackUrl, failureUrl]);
  // Replay of the RESCHEDULE keeps them too.
  await engine.close();
  engine = await openEngine(fs, clock);
  assert.deepEqual([engine.get(id)?.callback, engine.get(id)?.failureCallback], [callbackUrl, failureUrl]);
  const follow = await deliverAndFollow(engine, clock, t0 + 10_000);
  assert.equal(follow?.target, callbackUrl);
  const summary = JSON.parse(follow?.payload ?? '{}') as { id: string; fire_at: string };
  assert.equal(summary.id, id);
  assert.equal(summary.fire_at, new Date(t0 + 5000).toISOString(), 'the summary names the fire time the PATCH gave it');
  await engine.close();
});

test('a spilled timer with callbacks, patched (live and on replay), keeps them', async () => {
  const fs = new SimFileSystem({ seed: 16 });
  const clock = manualClock();
  let engine = await openEngine(fs, clock);
  const live = await addOne(engine, { fireAtMs: t0 + 30 * hour, callback: callbackUrl, failureCallback: failureUrl });
  const replayed = await addOne(engine, { fireAtMs: t0 + 31 * hour, callback: callbackUrl });
  await engine.checkpoint(t0 + 3 * hour);
  assert.equal(engine.get(live), undefined, 'spilled');
  const moved = await engine.reschedule(live, { fireAtMs: t0 + 2000, payload: 'changed' });
  assert.ok(moved.outcome === 'rescheduled');
  assert.deepEqual([moved.view.callback, moved.view.failureCallback], [callbackUrl, failureUrl]);
  await engine.reschedule(replayed, { fireAtMs: t0 + 3000, payload: 'changed too' });
  // No checkpoint since: replay finds both on disk and applies their PATCHes.
  await engine.close();
  engine = await openEngine(fs, clock);
  assert.deepEqual([engine.get(live)?.callback, engine.get(live)?.failureCallback], [callbackUrl, failureUrl]);
  assert.deepEqual([engine.get(replayed)?.callback, engine.get(replayed)?.failureCallback], [callbackUrl, null]);
  assert.equal((await deliverAndFollow(engine, clock, t0 + 2000))?.target, callbackUrl);
  await engine.close();
});

const refusedFor = (code: (typeof errorCodes)[keyof typeof errorCodes], column: string) => (err: unknown) => isFermataError(err, code) && (err as { details?: { column?: string } }).details?.column === column;

test('a PATCH sets and removes callbacks; the change replays after a restart and a checkpoint keeps it', async () => {
  const fs = new SimFileSystem({ seed: 17 });
  const clock = manualClock();
  let engine = await openEngine(fs, clock);
  const id = await addOne(engine, { key: 'k' });
  const other = await addOne(engine, { fireAtMs: t0 + 20_000, callback: callbackUrl, failureCallback: failureUrl });
  const set = await engine.reschedule(id, { callback: callbackUrl });
  assert.ok(set.outcome === 'rescheduled');
  assert.deepEqual([set.view.callback, set.view.failureCallback, set.view.revision, set.view.key], [callbackUrl, null, 2, 'k']);
  const both = await engine.reschedule(id, { failureCallback: failureUrl, payload: 'new' });
  assert.ok(both.outcome === 'rescheduled');
  assert.deepEqual([both.view.callback, both.view.failureCallback], [callbackUrl, failureUrl], 'a PATCH of one keeps the other');
  const removed = await engine.reschedule(other, { callback: null });
  assert.ok(removed.outcome === 'rescheduled');
  assert.deepEqual([removed.view.callback, removed.view.failureCallback], [null, failureUrl]);
  await engine.close();
  engine = await openEngine(fs, clock);
  assert.deepEqual([engine.get(id)?.callback, engine.get(id)?.failureCallback, engine.get(id)?.revision], [callbackUrl, failureUrl, 3]);
  assert.deepEqual([engine.get(other)?.callback, engine.get(other)?.failureCallback], [null, failureUrl]);
  await engine.checkpoint();
  await engine.close();
  engine = await openEngine(fs, clock);
  assert.deepEqual([engine.get(id)?.callback, engine.get(id)?.failureCallback], [callbackUrl, failureUrl]);
  const cleared = await engine.reschedule(other, { failureCallback: null });
  assert.ok(cleared.outcome === 'rescheduled');
  assert.deepEqual([cleared.view.callback, cleared.view.failureCallback], [null, null]);
  // The set callback is told of the delivery; the removed one is not.
  assert.equal((await deliverAndFollow(engine, clock, t0 + 10_000))?.target, callbackUrl);
  assert.equal(await deliverAndFollow(engine, clock, t0 + 20_000), undefined, 'no callback left: no follow-up');
  await engine.close();
});

test('a spilled timer gets a callback by PATCH, and keeps it on replay', async () => {
  const fs = new SimFileSystem({ seed: 18 });
  const clock = manualClock();
  let engine = await openEngine(fs, clock);
  const far = await addOne(engine, { fireAtMs: t0 + 30 * hour });
  await engine.checkpoint(t0 + 3 * hour);
  assert.equal(engine.get(far), undefined, 'spilled');
  const set = await engine.reschedule(far, { callback: callbackUrl });
  assert.ok(set.outcome === 'rescheduled');
  assert.equal(set.view.callback, callbackUrl);
  await engine.close();
  engine = await openEngine(fs, clock);
  assert.equal(engine.get(far)?.callback, callbackUrl);
  assert.equal(engine.stats().counts.pending, 1);
  await engine.close();
});

test('a PATCH refuses callbacks as an add does: a bad URL, the address guard, a queue delivering by arrow or pull, and a move of a timer with callbacks into one', async () => {
  const engine = await openEngine(new SimFileSystem({ seed: 19 }), manualClock(), { checkTarget: (t) => (t.includes('internal') ? 'refused: internal' : undefined) });
  await engine.setQueue('batched', { delivery: 'arrow', sink: 'https://sink.example/in' });
  await engine.setQueue('pulled', { delivery: 'pull' });
  const id = await addOne(engine, { callback: callbackUrl });
  const plain = await addOne(engine, { queue: 'pulled' });
  await assert.rejects(engine.reschedule(id, { callback: 'ftp://x' }), refusedFor(errorCodes.batchInvalid, 'callback'));
  await assert.rejects(engine.reschedule(id, { failureCallback: 'not a url' }), refusedFor(errorCodes.batchInvalid, 'failure_callback'));
  await assert.rejects(engine.reschedule(id, { failureCallback: 'https://internal.example/' }), refusedFor(errorCodes.targetRefused, 'failure_callback'));
  await assert.rejects(engine.reschedule(id, { queue: 'batched' }), refusedFor(errorCodes.batchInvalid, 'callback'));
  await assert.rejects(engine.reschedule(plain, { callback: callbackUrl }), refusedFor(errorCodes.batchInvalid, 'callback'));
  assert.deepEqual([engine.get(id)?.revision, engine.get(id)?.queue, engine.get(plain)?.callback], [1, 'default', null], 'nothing half-applied');
  // Without its callback it may move there; a null on a timer without one changes nothing else.
  assert.equal((await engine.reschedule(id, { callback: null, queue: 'batched' })).outcome, 'rescheduled');
  assert.equal((await engine.reschedule(plain, { callback: null })).outcome, 'rescheduled');
  await engine.close();
});

test('a PATCH of a spilled timer refused for want of room holds no room afterwards', async () => {
  const fs = new SimFileSystem({ seed: 17 });
  const clock = manualClock();
  const engine = await openEngine(fs, clock, { store: { capacityMax: 4, capacityInitial: 4 } });
  const far = await addOne(engine, { fireAtMs: t0 + 30 * hour });
  await engine.checkpoint(t0 + 3 * hour);
  assert.equal(engine.get(far), undefined, 'spilled');
  for (let i = 0; i < 3; i++) await addOne(engine);
  // One slot is left: a content change of a spilled timer needs two (its own and the new content's).
  await assert.rejects(engine.reschedule(far, { payload: 'changed' }, undefined), (err) => isFermataError(err, errorCodes.capacityFull));
  // The one slot is still there for an add.
  await addOne(engine);
  await engine.close();
});
