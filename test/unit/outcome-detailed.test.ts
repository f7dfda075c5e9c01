// OUTCOME_DETAILED (docs/format/engine-records.md): why a failed attempt failed and when, in
// the record and in memory. The format's worked example byte for byte (its golden copy); a
// delivered batch still logged as a plain 32-byte OUTCOME; malformed bodies refused; and in the
// engine: last_error, last_attempt_at and next_attempt_at across a restart (and across a
// checkpoint that truncates the log, and a restart), a delivery clearing
// them, one text held once however many timers name it, the dead list paged by a cursor, and
// a discarded dead timer released at once and for good.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { batchFromSpecs } from '../../engine/batch/timer-batch.ts';
import { type Clock, Engine } from '../../engine/engine.ts';
import { deliveryLimits } from '../../engine/limits.ts';
import {
  boundErrorText,
  decodeOutcomes,
  decodeOutcomesDetailed,
  emptyOutcomes,
  encodeOutcomeRecord,
  encodeOutcomesDetailed,
  outcomeKind,
  recordType,
} from '../../engine/records.ts';
import { TimerFailures } from '../../engine/timer-failures.ts';
import { outcomesFor } from '../helpers/outcomes.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';

// The worked example of docs/format/engine-records.md, "OUTCOME_DETAILED (7)".
const golden = `
02 00 00 00 01 00 00 00
00 00 00 00 00 00 1c 40  00 00 00 00 02 00 f7 01
02 00 00 00 01 00 00 00  00 00 a6 d3 85 31 7a 42
00 00 00 00 00 00 1c 40  02 00 00 00 01 00 c8 00
02 00 00 00 00 00 00 00  00 00 c0 2a d8 31 7a 42
01 00 00 00 00 00 00 00  00 00 00 c5 85 31 7a 42
00 00 00 00 00 00 00 00  00 00 00 00 00 00 00 00
08 00 48 54 54 50 20 35 30 33`;
const goldenBytes = Uint8Array.from(golden.trim().split(/\s+/), (hex) => parseInt(hex, 16));

function workedExample(): ReturnType<typeof emptyOutcomes> {
  const o = emptyOutcomes(3);
  o.count = 3;
  for (let i = 0; i < 3; i++) {
    o.seqs[i] = 7;
    o.rows[i] = i;
    o.attempts[i] = 2;
  }
  o.kinds.set([outcomeKind.retry, outcomeKind.retry, outcomeKind.delivered]);
  o.statuses.set([503, 503, 200]);
  o.retryAtMs.set([1_800_000_060_000, 1_800_000_060_000, 1_800_086_400_000]);
  o.errorTexts.push('HTTP 503');
  o.errors.set([1, 1, 0]);
  o.attemptedAtMs.set([1_800_000_000_000, 1_800_000_000_000, 0]);
  return o;
}

test('OUTCOME_DETAILED: the worked example is written byte for byte and read back row by row', () => {
  const example = workedExample();
  assert.deepEqual(encodeOutcomesDetailed(example), goldenBytes);
  const record = encodeOutcomeRecord(example);
  assert.equal(record.type, recordType.outcomeDetailed);
  const decoded = decodeOutcomesDetailed(goldenBytes);
  assert.ok(decoded !== undefined);
  assert.equal(decoded.count, 3);
  assert.deepEqual(decoded.errorTexts, ['HTTP 503']);
  assert.deepEqual(Array.from(decoded.errors), [1, 1, 0]);
  assert.deepEqual(Array.from(decoded.attemptedAtMs), [1_800_000_000_000, 1_800_000_000_000, 0]);
  assert.deepEqual(Array.from(decoded.statuses), [503, 503, 200]);
  assert.deepEqual(Array.from(decoded.kinds), [outcomeKind.retry, outcomeKind.retry, outcomeKind.delivered]);
});

test('outcomes without an error stay a plain OUTCOME: a delivered batch of 10,000 rows logs 32 bytes', () => {
  const delivered = emptyOutcomes(10_000);
  delivered.count = 10_000;
  for (let i = 0; i < 10_000; i++) {
    delivered.seqs[i] = 3;
    delivered.rows[i] = i;
    delivered.kinds[i] = outcomeKind.delivered;
    delivered.statuses[i] = 200;
    delivered.attempts[i] = 1;
    delivered.retryAtMs[i] = 5;
  }
  const record = encodeOutcomeRecord(delivered);
  assert.equal(record.type, recordType.outcome);
  assert.equal(record.body.length, 32);
  assert.equal(decodeOutcomes(record.body)?.count, 10_000);
});

test('a failed Arrow batch of 10,000 rows with one answer is one entry, one detail and one text', () => {
  const failed = emptyOutcomes(10_000);
  failed.count = 10_000;
  failed.errorTexts.push('connection refused');
  for (let i = 0; i < 10_000; i++) {
    failed.seqs[i] = 3;
    failed.rows[i] = i;
    failed.kinds[i] = outcomeKind.retry;
    failed.attempts[i] = 1;
    failed.retryAtMs[i] = 5;
    failed.errors[i] = 1;
    failed.attemptedAtMs[i] = 4;
  }
  assert.equal(encodeOutcomesDetailed(failed).length, 8 + 32 + 16 + 2 + 'connection refused'.length);
});

test('malformed OUTCOME_DETAILED bodies are refused', () => {
  const refused = (bytes: Uint8Array, why: string): void => assert.equal(decodeOutcomesDetailed(bytes), undefined, why);
  refused(goldenBytes.subarray(0, 7), 'shorter than its header');
  refused(goldenBytes.subarray(0, goldenBytes.length - 1), 'a text cut short');
  refused(Uint8Array.from([...goldenBytes, 0]), 'a byte after the last text');
  const noText = goldenBytes.slice();
  noText[4] = 0; // texts 0, but detail 0 names text 1
  refused(noText.subarray(0, noText.length - 10), 'an error that names no text');
  const badUtf8 = goldenBytes.slice();
  badUtf8[badUtf8.length - 1] = 0xff;
  refused(badUtf8, 'a text that is not UTF-8');
  const tooManyEntries = goldenBytes.slice();
  tooManyEntries[0] = 0xff;
  refused(tooManyEntries, 'more entries than the body holds');
});

test('an error text is cut to lastErrorBytesMax bytes at a character edge', () => {
  assert.equal(boundErrorText('HTTP 503'), 'HTTP 503');
  const long = boundErrorText('é'.repeat(1000));
  assert.ok(new TextEncoder().encode(long).length <= deliveryLimits.lastErrorBytesMax);
  assert.ok(long.endsWith('…'));
  assert.ok(!long.includes('\ufffd'), 'no character cut in half');
});

test('TimerFailures holds a text once for all the timers naming it and lets it go with the last', () => {
  const failures = new TimerFailures();
  for (let slot = 0; slot < 1000; slot++) failures.set(slot, 'HTTP 503', 10);
  assert.equal(failures.textCount, 1);
  failures.set(5, 'timeout after 10000 ms', 20);
  assert.equal(failures.textCount, 2);
  assert.equal(failures.errorOf(5), 'timeout after 10000 ms');
  assert.equal(failures.attemptedAtOf(5), 20);
  for (let slot = 0; slot < 1000; slot++) failures.clear(slot);
  assert.equal(failures.size, 0);
  assert.equal(failures.textCount, 0);
  assert.equal(failures.errorOf(1), null);
});

const dataDir = '/data';
const t0 = 1_796_220_000_000;

function manualClock(start = t0): Clock & { set(ms: number): void } {
  let now = start;
  return { now: () => now, set: (ms) => (now = ms) };
}

const spec = (fireAtMs: number) => ({ fireAtMs, target: 'https://down.example/hook?token=secret', queue: 'q' });

test('last_error, last_attempt_at and next_attempt_at survive a restart; a delivery clears them', async () => {
  const clock = manualClock();
  const fs = new SimFileSystem({ seed: 71 });
  let engine = await Engine.open({ dataDir, fs, clock });
  const admitted = await engine.admit(batchFromSpecs([spec(t0), spec(t0), spec(t0)]));
  const slice = engine.takeDue(t0, 10);
  const outcomes = outcomesFor(slice, outcomeKind.retry, t0 + 60_000, 503);
  outcomes.errorTexts.push('HTTP 503', 'connection refused');
  outcomes.errors.set([1, 1, 2]);
  outcomes.statuses[2] = 0;
  outcomes.attemptedAtMs.fill(t0 + 3);
  await engine.settle(outcomes);
  const expect = (i: number, error: string): void => {
    const view = engine.get(admitted.idOf(i));
    assert.equal(view?.state, 'retrying');
    assert.equal(view?.lastError, error);
    assert.equal(view?.lastAttemptAtMs, t0 + 3);
    assert.equal(view?.nextAttemptAtMs, t0 + 60_000);
  };
  expect(0, 'HTTP 503');
  expect(2, 'connection refused');
  await engine.close();

  engine = await Engine.open({ dataDir, fs, clock });
  expect(0, 'HTTP 503');
  expect(1, 'HTTP 503');
  expect(2, 'connection refused');
  clock.set(t0 + 60_000);
  const again = engine.takeDue(t0 + 60_000, 10);
  assert.equal(again.count, 3);
  await engine.settle(outcomesFor(again, outcomeKind.delivered));
  const delivered = engine.get(admitted.idOf(0));
  assert.deepEqual([delivered?.state, delivered?.lastError, delivered?.lastAttemptAtMs, delivered?.nextAttemptAtMs], ['delivered', null, null, null]);
  await engine.close();
  engine = await Engine.open({ dataDir, fs, clock });
  assert.equal(engine.get(admitted.idOf(2))?.lastError, null, 'the delivery is durable too');
  await engine.close();
});

test('last_error and last_attempt_at survive a checkpoint that lets the log before it go, and a restart; timers that never failed show none', async () => {
  const clock = manualClock();
  const fs = new SimFileSystem({ seed: 73 });
  const open = (): Promise<Engine> => Engine.open({ dataDir, fs, clock, walLimits: { segmentBytes: 4096 } });
  let engine = await open();
  // Many that never fail, due after now: in the checkpoint's run the failed ones fall among them.
  const quiet = await engine.admit(batchFromSpecs(Array.from({ length: 3000 }, (_, i) => spec(t0 + 1 + i))));
  const failed = await engine.admit(batchFromSpecs([spec(t0), spec(t0), spec(t0)]));
  const slice = engine.takeDue(t0, 10);
  assert.equal(slice.count, 3);
  const outcomes = outcomesFor(slice, outcomeKind.retry, 0, 503);
  outcomes.retryAtMs.set([t0 + 1_500, 0, t0 + 2_500]);
  outcomes.kinds[1] = outcomeKind.dead;
  outcomes.reasons[1] = 1;
  outcomes.statuses[1] = 0;
  outcomes.errorTexts.push('HTTP 503', 'connection refused', 'timeout after 10000 ms');
  outcomes.errors.set([1, 2, 3]);
  outcomes.attemptedAtMs.set([t0 + 3, t0 + 4, t0 + 5]);
  await engine.settle(outcomes);
  const report = await engine.checkpoint();
  assert.equal(report.residentRows, 3003);
  assert.ok(report.segmentsDeleted >= 1, 'the records that said why are gone from the log');
  await engine.close();

  engine = await open();
  const shown = [0, 1, 2].map((i) => {
    const view = engine.get(failed.idOf(i));
    return [view?.state, view?.lastError, view?.lastAttemptAtMs, view?.nextAttemptAtMs];
  });
  assert.deepEqual(shown, [
    ['retrying', 'HTTP 503', t0 + 3, t0 + 1_500],
    ['dead', 'connection refused', t0 + 4, null],
    ['retrying', 'timeout after 10000 ms', t0 + 5, t0 + 2_500],
  ]);
  assert.deepEqual(
    engine.listDead(10).map((dead) => [dead.id, dead.lastError, dead.lastAttemptAtMs]),
    [[failed.idOf(1), 'connection refused', t0 + 4]],
  );
  for (let i = 0; i < quiet.rows; i++) {
    const view = engine.get(quiet.idOf(i));
    if (view?.lastError !== null || view.lastAttemptAtMs !== null) assert.fail(`timer ${i} never failed, and shows ${JSON.stringify(view)}`);
  }
  // And once more through a checkpoint of the restored engine.
  await engine.checkpoint();
  await engine.close();
  engine = await open();
  assert.equal(engine.get(failed.idOf(2))?.lastError, 'timeout after 10000 ms');
  await engine.close();
});

async function deadTimers(engine: Engine, count: number): Promise<string[]> {
  const admitted = await engine.admit(batchFromSpecs(Array.from({ length: count }, () => spec(t0))));
  const slice = engine.takeDue(t0, count);
  const outcomes = outcomesFor(slice, outcomeKind.dead, 0, 503);
  outcomes.reasons.fill(1);
  outcomes.errorTexts.push('HTTP 503');
  outcomes.errors.fill(1);
  outcomes.attemptedAtMs.fill(t0 + 1);
  await engine.settle(outcomes);
  return Array.from({ length: count }, (_, i) => admitted.idOf(i));
}

test('the dead list pages past 1,000 with a cursor, oldest first, each timer once', async () => {
  const engine = await Engine.open({ dataDir, fs: new SimFileSystem({ seed: 72 }), clock: manualClock() });
  const ids = await deadTimers(engine, 2500);
  const seen: string[] = [];
  let cursor: string | undefined;
  for (let pages = 0; pages < 10; pages++) {
    const page = engine.deadPage(1000, undefined, cursor);
    assert.ok(page !== undefined);
    seen.push(...page.dead.map((timer) => timer.id));
    if (page.nextCursor === null) break;
    cursor = page.nextCursor;
  }
  assert.deepEqual(seen, ids);
  assert.equal(engine.deadPage(1000)?.dead[0]?.lastError, 'HTTP 503');
  assert.equal(engine.deadPage(1000)?.dead[0]?.lastAttemptAtMs, t0 + 1);
  assert.equal(engine.deadPage(1000, undefined, 'not-a-cursor'), undefined);
  // A cursor names a place in the log: discarding the timer it names does not spoil it.
  const first = engine.deadPage(10);
  assert.equal(await engine.discardDead(first?.nextCursor as string), 'discarded');
  assert.equal(engine.deadPage(10, undefined, first?.nextCursor as string)?.dead[0]?.id, ids[10]);
  await engine.close();
});

test('a discarded dead timer is released at once and stays gone after a restart; only dead timers are discarded', async () => {
  const clock = manualClock();
  const fs = new SimFileSystem({ seed: 73 });
  let engine = await Engine.open({ dataDir, fs, clock });
  const [dead, other] = await deadTimers(engine, 2);
  const pending = (await engine.admit(batchFromSpecs([spec(t0 + 3_600_000)]))).idOf(0);
  assert.equal(await engine.discardDead(dead as string), 'discarded');
  assert.equal(engine.get(dead as string), undefined, 'released at once');
  assert.equal(await engine.discardDead(dead as string), 'not-found');
  assert.equal(await engine.discardDead(pending), 'not-dead');
  assert.equal(engine.stats().counts.dead, 1);
  await engine.close();
  engine = await Engine.open({ dataDir, fs, clock });
  assert.equal(await engine.lookup(dead as string), undefined, 'the discard is durable');
  assert.equal(engine.get(other as string)?.state, 'dead');
  assert.deepEqual(engine.listDead(10).map((timer) => timer.id), [other]);
  await engine.close();
});
