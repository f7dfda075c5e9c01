// What admit() says of a duplicate row (engine/duplicate-answers.ts), on the simulated file
// system: the original's state and the fields that differ from it, for an original in memory,
// one of the same batch and one spilled to disk (compared with its row in the run file); and a
// queue's delete (engine/queue-registry.ts), refused while a spilled timer waits in it, durable
// across a reopen. The HTTP answers are test/integration/duplicate-answers.test.ts's.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { batchFromSpecs, type TimerSpec } from '../../engine/batch/timer-batch.ts';
import { type Clock, type DuplicateAnswer, Engine } from '../../engine/engine.ts';
import { errorCodes, isFermataError } from '../../engine/errors.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';

const dataDir = '/data';
const hour = 3600_000;
const t0 = 1_796_220_000_000 - (1_796_220_000_000 % hour);
const target = 'https://a.example/hook';
const clock: Clock = { now: () => t0 };

function open(fs: SimFileSystem): Promise<Engine> {
  return Engine.open({ dataDir, fs, clock, walLimits: { segmentBytes: 4096 } });
}

const original: TimerSpec = { fireAtMs: t0 + 10 * hour, target, payload: 'p1', headers: { 'X-Trace': 'a', 'x-span': 'b' }, key: 'k1', queue: 'billing' };


/** What these tests compare of a duplicate's answer (its revision and fire time are reschedule.test.ts's). */
const stateAndDiffers = (original: DuplicateAnswer | undefined): { state: string; differs: readonly string[] } | undefined =>
  original === undefined ? undefined : { state: original.state, differs: original.differs };

test('a duplicate of a resident timer says its state and which fields differ; none for an exact retry', async () => {
  const engine = await open(new SimFileSystem({ seed: 1 }));
  const first = await engine.admit(batchFromSpecs([original]));
  assert.equal(first.duplicateOf(0), undefined, 'a new row has no original');
  const retry = await engine.admit(batchFromSpecs([original]));
  assert.deepEqual(stateAndDiffers(retry.duplicateOf(0)), { state: 'pending', differs: [] });
  // The same headers in another order and case are the same headers.
  const reordered = await engine.admit(batchFromSpecs([{ ...original, headers: { 'x-span': 'b', 'x-trace': 'a' } }]));
  assert.deepEqual(reordered.duplicateOf(0)?.differs, []);
  const collision = await engine.admit(batchFromSpecs([{ fireAtMs: t0 + 11 * hour, target: 'https://b.example/', payload: 'p2', headers: { 'x-trace': 'z' }, key: 'k1' }]));
  assert.deepEqual(stateAndDiffers(collision.duplicateOf(0)), { state: 'pending', differs: ['target', 'payload', 'headers', 'queue', 'fire_at'] });
  assert.equal(await engine.cancel(first.idOf(0)), 'cancelled');
  const afterCancel = await engine.admit(batchFromSpecs([original]));
  assert.deepEqual(stateAndDiffers(afterCancel.duplicateOf(0)), { state: 'cancelled', differs: [] }, 'a retry after a cancel says cancelled and adds nothing');
  assert.equal(afterCancel.idOf(0), first.idOf(0));
  await engine.close();
});

test('a row repeating a key of an earlier row of its batch is compared with that row', async () => {
  const engine = await open(new SimFileSystem({ seed: 2 }));
  const admitted = await engine.admit(batchFromSpecs([original, { ...original, payload: 'other' }, { ...original }]));
  assert.equal(admitted.duplicates, 2);
  assert.deepEqual(stateAndDiffers(admitted.duplicateOf(1)), { state: 'pending', differs: ['payload'] });
  assert.deepEqual(stateAndDiffers(admitted.duplicateOf(2)), { state: 'pending', differs: [] });
  await engine.close();
});

test('a duplicate of a spilled timer is compared with what its run file holds', async () => {
  const fs = new SimFileSystem({ seed: 3 });
  let engine = await open(fs);
  const first = await engine.admit(batchFromSpecs([original]));
  const report = await engine.checkpoint(t0 + 2 * hour);
  assert.equal(report.spilledRows, 1);
  assert.equal(engine.get(first.idOf(0)), undefined, 'the original is on disk only');
  const retry = await engine.admit(batchFromSpecs([original]));
  assert.deepEqual(stateAndDiffers(retry.duplicateOf(0)), { state: 'pending', differs: [] });
  const changed = await engine.admit(batchFromSpecs([{ ...original, payload: new TextEncoder().encode('p1!'), queue: 'other' }]));
  assert.deepEqual(stateAndDiffers(changed.duplicateOf(0)), { state: 'pending', differs: ['payload', 'queue'] });
  assert.equal(changed.idOf(0), first.idOf(0));
  await engine.close();

  // Reopened: the original is restored to its run, and compared there again.
  engine = await open(fs);
  const again = await engine.admit(batchFromSpecs([{ ...original, target: 'https://c.example/' }]));
  assert.deepEqual(stateAndDiffers(again.duplicateOf(0)), { state: 'pending', differs: ['target'] });
  await engine.close();
});

test('a queue with a spilled timer waiting is not deleted; once it is cancelled the delete holds across a reopen', async () => {
  const fs = new SimFileSystem({ seed: 4 });
  let engine = await open(fs);
  await engine.setQueue('billing', { max_attempts: 5 });
  const first = await engine.admit(batchFromSpecs([original]));
  await engine.checkpoint(t0 + 2 * hour);
  await assert.rejects(engine.deleteQueue('billing'), (err) => isFermataError(err, errorCodes.queueNotEmpty) && err.details.pending === 1);
  await assert.rejects(engine.deleteQueue('default'), (err) => isFermataError(err, errorCodes.queueProtected));
  assert.equal(await engine.deleteQueue('never-seen'), false);
  assert.equal(await engine.cancel(first.idOf(0)), 'cancelled');
  assert.equal(await engine.deleteQueue('billing'), true);
  assert.equal(engine.findQueue('billing'), undefined);
  assert.ok(!engine.queues().some(({ name }) => name === 'billing'));
  await engine.close();

  engine = await open(fs);
  assert.equal(engine.findQueue('billing'), undefined, 'the delete was replayed');
  assert.equal(engine.queueConfig('billing').max_attempts, 20, 'its config is gone');
  await engine.admit(batchFromSpecs([{ ...original, key: 'k2' }]));
  assert.equal(engine.findQueue('billing')?.max_attempts, 20, 'named by a timer again, it is back with the defaults');
  // A checkpoint after the delete: the manifest lists no config for it either.
  await engine.checkpoint();
  await engine.close();
  engine = await open(fs);
  assert.equal(engine.queueConfig('billing').max_attempts, 20);
  await engine.close();
});
