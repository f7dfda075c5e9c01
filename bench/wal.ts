// The `wal` suite: how fast appends become durable, set against two bounds measured in the
// same run, on the same file system, each in its own temporary directory:
//
//   floor    one 128-byte write + fdatasync at a time, no group commit: what a log without
//            group commit could acknowledge per second
//   ceiling  1 MiB sequential writes, one fdatasync per 16 MiB: what the disk takes in
//
// then the WAL itself (default limits) under 256 appenders of 128-byte records and 8
// appenders of 1 MiB records. Each measurement warms up, then counts only the work that
// completes inside its measured span. MB here is 1,048,576 bytes.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtemp, open, rm } from 'node:fs/promises';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import type { Histogram } from 'hdr-histogram-js';
import { Wal } from '../engine/wal/wal.ts';
import { type Figure, inSpan, metaLine, newHistogram, percentileMs, recordMs, roundTo, startSpan, type SuiteOptions } from './report.ts';

const suite = 'wal';
const MiB = 1024 * 1024;
const recordType = 1;

const smallBodyBytes = 128;
const smallAppenders = 256;
const largeBodyBytes = MiB;
const largeAppenders = 8;
const ceilingWriteBytes = MiB;
const ceilingSyncEveryBytes = 16 * MiB;

interface Timing {
  readonly warmupMs: number;
  readonly measureMs: number;
}

// Four measurements: quick stays well under 30 s in all, full trades time for steadier numbers.
const quickTiming: Timing = { warmupMs: 500, measureMs: 3000 };
const fullTiming: Timing = { warmupMs: 1000, measureMs: 10_000 };


export async function walSuite(options: SuiteOptions): Promise<Figure[]> {
  const timing = options.quick ? quickTiming : fullTiming;
  const seconds = (timing.warmupMs + timing.measureMs) / 1000;
  const { baseDir, progress } = options;

  progress(`wal: floor, 128-byte write + fdatasync (${seconds} s)`);
  const floorPerS = await inTempDir(baseDir, 'floor', (dir) => measureFloor(dir, timing));
  progress(`wal: ceiling, 1 MiB writes + fdatasync per 16 MiB (${seconds} s)`);
  const ceilingMbPerS = await inTempDir(baseDir, 'ceiling', (dir) => measureCeiling(dir, timing));
  progress(`wal: ${smallAppenders} appenders of ${smallBodyBytes}-byte records (${seconds} s)`);
  const small = await inTempDir(baseDir, 'append128', (dir) => measureAppends(dir, timing, smallAppenders, smallBodyBytes));
  progress(`wal: ${largeAppenders} appenders of 1 MiB records (${seconds} s)`);
  const large = await inTempDir(baseDir, 'append1m', (dir) => measureAppends(dir, timing, largeAppenders, largeBodyBytes));

  const smallPerS = small.appended / small.seconds;
  const largeMbPerS = (large.appended * largeBodyBytes) / MiB / large.seconds;
  const figure = (name: string, value: number, unit: string): Figure => ({ suite, name, value, unit });
  return [
    metaLine(suite, { node: process.version, cpus: cpus().length, dir: baseDir, quick: options.quick }),
    figure('wal.floor.write_fdatasync.per_s', Math.round(floorPerS), '1/s'),
    figure('wal.ceiling.mb_per_s', roundTo(ceilingMbPerS, 1), 'MB/s'),
    figure('wal.append128.per_s', Math.round(smallPerS), '1/s'),
    figure('wal.append128.floor_ratio', roundTo(smallPerS / floorPerS, 2), 'ratio'),
    figure('wal.append128.latency_ms.p50', percentileMs(small.latencyUs, 50), 'ms'),
    figure('wal.append128.latency_ms.p99', percentileMs(small.latencyUs, 99), 'ms'),
    figure('wal.group_size.p50', small.groupSizes.getValueAtPercentile(50), 'records'),
    figure('wal.group_size.p99', small.groupSizes.getValueAtPercentile(99), 'records'),
    figure('wal.fdatasync.per_s', Math.round(small.syncs / small.seconds), '1/s'),
    figure('wal.append1m.mb_per_s', roundTo(largeMbPerS, 1), 'MB/s'),
    figure('wal.append1m.ceiling_ratio', roundTo(largeMbPerS / ceilingMbPerS, 3), 'ratio'),
  ];
}

async function inTempDir<T>(baseDir: string, label: string, measure: (dir: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(join(baseDir, `fermata-bench-wal-${label}-`));
  try {
    return await measure(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Syncs per second when every 128-byte write waits for its own fdatasync. */
async function measureFloor(dir: string, timing: Timing): Promise<number> {
  const handle = await open(join(dir, 'floor'), 'a');
  try {
    const body = randomBytes(smallBodyBytes);
    const span = startSpan(timing);
    let synced = 0;
    while (performance.now() < span.end) {
      const { bytesWritten } = await handle.write(body);
      assert.equal(bytesWritten, body.length, 'short write');
      await handle.datasync();
      if (inSpan(span, performance.now())) synced++;
    }
    return synced / span.seconds;
  } finally {
    await handle.close();
  }
}

/** MB per second made durable by large sequential writes and infrequent syncs. */
async function measureCeiling(dir: string, timing: Timing): Promise<number> {
  const handle = await open(join(dir, 'ceiling'), 'a');
  try {
    const chunk = randomBytes(ceilingWriteBytes);
    const span = startSpan(timing);
    let syncedBytes = 0;
    while (performance.now() < span.end) {
      for (let written = 0; written < ceilingSyncEveryBytes; written += chunk.length) {
        const { bytesWritten } = await handle.write(chunk);
        assert.equal(bytesWritten, chunk.length, 'short write');
      }
      await handle.datasync();
      if (inSpan(span, performance.now())) syncedBytes += ceilingSyncEveryBytes;
    }
    return syncedBytes / MiB / span.seconds;
  } finally {
    await handle.close();
  }
}

interface AppendRun {
  /** Appends acknowledged (durable) inside the measured span. */
  readonly appended: number;
  readonly seconds: number;
  /** Append-to-acknowledgement latency of those appends, in microseconds. */
  readonly latencyUs: Histogram;
  /** Records per group commit, for groups committed inside the span. */
  readonly groupSizes: Histogram;
  /** Group commits (one fdatasync each) inside the span. */
  readonly syncs: number;
}

/** `appenders` loops, each appending its own `bodyBytes` body and waiting for it to be durable. */
async function measureAppends(dir: string, timing: Timing, appenders: number, bodyBytes: number): Promise<AppendRun> {
  const latencyUs = newHistogram();
  const groupSizes = newHistogram();
  let syncs = 0;
  let appended = 0;
  // The span starts before the open, so the open (segment create + syncs) eats into the warm-up.
  const span = startSpan(timing);
  const wal = await Wal.open({
    dir,
    onGroupCommitted: (stats) => {
      if (!inSpan(span, performance.now())) return;
      syncs++;
      groupSizes.recordValue(stats.records);
    },
  });
  const appendUntilEnd = async (body: Uint8Array): Promise<void> => {
    while (performance.now() < span.end) {
      const started = performance.now();
      await wal.append(recordType, body);
      const acknowledged = performance.now();
      if (!inSpan(span, acknowledged)) continue;
      appended++;
      recordMs(latencyUs, acknowledged - started);
    }
  };
  try {
    await Promise.all(Array.from({ length: appenders }, () => appendUntilEnd(randomBytes(bodyBytes))));
  } finally {
    await wal.close();
  }
  return { appended, seconds: span.seconds, latencyUs, groupSizes, syncs };
}
