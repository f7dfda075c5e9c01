// The `schedules` suite: N schedules of `every_ms: 3600000` (hourly), each with a 40-byte target,
// a 64-byte payload and no headers, in the engine on a real data directory (engine/schedules/):
//
//   put.per_s           PUTs acknowledged a second (durable), 256 in flight
//   bytes_per_schedule  heapUsed + external growth over the N schedules, after each has its one
//                       pending occurrence, less the store's own bytes for those occurrences
//                       (Engine.residentBytes): what a schedule costs beyond its pending timer
//   lateness_ms.p99     the occurrences falling due in a window after the PUTs, taken by a loop
//                       that sleeps until the next one is due (as the scheduler does): taken at −
//                       fire time, while the materializer creates each one's next occurrence
//   meta: checkpoint_*  then two checkpoints: the first writes the schedules file, the second only
//                       a marks file (occurrences moved the marks meanwhile) or nothing; their
//                       times, the event loop's longest delay during them, and the files' sizes
//
// The schedules' instants are spread evenly over the hour, starting a few seconds after the PUTs
// are expected to finish (N / 5,000 s), so the window sees the real rate: N / 3,600 a second
// (about 280 at a million). N is 1,000,000; 100,000 with --quick. The measurement runs in a child
// process (this file, forked with --expose-gc), so the parent's heap does not count.
import assert from 'node:assert/strict';
import { mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import { join } from 'node:path';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { tuneHeapGrowth } from '../bin/heap-growth.js';
import { batchFromSpecs } from '../engine/batch/timer-batch.ts';
import { Engine } from '../engine/engine.ts';
import { runGcChild } from './gc-child.ts';
import { type Figure, metaLine, newHistogram, percentileMs, recordMs, roundTo, type SuiteOptions } from './report.ts';

const suite = 'schedules';
const hourMs = 3_600_000;
const putsInFlight = 256;
/** A 40-byte target and a 64-byte payload. */
const target = 'https://bench.example/hooks/schedule-001';
const payload = new Uint8Array(64).fill(0x61);
/** The PUT rate assumed when placing the first instants after the PUTs (slower PUTs just miss the first ones). */
const assumedPutsPerS = 5_000;
const firstAfterPutsMs = 5_000;
const gcSettleMs = 200;
const plainBatchRows = 10_000;

interface Timing {
  readonly schedules: number;
  readonly latenessWindowMs: number;
}

const timings: Record<'quick' | 'full', Timing> = {
  quick: { schedules: 100_000, latenessWindowMs: 10_000 },
  full: { schedules: 1_000_000, latenessWindowMs: 30_000 },
};

interface ChildResult {
  readonly putSeconds: number;
  readonly scheduleBytes: number;
  readonly occurrenceBytes: number;
  readonly pendingOccurrences: number;
  readonly lateness: Lateness;
  readonly checkpoints: Checkpoints;
  /** The same window's lateness for as many plain timers due at the same instants, in an engine without schedules: the control. */
  readonly plainLateness: Lateness;
}

/** Two checkpoints after the window: the first writes the schedules file, the second (only marks moved, or nothing) does not. */
interface Checkpoints {
  readonly firstMs: number;
  readonly secondMs: number;
  /** The main thread's longest delay while either ran. */
  readonly eventLoopDelayMaxMs: number;
  readonly manifestBytes: number;
  /** The schedules file's and the marks file's bytes after the second. */
  readonly scheduleFileBytes: number;
  readonly marksFileBytes: number;
}

interface Lateness {
  readonly p50: number;
  readonly p99: number;
  readonly max: number;
  readonly count: number;
  readonly eventLoopDelayP99Ms: number;
}

export async function schedulesSuite(options: SuiteOptions): Promise<Figure[]> {
  assert.equal(target.length, 40);
  const timing = options.quick ? timings.quick : timings.full;
  const dir = await mkdtemp(join(options.baseDir, 'fermata-bench-schedules-'));
  try {
    options.progress(`schedules: ${timing.schedules} hourly schedules, then ${timing.latenessWindowMs / 1000} s of their occurrences`);
    const result = await runGcChild<ChildResult>(import.meta.filename, suite, ['measure', dir, String(timing.schedules), String(timing.latenessWindowMs)]);
    const n = timing.schedules;
    return [
      metaLine(suite, { schedules: n, every_ms: hourMs, target_bytes: target.length, payload_bytes: payload.length, puts_in_flight: putsInFlight, lateness_window_ms: timing.latenessWindowMs, occurrences_timed: result.lateness.count, pending_occurrences: result.pendingOccurrences, event_loop_delay_ms_p99: roundTo(result.lateness.eventLoopDelayP99Ms, 3), plain_timers_lateness_ms_p99: result.plainLateness.p99, plain_timers_event_loop_delay_ms_p99: roundTo(result.plainLateness.eventLoopDelayP99Ms, 3), checkpoint_first_ms: Math.round(result.checkpoints.firstMs), checkpoint_second_ms: Math.round(result.checkpoints.secondMs), checkpoint_event_loop_delay_max_ms: roundTo(result.checkpoints.eventLoopDelayMaxMs, 3), manifest_bytes: result.checkpoints.manifestBytes, schedule_file_bytes: result.checkpoints.scheduleFileBytes, schedule_marks_file_bytes: result.checkpoints.marksFileBytes }),
      { suite, name: 'schedules.put.per_s', value: Math.round(n / result.putSeconds), unit: '1/s' },
      { suite, name: 'schedules.bytes_per_schedule', value: Math.round(result.scheduleBytes / n), unit: 'B' },
      { suite, name: 'schedules.occurrence_bytes', value: Math.round(result.occurrenceBytes / Math.max(1, result.pendingOccurrences)), unit: 'B' },
      { suite, name: 'schedules.lateness_ms.p50', value: roundTo(result.lateness.p50, 3), unit: 'ms' },
      { suite, name: 'schedules.lateness_ms.p99', value: roundTo(result.lateness.p99, 3), unit: 'ms' },
      { suite, name: 'schedules.lateness_ms.max', value: roundTo(result.lateness.max, 3), unit: 'ms' },
    ];
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

async function settledMemory(gc: NodeJS.GCFunction): Promise<number> {
  const collect = (): void => gc({ type: 'major', execution: 'sync', flavor: 'last-resort' });
  collect();
  await sleep(gcSettleMs);
  collect();
  const { heapUsed, external } = process.memoryUsage();
  return heapUsed + external;
}

/** Child: PUTs `n` hourly schedules, measures their memory, then the lateness of their occurrences in a window. */
async function measureChild(dir: string, n: number, windowMs: number): Promise<ChildResult> {
  const gc = globalThis.gc;
  assert.ok(gc !== undefined, 'the measuring child needs --expose-gc');
  tuneHeapGrowth();
  const engine = await Engine.open({ dataDir: join(dir, 'schedules') });
  let measured: Omit<ChildResult, 'plainLateness'>;
  try {
    const before = await settledMemory(gc);
    const firstMs = Date.now() + (n / assumedPutsPerS) * 1000 + firstAfterPutsMs;
    const started = performance.now();
    let next = 0;
    await Promise.all(
      Array.from({ length: putsInFlight }, async () => {
        while (next < n) {
          const i = next++;
          const startAtMs = Math.round(firstMs + (i * hourMs) / n);
          await engine.putSchedule(`s${i}`, { everyMs: hourMs, startAtMs, target, queue: 'default', payload, headers: '' });
        }
      }),
    );
    const putSeconds = (performance.now() - started) / 1000;
    // Every schedule has its next occurrence once the materializer has gone round.
    while (engine.stats().schedules.occurrencesCreated < n) await sleep(50);
    const after = await settledMemory(gc);
    const occurrenceBytes = engine.residentBytes();
    const pendingOccurrences = engine.stats().pending;
    const lateness = await latenessOver(engine, Math.max(firstMs, Date.now()), windowMs);
    const checkpoints = await checkpointTwice(engine, join(dir, 'schedules', 'spill'));
    measured = { putSeconds, scheduleBytes: after - before - occurrenceBytes, occurrenceBytes, pendingOccurrences, lateness, checkpoints };
  } finally {
    await engine.close();
  }
  return { ...measured, plainLateness: await plainLateness(join(dir, 'plain'), n, windowMs) };
}

/**
 * Checkpoints twice, as the memory loader would (everything resident: no watermark), timing each
 * and the event loop's longest delay meanwhile; the spill directory's manifest and schedules
 * files after them.
 */
async function checkpointTwice(engine: Engine, spillDir: string): Promise<Checkpoints> {
  const delay = monitorEventLoopDelay({ resolution: 1 });
  delay.enable();
  let started = performance.now();
  await engine.checkpoint();
  const firstMs = performance.now() - started;
  started = performance.now();
  await engine.checkpoint();
  const secondMs = performance.now() - started;
  delay.disable();
  const sizes = new Map<string, number>();
  for (const name of await readdir(spillDir)) sizes.set(name.replace(/-\d+$/, ''), (await stat(join(spillDir, name))).size);
  return { firstMs, secondMs, eventLoopDelayMaxMs: delay.max / 1e6, manifestBytes: sizes.get('MANIFEST') ?? 0, scheduleFileBytes: sizes.get('schedules') ?? 0, marksFileBytes: sizes.get('schedule-marks') ?? 0 };
}

/** The control: `n` plain timers spread over the hour as the occurrences are (admitted in 10,000-row batches), their lateness over the window. */
async function plainLateness(dir: string, n: number, windowMs: number): Promise<Lateness> {
  const engine = await Engine.open({ dataDir: dir });
  try {
    const firstMs = Date.now() + firstAfterPutsMs;
    for (let from = 0; from < n; from += plainBatchRows) {
      const specs = Array.from({ length: Math.min(plainBatchRows, n - from) }, (_, k) => ({ fireAtMs: Math.round(firstMs + ((from + k) * hourMs) / n), target, payload, key: `plain:${from + k}` }));
      await engine.admit(batchFromSpecs(specs));
    }
    return await latenessOver(engine, Math.max(firstMs, Date.now()), windowMs);
  } finally {
    await engine.close();
  }
}

/** Takes due occurrences as the scheduler would (sleeping until the next is due), from `fromMs` for `windowMs`; lateness = taken − fire time. */
async function latenessOver(engine: Engine, fromMs: number, windowMs: number): Promise<Lateness> {
  const histogram = newHistogram();
  await sleep(Math.max(0, fromMs - Date.now()));
  // The main thread's delay over the window: lateness beyond it is the engine's, within it the machine's.
  const delay = monitorEventLoopDelay({ resolution: 1 });
  delay.enable();
  const endMs = fromMs + windowMs;
  let count = 0;
  let maxMs = 0;
  while (Date.now() < endMs) {
    const dueMs = engine.nextDeliveryDueMs();
    const waitMs = dueMs === undefined ? 5 : dueMs - Date.now();
    if (waitMs > 0) {
      await sleep(Math.min(waitMs, endMs - Date.now()));
      continue;
    }
    const nowMs = Date.now();
    const slice = engine.takeDue(nowMs, 1024);
    for (let i = 0; i < slice.count; i++) {
      const lateMs = Math.max(0, nowMs - (slice.fireAtMs[i] as number));
      recordMs(histogram, lateMs);
      maxMs = Math.max(maxMs, lateMs);
      count++;
    }
    // As the scheduler does between slices: the event loop runs (the materializer among others).
    await new Promise((resolve) => setImmediate(resolve));
  }
  delay.disable();
  assert.ok(count > 0, 'no occurrence fell due in the window');
  return { p50: percentileMs(histogram, 50), p99: percentileMs(histogram, 99), max: maxMs, count, eventLoopDelayP99Ms: delay.percentile(99) / 1e6 };
}

async function childMain(args: readonly string[]): Promise<void> {
  const [role, dir, count, window] = args;
  assert.ok(role === 'measure' && dir !== undefined, 'usage: schedules.ts measure <dir> <schedules> <window ms>');
  const result = await measureChild(dir, Number(count), Number(window));
  assert.ok(process.send !== undefined, 'a schedules child runs with an IPC channel (fork)');
  await new Promise<void>((resolve, reject) => process.send?.(result, undefined, {}, (err) => (err === null ? resolve() : reject(err))));
  process.disconnect?.();
}

if (import.meta.main) await childMain(process.argv.slice(2));
