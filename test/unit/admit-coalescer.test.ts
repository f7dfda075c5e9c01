// The admit coalescer over the engine on the simulated file system: one-timer admits of one
// turn share one WAL record yet behave as separate admits (ids, duplicates, per-timer
// refusals, whole-record errors, replay).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AdmitCoalescer, type AdmittedOne } from '../../engine/admit-coalescer.ts';
import type { TimerSpec } from '../../engine/batch/timer-batch.ts';
import { type Clock, Engine } from '../../engine/engine.ts';
import { errorCodes, isFermataError } from '../../engine/errors.ts';
import { coalesceLimits, timerLimits } from '../../engine/limits.ts';
import { SimFileSystem, type SimOp } from '../sim/sim-file-system.ts';

const dataDir = '/data';
const t0 = 1_796_220_000_000;

function manualClock(start = t0): Clock & { set(ms: number): void } {
  let now = start;
  return { now: () => now, set: (ms) => (now = ms) };
}

/** A distinct payload per timer, with bytes of every value (not only ASCII). */
function payloadOf(i: number): Uint8Array {
  return Uint8Array.from({ length: 1 + (i % 37) }, (_, at) => (i * 131 + at * 7) & 0xff);
}

function specOf(i: number): TimerSpec {
  return { fireAtMs: t0 + 1000 + i, target: `https://t${i % 3}.example/hook`, payload: payloadOf(i), queue: i % 2 === 0 ? 'default' : 'billing', key: `k-${i}` };
}

test('concurrent admitOne calls share one WAL record; each id names its own timer', async () => {
  const fs = new SimFileSystem({ seed: 11 });
  const engine = await Engine.open({ dataDir, fs, clock: manualClock() });
  const coalescer = new AdmitCoalescer(engine);
  const before = engine.log.lastSeq;
  // As many as one record holds.
  const n = coalesceLimits.rowsMax;
  const answers = await Promise.all(Array.from({ length: n }, (_, i) => coalescer.admitOne(specOf(i))));
  assert.equal(engine.log.lastSeq - before, 1, `${n} admits in one turn are one record`);
  assert.equal(new Set(answers.map((answer) => answer.id)).size, n);
  for (const [i, answer] of answers.entries()) {
    assert.equal(answer.duplicate, false);
    const view = engine.get(answer.id);
    assert.ok(view !== undefined);
    assert.equal(view.fireAtMs, t0 + 1000 + i);
    assert.equal(view.target, `https://t${i % 3}.example/hook`);
    assert.equal(view.queue, i % 2 === 0 ? 'default' : 'billing');
    assert.equal(view.key, `k-${i}`);
    assert.deepEqual(engine.payloadOf(answer.id), payloadOf(i), `payload of timer ${i}, byte for byte`);
  }
  assert.equal(await engine.cancel((answers[7] as AdmittedOne).id), 'cancelled');
  assert.equal(engine.get((answers[7] as AdmittedOne).id)?.state, 'cancelled');
  assert.equal(engine.get((answers[8] as AdmittedOne).id)?.state, 'pending', 'cancelling one leaves its neighbours');
  await engine.close();
});

test('admits of later turns make later records; rowsMax caps a record', async () => {
  const fs = new SimFileSystem({ seed: 12 });
  const engine = await Engine.open({ dataDir, fs, clock: manualClock() });
  const coalescer = new AdmitCoalescer(engine, { rowsMax: 10 });
  const before = engine.log.lastSeq;
  const answers = await Promise.all(Array.from({ length: 25 }, (_, i) => coalescer.admitOne(specOf(i))));
  assert.equal(engine.log.lastSeq - before, 3, '25 admits at 10 rows a record');
  assert.equal(new Set(answers.map((answer) => answer.id)).size, 25);
  await coalescer.admitOne(specOf(100));
  assert.equal(engine.log.lastSeq - before, 4);
  await engine.close();
});

test('a record full at rowsMax is written at once; the rest of the turn goes into the next, written after it', async () => {
  const fs = new SimFileSystem({ seed: 14 });
  const engine = await Engine.open({ dataDir, fs, clock: manualClock() });
  const coalescer = new AdmitCoalescer(engine, { rowsMax: 10 });
  const writes: SimOp[] = [];
  fs.setFault((op) => {
    if (op === 'writev') writes.push(op);
    return undefined;
  });
  const first = Array.from({ length: 10 }, (_, i) => coalescer.admitOne(specOf(i)));
  assert.equal(writes.length, 1, 'the full record is being written within the turn that filled it');
  const rest = Array.from({ length: 5 }, (_, i) => coalescer.admitOne(specOf(10 + i)));
  assert.equal(writes.length, 1, 'the rest waits for the turn to end');
  const answers = await Promise.all([...first, ...rest]);
  assert.equal(writes.length, 2);
  assert.deepEqual(
    answers.map((answer) => engine.get(answer.id)?.fireAtMs),
    Array.from({ length: 15 }, (_, i) => t0 + 1000 + i),
  );
  // A record not full waits for the turn, as before.
  const single = coalescer.admitOne(specOf(99));
  assert.equal(writes.length, 2);
  await single;
  assert.equal(writes.length, 3);
  await engine.close();
});

test('one invalid or refused timer among 100 is refused alone', async () => {
  const fs = new SimFileSystem({ seed: 13 });
  const engine = await Engine.open({ dataDir, fs, clock: manualClock(), checkTarget: (target) => (target.includes('refused') ? 'a private address' : undefined) });
  const coalescer = new AdmitCoalescer(engine);
  const before = engine.log.lastSeq;
  const specs = Array.from({ length: 100 }, (_, i) => specOf(i));
  specs[40] = { ...specOf(40), target: 'ftp://bad.example/' };
  specs[70] = { ...specOf(70), target: 'https://refused.example/' };
  const results = await Promise.allSettled(specs.map((spec) => coalescer.admitOne(spec)));
  for (const [i, result] of results.entries()) {
    if (i === 40) assert.ok(result.status === 'rejected' && isFermataError(result.reason, errorCodes.batchInvalid));
    else if (i === 70) assert.ok(result.status === 'rejected' && isFermataError(result.reason, errorCodes.targetRefused));
    else assert.equal(result.status, 'fulfilled', `timer ${i} is admitted`);
  }
  assert.equal(engine.log.lastSeq - before, 1, 'the 98 good timers share one record');
  assert.equal(engine.stats().pending, 98);
  await engine.close();
});

test('a merged batch refused as a whole falls back to admitting each timer alone', async () => {
  const fs = new SimFileSystem({ seed: 14 });
  const clock = manualClock();
  const engine = await Engine.open({ dataDir, fs, clock });
  const coalescer = new AdmitCoalescer(engine);
  // At the horizon's edge when checked alone; past it once the clock steps back before the flush.
  const edge = coalescer.admitOne({ ...specOf(0), fireAtMs: t0 + timerLimits.horizonMsMax });
  const ordinary = coalescer.admitOne(specOf(1));
  clock.set(t0 - 1000);
  await assert.rejects(edge, (err) => isFermataError(err, errorCodes.batchInvalid));
  const answer = await ordinary;
  assert.equal(engine.get(answer.id)?.fireAtMs, t0 + 1001);
  await engine.close();
});

test('the same key twice in one turn: one timer, both callers get its id', async () => {
  const fs = new SimFileSystem({ seed: 15 });
  const engine = await Engine.open({ dataDir, fs, clock: manualClock() });
  const coalescer = new AdmitCoalescer(engine);
  const [first, other, second] = await Promise.all([
    coalescer.admitOne({ ...specOf(1), key: 'same' }),
    coalescer.admitOne(specOf(2)),
    coalescer.admitOne({ ...specOf(3), key: 'same' }),
  ]);
  assert.ok(first !== undefined && other !== undefined && second !== undefined);
  assert.equal(first.duplicate, false);
  assert.equal(second.duplicate, true);
  assert.equal(second.id, first.id);
  assert.equal(engine.get(first.id)?.fireAtMs, t0 + 1001, 'the earlier call is the original');
  assert.equal(engine.stats().pending, 2);
  const again = await coalescer.admitOne({ ...specOf(9), key: 'same' });
  assert.deepEqual(again, { id: first.id, duplicate: true, original: { state: 'pending', revision: 1, fireAtMs: t0 + 1001, differs: ['target', 'payload', 'fire_at'] } });
  await engine.close();
});

test('a poisoned log rejects every caller of the record', async () => {
  const fs = new SimFileSystem({ seed: 16 });
  const engine = await Engine.open({ dataDir, fs, clock: manualClock() });
  const coalescer = new AdmitCoalescer(engine);
  fs.failAfter('datasync', 0, 'EIO');
  const results = await Promise.allSettled(Array.from({ length: 50 }, (_, i) => coalescer.admitOne(specOf(i))));
  for (const result of results) assert.ok(result.status === 'rejected' && isFermataError(result.reason, errorCodes.walPoisoned));
  await assert.rejects(coalescer.admitOne(specOf(99)), (err) => isFermataError(err, errorCodes.walPoisoned));
  await engine.close().catch(() => undefined);
});

test('reopening replays a coalesced record to the same ids', async () => {
  const fs = new SimFileSystem({ seed: 17 });
  let engine = await Engine.open({ dataDir, fs, clock: manualClock() });
  const coalescer = new AdmitCoalescer(engine);
  const before = engine.log.lastSeq;
  const specs = Array.from({ length: 64 }, (_, i) => i);
  const answers = await Promise.all(specs.map((i) => coalescer.admitOne(specOf(i))));
  assert.equal(engine.log.lastSeq - before, 1);
  await engine.close();
  engine = await Engine.open({ dataDir, fs: fs.powerLoss(), clock: manualClock() });
  for (const [i, answer] of answers.entries()) {
    const view = engine.get(answer.id);
    assert.ok(view !== undefined, `timer ${i} is back`);
    assert.equal(view.fireAtMs, t0 + 1000 + i);
    assert.deepEqual(engine.payloadOf(answer.id), payloadOf(i));
  }
  const again = await new AdmitCoalescer(engine).admitOne(specOf(5));
  assert.deepEqual(again, { id: (answers[5] as AdmittedOne).id, duplicate: true, original: { state: 'pending', revision: 1, fireAtMs: t0 + 1005, differs: [] } }, 'keys survive the reopen');
  await engine.close();
});

test('a spec no batch can be built from is refused alone, later; the others of its turn are admitted', async () => {
  const fs = new SimFileSystem({ seed: 18 });
  const engine = await Engine.open({ dataDir, fs, clock: manualClock() });
  const coalescer = new AdmitCoalescer(engine);
  // An in-process caller's mistake the types do not stop: a header value that is not a string.
  const broken = { ...specOf(1), headers: { 'x-a': 42 } } as unknown as TimerSpec;
  let settledSync = false;
  const results = Promise.allSettled([coalescer.admitOne(specOf(0)), coalescer.admitOne(broken).finally(() => (settledSync = true)), coalescer.admitOne(specOf(2))]);
  assert.equal(settledSync, false);
  const [first, bad, third] = await results;
  assert.equal(first?.status, 'fulfilled');
  assert.equal(bad?.status, 'rejected');
  assert.equal(third?.status, 'fulfilled');
  assert.equal(engine.stats().pending, 2);
  await engine.close();
});

test('bytesMax splits a turn into records: strings are counted at their longest UTF-8', async () => {
  const fs = new SimFileSystem({ seed: 19 });
  const engine = await Engine.open({ dataDir, fs, clock: manualClock() });
  // 500 ASCII characters count as 1,500 bytes: two such payloads (and their keys) fit 4,000.
  const coalescer = new AdmitCoalescer(engine, { bytesMax: 4000 });
  const before = engine.log.lastSeq;
  let writes = 0;
  fs.setFault((op) => {
    if (op === 'writev') writes++;
    return undefined;
  });
  const pending = Array.from({ length: 3 }, (_, i) => coalescer.admitOne({ ...specOf(i), payload: 'p'.repeat(500) }));
  assert.equal(writes, 1, 'a record full by its bytes is being written within the turn, as one full by its rows');
  pending.push(...Array.from({ length: 7 }, (_, i) => coalescer.admitOne({ ...specOf(3 + i), payload: 'p'.repeat(500) })));
  const answers = await Promise.all(pending);
  assert.equal(new Set(answers.map((answer) => answer.id)).size, 10);
  assert.equal(engine.log.lastSeq - before, 5, 'two timers a record');
  await engine.close();
});
