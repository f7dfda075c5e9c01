// The `memory` suite: what pending timers cost once the spill tier holds the far future.
// N timers (10,000,000; 1,000,000 with --quick) due between 1 hour and 365 days ahead, 128-byte
// payloads, one in ten with a 32-byte idempotency key, are admitted through the engine on a real
// data directory in 10,000-row columnar batches; every `timersPerCheckpoint` of them a
// checkpoint with a watermark about an hour ahead spills what is due past it, as the memory
// loader would once over budget, so the fill never holds more than one chunk in memory.
//
//   fill     admit chunk ─► gc, measure (all resident) ─► checkpoint(W) ─► … ─► gc, measure
//   reopen   a fresh process: gc, measure ─► Engine.open(dir) ─► gc, measure
//
// Both run in child processes (this file forked with --expose-gc): the fill so the suite's own
// heap stays out of the figures, the reopen so the spill tier's cost is measured in a process
// that never held the timers (the filling process keeps the store's grown columns). The
// recovery suite (bench/recovery.ts) builds its data directory with the same fill.
import assert from 'node:assert/strict';
import { mkdtemp, readdir, rm, stat } from 'node:fs/promises';
import { cpus, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import type { TimerBatch } from '../engine/batch/timer-batch.ts';
import { Engine } from '../engine/engine.ts';
import { memoryLimits } from '../engine/limits.ts';
import { type Figure, metaLine, roundTo, type SuiteOptions } from './report.ts';
import { runGcChild } from './gc-child.ts';

const suite = 'memory';
const payloadBytes = 128;
const keyBytes = 32;
/** Every keyedEvery-th row has a key (10%): spilled keyed timers cost their key's hash in RAM. */
const keyedEvery = 10;
const batchRows = 10_000;
const admitters = 4;
const target = 'https://bench.example/hook';
const hourMs = 3_600_000;
/** Fire times spread uniformly over [now + 1 h, now + 365 d). */
const nearestMs = hourMs;
const furthestMs = 365 * 24 * hourMs;
/** The timers a projection is made for. */
const projectedTimers = 100_000_000;
/** V8 frees ArrayBuffer backing stores on a background thread: gc, wait, gc. */
const gcSettleMs = 200;

export interface MemoryTiming {
  readonly timers: number;
  /** Timers admitted between checkpoints (the most the fill holds in memory at once). */
  readonly timersPerCheckpoint: number;
}

export const quickMemoryTiming: MemoryTiming = { timers: 1_000_000, timersPerCheckpoint: 500_000 };
export const fullMemoryTiming: MemoryTiming = { timers: 10_000_000, timersPerCheckpoint: 2_000_000 };

/** What the fill child reports. */
export interface FillResult {
  readonly timers: number;
  readonly admitSeconds: number;
  readonly checkpointSeconds: number;
  readonly checkpoints: number;
  /** Timers resident when the first chunk was measured (before any checkpoint). */
  readonly chunkResident: number;
  /** heapUsed + external growth with the first chunk resident, after gc. */
  readonly chunkProcessBytes: number;
  /** engine.residentBytes() with the first chunk resident. */
  readonly chunkEngineBytes: number;
  /** After the last checkpoint: */
  readonly resident: number;
  readonly residentEngineBytes: number;
  readonly spilled: number;
  readonly runs: number;
  readonly metadataBytes: number;
  /** heapUsed + external growth from the empty engine to the end of the fill, after gc. */
  readonly fillProcessBytes: number;
  readonly walBytes: number;
  readonly spillBytes: number;
  /** How far ahead of the fill's start the checkpoints' watermark was. */
  readonly watermarkAheadMs: number;
}

/** What the reopen child reports. */
export interface ReopenResult {
  readonly openMs: number;
  readonly pending: number;
  readonly resident: number;
  readonly spilled: number;
  readonly residentEngineBytes: number;
  readonly metadataBytes: number;
  /** heapUsed + external growth over Engine.open, after gc. */
  readonly processBytes: number;
  /** The same growth for an engine opened on an empty directory (after the first, code warm). */
  readonly emptyEngineBytes: number;
  /** VmRSS-equivalent of the process (process.memoryUsage().rss) before the open, after gc. */
  readonly baselineRssBytes: number;
}

export async function memorySuite(options: SuiteOptions): Promise<Figure[]> {
  const timing = options.quick ? quickMemoryTiming : fullMemoryTiming;
  const { progress } = options;
  const dir = await mkdtemp(join(options.baseDir, 'fermata-bench-memory-'));
  try {
    const fill = await fillDataDir(dir, timing, progress);
    progress(`memory: reopening the data directory in a fresh process`);
    const reopen = await runMemoryChild<ReopenResult>(['reopen', dir]);
    assert.equal(reopen.pending, timing.timers, 'the reopened engine has every admitted timer pending');
    return memoryFigures(options, timing, fill, reopen);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Fills `dir` (an empty directory) with the suite's timers, spilled; in a child process. */
export async function fillDataDir(dir: string, timing: MemoryTiming, progress: (message: string) => void): Promise<FillResult> {
  progress(`memory: admitting ${timing.timers} timers over 1 h–365 d, a checkpoint every ${timing.timersPerCheckpoint} (child process)`);
  const fill = await runMemoryChild<FillResult>(['fill', dir, String(timing.timers), String(timing.timersPerCheckpoint)]);
  progress(
    `memory: admitted in ${fill.admitSeconds.toFixed(1)} s, ${fill.checkpoints} checkpoints in ${fill.checkpointSeconds.toFixed(1)} s; ` +
      `${fill.spilled} spilled in ${fill.runs} runs, ${fill.resident} resident; wal ${fill.walBytes} B, spill ${fill.spillBytes} B`,
  );
  assert.equal(fill.spilled + fill.resident, timing.timers, 'every admitted timer is spilled or resident');
  return fill;
}

function memoryFigures(options: SuiteOptions, timing: MemoryTiming, fill: FillResult, reopen: ReopenResult): Figure[] {
  const figure = (name: string, value: number, unit: string): Figure => ({ suite, name, value, unit });
  const spilledBytes = fill.metadataBytes / fill.spilled;
  // The fresh process's growth over the open holds what any engine holds and the resident window too: take both out.
  const spilledProcessBytes = (reopen.processBytes - reopen.emptyEngineBytes - reopen.residentEngineBytes) / reopen.spilled;
  const residentBytes = fill.chunkEngineBytes / fill.chunkResident;
  const residentProcessBytes = fill.chunkProcessBytes / fill.chunkResident;
  const diskBytes = (fill.walBytes + fill.spillBytes) / timing.timers;
  // The projection: the same mix of timers; every one spilled but the resident window, which
  // keeps the measured share of the timers (those due before the watermark).
  const residentShare = fill.resident / timing.timers;
  const projectedRam = reopen.baselineRssBytes + reopen.emptyEngineBytes + projectedTimers * ((1 - residentShare) * spilledProcessBytes + residentShare * residentProcessBytes);
  const projectedDisk = projectedTimers * diskBytes;
  return [
    metaLine(suite, {
      node: process.version,
      cpus: cpus().length,
      machine_ram_bytes: totalmem(),
      dir: options.baseDir,
      quick: options.quick,
      timers: timing.timers,
      payload_bytes: payloadBytes,
      keyed_share: 1 / keyedEvery,
      key_bytes: keyBytes,
      spread: '1 h – 365 d, uniform',
      timers_per_checkpoint: timing.timersPerCheckpoint,
      checkpoints: fill.checkpoints,
      spilled: fill.spilled,
      resident: fill.resident,
      runs: fill.runs,
      watermark_ahead_ms: fill.watermarkAheadMs,
      admit_s: roundTo(fill.admitSeconds, 2),
      checkpoint_s: roundTo(fill.checkpointSeconds, 2),
      empty_engine_bytes: reopen.emptyEngineBytes,
      reopen_ms: roundTo(reopen.openMs, 1),
      projection:
        `${projectedTimers} timers of this mix; RAM = node baseline RSS (${reopen.baselineRssBytes} B) + an empty engine (${reopen.emptyEngineBytes} B) + spilled × memory.spilled.process_bytes_per_timer + ` +
        `resident (share ${roundTo(residentShare, 6)} as measured) × memory.resident.process_bytes_per_timer; no memory budget forcing more to stay resident ` +
        `(the default budget, ${memoryLimits.residentShare} of RAM, would let the loader keep more in memory before spilling); disk = timers × memory.disk.bytes_per_timer`,
    }),
    figure('memory.spilled.bytes_per_timer', roundTo(spilledBytes, 2), 'B'),
    figure('memory.spilled.process_bytes_per_timer', roundTo(spilledProcessBytes, 2), 'B'),
    figure('memory.spilled.fill_process_bytes_per_timer', roundTo((fill.fillProcessBytes - fill.residentEngineBytes) / fill.spilled, 1), 'B'),
    figure('memory.resident.bytes_per_timer', roundTo(residentBytes, 1), 'B'),
    figure('memory.resident.process_bytes_per_timer', roundTo(residentProcessBytes, 1), 'B'),
    figure('memory.disk.bytes_per_timer', roundTo(diskBytes, 1), 'B'),
    figure('memory.projected_100m.ram_bytes', Math.round(projectedRam), 'B'),
    figure('memory.projected_100m.disk_bytes', Math.round(projectedDisk), 'B'),
  ];
}

/** Bytes of the files under `dir`, recursively (0 when it does not exist). */
export async function directoryBytes(dir: string): Promise<number> {
  let entries;
  try {
    entries = await readdir(dir, { withFileTypes: true });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return 0;
    throw err;
  }
  let bytes = 0;
  for (const entry of entries) {
    const path = join(entry.parentPath, entry.name);
    if (entry.isDirectory()) bytes += await directoryBytes(path);
    else if (entry.isFile()) bytes += await stat(path).then((info) => info.size, () => 0);
  }
  return bytes;
}

// ---- child processes --------------------------------------------------------------------------

/** Runs this file in a child with --expose-gc; resolves with the one message it sends. */
export function runMemoryChild<T>(args: readonly string[]): Promise<T> {
  return runGcChild<T>(import.meta.filename, 'memory', args);
}

/** heapUsed + external (which includes arrayBuffers) after full collections, and rss. */
async function settledMemory(): Promise<{ bytes: number; rss: number }> {
  const gc = globalThis.gc;
  assert.ok(gc !== undefined, 'a memory child needs --expose-gc');
  // The last-resort flavour also drops what V8 keeps only while memory is plentiful (bench/store.ts).
  const collect = (): void => gc({ type: 'major', execution: 'sync', flavor: 'last-resort' });
  collect();
  await sleep(gcSettleMs);
  collect();
  const { heapUsed, external, rss } = process.memoryUsage();
  return { bytes: heapUsed + external, rss };
}

/**
 * A batch of `batchRows` timers as columns: one target, the default queue, no headers, a
 * 128-byte payload, and a 32-byte key on every keyedEvery-th row. Keys and fire times are set
 * by refill().
 */
function newBatch(): TimerBatch {
  const payload = new Uint8Array(batchRows * payloadBytes);
  for (let i = 0; i < payload.length; i++) payload[i] = (i * 31 + 7) & 0xff;
  const keyOffsets = new Int32Array(batchRows + 1);
  for (let row = 0; row < batchRows; row++) keyOffsets[row + 1] = (keyOffsets[row] as number) + (row % keyedEvery === 0 ? keyBytes : 0);
  const keys = new Uint8Array(keyOffsets[batchRows] as number).fill(0x2e);
  return {
    rows: batchRows,
    fireAtMs: new Float64Array(batchRows),
    targets: [target],
    targetIndex: new Int32Array(batchRows),
    queues: ['default'],
    queueIndex: new Int32Array(batchRows),
    payload: { values: payload, offsets: Int32Array.from({ length: batchRows + 1 }, (_, i) => i * payloadBytes) },
    headers: { values: new Uint8Array(0), offsets: new Int32Array(batchRows + 1) },
    keys: { values: keys, offsets: keyOffsets },
  };
}

const hexDigits = new TextEncoder().encode('0123456789abcdef');
/** Keys are unique within the fill: 16 hex digits of this counter end each key. */
let nextKey = 0;

/** New unique keys and fresh fire times in [now + nearestMs, now + furthestMs). */
function refill(batch: TimerBatch, nowMs: number): void {
  const keys = batch.keys.values;
  for (let end = keyBytes; end <= keys.length; end += keyBytes) {
    let value = nextKey++;
    for (let at = end - 1; at >= end - 16; at--) {
      keys[at] = hexDigits[value % 16] as number;
      value = Math.floor(value / 16);
    }
  }
  const fireAt = batch.fireAtMs;
  for (let row = 0; row < batch.rows; row++) fireAt[row] = nowMs + nearestMs + Math.floor(Math.random() * (furthestMs - nearestMs));
}

/** Child: admits `timers` timers, checkpointing every `perCheckpoint`, and measures as it goes. */
async function fillChild(dir: string, timers: number, perCheckpoint: number): Promise<FillResult> {
  assert.ok(Number.isSafeInteger(timers) && timers > 0 && timers % batchRows === 0, `timers must be a positive multiple of ${batchRows}`);
  assert.ok(Number.isSafeInteger(perCheckpoint) && perCheckpoint > 0 && perCheckpoint % batchRows === 0, `timers per checkpoint must be a positive multiple of ${batchRows}`);
  const engine = await Engine.open({ dataDir: dir });
  try {
    const width = engine.bucketWidthMs;
    // The first bucket start at least an hour ahead: what the loader would choose with a small budget.
    const startedAtMs = Date.now();
    const watermarkMs = Math.ceil((startedAtMs + hourMs) / width) * width;
    const batches = Array.from({ length: admitters }, newBatch);
    const before = await settledMemory();
    let admitSeconds = 0;
    let checkpointSeconds = 0;
    let checkpoints = 0;
    let chunk: { resident: number; processBytes: number; engineBytes: number } | undefined;
    for (let admitted = 0; admitted < timers; ) {
      const chunkTimers = Math.min(perCheckpoint, timers - admitted);
      let remaining = chunkTimers / batchRows;
      const started = performance.now();
      await Promise.all(
        batches.map(async (batch) => {
          while (remaining > 0) {
            remaining--;
            refill(batch, Date.now());
            await engine.admit(batch);
          }
        }),
      );
      admitSeconds += (performance.now() - started) / 1000;
      admitted += chunkTimers;
      if (chunk === undefined) {
        const measured = await settledMemory();
        chunk = { resident: engine.stats().resident, processBytes: measured.bytes - before.bytes, engineBytes: engine.residentBytes() };
      }
      const checkpointStarted = performance.now();
      await engine.checkpoint(watermarkMs);
      checkpointSeconds += (performance.now() - checkpointStarted) / 1000;
      checkpoints++;
    }
    assert.ok(chunk !== undefined);
    const after = await settledMemory();
    const stats = engine.stats().spill;
    assert.equal(engine.stats().pending, timers, 'every admitted timer is pending');
    return {
      timers,
      admitSeconds,
      checkpointSeconds,
      checkpoints,
      chunkResident: chunk.resident,
      chunkProcessBytes: chunk.processBytes,
      chunkEngineBytes: chunk.engineBytes,
      resident: engine.stats().resident,
      residentEngineBytes: engine.residentBytes(),
      spilled: stats.spilled,
      runs: stats.runs,
      metadataBytes: stats.metadataBytes,
      fillProcessBytes: after.bytes - before.bytes,
      walBytes: await directoryBytes(join(dir, 'wal')),
      spillBytes: await directoryBytes(join(dir, 'spill')),
      watermarkAheadMs: watermarkMs - startedAtMs,
    };
  } finally {
    await engine.close();
  }
}

/**
 * Child: times Engine.open of `dir` and measures what the reopened engine holds. Then, with the
 * code warm, an engine opened on an empty directory: what any engine holds (log buffers and the
 * like), which is no timer's cost.
 */
async function reopenChild(dir: string): Promise<ReopenResult> {
  const before = await settledMemory();
  const started = performance.now();
  const engine = await Engine.open({ dataDir: dir });
  const openMs = performance.now() - started;
  let opened: Omit<ReopenResult, 'emptyEngineBytes'>;
  try {
    const after = await settledMemory();
    const stats = engine.stats().spill;
    opened = {
      openMs,
      pending: engine.stats().pending,
      resident: engine.stats().resident,
      spilled: stats.spilled,
      residentEngineBytes: engine.residentBytes(),
      metadataBytes: stats.metadataBytes,
      processBytes: after.bytes - before.bytes,
      baselineRssBytes: before.rss,
    };
  } finally {
    await engine.close();
  }
  const emptyDir = await mkdtemp(join(dirname(dir), 'fermata-bench-memory-empty-'));
  try {
    const beforeEmpty = await settledMemory();
    const empty = await Engine.open({ dataDir: emptyDir });
    try {
      const afterEmpty = await settledMemory();
      return { ...opened, emptyEngineBytes: afterEmpty.bytes - beforeEmpty.bytes };
    } finally {
      await empty.close();
    }
  } finally {
    await rm(emptyDir, { recursive: true, force: true });
  }
}

async function childMain(args: readonly string[]): Promise<void> {
  const [role, dir, timers, perCheckpoint] = args;
  assert.ok(dir !== undefined, 'usage: memory.ts fill <dir> <timers> <per-checkpoint> | reopen <dir>');
  const result = role === 'fill' ? await fillChild(dir, Number(timers), Number(perCheckpoint)) : role === 'reopen' ? await reopenChild(dir) : assert.fail(`unknown role ${role}`);
  assert.ok(process.send !== undefined, 'a memory child runs with an IPC channel (fork)');
  await new Promise<void>((resolve, reject) => process.send?.(result, undefined, {}, (err) => (err === null ? resolve() : reject(err))));
  process.disconnect?.();
}

if (import.meta.main) await childMain(process.argv.slice(2));
