// The `recovery` suite: how fast fermata is back after a restart with the far future spilled,
// and whether its disk use stays bounded under a steady load.
//
//   ready    the data directory of the memory suite's fill (N pending timers, nearly all
//            spilled; N = 10,000,000, 1,000,000 with --quick): `fermata serve` spawned on it,
//            /readyz polled until 200; the time from spawn, and the server's RSS then; and the
//            same on an empty data directory (what starting Node and the service costs anyway),
//            emptyStarts times: the medians of the time to the "listening" line and to /readyz 200
//   open     Engine.open of the same directory in a fresh process (bench/memory.ts's reopen)
//   soak     an engine on its own directory with an injected clock: each simulated second,
//            admit soakTimersPerSecond timers due 1–5 s ahead, take and settle what is due,
//            one loader step (checkpoints once the log passes soakCheckpointWalBytes), then
//            the bytes of wal/ + spill/ (quick: 60 simulated seconds; full: 600)
//
// The soak runs as fast as the machine allows: its clock moves a second per step, so it shows
// the disk use of 60 (600) seconds of load, not of 60 (600) seconds of wall time. Finished
// timers are kept soakFinishedRetentionMs (the default is a day, which would make the live set,
// and so the checkpoints, grow for a day before any plateau).
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import type { TimerBatch } from '../engine/batch/timer-batch.ts';
import { type Clock, Engine } from '../engine/engine.ts';
import { MemoryLoader } from '../engine/spill/memory-loader.ts';
import { emptyOutcomes, outcomeKind } from '../engine/records.ts';
import { fermataBin, residentBytes, startListeningChild } from './fermata-child.ts';
import { directoryBytes, fillDataDir, fullMemoryTiming, type MemoryTiming, quickMemoryTiming, type ReopenResult, runMemoryChild } from './memory.ts';
import { type Figure, metaLine, roundTo, type SuiteOptions } from './report.ts';

const suite = 'recovery';
const MiB = 1024 * 1024;
/** /readyz is asked this often until it answers 200, and for at most readyTimeoutMs. */
const readyPollMs = 5;
const readyTimeoutMs = 60_000;
const soakTimersPerSecond = 5_000;
const soakPayloadBytes = 128;
/** Soak timers fall due 1 to 5 seconds after they are added. */
const soakDueMinMs = 1_000;
const soakDueSpanMs = 4_000;
const soakFinishedRetentionMs = 30_000;
/** Small, so checkpoints (and segment deletions) happen many times within the run. */
const soakCheckpointWalBytes = 8 * MiB;
const soakSegmentBytes = 4 * MiB;
/** The soak's resident window never comes near this: only the log's size makes checkpoints. */
const soakBudgetBytes = 1024 * MiB;
/** Plateaued: the last third's largest sample is at most this times the middle third's. */
const plateauRatioMax = 1.2;
const soakTakeMax = 50_000;
const target = 'https://bench.example/hook';

interface RecoveryTiming {
  readonly fill: MemoryTiming;
  /** Spawns of `fermata serve` timed; the median is reported. */
  readonly starts: number;
  /** Spawns on an empty data directory; the medians are reported (a start is short, and one alone is noise). */
  readonly emptyStarts: number;
  readonly soakSeconds: number;
}

const quickTiming: RecoveryTiming = { fill: quickMemoryTiming, starts: 1, emptyStarts: 5, soakSeconds: 60 };
const fullTiming: RecoveryTiming = { fill: fullMemoryTiming, starts: 3, emptyStarts: 5, soakSeconds: 600 };

export async function recoverySuite(options: SuiteOptions): Promise<Figure[]> {
  const timing = options.quick ? quickTiming : fullTiming;
  const { progress } = options;
  const timers = timing.fill.timers;
  const dir = await mkdtemp(join(options.baseDir, 'fermata-bench-recovery-'));
  let reopen: ReopenResult;
  const starts: ServeStart[] = [];
  try {
    await fillDataDir(dir, timing.fill, progress);
    progress(`recovery: Engine.open of ${timers} pending timers (child process)`);
    reopen = await runMemoryChild<ReopenResult>(['reopen', dir]);
    assert.equal(reopen.pending, timers, 'the reopened engine has every admitted timer pending');
    for (let i = 0; i < timing.starts; i++) {
      progress(`recovery: fermata serve ${i + 1} of ${timing.starts} on ${timers} pending timers, until /readyz is green`);
      starts.push(await timeServeStart(options.baseDir, dir));
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  const empties: ServeStart[] = [];
  for (let i = 0; i < timing.emptyStarts; i++) {
    progress(`recovery: fermata serve ${i + 1} of ${timing.emptyStarts} on an empty data directory, until /readyz is green`);
    empties.push(await timeServeStart(options.baseDir, undefined));
  }
  const start = median(starts, (one) => one.readyMs);
  const emptyListening = median(empties, (one) => one.listeningMs);
  const emptyReady = median(empties, (one) => one.readyMs);
  progress(
    `recovery: open ${reopen.openMs.toFixed(0)} ms; ready ${starts.map((one) => `${one.readyMs.toFixed(0)} ms`).join(', ')}; ` +
      `empty: listening ${empties.map((one) => `${one.listeningMs.toFixed(0)} ms`).join(', ')}, ready ${empties.map((one) => `${one.readyMs.toFixed(0)} ms`).join(', ')}`,
  );

  progress(`recovery: soak, ${timing.soakSeconds} simulated seconds of ${soakTimersPerSecond} timers/s added and fired`);
  const soak = await soakRun(options.baseDir, timing.soakSeconds);
  progress(
    `recovery: soak took ${soak.wallSeconds.toFixed(1)} s; ${soak.fired} fired, ${soak.checkpoints} checkpoints; disk max ${soak.maxBytes} B, ` +
      `middle third max ${soak.middleMaxBytes} B, last third max ${soak.lastMaxBytes} B`,
  );

  const figure = (name: string, value: number, unit: string): Figure => ({ suite, name, value, unit });
  const plateauRatio = soak.lastMaxBytes / soak.middleMaxBytes;
  return [
    metaLine(suite, {
      node: process.version,
      cpus: cpus().length,
      dir: options.baseDir,
      quick: options.quick,
      timers,
      spilled: reopen.spilled,
      resident: reopen.resident,
      starts: timing.starts,
      empty_starts: timing.emptyStarts,
      listening_ms: roundTo(start.listeningMs, 1),
      soak_simulated_s: timing.soakSeconds,
      soak_wall_s: roundTo(soak.wallSeconds, 1),
      soak_timers_per_s: soakTimersPerSecond,
      soak_payload_bytes: soakPayloadBytes,
      soak_due_ahead: '1–5 s',
      soak_finished_retention_ms: soakFinishedRetentionMs,
      soak_checkpoint_wal_bytes: soakCheckpointWalBytes,
      soak_segment_bytes: soakSegmentBytes,
      soak_added: soak.added,
      soak_fired: soak.fired,
      soak_checkpoints: soak.checkpoints,
      soak_plateaued: plateauRatio <= plateauRatioMax,
    }),
    { ...figure('recovery.ready_ms', roundTo(start.readyMs, 1), 'ms'), timers } as Figure,
    figure('recovery.ready_rss_bytes', start.rssBytes, 'B'),
    figure('recovery.listening_empty_ms', roundTo(emptyListening.listeningMs, 1), 'ms'),
    figure('recovery.ready_empty_ms', roundTo(emptyReady.readyMs, 1), 'ms'),
    figure('recovery.engine_open_ms', roundTo(reopen.openMs, 1), 'ms'),
    figure('soak.disk_bytes.max', soak.maxBytes, 'B'),
    figure('soak.disk_bytes.plateau_ratio', roundTo(plateauRatio, 3), 'ratio'),
  ];
}

function median<T>(values: readonly T[], by: (value: T) => number): T {
  const sorted = [...values].sort((a, b) => by(a) - by(b));
  return sorted[Math.floor(sorted.length / 2)] as T;
}

// ---- start to ready ----------------------------------------------------------------------------

interface ServeStart {
  readonly listeningMs: number;
  readonly readyMs: number;
  /** The server's VmRSS once ready. */
  readonly rssBytes: number;
}

/**
 * Spawns `fermata serve --data dataDir` (undefined: a fresh, empty data directory) and times it
 * to its "listening" line and to /readyz 200.
 */
async function timeServeStart(baseDir: string, dataDir: string | undefined): Promise<ServeStart> {
  const started = performance.now();
  // The child gets a fresh directory of its own, used only when no dataDir is given.
  const child = await startListeningChild(baseDir, 'recovery', (fresh) => [fermataBin, 'serve', '--data', dataDir ?? join(fresh, 'data'), '--listen', '127.0.0.1:0']);
  try {
    const listeningMs = performance.now() - started;
    const deadline = started + readyTimeoutMs;
    for (;;) {
      const status = await fetch(`${child.url}/readyz`).then(
        async (response) => {
          await response.arrayBuffer();
          return response.status;
        },
        () => 0,
      );
      if (status === 200) break;
      if (performance.now() > deadline) throw new Error(`recovery: /readyz still ${status} after ${readyTimeoutMs} ms`);
      await sleep(readyPollMs);
    }
    const readyMs = performance.now() - started;
    return { listeningMs, readyMs, rssBytes: await residentBytes(child.pid) };
  } finally {
    await child.stop();
  }
}

// ---- soak ----------------------------------------------------------------------------------------

interface SoakResult {
  readonly wallSeconds: number;
  readonly added: number;
  readonly fired: number;
  readonly checkpoints: number;
  readonly maxBytes: number;
  readonly middleMaxBytes: number;
  readonly lastMaxBytes: number;
}

function soakBatch(): TimerBatch {
  const rows = soakTimersPerSecond;
  const payload = new Uint8Array(rows * soakPayloadBytes);
  for (let i = 0; i < payload.length; i++) payload[i] = (i * 17 + 3) & 0xff;
  return {
    rows,
    fireAtMs: new Float64Array(rows),
    targets: [target],
    targetIndex: new Int32Array(rows),
    queues: ['default'],
    queueIndex: new Int32Array(rows),
    payload: { values: payload, offsets: Int32Array.from({ length: rows + 1 }, (_, i) => i * soakPayloadBytes) },
    headers: { values: new Uint8Array(0), offsets: new Int32Array(rows + 1) },
    keys: { values: new Uint8Array(0), offsets: new Int32Array(rows + 1) },
  };
}

async function soakRun(baseDir: string, seconds: number): Promise<SoakResult> {
  const dir = await mkdtemp(join(baseDir, 'fermata-bench-soak-'));
  const hourMs = 3_600_000;
  let now = Math.floor(Date.now() / hourMs) * hourMs;
  const clock: Clock = { now: () => now };
  const engine = await Engine.open({ dataDir: dir, clock, retention: { finishedMs: soakFinishedRetentionMs }, walLimits: { segmentBytes: soakSegmentBytes } });
  const loader = new MemoryLoader(engine, {
    budget: { bytes: soakBudgetBytes, source: 'configured', limitBytes: soakBudgetBytes },
    clock,
    limits: { checkpointWalBytes: soakCheckpointWalBytes },
  });
  const started = performance.now();
  const batch = soakBatch();
  const samples: number[] = [];
  let added = 0;
  let fired = 0;
  let checkpoints = 0;
  try {
    for (let second = 0; second < seconds; second++) {
      now += 1000;
      for (let row = 0; row < batch.rows; row++) batch.fireAtMs[row] = now + soakDueMinMs + Math.floor(Math.random() * soakDueSpanMs);
      await engine.admit(batch);
      added += batch.rows;
      for (let slice = engine.takeDue(now, soakTakeMax); slice.count > 0; slice = engine.takeDue(now, soakTakeMax)) {
        const outcomes = emptyOutcomes(slice.count);
        outcomes.count = slice.count;
        outcomes.seqs.set(slice.seqs);
        outcomes.rows.set(slice.rows);
        outcomes.kinds.fill(outcomeKind.delivered);
        outcomes.statuses.fill(200);
        outcomes.attempts.set(slice.attempts);
        await engine.settle(outcomes);
        fired += slice.count;
      }
      const step = await loader.step();
      if (step.checkpointed === true) checkpoints++;
      samples.push((await directoryBytes(join(dir, 'wal'))) + (await directoryBytes(join(dir, 'spill'))));
    }
    // Every timer due by now fired exactly once: what is left is the last seconds' pending ones.
    assert.equal(fired + engine.stats().pending, added, 'every added timer fired or is still pending');
  } finally {
    await engine.close();
    await rm(dir, { recursive: true, force: true });
  }
  const third = Math.floor(samples.length / 3);
  return {
    wallSeconds: (performance.now() - started) / 1000,
    added,
    fired,
    checkpoints,
    maxBytes: Math.max(...samples),
    middleMaxBytes: Math.max(...samples.slice(third, 2 * third)),
    lastMaxBytes: Math.max(...samples.slice(2 * third)),
  };
}
