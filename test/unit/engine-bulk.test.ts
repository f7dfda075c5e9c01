// Bulk batches through the engine: rows that go into consecutive slots are indexed as one run
// (engine/store/slot-index.ts), rows that reuse freed slots or follow a duplicate key one by
// one. Whatever mix a history leaves, every id must answer the same live and after a reopen
// replays the log, and a released row must stay gone.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { batchFromSpecs, type TimerSpec } from '../../engine/batch/timer-batch.ts';
import { type Clock, Engine, type TimerView } from '../../engine/engine.ts';
import { outcomeKind } from '../../engine/records.ts';
import { slotIndexRunRowsMin } from '../../engine/store/slot-index.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';
import { outcomesFor } from '../helpers/outcomes.ts';
import { Prng } from '../helpers/prng.ts';

const target = 'https://a.example/';

function movingClock(start = 1_796_220_000_000): Clock & { advance(ms: number): void } {
  let now = start;
  return { now: () => now, advance: (ms) => void (now += ms) };
}

/** Every id's view (undefined once released), the counts by state and the resident count. */
function snapshot(engine: Engine, ids: readonly string[]): unknown {
  return { views: ids.map((id): TimerView | undefined => engine.get(id)), counts: engine.stats().counts, resident: engine.stats().resident };
}

test('big batches, cancels, deliveries and releases answer the same live and after each reopen', async () => {
  for (let seed = 1; seed <= 6; seed++) {
    const prng = new Prng(seed);
    const clock = movingClock();
    const options = { dataDir: '/data', fs: new SimFileSystem({ seed, maxExtraHops: 0 }), clock, retention: { finishedMs: 500, deadMs: 700 } };
    let engine = await Engine.open(options);
    const ids: string[] = [];
    const keyOf = new Map<string, string>();
    let runRowsAdmitted = 0;
    for (let step = 0; step < 40; step++) {
      const action = prng.below(5);
      if (action <= 1) {
        const rows = 1 + prng.below(3 * slotIndexRunRowsMin);
        const keyed = prng.coin();
        const specs: TimerSpec[] = Array.from({ length: rows }, () => ({
          fireAtMs: clock.now() + prng.below(400),
          target,
          payload: `p${prng.below(1000)}`,
          ...(keyed ? { key: `k${prng.below(300)}` } : {}),
        }));
        const admitted = await engine.admit(batchFromSpecs(specs));
        if (admitted.duplicates === 0 && rows >= slotIndexRunRowsMin) runRowsAdmitted += rows;
        for (let row = 0; row < rows; row++) {
          const id = admitted.idOf(row);
          const key = specs[row]?.key;
          if (key !== undefined && keyOf.has(key) && admitted.isDuplicate(row)) assert.equal(engine.get(id)?.key, key, 'a duplicate answers with the original');
          if (key !== undefined) keyOf.set(key, id);
          ids.push(id);
        }
      } else if (action === 2 && ids.length > 0) {
        for (let i = 0; i < 5; i++) {
          const id = ids[prng.below(ids.length)] as string;
          const outcome = await engine.cancel(id);
          if (outcome === 'cancelled') assert.equal(engine.get(id)?.state, 'cancelled');
        }
      } else if (action === 3) {
        const slice = engine.takeDue(clock.now(), 1 + prng.below(60));
        const kind = [outcomeKind.delivered, outcomeKind.retry, outcomeKind.dead][prng.below(3)] as (typeof outcomeKind)[keyof typeof outcomeKind];
        await engine.settle(outcomesFor(slice, kind, clock.now() + 50));
      } else {
        clock.advance(prng.below(400));
        // The sweep releases finished timers whose retention ended (takeDue does it on the way).
        await engine.settle(outcomesFor(engine.takeDue(clock.now(), 50), outcomeKind.delivered));
      }
      if (step % 8 === 7) {
        // Opening releases what had expired, as a sweep would: sweep first (settling what it takes).
        await engine.settle(outcomesFor(engine.takeDue(clock.now(), 10_000), outcomeKind.retry, clock.now() + 50));
        const live = snapshot(engine, ids);
        await engine.close();
        engine = await Engine.open(options);
        assert.deepEqual(snapshot(engine, ids), live, `seed ${seed}, step ${step}: the reopened engine differs`);
      }
    }
    const released = ids.filter((id) => engine.get(id) === undefined).length;
    assert.ok(runRowsAdmitted > 0 && released > 0, `seed ${seed}: the history indexed runs and released timers`);
    await engine.close();
  }
});

test('a released row of a bulk batch is gone by its id; its neighbours are not', async () => {
  const clock = movingClock();
  const engine = await Engine.open({ dataDir: '/data', fs: new SimFileSystem({ seed: 9 }), clock, retention: { finishedMs: 10, deadMs: 10 } });
  const rows = 4 * slotIndexRunRowsMin;
  const admitted = await engine.admit(batchFromSpecs(Array.from({ length: rows }, (_, row) => ({ fireAtMs: clock.now() + 1000 + row, target }))));
  assert.equal(await engine.cancel(admitted.idOf(5)), 'cancelled');
  clock.advance(20);
  assert.equal(engine.takeDue(clock.now(), 10).count, 0, 'the sweep only releases: nothing is due yet');
  assert.equal(engine.get(admitted.idOf(5)), undefined, 'released');
  assert.equal(await engine.cancel(admitted.idOf(5)), 'not-found');
  assert.equal(engine.get(admitted.idOf(4))?.state, 'pending');
  assert.equal(engine.get(admitted.idOf(6))?.state, 'pending');
  // The freed slot is taken again by the next admit; the old id must not reach the new timer.
  const next = await engine.admit(batchFromSpecs([{ fireAtMs: clock.now() + 5000, target }]));
  assert.equal(engine.get(next.idOf(0))?.state, 'pending');
  assert.equal(engine.get(admitted.idOf(5)), undefined);
  assert.equal(engine.stats().resident, rows);
  await engine.close();
});

/** Rows a record of the sizing tests holds; every other row has a key. */
const sizingRows = 500;

/** Admits records from…to of sizingRows timers (row i of record r keyed `key-r-i` when i is even); their ids in order. */
async function admitSizingRecords(engine: Engine, clock: Clock, from: number, to: number): Promise<string[]> {
  const ids: string[] = [];
  for (let r = from; r < to; r++) {
    const specs: TimerSpec[] = Array.from({ length: sizingRows }, (_, i) => ({ fireAtMs: clock.now() + 3_600_000 + i, target, payload: `r${r}-${i}`, ...(i % 2 === 0 ? { key: `key-${r}-${i}` } : {}) }));
    const admitted = await engine.admit(batchFromSpecs(specs));
    for (let i = 0; i < sizingRows; i++) ids.push(admitted.idOf(i));
  }
  return ids;
}

/** The key of row `row` of record `record` is found again: a new timer with it is a duplicate of that one. */
async function assertKeyFound(engine: Engine, clock: Clock, ids: readonly string[], record: number, row: number): Promise<void> {
  const again = await engine.admit(batchFromSpecs([{ fireAtMs: clock.now() + 7_200_000, target, key: `key-${record}-${row}` }]));
  assert.equal(again.isDuplicate(0), true, `key of record ${record}, row ${row} found after the reopen`);
  assert.equal(again.idOf(0), ids[record * sizingRows + row]);
}

test('a reopen sizes the store for the timers the log holds instead of doubling; every timer and key answers', async () => {
  const clock = movingClock();
  const options = { dataDir: '/data', fs: new SimFileSystem({ seed: 3, maxExtraHops: 0 }), clock };
  let engine = await Engine.open(options);
  const ids = await admitSizingRecords(engine, clock, 0, 40);
  const live = ids.map((id) => engine.get(id));
  assert.equal(engine.stats().residentCapacity, 32_768, 'admits grow the columns by doubling');
  await engine.close();

  engine = await Engine.open(options);
  const timers = ids.length;
  assert.equal(engine.stats().resident, timers);
  // Doubling would reach 32,768 again; sized from the log's bytes, the columns hold about the 20,000 (a 5% margin).
  assert.ok(engine.stats().residentCapacity >= timers && engine.stats().residentCapacity <= timers * 1.1, `capacity ${engine.stats().residentCapacity} for ${timers} timers`);
  assert.deepEqual(ids.map((id) => engine.get(id)), live);
  await assertKeyFound(engine, clock, ids, 7, 4);
  await engine.close();
});

test('a reopen makes the columns for the whole log ahead from its first records, when cancels and outcomes are logged between the adds too', async () => {
  const clock = movingClock();
  const options = { dataDir: '/data', fs: new SimFileSystem({ seed: 5, maxExtraHops: 0 }), clock };
  let engine = await Engine.open(options);
  const ids: string[] = [];
  for (let r = 0; r < 40; r++) {
    const specs: TimerSpec[] = Array.from({ length: sizingRows }, (_, i) => ({ fireAtMs: clock.now() + (i % 100), target, payload: `r${r}-${i}`, ...(i % 2 === 0 ? { key: `key-${r}-${i}` } : {}) }));
    const admitted = await engine.admit(batchFromSpecs(specs));
    for (let i = 0; i < sizingRows; i++) ids.push(admitted.idOf(i));
    // A tenth of each record's timers cancelled, one CANCEL each; a fifth delivered, as one OUTCOME.
    for (let i = 0; i < sizingRows; i += 10) await engine.cancel(admitted.idOf(i));
    clock.advance(100);
    await engine.settle(outcomesFor(engine.takeDue(clock.now(), sizingRows / 5), outcomeKind.delivered));
  }
  const live = snapshot(engine, ids);
  await engine.close();

  engine = await Engine.open(options);
  const stats = engine.stats();
  // Finished timers stay for their retention: every row of the log holds a slot.
  assert.equal(stats.resident, ids.length);
  assert.equal(stats.columnGrowthsMadeAhead, 1, 'the growth at the sample took the columns made ahead');
  assert.ok(stats.residentCapacity >= ids.length && stats.residentCapacity <= ids.length * 1.25, `capacity ${stats.residentCapacity} for ${ids.length} timers`);
  assert.deepEqual(snapshot(engine, ids), live);
  await assertKeyFound(engine, clock, ids, 21, 6);
  await engine.close();
});

test('a reopen after a checkpoint makes room for the resident run and the log after it; every timer and key answers', async () => {
  const clock = movingClock();
  const options = { dataDir: '/data', fs: new SimFileSystem({ seed: 4, maxExtraHops: 0 }), clock };
  let engine = await Engine.open(options);
  const ids = await admitSizingRecords(engine, clock, 0, 20);
  await engine.checkpoint();
  ids.push(...(await admitSizingRecords(engine, clock, 20, 40)));
  const live = ids.map((id) => engine.get(id));
  await engine.close();

  engine = await Engine.open(options);
  assert.equal(engine.stats().resident, ids.length);
  assert.ok(engine.stats().residentCapacity >= ids.length && engine.stats().residentCapacity < 32_768, `capacity ${engine.stats().residentCapacity}: the run's 10,000 at once, then the log's 10,000 on top`);
  assert.deepEqual(ids.map((id) => engine.get(id)), live);
  await assertKeyFound(engine, clock, ids, 3, 8);
  await assertKeyFound(engine, clock, ids, 33, 8);
  await engine.close();
});
