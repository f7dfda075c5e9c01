// The `dispatch` suite: due timers delivered end to end by the dispatcher (dispatch/) to a lean
// HTTP/2 cleartext sink on loopback, each outcome durable in the WAL before it counts. Every
// scenario opens a fresh engine (default limits) on its own temporary data directory under
// --dir, with a fresh Dispatcher (default threads and limits, loopback allowed), and removes
// both afterwards. Every timer has a 128-byte payload, no key, no headers, and is admitted in
// 10,000-row batches.
//
//   request    N timers due now, admitted before dispatcher.start(), which waits for the
//              dispatcher's workers to have loaded (dispatcher.ready(); the load time is the
//              meta line's worker_load_ms); start → all delivered (engine.countsByState()
//              .delivered, polled): the meta line's request_fresh_per_s, a service's first
//              drain after it starts. Then N more timers through the same dispatcher, running
//              (its worker, sessions and code warm, as a service is once it has delivered),
//              admitted to fall due together once the admits are done: N ÷ (time from that
//              fire time to the last durable outcome), durable dispatches per second
//   ceiling    the same sink driven by a bare node:http2 client (one session a worker, as many
//              streams in flight as the dispatcher's workers may send to one origin, the same
//              request fermata sends), N requests; then N again on new sessions, its code warm
//              as the running dispatcher's is: the ceiling (the first: ceiling_fresh_per_s)
//   arrow      the request scenario on a queue with delivery "arrow" (batches POSTed to the
//              sink): the first drain is arrow_fresh_per_s; then runningDrains drains through
//              the running dispatcher, each of N timers falling due together: their median (one
//              drain lasts some 0.15 s, within reach of one stall of this shared machine); all
//              of them are the meta line's arrow_running_per_s
//   lateness   timers due at half the request rate, spread evenly over a span, after a warm-up
//              batch; the dispatcher's lateness histogram (delivery start − fire time)
//   burst      N timers all due within one second, after a warm-up: lateness p99, and N ÷ (time
//              from the first fire time to the last durable outcome) against the request rate
//   cold       a restart: timers at the lateness rate seeded into a data directory, due from
//              about when a `fermata serve` started on it will say "listening" (the listening
//              time of a first start on a directory with as many timers, due later) for 6 s;
//              then that service spawned.
//              Each timer's arrival at a sink in this process − its fire time, for the timers
//              due 0–3 s after the "listening" line was read (those due earlier are a backlog,
//              counted in the meta line); quick one restart, full the median of three
//
// The sink (loadgen/sink.ts) is a child process by default, so it does not share the main thread
// with fermata; FERMATA_BENCH_DISPATCH_SINK=in-process runs it in this process instead. It
// answers 200 with no body once a request's body has arrived, and counts timers, deliveries that
// arrived before their fermata-fire-at, and arrival − fire time. FERMATA_BENCH_DISPATCH_PROFILE=DIR
// writes CPU profiles of this process's main thread during the timed spans of the request and
// arrow scenarios to DIR: the fresh drains (dispatch-request-fresh-main.cpuprofile, …-arrow-…)
// and the first running one (dispatch-request-main.cpuprofile, dispatch-arrow-main.cpuprofile).
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import type { AddressInfo } from 'node:net';
import http2 from 'node:http2';
import { Session } from 'node:inspector/promises';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Histogram } from 'hdr-histogram-js';
import { pino } from 'pino';
import type { TimerBatch } from '../engine/batch/timer-batch.ts';
import { Engine, systemClock } from '../engine/engine.ts';
import { encodeTimerId } from '../engine/ids.ts';
import { dispatchLimits } from '../engine/limits.ts';
import { Dispatcher } from '../dispatch/dispatcher.ts';
import { distributionChart, type Fact, type Figure, median, metaLine, roundTo, type SuiteOptions } from './report.ts';
import { type BenchSink, countArrival, newTally, startSink, startSinkProcess } from '../loadgen/sink.ts';
import { startFermata } from './fermata-child.ts';

const suite = 'dispatch';
const payloadBytes = 128;
const admitBatchRows = 10_000;
const arrowQueue = 'pipe';
/** Timers delivered before the lateness and burst scenarios start, so sessions and JIT are warm. */
const warmupTimers = 2_000;
/** The lateness and burst timers fall due this long after their admission starts. */
const leadMs = 3_000;
/** A running drain's timers fall due this long after their admits start. */
const runningDrainLeadMs = 2_000;
/** Arrow drains through the running dispatcher, of which the median is the figure. */
const runningDrains = 3;
/** How often the suite looks at the engine's delivered count (sets the resolution of the drain times). */
const pollMs = 2;
/** A scenario that has not delivered everything by then has failed. */
const drainTimeoutMs = 180_000;

interface Sizes {
  /** Timers in the request and arrow scenarios, and requests of the ceiling. */
  readonly requestTimers: number;
  readonly arrowTimers: number;
  /** The lateness scenario's timers fall due over this span. */
  readonly latenessSpanMs: number;
  readonly burstTimers: number;

  /** Restarts of the cold scenario (its figure is the median of theirs). */
  readonly coldStarts: number;
}

// Quick runs keep the full run's lateness span, arrow drains and burst: over 3 s a fresh rig's
// first second weighs three times as much in the p99, the first running drains of 100,000 are
// still warming up, and a shorter burst is a larger share of its own start.
const quickSizes: Sizes = { requestTimers: 50_000, arrowTimers: 200_000, latenessSpanMs: 10_000, burstTimers: 200_000, coldStarts: 1 };
const fullSizes: Sizes = { requestTimers: 200_000, arrowTimers: 200_000, latenessSpanMs: 10_000, burstTimers: 200_000, coldStarts: 3 };
/** The cold scenario measures the timers due this long after the service says "listening". */
const coldSpanMs = 3_000;
/** The lateness target: the cold scenario's meta line says how many were later, and when the last of them was due. */
const coldLateMs = 5;
/** The cold scenario's first start holds timers due from this long after its seeding (never delivered: it stops before). */
const coldProbeTimerLeadMs = 30_000;
/** Seeding the cold scenario's data directory (open, admit, close) must be done within this; the service is spawned then. */
const coldSeedMsMax = 2_000;

type SinkMode = 'process' | 'in-process';
const sinkModeVariable = 'FERMATA_BENCH_DISPATCH_SINK';
const profileVariable = 'FERMATA_BENCH_DISPATCH_PROFILE';

export async function dispatchSuite(options: SuiteOptions): Promise<Figure[]> {
  const sizes = options.quick ? quickSizes : fullSizes;
  const { baseDir, progress } = options;
  const sinkMode: SinkMode = process.env[sinkModeVariable] === 'in-process' ? 'in-process' : 'process';
  const sink = sinkMode === 'process' ? await startSinkProcess() : await startSink();
  try {
    const profileDir = process.env[profileVariable];
    progress(`dispatch: request, ${sizes.requestTimers} timers due now, a fresh dispatcher (sink: ${sinkMode})`);
    const request = await withRig(baseDir, 'request', async (rig) => {
      const fresh = await measureDrain(rig, sink, 'request', sizes.requestTimers, profileDir);
      progress(`dispatch: request, ${Math.round(fresh.perS)}/s in ${fresh.seconds.toFixed(2)} s, peak in flight ${fresh.inFlightPeak}; again, through the running dispatcher`);
      return { fresh, perS: await measureRunningDrain(rig, sink, 'default', sizes.requestTimers, profileDir === undefined ? undefined : join(profileDir, 'dispatch-request-main.cpuprofile')) };
    });
    progress(`dispatch: request, running, ${Math.round(request.perS)}/s`);

    const streams = dispatchLimits.requestsPerOriginMax;
    progress(`dispatch: ceiling, a bare node:http2 client, ${sizes.requestTimers} requests, ${request.fresh.threads} × ${streams} streams, twice`);
    const ceilingFreshPerS = await measureBareClient(sink, sizes.requestTimers, request.fresh.threads, streams);
    const ceilingPerS = await measureBareClient(sink, sizes.requestTimers, request.fresh.threads, streams);
    progress(`dispatch: ceiling, ${Math.round(ceilingFreshPerS)}/s, then ${Math.round(ceilingPerS)}/s`);

    progress(`dispatch: arrow, ${sizes.arrowTimers} timers due now, a fresh dispatcher`);
    const arrow = await withRig(baseDir, 'arrow', async (rig) => {
      const fresh = await measureDrain(rig, sink, 'arrow', sizes.arrowTimers, profileDir);
      progress(`dispatch: arrow, ${Math.round(fresh.perS)}/s in ${fresh.seconds.toFixed(2)} s; ${runningDrains} times again, through the running dispatcher`);
      const running: number[] = [];
      for (let drain = 0; drain < runningDrains; drain++) running.push(await measureRunningDrain(rig, sink, arrowQueue, sizes.arrowTimers, drain === 0 && profileDir !== undefined ? join(profileDir, 'dispatch-arrow-main.cpuprofile') : undefined));
      return { fresh, running, perS: median(running) };
    });
    progress(`dispatch: arrow, running, ${arrow.running.map(Math.round).join(', ')}/s`);

    const latenessRate = Math.max(1, Math.floor(request.perS / 2));
    const latenessTimers = Math.max(1, Math.round((latenessRate * sizes.latenessSpanMs) / 1000));
    progress(`dispatch: lateness, ${latenessTimers} timers due at ${latenessRate}/s over ${sizes.latenessSpanMs / 1000} s`);
    const lateness = await withRig(baseDir, 'lateness', (rig) => measureDue(rig, sink, latenessTimers, (i) => Math.floor((i * 1000) / latenessRate)));
    // The dispatcher's histogram already holds milliseconds.
    options.chart?.(distributionChart('dispatch.lateness_ms', lateness.histogram, 1, 'ms'));

    progress(`dispatch: burst, ${sizes.burstTimers} timers due within one second`);
    const burst = await withRig(baseDir, 'burst', (rig) => measureDue(rig, sink, sizes.burstTimers, (i) => Math.floor((i * 1000) / sizes.burstTimers)));
    const burstPerS = sizes.burstTimers / burst.secondsFromFirstDue;
    progress(`dispatch: burst, ${Math.round(burstPerS)}/s, done ${burst.secondsFromFirstDue.toFixed(2)} s after the first fire time`);

    const colds: ColdRun[] = [];
    for (let start = 0; start < sizes.coldStarts; start++) {
      progress(`dispatch: cold, a restart ${start + 1} of ${sizes.coldStarts}: timers due at ${latenessRate}/s from "listening" on, for ${coldSpanMs / 1000} s`);
      const cold = await measureColdStart(baseDir, latenessRate);
      progress(`dispatch: cold, listening after ${Math.round(cold.listeningMs)} ms, p99 ${cold.p99Ms} ms over ${cold.measured} timers (${cold.beforeListening} due before listening)`);
      colds.push(cold);
    }
    const coldP99Ms = median(colds.map((cold) => cold.p99Ms));

    // The running drains assert none arrived early.
    const early = request.fresh.early + arrow.fresh.early + lateness.early + burst.early + colds.reduce((sum, cold) => sum + cold.early, 0);
    if (early > 0) progress(`dispatch: WARNING ${early} deliveries reached the sink before their fire time`);
    const figure = (name: string, value: number, unit: string): Figure => ({ suite, name, value, unit });
    const facts: Record<string, Fact> = {
      node: process.version,
      cpus: cpus().length,
      dir: baseDir,
      quick: options.quick,
      sink: sinkMode,
      threads: request.fresh.threads,
      worker_load_ms: Math.round(Math.max(request.fresh.workerLoadMs, arrow.fresh.workerLoadMs)),
      in_flight_max: dispatchLimits.inFlightMax,
      requests_in_flight_max: dispatchLimits.requestsInFlightMax,
      queue_in_flight_max: Math.floor(dispatchLimits.requestsInFlightMax * dispatchLimits.queueInFlightShareMax),
      requests_per_origin_max: dispatchLimits.requestsPerOriginMax,
      timers_per_task_max: dispatchLimits.timersPerTaskMax,
      payload_bytes: payloadBytes,
      request_timers: sizes.requestTimers,
      request_fresh_per_s: Math.round(request.fresh.perS),
      request_fresh_second_half_per_s: Math.round(request.fresh.secondHalfPerS),
      request_fresh_in_flight_peak: request.fresh.inFlightPeak,
      request_fresh_latency_ms_p50: request.fresh.latencyP50Ms,
      request_fresh_latency_ms_p99: request.fresh.latencyP99Ms,
      ceiling_fresh_per_s: Math.round(ceilingFreshPerS),
      ceiling_per_s: Math.round(ceilingPerS),
      arrow_timers: sizes.arrowTimers,
      arrow_batch_rows_max: arrow.fresh.batchRowsMax,
      arrow_fresh_batches: arrow.fresh.requests,
      arrow_fresh_per_s: Math.round(arrow.fresh.perS),
      arrow_running_per_s: arrow.running.map(Math.round).join(', '),
      lateness_rate_per_s: latenessRate,
      lateness_timers: latenessTimers,
      lateness_release_ms_p99: lateness.releaseP99Ms,
      lateness_release_ms_max: lateness.releaseMaxMs,
      lateness_sink_ms_p99: lateness.sinkP99Ms,
      lateness_sink_ms_max: lateness.sinkMaxMs,
      burst_timers: sizes.burstTimers,
      burst_per_s: Math.round(burstPerS),
      burst_release_lateness_ms_p99: burst.releaseP99Ms,
      burst_sink_lateness_ms_p99: burst.sinkP99Ms,
      cold_listening_ms: colds.map((cold) => Math.round(cold.listeningMs)).join(', '),
      cold_timers: colds.map((cold) => cold.measured).join(', '),
      cold_due_before_listening: colds.map((cold) => cold.beforeListening).join(', '),
      cold_first_due_after_listening_ms: colds.map((cold) => cold.firstDueAfterListeningMs).join(', '),
      cold_lateness_ms_p50: colds.map((cold) => cold.p50Ms).join(', '),
      cold_lateness_ms_p99: colds.map((cold) => cold.p99Ms).join(', '),
      cold_lateness_ms_max: colds.map((cold) => cold.maxMs).join(', '),
      cold_late_over_5ms: colds.map((cold) => cold.late).join(', '),
      cold_last_late_due_after_listening_ms: colds.map((cold) => cold.lastLateDueAfterListeningMs).join(', '),
      early_deliveries: early,
    };
    return [
      metaLine(suite, facts),
      figure('dispatch.request.per_s', Math.round(request.perS), '1/s'),
      figure('dispatch.request.ceiling_ratio', roundTo(request.perS / ceilingPerS, 3), 'ratio'),
      figure('dispatch.arrow.timers_per_s', Math.round(arrow.perS), '1/s'),
      figure('dispatch.lateness_ms.min', lateness.minMs, 'ms'),
      figure('dispatch.lateness_ms.p50', lateness.histogram.getValueAtPercentile(50), 'ms'),
      figure('dispatch.lateness_ms.p99', lateness.histogram.getValueAtPercentile(99), 'ms'),
      figure('dispatch.lateness_ms.p999', lateness.histogram.getValueAtPercentile(99.9), 'ms'),
      figure('dispatch.lateness_ms.max', lateness.histogram.maxValue, 'ms'),
      figure('dispatch.cold_lateness_ms.p99', coldP99Ms, 'ms'),
      figure('dispatch.burst_lateness_ms.p99', burst.histogram.getValueAtPercentile(99), 'ms'),
      figure('dispatch.burst.rate_ratio', roundTo(burstPerS / request.perS, 3), 'ratio'),
    ];
  } finally {
    await sink.close();
  }
}

// ---- engine and dispatcher --------------------------------------------------------------------

interface Rig {
  readonly engine: Engine;
  readonly dispatcher: Dispatcher;
}

/** A fresh engine on a fresh temporary data directory and a dispatcher on it; all gone afterwards. */
async function withRig<T>(baseDir: string, label: string, run: (rig: Rig) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(join(baseDir, `fermata-bench-dispatch-${label}-`));
  try {
    const engine = await Engine.open({ dataDir: dir });
    try {
      // Built before any timer is admitted: the worker threads load while the admits run (a
      // drain is timed once they have: a running service's workers loaded when it started).
      const dispatcher = new Dispatcher({ engine, clock: systemClock, logger: pino({ level: 'silent' }), allowLoopback: true });
      try {
        return await run({ engine, dispatcher });
      } finally {
        await dispatcher.close();
      }
    } finally {
      await engine.close();
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Admits `count` timers to `target` in 10,000-row batches; timer i falls due at fireAtMs(i). */
async function admitTimers(engine: Engine, count: number, target: string, queue: string, fireAtMs: (i: number) => number): Promise<void> {
  const rows = Math.min(admitBatchRows, count);
  const payload = new Uint8Array(rows * payloadBytes);
  for (let i = 0; i < payload.length; i++) payload[i] = (i * 31 + 7) & 0xff;
  const emptyColumn = { values: new Uint8Array(0), offsets: new Int32Array(rows + 1) };
  for (let first = 0; first < count; first += rows) {
    const batchRows = Math.min(rows, count - first);
    const batch: TimerBatch = {
      rows: batchRows,
      fireAtMs: Float64Array.from({ length: batchRows }, (_, row) => fireAtMs(first + row)),
      targets: [target],
      targetIndex: new Int32Array(batchRows),
      queues: [queue],
      queueIndex: new Int32Array(batchRows),
      payload: { values: payload.subarray(0, batchRows * payloadBytes), offsets: Int32Array.from({ length: batchRows + 1 }, (_, i) => i * payloadBytes) },
      headers: batchRows === rows ? emptyColumn : { values: new Uint8Array(0), offsets: new Int32Array(batchRows + 1) },
      keys: batchRows === rows ? emptyColumn : { values: new Uint8Array(0), offsets: new Int32Array(batchRows + 1) },
    };
    await engine.admit(batch);
  }
}

interface Drained {
  /** Highest dispatcher.inFlight seen while polling. */
  readonly inFlightPeak: number;
  /** performance.now() when half of the count was first seen delivered. */
  readonly halfAt: number;
}

/** Polls until `count` timers are delivered (durably); fails on a dead or retried timer, or after drainTimeoutMs. */
async function untilDelivered(rig: Rig, count: number): Promise<Drained> {
  const deadline = performance.now() + drainTimeoutMs;
  let inFlightPeak = 0;
  let halfAt = Infinity;
  for (;;) {
    inFlightPeak = Math.max(inFlightPeak, rig.dispatcher.inFlight);
    const counts = rig.engine.stats().counts;
    assert.equal(counts.dead + counts.retrying, 0, `a fault-free sink, yet ${counts.dead} dead and ${counts.retrying} retrying timers`);
    if (counts.delivered >= count / 2 && halfAt === Infinity) halfAt = performance.now();
    if (counts.delivered >= count) return { inFlightPeak, halfAt };
    assert.ok(performance.now() < deadline, `only ${counts.delivered} of ${count} timers delivered after ${drainTimeoutMs} ms`);
    await sleep(pollMs);
  }
}

interface DrainRun {
  readonly seconds: number;
  readonly perS: number;
  /** The rate over the second half of the timers: the first half pays for cold workers and sessions. */
  readonly secondHalfPerS: number;
  readonly inFlightPeak: number;
  readonly threads: number;
  readonly latencyP50Ms: number;
  readonly latencyP99Ms: number;
  /** Requests the sink got (one per timer, or one per Arrow batch). */
  readonly requests: number;
  readonly batchRowsMax: number;
  readonly early: number;
  /** From the dispatcher's construction until its workers had loaded their code (before the timed span). */
  readonly workerLoadMs: number;
}

/** `count` timers due now, admitted first; the time from dispatcher.start() until all are durably delivered. */
async function measureDrain(rig: Rig, sink: BenchSink, delivery: 'request' | 'arrow', count: number, profileDir: string | undefined): Promise<DrainRun> {
  const { engine, dispatcher } = rig;
  let queue = 'default';
  let batchRowsMax = 1;
  if (delivery === 'arrow') {
    queue = arrowQueue;
    batchRowsMax = (await engine.setQueue(arrowQueue, { delivery: 'arrow', sink: `${sink.url}/ingest` })).batch_rows_max;
  }
  const dueMs = Date.now();
  await admitTimers(engine, count, `${sink.url}/hook`, queue, () => dueMs);
  await sink.reset();
  const workerLoadMs = await dispatcher.ready();
  const profiler = profileDir === undefined ? undefined : await startProfile();
  const started = performance.now();
  dispatcher.start();
  const { inFlightPeak, halfAt } = await untilDelivered(rig, count);
  const ended = performance.now();
  const seconds = (ended - started) / 1000;
  if (profiler !== undefined && profileDir !== undefined) await stopProfile(profiler, join(profileDir, `dispatch-${delivery}-fresh-main.cpuprofile`));
  const got = await sink.snapshot();
  assert.equal(got.timers, count, 'the sink got every timer once');
  return {
    seconds,
    perS: count / seconds,
    secondHalfPerS: (count - Math.ceil(count / 2)) / ((ended - halfAt) / 1000),
    inFlightPeak,
    threads: dispatcher.threads,
    latencyP50Ms: dispatcher.latency.getValueAtPercentile(50),
    latencyP99Ms: dispatcher.latency.getValueAtPercentile(99),
    requests: got.requests,
    batchRowsMax,
    early: got.early,
    workerLoadMs,
  };
}

/**
 * A drain through the running dispatcher of an earlier one, its worker, sessions and code warm:
 * `count` timers of `queue` admitted to fall due together once the admits are done; timers ÷
 * (time from that fire time to the last durable outcome), as a running service delivers them.
 * With `profilePath`, a CPU profile of the main thread over that span is written there.
 */
async function measureRunningDrain(rig: Rig, sink: BenchSink, queue: string, count: number, profilePath: string | undefined): Promise<number> {
  const { engine } = rig;
  const before = engine.stats().counts.delivered;
  await sink.reset();
  const dueMs = Date.now() + runningDrainLeadMs;
  await admitTimers(engine, count, `${sink.url}/hook`, queue, () => dueMs);
  assert.ok(Date.now() < dueMs, `admitting ${count} timers took longer than the ${runningDrainLeadMs} ms lead: raise runningDrainLeadMs`);
  const profiler = profilePath === undefined ? undefined : await startProfile();
  await untilDelivered(rig, before + count);
  const seconds = (Date.now() - dueMs) / 1000;
  if (profiler !== undefined && profilePath !== undefined) await stopProfile(profiler, profilePath);
  const got = await sink.snapshot();
  assert.equal(got.timers, count, 'the sink got every timer once');
  assert.equal(got.early, 0, 'no timer reached the sink before its fire time');
  return count / seconds;
}

interface DueRun {
  /** Delivery start − fire time of the measured timers, ms (the dispatcher's histogram). */
  readonly histogram: Histogram;
  readonly minMs: number;
  /** From the first measured fire time to the last durable outcome. */
  readonly secondsFromFirstDue: number;
  /** Release by the scheduler − fire time (the dispatcher's releaseLateness): the main thread's share. */
  readonly releaseP99Ms: number;
  readonly releaseMaxMs: number;
  /** Arrival at the sink − fire time: includes the wait for a free stream in the worker. */
  readonly sinkP99Ms: number;
  readonly sinkMaxMs: number;
  readonly early: number;
}

/**
 * `count` timers falling due at t0 + offsetMs(i), t0 leadMs after the admits start; a warm-up
 * batch due now is delivered first, then the lateness histogram is reset.
 */
async function measureDue(rig: Rig, sink: BenchSink, count: number, offsetMs: (i: number) => number): Promise<DueRun> {
  const { engine, dispatcher } = rig;
  const target = `${sink.url}/hook`;
  const t0 = Date.now() + leadMs;
  await admitTimers(engine, count, target, 'default', (i) => t0 + offsetMs(i));
  const warmupDueMs = Date.now();
  await admitTimers(engine, warmupTimers, target, 'default', () => warmupDueMs);
  dispatcher.start();
  await untilDelivered(rig, warmupTimers);
  await sink.reset();
  assert.ok(Date.now() < t0, `admits and warm-up took longer than the ${leadMs} ms lead: raise leadMs`);
  dispatcher.lateness.reset();
  dispatcher.releaseLateness.reset();
  await untilDelivered(rig, warmupTimers + count);
  const secondsFromFirstDue = (Date.now() - t0) / 1000;
  const got = await sink.snapshot();
  assert.equal(got.timers, count, 'the sink got every timer once');
  assert.equal(dispatcher.lateness.totalCount, count, 'every measured timer was a first attempt');
  return {
    histogram: dispatcher.lateness,
    minMs: dispatcher.lateness.getValueAtPercentile(0),
    secondsFromFirstDue,
    releaseP99Ms: dispatcher.releaseLateness.getValueAtPercentile(99),
    releaseMaxMs: dispatcher.releaseLateness.maxValue,
    sinkP99Ms: roundTo(got.latenessUs.getValueAtPercentile(99) / 1000, 1),
    sinkMaxMs: roundTo(got.latenessUs.maxValue / 1000, 1),
    early: got.early,
  };
}

// ---- a restart ------------------------------------------------------------------------------------

export interface ColdRun {
  /** Spawn of `fermata serve` on the seeded directory to its "listening" line. */
  readonly listeningMs: number;
  /** Timers due 0–coldSpanMs after "listening", and their arrival − fire time (ms, 0.1 ms precision). */
  readonly measured: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
  /** Seeded timers due before "listening" (delivered at once: not measured). */
  readonly beforeListening: number;
  /** The first measured timer's fire time − "listening". */
  readonly firstDueAfterListeningMs: number;
  /** Measured timers more than coldLateMs late, and the fire time − "listening" of the last of them (-1: none): where a start's lateness lies. */
  readonly late: number;
  readonly lastLateDueAfterListeningMs: number;
  readonly early: number;
}

/**
 * A restart with timers due from its first second: timers at `ratePerS` admitted into a fresh
 * data directory by an engine in this process, due from when a service started on it is
 * expected to say "listening" (as long after its spawn as a first start on an empty directory
 * took) for coldSpanMs and a little more; then `fermata serve` spawned on it, delivering to a
 * sink in this process (fermata runs alone in its own). Measured: the timers due 0–coldSpanMs
 * after the "listening" line was read.
 */
export async function measureColdStart(baseDir: string, ratePerS: number): Promise<ColdRun> {
  const dir = await mkdtemp(join(baseDir, 'fermata-bench-dispatch-cold-'));
  const sink = await startArrivalSink();
  try {
    // A start of the same kind, to learn when a restart says "listening": its directory holds as
    // many timers to the same sink, due later (a service may get ready for due timers before it
    // listens, and its replay takes as long). It also brings the launcher, Node and fermata's
    // files into the page cache, as a restart finds them.
    const count = Math.ceil((ratePerS * coldSpanMs * 2) / 1000);
    const probeDir = join(dir, 'probe');
    const probeEngine = await Engine.open({ dataDir: probeDir });
    try {
      const laterMs = Date.now() + coldProbeTimerLeadMs;
      await admitTimers(probeEngine, count, `${sink.url}/hook`, 'default', (i) => laterMs + Math.floor((i * 1000) / ratePerS));
    } finally {
      await probeEngine.close();
    }
    // Twice: the first start meets files not yet in the page cache, which the measured one does not.
    let probeListeningMs = 0;
    for (let start = 0; start < 2; start++) {
      const probeStart = performance.now();
      const probe = await startFermata(baseDir, 'dispatch-cold-probe', { dataDir: probeDir });
      probeListeningMs = performance.now() - probeStart;
      await probe.stop();
    }

    const dataDir = join(dir, 'data');
    const spawnAtMs = Date.now() + coldSeedMsMax;
    const firstDueMs = spawnAtMs + Math.round(probeListeningMs);
    const engine = await Engine.open({ dataDir });
    try {
      await admitTimers(engine, count, `${sink.url}/hook`, 'default', (i) => firstDueMs + Math.floor((i * 1000) / ratePerS));
    } finally {
      await engine.close();
    }
    assert.ok(Date.now() < spawnAtMs, `seeding ${count} timers took longer than ${coldSeedMsMax} ms: raise coldSeedMsMax`);
    await sleep(spawnAtMs - Date.now());

    const spawned = performance.now();
    const service = await startFermata(baseDir, 'dispatch-cold', { dataDir });
    // Read from its log a little after it was written: the first few ms' timers count as before it.
    const listeningAtMs = Date.now();
    const listeningMs = performance.now() - spawned;
    try {
      const deadline = performance.now() + drainTimeoutMs;
      while (sink.arrivals() < count) {
        assert.ok(performance.now() < deadline, `only ${sink.arrivals()} of ${count} timers reached the sink after ${drainTimeoutMs} ms`);
        await sleep(10);
      }
    } finally {
      await service.stop();
    }
    const lateness = newTally().latenessUs;
    let beforeListening = 0;
    let firstMeasuredDueMs = Infinity;
    let late = 0;
    let lastLateDueMs = -Infinity;
    sink.forEach((fireAtMs, latenessUs) => {
      if (fireAtMs < listeningAtMs) beforeListening++;
      else if (fireAtMs < listeningAtMs + coldSpanMs) {
        lateness.recordValue(latenessUs);
        firstMeasuredDueMs = Math.min(firstMeasuredDueMs, fireAtMs);
        if (latenessUs > coldLateMs * 1000) {
          late++;
          lastLateDueMs = Math.max(lastLateDueMs, fireAtMs);
        }
      }
    });
    const ms = (us: number): number => roundTo(us / 1000, 1);
    return {
      listeningMs,
      measured: lateness.totalCount,
      p50Ms: ms(lateness.getValueAtPercentile(50)),
      p99Ms: ms(lateness.getValueAtPercentile(99)),
      maxMs: ms(lateness.maxValue),
      beforeListening,
      firstDueAfterListeningMs: firstMeasuredDueMs - listeningAtMs,
      late,
      lastLateDueAfterListeningMs: late === 0 ? -1 : lastLateDueMs - listeningAtMs,
      early: sink.early(),
    };
  } finally {
    await sink.close();
    await rm(dir, { recursive: true, force: true });
  }
}

interface ArrivalSink {
  readonly url: string;
  arrivals(): number;
  /** Arrivals before their fire time by the wall clock. */
  early(): number;
  /** Each arrival's fire time (epoch ms) and its lateness (µs, at least 1), early ones left out. */
  forEach(visit: (fireAtMs: number, latenessUs: number) => void): void;
  close(): Promise<void>;
}

/**
 * An HTTP/2 cleartext sink in this process that keeps every arrival's fire time and lateness
 * (the bench sink's histogram mixes timers due before and after a moment known only later).
 * Answers 200 once a request's body has arrived, lateness counted as loadgen/sink.ts does.
 */
async function startArrivalSink(): Promise<ArrivalSink> {
  const server = http2.createServer({ settings: { maxConcurrentStreams: 4096 } });
  const fireAt: number[] = [];
  const latenessUs: number[] = [];
  const tally = newTally();
  const sessions = new Set<http2.ServerHttp2Session>();
  server.on('session', (session: http2.ServerHttp2Session) => {
    sessions.add(session);
    session.once('close', () => sessions.delete(session));
  });
  server.on('stream', (stream: http2.ServerHttp2Stream, headers: http2.IncomingHttpHeaders) => {
    stream.on('error', () => undefined);
    stream.once('end', () => {
      const arrivalMs = performance.timeOrigin + performance.now();
      const earlyBefore = tally.early;
      countArrival(tally, headers, arrivalMs, Date.now());
      const fireAtMs = Number(headers['fermata-fire-at']);
      if (tally.early === earlyBefore) {
        fireAt.push(fireAtMs);
        latenessUs.push(Math.max(1, Math.round((arrivalMs - fireAtMs) * 1000)));
      }
      stream.respond({ ':status': 200 }, { endStream: true });
    });
    stream.resume();
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    arrivals: () => tally.timers,
    early: () => tally.early,
    forEach: (visit) => {
      for (let i = 0; i < fireAt.length; i++) visit(fireAt[i] as number, latenessUs[i] as number);
    },
    close: () => {
      const closed = new Promise<void>((resolve) => server.close(() => resolve()));
      for (const session of sessions) session.destroy();
      return closed;
    },
  };
}

// ---- the bare client ------------------------------------------------------------------------------

/**
 * Requests per second of a node:http2 client with `streams` requests in flight on each of
 * `sessions` sessions (a delivery worker holds one session per origin and sends it at most
 * requestsPerOriginMax at once), each request the one fermata sends.
 */
async function measureBareClient(sink: BenchSink, count: number, sessionCount: number, streams: number): Promise<number> {
  const sessions = Array.from({ length: sessionCount }, () => http2.connect(sink.url, { maxSessionMemory: 64 }));
  try {
    await Promise.all(sessions.map((session) => once(session, 'remoteSettings')));
    const body = new Uint8Array(payloadBytes).map((_, i) => (i * 31 + 7) & 0xff);
    const authority = new URL(sink.url).host;
    const fireAtMs = Date.now();
    let sent = 0;
    let answered = 0;
    const started = performance.now();
    await new Promise<void>((resolve, reject) => {
      const send = (session: http2.ClientHttp2Session): void => {
        const id = encodeTimerId(1, sent++, fireAtMs);
        const stream = session.request({
          ':method': 'POST',
          ':path': '/hook',
          ':authority': authority,
          'content-length': payloadBytes,
          'content-type': 'application/octet-stream',
          'fermata-timer-id': id,
          'fermata-attempt': '1',
          'fermata-fire-at': String(fireAtMs),
          'idempotency-key': id,
        });
        stream.once('response', onResponse);
        stream.once('error', reject);
        stream.end(body);
      };
      function onResponse(this: http2.ClientHttp2Stream, headers: http2.IncomingHttpHeaders): void {
        this.resume();
        if (Number(headers[':status']) !== 200) reject(new Error(`the sink answered ${String(headers[':status'])}`));
        answered++;
        if (sent < count) send(this.session as http2.ClientHttp2Session);
        else if (answered === count) resolve();
      }
      for (let i = 0; i < Math.min(streams * sessionCount, count); i++) send(sessions[i % sessionCount] as http2.ClientHttp2Session);
    });
    return count / ((performance.now() - started) / 1000);
  } finally {
    for (const session of sessions) session.close();
  }
}

// ---- profile ------------------------------------------------------------------------------------

async function startProfile(): Promise<Session> {
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.start');
  return session;
}

async function stopProfile(session: Session, path: string): Promise<void> {
  const { profile } = await session.post('Profiler.stop');
  session.disconnect();
  await writeFile(path, JSON.stringify(profile));
}
