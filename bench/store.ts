// The `store` suite: the engine (engine/engine.ts) on a real data directory, end to end —
// validate, batch encoding, WAL group commit, then the resident store, heap, id and key indexes:
//
//   admit_single   256 async loops, each admitting a one-timer batch and awaiting it (durable),
//                  through the AdmitCoalescer as ingest does (one turn's admits share a record)
//   admit_single_uncoalesced   the same, each admit straight to engine.admit (a record each)
//   admit_batch    4 async loops admitting 10,000-timer batches
//   resident       RAM per resident timer: heapUsed + external growth over N timers without keys
//   key            RAM per idempotency key: the same N timers with 64-byte keys, minus the above
//   pop            takeDue(now, 1024) until the N (all due) timers are out of the heap
//   recovery       Engine.open of the data dir holding the N keyed timers, in a fresh process
//                  started as `fermata serve` starts (huge pages, V8's pool, heap growth)
//
// N is 1,000,000 (also with --quick). Every timer carries a 128-byte payload; the admit and
// keyed runs a 64-byte key (unique, ASCII) too. Batches are built once as columns and reused:
// the suite measures the engine, not a batch builder. The admit measurements warm up, then count only the admits
// acknowledged inside the measured span.
//
// The resident, pop and recovery measurements each run in a child process (this file, forked
// with --expose-gc), so the parent's heap does not pollute the memory figure and recovery
// starts as cold as a restart does. A child reports one message on its IPC channel.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import { tuneHeapGrowth } from '../bin/heap-growth.js';
import { AdmitCoalescer } from '../engine/admit-coalescer.ts';
import type { TimerBatch } from '../engine/batch/timer-batch.ts';
import { Engine } from '../engine/engine.ts';
import { type Figure, inSpan, metaLine, roundTo, startSpan, type SuiteOptions } from './report.ts';
import { runGcChild } from './gc-child.ts';

const suite = 'store';
const payloadBytes = 128;
const keyBytes = 64;
const singleAdmitters = 256;
const batchRows = 10_000;
const batchAdmitters = 4;
const target = 'https://bench.example/hook';
/** Admitted timers fall due between 1 minute and 1 hour from now (pending, never popped). */
const futureMinMs = 60_000;
const futureSpanMs = 3_600_000;
/** Timers for pop and recovery fell due within the last hour (all due at once). */
const pastSpanMs = 3_600_000;
/** V8 frees ArrayBuffer backing stores on a background thread: gc, wait, gc. */
const gcSettleMs = 200;

interface Timing {
  readonly warmupMs: number;
  readonly measureMs: number;
  /** Timers resident for the memory, pop and recovery measurements. */
  readonly residentTimers: number;
  /** Reopens timed (each in its own process); the median is reported. */
  readonly reopens: number;
}

// Quick runs hold as many timers as full ones: memory per timer depends on the count (columns
// grow by doubling, the byte arena by slabs), so a smaller count measures another figure.
const quickTiming: Timing = { warmupMs: 500, measureMs: 3000, residentTimers: 1_000_000, reopens: 1 };
const fullTiming: Timing = { warmupMs: 1000, measureMs: 10_000, residentTimers: 1_000_000, reopens: 3 };


export async function storeSuite(options: SuiteOptions): Promise<Figure[]> {
  const timing = options.quick ? quickTiming : fullTiming;
  const seconds = (timing.warmupMs + timing.measureMs) / 1000;
  const { baseDir, progress } = options;
  const n = timing.residentTimers;

  progress(`store: ${singleAdmitters} admitters of one-timer batches, coalesced (${seconds} s)`);
  const single = await inTempDir(baseDir, 'admit1', (dir) => measureAdmits(dir, timing, singleAdmitters, 1, 'coalesced'));
  progress(`store: ${singleAdmitters} admitters of one-timer batches, a record each (${seconds} s)`);
  const singleRaw = await inTempDir(baseDir, 'admit1raw', (dir) => measureAdmits(dir, timing, singleAdmitters, 1, 'direct'));
  progress(`store: ${batchAdmitters} admitters of ${batchRows}-timer batches (${seconds} s)`);
  const batched = await inTempDir(baseDir, 'admit10k', (dir) => measureAdmits(dir, timing, batchAdmitters, batchRows));

  progress(`store: ${n} resident timers without keys: memory, then pops (child process)`);
  const plain = await inTempDir(baseDir, 'plain', (dir) => runChild<FillResult>(['fill', dir, String(n), 'no-keys']));
  assert.equal(plain.popped, n, 'every admitted timer was due and popped');
  const { fill, reopens } = await inTempDir(baseDir, 'resident', async (dir) => {
    progress(`store: ${n} resident timers with ${keyBytes}-byte keys: memory (child process)`);
    const fill = await runChild<FillResult>(['fill', dir, String(n), 'keys']);
    const reopens: RecoverResult[] = [];
    for (let i = 0; i < timing.reopens; i++) {
      progress(`store: reopen ${i + 1} of ${timing.reopens}, replaying ${n} timers (child process)`);
      const reopen = await runChild<RecoverResult>(['recover', dir]);
      assert.equal(reopen.resident, n, 'the reopened engine holds every admitted timer');
      reopens.push(reopen);
    }
    return { fill, reopens };
  });
  const openSeconds = median(reopens.map((reopen) => reopen.openSeconds));
  progress(
    `store: filled ${n} timers in ${fill.fillSeconds.toFixed(2)} s; heapUsed +${fill.heapUsedBytes} B, external +${fill.externalBytes} B; ` +
      `reopen ${reopens.map((reopen) => `${reopen.openSeconds.toFixed(3)} s`).join(', ')}`,
  );

  const figure = (name: string, value: number, unit: string): Figure => ({ suite, name, value, unit });
  return [
    metaLine(suite, {
      node: process.version,
      cpus: cpus().length,
      dir: baseDir,
      quick: options.quick,
      timers: n,
      payload_bytes: payloadBytes,
      key_bytes: keyBytes,
      reopens: timing.reopens,
    }),
    figure('store.admit_single.per_s', Math.round(single.admitted / single.seconds), '1/s'),
    figure('store.admit_single_uncoalesced.per_s', Math.round(singleRaw.admitted / singleRaw.seconds), '1/s'),
    figure('store.admit_batch.per_s', Math.round(batched.admitted / batched.seconds), '1/s'),
    figure('store.resident.bytes_per_timer', roundTo((plain.heapUsedBytes + plain.externalBytes) / n, 1), 'B'),
    figure('store.key.bytes_per_key', roundTo((fill.heapUsedBytes + fill.externalBytes - plain.heapUsedBytes - plain.externalBytes) / n, 1), 'B'),
    figure('store.pop.per_s', Math.round(plain.popped / plain.popSeconds), '1/s'),
    figure('store.recovery.timers_per_s', Math.round(n / openSeconds), '1/s'),
  ];
}

async function inTempDir<T>(baseDir: string, label: string, measure: (dir: string) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(join(baseDir, `fermata-bench-store-${label}-`));
  try {
    return await measure(dir);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] as number;
}

// ---- batches -------------------------------------------------------------------------------

const keyPrefix = 'fermata-bench-store-key-'.padEnd(keyBytes - 16, '.');
/** Keys are unique across the whole process: keyPrefix + 16 hex digits of this counter. */
let nextKey = 0;
const hexDigits = new TextEncoder().encode('0123456789abcdef');
const utf8 = new TextDecoder();

/**
 * A batch of `rows` timers as columns: one target, the default queue, no headers, a
 * 128-byte payload and a 64-byte key per row. Fire times are set by setFireTimes().
 */
function newBatch(rows: number, keyed = true): TimerBatch {
  const payload = new Uint8Array(rows * payloadBytes);
  for (let i = 0; i < payload.length; i++) payload[i] = (i * 31 + 7) & 0xff;
  const keys = new Uint8Array(rows * keyBytes);
  const prefix = new TextEncoder().encode(keyPrefix);
  for (let row = 0; row < rows; row++) keys.set(prefix, row * keyBytes);
  const batch: TimerBatch = {
    rows,
    fireAtMs: new Float64Array(rows),
    targets: [target],
    targetIndex: new Int32Array(rows),
    queues: ['default'],
    queueIndex: new Int32Array(rows),
    payload: { values: payload, offsets: Int32Array.from({ length: rows + 1 }, (_, i) => i * payloadBytes) },
    headers: { values: new Uint8Array(0), offsets: new Int32Array(rows + 1) },
    keys: keyed ? { values: keys, offsets: Int32Array.from({ length: rows + 1 }, (_, i) => i * keyBytes) } : { values: new Uint8Array(0), offsets: new Int32Array(rows + 1) },
  };
  if (keyed) stampKeys(batch);
  return batch;
}

/** Gives every row of the batch a key not used before (call it between admits of a batch). */
function stampKeys(batch: TimerBatch): void {
  const keys = batch.keys.values;
  for (let row = 0; row < batch.rows; row++) {
    let value = nextKey++;
    for (let at = (row + 1) * keyBytes - 1; at >= (row + 1) * keyBytes - 16; at--) {
      keys[at] = hexDigits[value % 16] as number;
      value = Math.floor(value / 16);
    }
  }
}

/** Whole-ms fire times spread at random over [fromMs, fromMs + spanMs). */
function setFireTimes(batch: TimerBatch, fromMs: number, spanMs: number): void {
  const fireAt = batch.fireAtMs;
  for (let row = 0; row < batch.rows; row++) fireAt[row] = fromMs + Math.floor(Math.random() * spanMs);
}

// ---- admits (in this process) ---------------------------------------------------------------

interface AdmitRun {
  /** Timers whose admit was acknowledged (durable) inside the measured span. */
  readonly admitted: number;
  readonly seconds: number;
}

/**
 * `admitters` loops, each admitting its own `rows`-timer batch and awaiting it, until the span
 * ends: straight to engine.admit, or (one-timer batches) through an AdmitCoalescer.
 */
async function measureAdmits(dir: string, timing: Timing, admitters: number, rows: number, path: 'direct' | 'coalesced' = 'direct'): Promise<AdmitRun> {
  const batches = Array.from({ length: admitters }, () => {
    const batch = newBatch(rows);
    setFireTimes(batch, Date.now() + futureMinMs, futureSpanMs);
    return batch;
  });
  const engine = await Engine.open({ dataDir: dir });
  const coalescer = path === 'coalesced' ? new AdmitCoalescer(engine) : undefined;
  let admitted = 0;
  const span = startSpan(timing);
  const admitUntilEnd = async (batch: TimerBatch): Promise<void> => {
    while (performance.now() < span.end) {
      // A coalesced admit takes a spec, as the HTTP routes build from JSON: this batch's row with a fresh key.
      if (coalescer === undefined) await engine.admit(batch);
      else await coalescer.admitOne({ fireAtMs: batch.fireAtMs[0] as number, target, payload: batch.payload.values, key: utf8.decode(batch.keys.values) });
      if (inSpan(span, performance.now())) admitted += batch.rows;
      stampKeys(batch);
    }
  };
  try {
    await Promise.all(batches.map(admitUntilEnd));
  } finally {
    await engine.close();
  }
  return { admitted, seconds: span.seconds };
}

// ---- child processes --------------------------------------------------------------------------

interface FillResult {
  readonly fillSeconds: number;
  /** Growth of process.memoryUsage().heapUsed over the fill, after gc. */
  readonly heapUsedBytes: number;
  /** Growth of process.memoryUsage().external (which includes arrayBuffers) over the fill, after gc. */
  readonly externalBytes: number;
  readonly popped: number;
  readonly popSeconds: number;
}

interface RecoverResult {
  readonly openSeconds: number;
  readonly resident: number;
}

/** Runs this file in a child with --expose-gc; resolves with the one message it sends. */
function runChild<T>(args: readonly string[]): Promise<T> {
  return runGcChild<T>(import.meta.filename, 'store', args);
}

/**
 * heapUsed and external after full collections. The last-resort flavour also drops what V8
 * keeps only while memory is plentiful (at start-up, a 3.8 MB large object left by loading
 * TypeScript sources), which the fill's own collections would otherwise free and subtract.
 */
async function settledMemory(gc: NodeJS.GCFunction): Promise<{ heapUsed: number; external: number }> {
  const collect = (): void => gc({ type: 'major', execution: 'sync', flavor: 'last-resort' });
  collect();
  await sleep(gcSettleMs);
  collect();
  const { heapUsed, external } = process.memoryUsage();
  return { heapUsed, external };
}

/** Child: admits `n` due timers in 10,000-row batches, measures the memory they hold, pops them all. */
async function fillChild(dir: string, n: number, keyed: boolean): Promise<FillResult> {
  const gc = globalThis.gc;
  assert.ok(gc !== undefined, 'the fill child needs --expose-gc');
  assert.ok(Number.isSafeInteger(n) && n > 0 && n % batchRows === 0, `timers must be a positive multiple of ${batchRows}`);
  const engine = await Engine.open({ dataDir: dir });
  try {
    const batches = Array.from({ length: batchAdmitters }, () => newBatch(batchRows, keyed));
    const before = await settledMemory(gc);
    const started = performance.now();
    let remaining = n / batchRows;
    await Promise.all(
      batches.map(async (batch) => {
        while (remaining > 0) {
          remaining--;
          if (keyed) stampKeys(batch);
          setFireTimes(batch, Date.now() - pastSpanMs, pastSpanMs);
          await engine.admit(batch);
        }
      }),
    );
    const fillSeconds = (performance.now() - started) / 1000;
    assert.equal(engine.stats().resident, n);
    const after = await settledMemory(gc);

    const now = Date.now();
    const popStarted = performance.now();
    let popped = 0;
    for (let slice = engine.takeDue(now, 1024); slice.count > 0; slice = engine.takeDue(now, 1024)) popped += slice.count;
    const popSeconds = (performance.now() - popStarted) / 1000;
    assert.equal(engine.stats().pending, 0);
    return { fillSeconds, heapUsedBytes: after.heapUsed - before.heapUsed, externalBytes: after.external - before.external, popped, popSeconds };
  } finally {
    await engine.close();
  }
}

/**
 * Child: times Engine.open of `dir` (WAL recovery and replay of every record), with the heap
 * growth `fermata serve` sets before it opens its engine (bin/heap-growth.js): without it, V8
 * starts a full collection for every 64 MB the replay's columns and slabs add, twice as many
 * as a restarted service goes through.
 */
async function recoverChild(dir: string): Promise<RecoverResult> {
  tuneHeapGrowth();
  const started = performance.now();
  const engine = await Engine.open({ dataDir: dir });
  const openSeconds = (performance.now() - started) / 1000;
  try {
    return { openSeconds, resident: engine.stats().resident };
  } finally {
    await engine.close();
  }
}

async function childMain(args: readonly string[]): Promise<void> {
  const [role, dir, count, keys] = args;
  assert.ok(dir !== undefined, 'usage: store.ts fill|recover <dir> [timers]');
  const result = role === 'fill' ? await fillChild(dir, Number(count), keys === 'keys') : role === 'recover' ? await recoverChild(dir) : assert.fail(`unknown role ${role}`);
  assert.ok(process.send !== undefined, 'a store child runs with an IPC channel (fork)');
  await new Promise<void>((resolve, reject) => process.send?.(result, undefined, {}, (err) => (err === null ? resolve() : reject(err))));
  process.disconnect?.();
}

if (import.meta.main) await childMain(process.argv.slice(2));
