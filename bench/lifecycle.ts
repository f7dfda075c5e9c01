// The `lifecycle` suite: what users do with timers after adding them, at scale. One engine
// (engine/engine.ts, in this process) on a temporary data directory under --dir holds N pending
// timers (10,000,000; --quick 1,000,000), most spilled to disk as the memory loader would put
// them: 5% due within the day (resident), 95% due from a day to a month out (spilled), 10% of
// them in queue "tenth", one in ten with a short key (`t0`, `t1`, …; as in the memory suite: an
// admit looks each key up among the spilled ones), a 64-byte payload, admitted in 10,000-row
// batches and spilled by a checkpoint after every million.
//
//   list_page_ms        pages of 1,000 (engine.listTimers + each view as JSON, as the route
//                       answers): from the start, then from random places in the spilled month;
//                       with no filter (.p99) and with queue "tenth" (.queue.p99)
//   list_key_prefix_ms  pages of 1,000 with key_prefix "t1" (one timer in 90, spread over the
//                       whole month on disk: a page reads some 90,000 rows of the runs)
//   export.timers_per_s every timer through engine.exportTimers (4,096-row Arrow batches), read
//                       as fast as they come
//   export.lateness_ms  deliveries' lateness (the dispatcher's histogram: delivery start − fire
//                       time) of timers due at a steady rate to a loopback sink (a child
//                       process, loadgen/sink.ts) while exports run back to back; the meta line
//                       has the same load's p99 just before, with no export, and the main
//                       thread's event-loop delay during the exports
//
// lifecycle.patch.per_s and lifecycle.patch.ratio are measured by bench/lifecycle-patch.ts,
// against a `fermata serve` child of their own after the rest;
// lifecycleSuite adds them to the others.
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Histogram } from 'hdr-histogram-js';
import { pino } from 'pino';
import { Dispatcher } from '../dispatch/dispatcher.ts';
import type { TimerBatch } from '../engine/batch/timer-batch.ts';
import { decodeCursor, Engine, type QueryPosition, queryStart, systemClock, type TimerFilter } from '../engine/engine.ts';
import { timerView } from '../ingest/http/timer-views.ts';
import { type BenchSink, startSinkProcess } from '../loadgen/sink.ts';
import { fermataBin, startListeningChild } from './fermata-child.ts';
import { lifecyclePatchFigures, type PatchTiming } from './lifecycle-patch.ts';
import { type Figure, metaLine, newHistogram, percentileMs, recordMs, roundTo, type SuiteOptions } from './report.ts';

const suite = 'lifecycle';
const payloadBytes = 64;
const batchRows = 10_000;
const pageLimit = 1000;
const tenth = 'tenth';
const hour = 3_600_000;
const day = 24 * hour;
/** A checkpoint spills what is past the first day after every this many timers admitted. */
const spillEvery = 1_000_000;
const exportBatchRows = 4096;
/** Deliveries during the export: this many a second over the span, due from a lead after their admits. */
const deliveryRatePerS = 2000;
const deliveryLeadMs = 3000;
const warmupTimers = 2000;
/** Deliveries due before the exports start, for the lateness of the same load without them. */
const quietSpanMs = 3000;
const drainTimeoutMs = 120_000;
const keyPrefix = 't1';

interface Sizes {
  readonly timers: number;
  /** Pages walked from the start, and pages started at random places in the spilled month. */
  readonly pagesFromStart: number;
  readonly pagesAtRandom: number;
  readonly keyPrefixPages: number;
  readonly deliverySpanMs: number;
}

const quickPatchTiming: PatchTiming = { warmupMs: 1000, measureMs: 4000 };
const fullPatchTiming: PatchTiming = { warmupMs: 2000, measureMs: 10_000 };

const quickSizes: Sizes = { timers: 1_000_000, pagesFromStart: 50, pagesAtRandom: 50, keyPrefixPages: 5, deliverySpanMs: 6000 };
const fullSizes: Sizes = { timers: 10_000_000, pagesFromStart: 200, pagesAtRandom: 200, keyPrefixPages: 10, deliverySpanMs: 10_000 };

export async function lifecycleSuite(options: SuiteOptions): Promise<Figure[]> {
  const figures = await queryFigures(options);
  // PATCHes against a service of their own, once the ten million timers above are let go.
  const service = await startListeningChild(options.baseDir, 'lifecycle-patch', (dir) => [fermataBin, 'serve', '--data', join(dir, 'data'), '--listen', '127.0.0.1:0']);
  try {
    figures.push(...(await lifecyclePatchFigures({ url: service.url, timing: options.quick ? quickPatchTiming : fullPatchTiming, progress: options.progress })));
  } finally {
    await service.stop();
  }
  return figures;
}

/** The list, export and lateness figures, on one engine in this process. */
async function queryFigures(options: SuiteOptions): Promise<Figure[]> {
  const sizes = options.quick ? quickSizes : fullSizes;
  const { baseDir, progress } = options;
  const dir = await mkdtemp(join(baseDir, 'fermata-bench-lifecycle-'));
  const sink = await startSinkProcess();
  try {
    const engine = await Engine.open({ dataDir: dir });
    try {
      const startMs = Date.now();
      progress(`lifecycle: filling ${sizes.timers} timers (95% spilled)`);
      const fillStarted = performance.now();
      await fill(engine, sizes.timers, startMs);
      const fillSeconds = (performance.now() - fillStarted) / 1000;
      const stats = engine.stats();
      assert.equal(stats.pending, sizes.timers, 'every timer admitted is pending');
      progress(`lifecycle: ${stats.resident} resident, ${stats.spill.spilled} spilled in ${stats.spill.runs} runs after ${fillSeconds.toFixed(1)} s; pages of ${pageLimit}`);

      const spanStart = engine.bucketWidthMs * Math.ceil((startMs + day) / engine.bucketWidthMs);
      const places = randomPlaces(sizes.pagesAtRandom, spanStart, startMs + 31 * day);
      const plain = await measurePages(engine, {}, sizes.pagesFromStart, places);
      progress(`lifecycle: no filter p99 ${percentileMs(plain, 99)} ms; queue "${tenth}"`);
      const queue = await measurePages(engine, { queue: tenth }, sizes.pagesFromStart, places);
      progress(`lifecycle: queue p99 ${percentileMs(queue, 99)} ms; key_prefix "${keyPrefix}"`);
      const prefix = await measurePages(engine, { keyPrefix: new TextEncoder().encode(keyPrefix) }, sizes.keyPrefixPages, []);
      progress(`lifecycle: key_prefix p99 ${percentileMs(prefix, 99)} ms; an export of every timer`);

      const exportRun = await measureExport(engine);
      assert.ok(exportRun.bytes > 0, 'the export made bytes');
      progress(`lifecycle: export ${Math.round(sizes.timers / exportRun.seconds)} timers/s; deliveries at ${deliveryRatePerS}/s while exports run`);
      const lateness = await measureLatenessDuringExport(engine, sink, sizes.deliverySpanMs);
      progress(`lifecycle: lateness p99 ${lateness.histogram.getValueAtPercentile(99)} ms over ${lateness.exports} exports`);

      const figure = (name: string, value: number, unit: string): Figure => ({ suite, name, value, unit });
      return [
        metaLine(suite, {
          node: process.version,
          cpus: cpus().length,
          dir: baseDir,
          quick: options.quick,
          timers: sizes.timers,
          resident: stats.resident,
          spilled: stats.spill.spilled,
          runs: stats.spill.runs,
          fill_s: roundTo(fillSeconds, 1),
          page_limit: pageLimit,
          pages: plain.totalCount,
          key_prefix_pages: prefix.totalCount,
          list_page_ms_p50: percentileMs(plain, 50),
          list_page_queue_ms_p50: percentileMs(queue, 50),
          export_seconds: roundTo(exportRun.seconds, 2),
          export_bytes: exportRun.bytes,
          delivery_rate_per_s: deliveryRatePerS,
          lateness_without_export_ms_p99: lateness.quietP99Ms,
          export_loop_delay_ms_p99: lateness.loopDelayP99Ms,
          export_loop_delay_ms_max: lateness.loopDelayMaxMs,
          exports_during_deliveries: lateness.exports,
          exported_during_deliveries: lateness.exported,
        }),
        figure('lifecycle.list_page_ms.p99', percentileMs(plain, 99), 'ms'),
        figure('lifecycle.list_page_ms.queue.p99', percentileMs(queue, 99), 'ms'),
        figure('lifecycle.list_key_prefix_ms.p99', percentileMs(prefix, 99), 'ms'),
        figure('lifecycle.export.timers_per_s', Math.round(sizes.timers / exportRun.seconds), '1/s'),
        figure('lifecycle.export.lateness_ms.p99', lateness.histogram.getValueAtPercentile(99), 'ms'),
      ];
    } finally {
      await engine.close();
    }
  } finally {
    await sink.close();
    await rm(dir, { recursive: true, force: true });
  }
}

// ---- filling -----------------------------------------------------------------------------------

/** N timers: 5% due within a day of `startMs`, the rest over the month after, one in ten keyed; a checkpoint spills the far ones every million. */
async function fill(engine: Engine, count: number, startMs: number): Promise<void> {
  const payload = new Uint8Array(batchRows * payloadBytes);
  for (let i = 0; i < payload.length; i++) payload[i] = (i * 31 + 7) & 0xff;
  const watermarkMs = engine.bucketWidthMs * Math.ceil((startMs + day) / engine.bucketWidthMs);
  const encoder = new TextEncoder();
  for (let first = 0; first < count; first += batchRows) {
    const rows = Math.min(batchRows, count - first);
    const keys = new Uint8Array(rows * 10);
    const keyOffsets = new Int32Array(rows + 1);
    let keyBytes = 0;
    const fireAtMs = new Float64Array(rows);
    const queueIndex = new Int32Array(rows);
    for (let row = 0; row < rows; row++) {
      const i = first + row;
      if (i % 10 === 0) keyBytes += encoder.encodeInto(`t${i / 10}`, keys.subarray(keyBytes)).written;
      keyOffsets[row + 1] = keyBytes;
      // A multiplicative hash of i: fire times and queues spread evenly, independent of the key.
      const spread = ((i * 2654435761) >>> 0) / 2 ** 32;
      fireAtMs[row] = spread < 0.05 ? startMs + hour + Math.floor((spread / 0.05) * (day - 2 * hour)) : watermarkMs + Math.floor(((spread - 0.05) / 0.95) * 30 * day);
      queueIndex[row] = i % 10 === 0 ? 1 : 0;
    }
    const batch: TimerBatch = {
      rows,
      fireAtMs,
      targets: ['https://bench.example/hook'],
      targetIndex: new Int32Array(rows),
      queues: ['default', tenth],
      queueIndex,
      payload: { values: payload.subarray(0, rows * payloadBytes), offsets: Int32Array.from({ length: rows + 1 }, (_, i) => i * payloadBytes) },
      headers: { values: new Uint8Array(0), offsets: new Int32Array(rows + 1) },
      keys: { values: keys.subarray(0, keyBytes), offsets: keyOffsets },
    };
    await engine.admit(batch);
    if ((first + rows) % spillEvery === 0 || first + rows === count) await engine.checkpoint(watermarkMs);
  }
}

function randomPlaces(count: number, fromMs: number, toMs: number): QueryPosition[] {
  return Array.from({ length: count }, () => ({ dueMs: fromMs + Math.floor(Math.random() * (toMs - fromMs)), seq: -1, row: 0 }));
}

// ---- list ----------------------------------------------------------------------------------------

/** Times pages of 1,000 as the route answers them: `fromStart` pages walked from the start, then one page at each place. */
async function measurePages(engine: Engine, filter: TimerFilter, fromStart: number, places: readonly QueryPosition[]): Promise<Histogram> {
  const histogram = newHistogram();
  const page = async (after: QueryPosition): Promise<string | null> => {
    const started = performance.now();
    const listed = await engine.listTimers(filter, pageLimit, after);
    JSON.stringify({ timers: listed.timers.map((timer) => timerView.json(timer)), next_cursor: listed.nextCursor });
    recordMs(histogram, performance.now() - started);
    return listed.nextCursor;
  };
  let after: QueryPosition | undefined = queryStart;
  for (let i = 0; i < fromStart && after !== undefined; i++) {
    const next = await page(after);
    after = next === null ? undefined : decodeCursor(next);
  }
  for (const place of places) await page(place);
  return histogram;
}

// ---- export ----------------------------------------------------------------------------------------

async function measureExport(engine: Engine): Promise<{ seconds: number; bytes: number }> {
  const started = performance.now();
  let bytes = 0;
  for await (const chunk of engine.exportTimers({}, exportBatchRows)) bytes += chunk.length;
  return { seconds: (performance.now() - started) / 1000, bytes };
}

interface LatenessRun {
  /** The dispatcher's lateness (ms) of the timers due while exports ran. */
  readonly histogram: Histogram;
  /** Its p99 over the timers due just before, with no export. */
  readonly quietP99Ms: number;
  /** The main thread's event-loop delay while exports ran. */
  readonly loopDelayP99Ms: number;
  readonly loopDelayMaxMs: number;
  readonly exports: number;
  /** Bytes of Arrow the exports made meanwhile. */
  readonly exported: number;
}

/**
 * Timers due at deliveryRatePerS to the sink: for quietSpanMs with nothing else going on, then
 * for `spanMs` while exports of every timer run back to back.
 */
async function measureLatenessDuringExport(engine: Engine, sink: BenchSink, spanMs: number): Promise<LatenessRun> {
  const dispatcher = new Dispatcher({ engine, clock: systemClock, logger: pino({ level: 'silent' }), allowLoopback: true });
  try {
    const target = `${sink.url}/hook`;
    const count = Math.round((deliveryRatePerS * spanMs) / 1000);
    const quiet = Math.round((deliveryRatePerS * quietSpanMs) / 1000);
    const t0 = Date.now() + deliveryLeadMs;
    // The first `quiet` timers are due before any export starts (their lateness alone), the rest while exports run.
    await admitDue(engine, quiet, target, (i) => t0 + Math.floor((i * quietSpanMs) / quiet));
    await admitDue(engine, count, target, (i) => t0 + quietSpanMs + Math.floor((i * spanMs) / count));
    const warmupDueMs = Date.now();
    await admitDue(engine, warmupTimers, target, () => warmupDueMs);
    await dispatcher.ready();
    dispatcher.start();
    await untilDelivered(engine, warmupTimers);
    assert.ok(Date.now() < t0, `admits and warm-up took longer than the ${deliveryLeadMs} ms lead`);
    dispatcher.lateness.reset();
    // The same load without an export first: what the export adds is the difference.
    await untilDelivered(engine, warmupTimers + quiet);
    const quietP99Ms = dispatcher.lateness.getValueAtPercentile(99);
    dispatcher.lateness.reset();
    const loopDelay = monitorEventLoopDelay({ resolution: 1 });
    loopDelay.enable();
    let exporting = true;
    let exports = 0;
    let exported = 0;
    const exportsDone = (async () => {
      while (exporting) {
        for await (const chunk of engine.exportTimers({}, exportBatchRows)) {
          exported += chunk.length;
          if (!exporting) break;
        }
        exports++;
      }
    })();
    await untilDelivered(engine, warmupTimers + quiet + count);
    exporting = false;
    await exportsDone;
    loopDelay.disable();
    return { histogram: dispatcher.lateness, quietP99Ms, loopDelayP99Ms: roundTo(loopDelay.percentile(99) / 1e6, 1), loopDelayMaxMs: roundTo(loopDelay.max / 1e6, 1), exports, exported };
  } finally {
    await dispatcher.close();
  }
}

async function admitDue(engine: Engine, count: number, target: string, fireAtMs: (i: number) => number): Promise<void> {
  for (let first = 0; first < count; first += batchRows) {
    const rows = Math.min(batchRows, count - first);
    const payload = new Uint8Array(rows * payloadBytes);
    await engine.admit({
      rows,
      fireAtMs: Float64Array.from({ length: rows }, (_, row) => fireAtMs(first + row)),
      targets: [target],
      targetIndex: new Int32Array(rows),
      queues: ['deliveries'],
      queueIndex: new Int32Array(rows),
      payload: { values: payload, offsets: Int32Array.from({ length: rows + 1 }, (_, i) => i * payloadBytes) },
      headers: { values: new Uint8Array(0), offsets: new Int32Array(rows + 1) },
      keys: { values: new Uint8Array(0), offsets: new Int32Array(rows + 1) },
    });
  }
}

async function untilDelivered(engine: Engine, count: number): Promise<void> {
  const deadline = performance.now() + drainTimeoutMs;
  for (;;) {
    const counts = engine.stats().counts;
    if (counts.delivered >= count) return;
    assert.ok(performance.now() < deadline, `only ${counts.delivered} of ${count} timers delivered after ${drainTimeoutMs} ms`);
    await sleep(5);
  }
}
