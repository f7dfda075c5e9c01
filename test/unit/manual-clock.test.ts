// The manual test clock (engine/clock.ts, engine/clock-moves.ts): it stands still between
// moves and never goes back; a worker's view reads the same position through shared memory;
// the CLOCK record's bytes (the golden copy of docs/format/engine-records.md's example); a move
// is durable before the clock moves, replay and a checkpoint's manifest restore the position, a
// record that moves it back refuses to start, a real clock leaves it logged; the scheduler
// looks at once after a move; POST /v1/clock's body rules.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { setImmediate as turn } from 'node:timers/promises';
import { test } from 'node:test';
import { Worker } from 'node:worker_threads';
import { batchFromSpecs } from '../../engine/batch/timer-batch.ts';
import { ManualClock, SharedClockView, sharedClockOf } from '../../engine/clock.ts';
import { Engine, systemClock } from '../../engine/engine.ts';
import { errorCodes, isFermataError } from '../../engine/errors.ts';
import { clockBodyBytes, decodeClock, encodeClock, recordType } from '../../engine/records.ts';
import { decodeManifest, encodeManifest, readManifest } from '../../engine/spill/manifest.ts';
import { decideOutcome } from '../../dispatch/retry-policy.ts';
import { Scheduler } from '../../dispatch/scheduler.ts';
import { MemoryLoader } from '../../engine/spill/memory-loader.ts';
import { defaultQueueConfig } from '../../engine/queues.ts';
import { clockMoveOf } from '../../ingest/http/routes/clock.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';

const dataDir = '/data';
const t0 = 1_800_000_000_000;
const day = 86_400_000;

/** docs/format/engine-records.md, "CLOCK (10)": the clock moved to 1,800,000,000,000 ms (2027-01-15T08:00:00Z). */
const goldenClockBody = Uint8Array.from([0x00, 0x00, 0x00, 0xc5, 0x85, 0x31, 0x7a, 0x42]);

test('CLOCK: the documented example is these 8 bytes, both ways; other lengths and non-whole positions are malformed', () => {
  assert.equal(recordType.clock, 10);
  assert.equal(clockBodyBytes, 8);
  assert.deepEqual(encodeClock(t0), goldenClockBody);
  assert.equal(new Date(t0).toISOString(), '2027-01-15T08:00:00.000Z');
  assert.equal(decodeClock(goldenClockBody), t0);
  assert.equal(decodeClock(goldenClockBody.subarray(0, 7)), undefined);
  assert.equal(decodeClock(new Uint8Array(9)), undefined);
  assert.equal(decodeClock(encodeClock(t0 + 0.5)), undefined);
  assert.equal(decodeClock(encodeClock(-1)), undefined);
  assert.equal(decodeClock(encodeClock(NaN)), undefined);
});

test('a manual clock stands still between moves, moves forward only, and tells its watchers', () => {
  const clock = new ManualClock(t0);
  assert.equal(clock.now(), t0);
  let told = 0;
  const unwatch = clock.watch(() => told++);
  clock.moveTo(t0 + 30 * day);
  assert.equal(clock.now(), t0 + 30 * day);
  assert.equal(told, 1);
  assert.throws(() => clock.moveTo(t0), /never moves backwards/);
  clock.moveTo(t0, true); // replay restoring a logged position may put it below its start
  assert.equal(clock.now(), t0);
  unwatch();
  clock.moveTo(t0 + 1);
  assert.equal(told, 2, 'the restore told the watcher; the unwatched move did not');
});

test('a delivery worker reads the main thread\'s manual clock through shared memory; without it, the real time', async () => {
  const clock = new ManualClock(t0);
  const shared = sharedClockOf(clock);
  assert.ok(shared !== undefined);
  assert.equal(sharedClockOf(systemClock), undefined);
  const view = new SharedClockView(shared);
  assert.equal(view.now(), t0);
  assert.equal(view.at(Date.now()), t0, 'a request sent at any real instant was sent at the position');
  clock.moveTo(t0 + day);
  assert.equal(view.now(), t0 + day);
  const real = new SharedClockView(undefined);
  const before = Date.now();
  assert.ok(real.now() >= before && real.at(before) === before);
  // Another thread sees the move too.
  const worker = new Worker(
    `const { parentPort, workerData } = require('node:worker_threads');
     parentPort.once('message', () => parentPort.postMessage(Number(Atomics.load(new BigInt64Array(workerData), 0))));`,
    { eval: true, workerData: shared },
  );
  clock.moveTo(t0 + 2 * day);
  const seen = new Promise<number>((resolve) => worker.once('message', resolve));
  worker.postMessage('read');
  assert.equal(await seen, t0 + 2 * day);
  await worker.terminate();
});

test('a move is logged as CLOCK before the clock moves; a restart resumes where it stood, not at the real time', async () => {
  const fs = new SimFileSystem({ seed: 101 });
  const clock = new ManualClock(t0);
  let engine = await Engine.open({ dataDir, fs, clock });
  assert.equal(engine.loggedClockMs, t0, 'a first start logs the position it starts at');
  const seqBefore = engine.log.lastSeq;
  const moving = engine.moveClock({ advanceMs: 30 * day });
  assert.equal(clock.now(), t0, 'not moved until its record is durable');
  assert.equal(await moving, t0 + 30 * day);
  assert.equal(clock.now(), t0 + 30 * day);
  assert.equal(engine.log.lastSeq, seqBefore + 1);
  assert.equal(await engine.moveClock({ toMs: t0 + 31 * day }), t0 + 31 * day);
  // Concurrent advances each count from where the one before left the clock.
  const both = await Promise.all([engine.moveClock({ advanceMs: 1000 }), engine.moveClock({ advanceMs: 1000 })]);
  assert.deepEqual(both, [t0 + 31 * day + 1000, t0 + 31 * day + 2000]);
  await engine.close();

  // A fresh process: its manual clock starts at the real time, and open puts it where it stood.
  const restarted = new ManualClock(Date.now());
  engine = await Engine.open({ dataDir, fs, clock: restarted });
  assert.equal(restarted.now(), t0 + 31 * day + 2000);
  const seq = engine.log.lastSeq;
  await engine.close();
  // Resuming logs nothing.
  engine = await Engine.open({ dataDir, fs, clock: new ManualClock(Date.now()) });
  assert.equal(engine.log.lastSeq, seq);
  await engine.close();
});

test('a move backwards is CLOCK_BACKWARDS and logs nothing; one past year 9999 is CLOCK_INVALID; the real clock is not moved', async () => {
  const fs = new SimFileSystem({ seed: 102 });
  const clock = new ManualClock(t0);
  let engine = await Engine.open({ dataDir, fs, clock });
  const seq = engine.log.lastSeq;
  await assert.rejects(engine.moveClock({ toMs: t0 - 1 }), (err) => isFermataError(err, errorCodes.clockBackwards) && /never moves backwards/.test(err.message));
  await assert.rejects(engine.moveClock({ advanceMs: 300_000 * 365 * day }), (err) => isFermataError(err, errorCodes.clockInvalid));
  assert.equal(await engine.moveClock({ toMs: t0 }), t0, 'a set to where it stands changes nothing');
  assert.equal(engine.log.lastSeq, seq);
  assert.equal(clock.now(), t0);
  await engine.close();
  engine = await Engine.open({ dataDir, fs, clock: systemClock });
  await assert.rejects(engine.moveClock({ advanceMs: 1 }), (err) => isFermataError(err, errorCodes.clockInvalid));
  await engine.close();
});

test('the real clock leaves a logged position as it is: a later manual start resumes there, also after a checkpoint under the real clock', async () => {
  const fs = new SimFileSystem({ seed: 103 });
  let engine = await Engine.open({ dataDir, fs, clock: new ManualClock(t0) });
  await engine.moveClock({ advanceMs: day });
  await engine.close();
  engine = await Engine.open({ dataDir, fs, clock: systemClock });
  assert.equal(engine.loggedClockMs, t0 + day);
  await engine.admit(batchFromSpecs([{ fireAtMs: Date.now() + day, target: 'https://a.example/' }]));
  await engine.checkpoint();
  await engine.close();
  const clock = new ManualClock(Date.now());
  engine = await Engine.open({ dataDir, fs, clock });
  assert.equal(clock.now(), t0 + day);
  await engine.close();
});

test('a checkpoint keeps the position in its manifest (the log before it is gone); manifests without one still read', async () => {
  const fs = new SimFileSystem({ seed: 104 });
  let engine = await Engine.open({ dataDir, fs, clock: new ManualClock(t0) });
  await engine.moveClock({ advanceMs: 7 * day });
  await engine.admit(batchFromSpecs([{ fireAtMs: t0 + 8 * day, target: 'https://a.example/' }]));
  await engine.checkpoint();
  assert.equal((await readManifest(fs, '/data/spill'))?.clockPositionMs, t0 + 7 * day);
  await engine.close();
  const clock = new ManualClock(Date.now());
  engine = await Engine.open({ dataDir, fs, clock });
  assert.equal(clock.now(), t0 + 7 * day);
  await engine.close();

  // The previous release's manifest (a golden fixture) has no position, and reads as having none.
  const old = decodeManifest(readFileSync(new URL('../fixtures/spill/v2/MANIFEST', import.meta.url)));
  assert.equal(old.clockPositionMs, undefined);
  assert.equal(decodeManifest(encodeManifest({ ...old, clockPositionMs: t0 })).clockPositionMs, t0);
  assert.throws(() => encodeManifest({ ...old, clockPositionMs: t0 + 0.5 }), /bad clockPositionMs/);
});

test('replay refuses a CLOCK record that moves the clock back (a log the engine never writes)', async () => {
  const fs = new SimFileSystem({ seed: 105 });
  const engine = await Engine.open({ dataDir, fs, clock: new ManualClock(t0) });
  await engine.moveClock({ advanceMs: day });
  // Written past the engine, as a damaged or forged log would hold it.
  await engine.log.append(recordType.clock, encodeClock(t0));
  await engine.close();
  await assert.rejects(Engine.open({ dataDir, fs, clock: new ManualClock(Date.now()) }), (err) => isFermataError(err, errorCodes.walCorrupt) && /moves the clock back/.test(err.message));
});

test('after a move the scheduler looks at once: a timer 30 days out is handed over within a turn, not after its armed sleep', async () => {
  const clock = new ManualClock(t0);
  const engine = await Engine.open({ dataDir, fs: new SimFileSystem({ seed: 106 }), clock });
  await engine.admit(batchFromSpecs([{ fireAtMs: t0 + 30 * day, target: 'https://a.example/' }]));
  const handed: number[] = [];
  const scheduler = new Scheduler(engine, { room: () => 10, deliver: (slice) => void handed.push(clock.now(), slice.fireAtMs[0] as number) }, clock, { sleepMsMax: 60_000 });
  scheduler.start();
  await turn();
  assert.deepEqual(handed, [], 'not due');
  await engine.moveClock({ advanceMs: 30 * day });
  for (let i = 0; i < 3 && handed.length === 0; i++) await turn();
  assert.deepEqual(handed, [t0 + 30 * day, t0 + 30 * day]);
  scheduler.stop();
  await engine.close();
});

test('POST /v1/clock bodies: exactly one of advance_ms (1 ms to 10 years) and set (RFC 3339 or epoch ms), each refusal naming its field', () => {
  assert.deepEqual(clockMoveOf({ advance_ms: 2_592_000_000 }), { advanceMs: 2_592_000_000 });
  assert.deepEqual(clockMoveOf({ set: '2027-01-15T08:00:00Z' }), { toMs: t0 });
  assert.deepEqual(clockMoveOf({ set: t0 }), { toMs: t0 });
  const refused = (body: unknown, field: string, message: RegExp): void => {
    assert.throws(() => clockMoveOf(body), (err) => isFermataError(err, errorCodes.clockInvalid) && err.details.field === field && message.test(err.message), JSON.stringify(body));
  };
  refused({}, 'advance_ms', /advance_ms .* or set/);
  refused({ advance_ms: 1, set: t0 }, 'set', /not both/);
  refused({ advance_ms: 0 }, 'advance_ms', /from 1/);
  refused({ advance_ms: 1.5 }, 'advance_ms', /whole number/);
  refused({ advance_ms: '5' }, 'advance_ms', /whole number/);
  refused({ advance_ms: 11 * 366 * day }, 'advance_ms', /10 years/);
  refused({ set: 'tomorrow' }, 'set', /RFC 3339/);
  refused({ set: 1_800_000_000 }, 'set', /looks like epoch seconds.*1800000000000/);
  refused({ set: 999 * 1e15 }, 'set', /10\^12/);
  refused({ set: null }, 'set', /RFC 3339 date-time or whole epoch ms/);
  refused({ advance: 5 }, 'advance', /unknown field "advance"/);
  refused([1], '', /JSON object/);
});

test('a retry counts from the service\'s clock; an HTTP-date Retry-After is the target\'s real time, a wait measured against the real time', () => {
  const realMs = Date.UTC(2026, 11, 7, 9, 0, 0);
  const clockMs = realMs + 30 * day;
  const policy = { ...defaultQueueConfig, min_backoff_ms: 1000, max_backoff_ms: 1000 };
  const inTwoMinutes = new Date(realMs + 120_000).toUTCString();
  assert.deepEqual(decideOutcome(1, 503, inTwoMinutes, policy, clockMs, 0, realMs), { kind: 2, retryAtMs: clockMs + 120_000, reason: 0 });
  assert.deepEqual(decideOutcome(1, 503, '30', policy, clockMs, 0, realMs), { kind: 2, retryAtMs: clockMs + 30_000, reason: 0 });
  assert.deepEqual(decideOutcome(1, 503, undefined, policy, clockMs, 0, realMs), { kind: 2, retryAtMs: clockMs + 1000, reason: 0 });
});

test('under a manual clock standing still, the memory loader\'s idle trims keep their real interval', async () => {
  const clock = new ManualClock(t0);
  const engine = await Engine.open({ dataDir, fs: new SimFileSystem({ seed: 107 }), clock });
  let realMs = 0;
  let trims = 0;
  const budget = { bytes: 1024 ** 3, source: 'configured', limitBytes: 1024 ** 3 } as const;
  const limits = { farSpillQuietSteps: 2, idleTrimIntervalMs: 10_000 };
  const loader = new MemoryLoader(engine, { budget, clock, trimClock: { now: () => realMs }, limits, trimMemory: () => void trims++ });
  for (let step = 0; step < 25; step++) {
    realMs += 1000;
    await loader.step();
  }
  assert.equal(trims, 3, 'the second quiet step, then every 10 s of real time, while the clock stood still');
  await engine.close();
});
