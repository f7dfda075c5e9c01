// Idempotency keys: a key already known returns the original timer's id and adds nothing,
// within a batch, across batches, between concurrent admits, after a retry moved the
// original, and after a restart (replay decides every duplicate as it was decided live).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { batchFromSpecs, type TimerSpec } from '../../engine/batch/timer-batch.ts';
import { type Clock, Engine } from '../../engine/engine.ts';
import { outcomeKind } from '../../engine/records.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';
import { outcomesFor } from '../helpers/outcomes.ts';

const dataDir = '/data';
const t0 = 1_796_220_000_000;
const clock: Clock = { now: () => t0 };
const timer = (key: string | undefined, offset = 0): TimerSpec => ({ fireAtMs: t0 + offset, target: 'https://a.example/', ...(key === undefined ? {} : { key }) });

test('a known key returns the original id and adds nothing, across batches and within one', async () => {
  const engine = await Engine.open({ dataDir, fs: new SimFileSystem({ seed: 51 }), clock });
  const first = await engine.admit(batchFromSpecs([timer('order-1'), timer(undefined), timer('order-2', 5)]));
  assert.equal(first.duplicates, 0);
  const second = await engine.admit(batchFromSpecs([timer('order-2', 99), timer('order-3'), timer('order-3', 1)]));
  assert.equal(second.duplicates, 2);
  assert.deepEqual([0, 1, 2].map((row) => second.isDuplicate(row)), [true, false, true]);
  assert.equal(second.idOf(0), first.idOf(2), 'the original id, with the original fire time');
  assert.equal(second.idOf(2), second.idOf(1), 'a key repeated inside a batch points at its first row');
  assert.equal(engine.stats().pending, 4, 'two duplicates added no timers');
  assert.equal(engine.get(first.idOf(2))?.key, 'order-2');
  assert.equal(engine.get(first.idOf(1))?.key, null);
  await engine.close();
});

test('concurrent admits of one key make one timer, and both answer its id', async () => {
  const engine = await Engine.open({ dataDir, fs: new SimFileSystem({ seed: 52 }), clock });
  const results = await Promise.all(Array.from({ length: 8 }, (_, i) => engine.admit(batchFromSpecs([timer('same', i), timer(`own-${i}`)]))));
  const ids = new Set(results.map((admitted) => admitted.idOf(0)));
  assert.equal(ids.size, 1, 'every admit got the same id for the shared key');
  assert.equal(results.filter((admitted) => !admitted.isDuplicate(0)).length, 1);
  assert.equal(engine.stats().pending, 1 + 8);
  await engine.close();
});

test('duplicates hold after a restart and after the original was retried', async () => {
  const fs = new SimFileSystem({ seed: 53 });
  let engine = await Engine.open({ dataDir, fs, clock });
  const original = await engine.admit(batchFromSpecs([timer('pay-7')]));
  await engine.settle(outcomesFor(engine.takeDue(t0, 1), outcomeKind.retry, t0 + 60_000));
  const again = await engine.admit(batchFromSpecs([timer('pay-7', 123), timer('pay-8')]));
  assert.equal(again.idOf(0), original.idOf(0), 'the id it was first given, though its due time moved');
  await engine.close();

  engine = await Engine.open({ dataDir, fs, clock });
  assert.equal(engine.stats().pending, 2, 'replay made the same duplicate decisions');
  const afterRestart = await engine.admit(batchFromSpecs([timer('pay-8', 7), timer('pay-7', 8)]));
  assert.deepEqual([afterRestart.idOf(0), afterRestart.idOf(1)], [again.idOf(1), original.idOf(0)]);
  assert.equal(afterRestart.duplicates, 2);
  await engine.close();
});

test('a key is free again once its finished timer’s retention ended, and replay agrees', async () => {
  const fs = new SimFileSystem({ seed: 54 });
  let now = t0;
  const moving: Clock = { now: () => now };
  const retention = { finishedMs: 1_000, deadMs: 5_000 };
  let engine = await Engine.open({ dataDir, fs, clock: moving, retention });
  const original = await engine.admit(batchFromSpecs([timer('k')]));
  await engine.settle(outcomesFor(engine.takeDue(now, 1), outcomeKind.delivered));
  now += 500;
  const within = await engine.admit(batchFromSpecs([timer('k', 600)]));
  assert.equal(within.idOf(0), original.idOf(0), 'within retention: a duplicate');
  now += 1_000;
  const after = await engine.admit(batchFromSpecs([timer('k', 2_000)]));
  assert.equal(after.isDuplicate(0), false, 'after retention: a new timer');
  assert.equal(engine.get(original.idOf(0)), undefined, 'the finished original is gone');
  await engine.close();

  now += 60_000; // replay happens much later: decisions must still be the ones made live
  engine = await Engine.open({ dataDir, fs, clock: moving, retention });
  assert.equal(engine.get(after.idOf(0))?.state, 'pending');
  assert.equal(engine.stats().pending, 1);
  await engine.close();
});
