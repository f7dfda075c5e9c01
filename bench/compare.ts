// The `compare` suite: the same workloads on BullMQ (Redis, AOF on) and on fermata, in one run
// on one machine, and their ratios (> 1 always means fermata is ahead):
//
//   single_add   256 concurrent writers, one far-future timer each call: BullMQ `queue.add`
//                with a delay (ioredis carries all 256 on one connection) vs fermata JSON adds
//                to a child `fermata serve` over one HTTP/2 connection: as lines of one open
//                POST /v1/timers/stream, each answered once durable (the ratios), and as one
//                POST /v1/timers each (the `_request` figures); against Redis with `appendfsync
//                everysec` and with `always` (the durable match for fermata, whose answer means
//                fdatasync'd)
//   bulk_add     10,000 timers a call, one call at a time: `addBulk` vs one Arrow batch
//   dispatch     N timers all due at one instant: delivered a second from that instant to the
//                last arrival at the sink (BullMQ: a Worker, concurrency 256, POSTing each job
//                over HTTP/2; fermata: its own dispatcher)
//   lateness     timers due evenly over a span at a rate both sustain: arrival − fire time p99
//   ram          memory per pending far-future timer at 4,000,000 timers (BullMQ: 1,000,000 jobs,
//                100,000 --quick):
//                Redis INFO used_memory growth vs fermata's VmRSS (default settings, which
//                put the far future on disk once the service is quiet): the larger of the
//                live process's growth, at rest before and after, and the VmRSS of the
//                service restarted on them over an empty one's, with the range the readings'
//                extremes allow (the ratio divides by its upper end: a few MB of VmRSS is
//                within how much a process at rest moves); also fermata's own count of the
//                bytes it holds for them (the like of used_memory)
//
// Redis comes from Debian's redis-server (installed when missing and permitted), BullMQ from
// npm into bench/results/.scratch (never the project's dependencies); when either cannot be
// had, the suite says so on stderr and in its meta line and measures fermata alone. Every Redis,
// fermata and sink process it starts is stopped, and every directory removed, also on error.
// The delivery sink is a child process (loadgen/sink.ts), so neither side shares its event loop.
import { mkdtemp, rm } from 'node:fs/promises';
import { cpus } from 'node:os';
import { join } from 'node:path';
import type { Histogram } from 'hdr-histogram-js';
import { BullMqSide } from './compare-bullmq.ts';
import { fermataBulkAdds, fermataDelivery, fermataLateness, fermataMemory, fermataSingleAdds } from './compare-fermata.ts';
import { type CompareTiming, compareShape, type Delivery, type Lateness, type FermataMemoryUse, type MemoryUse, type SingleAdds, type SpilledMemoryUse } from './compare-shape.ts';
import { type BullMq, bullmqVersion, loadBullMq } from './bullmq-scratch.ts';
import { startFermata } from './fermata-child.ts';
import { type AppendFsync, ensureRedisServer, type RedisServer, startRedis } from './redis-server.ts';
import { distributionChart, type Fact, type Figure, metaLine, roundTo, type SuiteOptions } from './report.ts';
import { type BenchSink, startSinkProcess } from '../loadgen/sink.ts';

const suite = 'compare';

interface Sizes {
  readonly timing: CompareTiming;
  /** Timers of the delivery run. */
  readonly deliveryTimers: number;
  /** Span over which the lateness run's timers fall due. */
  readonly latenessSpanMs: number;
  /**
   * Pending far-future timers of fermata's memory run, four million in quick runs too: what
   * they cost is read against VmRSS that moves by 8–20 MB at rest, and that noise shrinks a
   * timer only as the count grows (8–20 B a timer at a million, and the upper end a ratio
   * divides by was mostly the noise; at four million the live process's growth stands above it).
   */
  readonly memoryTimers: number;
  /**
   * BullMQ's jobs of the memory run: Redis's used_memory is its allocator's own count, with
   * no such noise, and filling a million jobs takes BullMQ some 50 s.
   */
  readonly bullmqMemoryTimers: number;
}

const quickSizes: Sizes = { timing: { warmupMs: 500, measureMs: 3000 }, deliveryTimers: 10_000, latenessSpanMs: 3000, memoryTimers: 4_000_000, bullmqMemoryTimers: 100_000 };
const fullSizes: Sizes = { timing: { warmupMs: 1000, measureMs: 10_000 }, deliveryTimers: 50_000, latenessSpanMs: 10_000, memoryTimers: 4_000_000, bullmqMemoryTimers: 1_000_000 };

/** The lateness run's rate: at most this, and at most half the slower side's delivery rate. */
const latenessRateMaxPerS = 1000;
/** Lateness below this is within the clocks' resolution; ratios use it as the floor. */
const latenessFloorMs = 1;
/** Fire times start this long after the adds begin, plus three times what the adds should take. */
const leadBaseMs = 2000;

/** Time to add `count` timers at `perS`, three times over, plus the base lead. */
function leadMs(count: number, perS: number): number {
  return leadBaseMs + Math.ceil((3 * count * 1000) / perS);
}

interface SideFigures {
  readonly single: SingleAdds;
  readonly bulkPerS: number;
  readonly delivery: Delivery;
  readonly lateness: Lateness;
  readonly memory: MemoryUse;
}

export interface FermataFigures extends SideFigures {
  /** Single adds again, one request each. */
  readonly singleRequest: SingleAdds;
  readonly memory: FermataMemoryUse;
  /** The memory run's timers as the engine counts them, and as a restart on them shows. */
  readonly spilled: SpilledMemoryUse;
}

export interface BullFigures extends SideFigures {
  readonly singleAlways: SingleAdds;
  readonly bulkAlwaysPerS: number;
  readonly failures: number;
}

type Bull = { readonly kind: 'ready'; readonly bull: BullMq; readonly redisVersion: string } | { readonly kind: 'unavailable'; readonly reason: string };

async function findBullMq(progress: (message: string) => void): Promise<Bull> {
  const redis = await ensureRedisServer(progress);
  if (redis.kind === 'unavailable') return redis;
  try {
    return { kind: 'ready', bull: await loadBullMq(progress), redisVersion: redis.version };
  } catch (err) {
    return { kind: 'unavailable', reason: `bullmq could not be installed: ${err instanceof Error ? err.message : String(err)}` };
  }
}

/** Stops what was started, last first, every one even when one fails. */
class Cleanup {
  readonly #steps: (() => Promise<void>)[] = [];

  add(step: () => Promise<void>): void {
    this.#steps.push(step);
  }

  /** Runs `step` now and drops it from the list. */
  async now(step: () => Promise<void>): Promise<void> {
    const at = this.#steps.indexOf(step);
    if (at >= 0) this.#steps.splice(at, 1);
    await step();
  }

  /** Runs every step left; returns what failed, so that a failure here never hides the one that got us here. */
  async all(): Promise<unknown[]> {
    const errors: unknown[] = [];
    for (const step of this.#steps.splice(0).reverse()) await step().catch((err: unknown) => errors.push(err));
    return errors;
  }
}

/** Redis with the given fsync policy in a fresh directory under baseDir; its stop also removes the directory (the caller registers it). */
async function redisFor(baseDir: string, fsync: AppendFsync): Promise<{ redis: RedisServer; stop: () => Promise<void> }> {
  const dir = await mkdtemp(join(baseDir, `fermata-bench-redis-${fsync}-`));
  const redis = await startRedis(dir, fsync).catch(async (err: unknown) => {
    await rm(dir, { recursive: true, force: true });
    throw err;
  });
  const stop = async (): Promise<void> => {
    await redis.stop();
    await rm(dir, { recursive: true, force: true });
  };
  return { redis, stop };
}

/** Fire times `perS` a second over `spanMs`, the first `lead` ms from now. */
function schedule(perS: number, spanMs: number, lead: number): number[] {
  const count = Math.max(1, Math.round((perS * spanMs) / 1000));
  const first = Date.now() + lead;
  return Array.from({ length: count }, (_, i) => first + Math.floor((i * 1000) / perS));
}

export async function compareSuite(options: SuiteOptions): Promise<Figure[]> {
  const { baseDir, progress } = options;
  const sizes = options.quick ? quickSizes : fullSizes;
  const measureS = sizes.timing.measureMs / 1000;
  const bull = await findBullMq(progress);
  if (bull.kind === 'unavailable') progress(`compare: ${bull.reason}; measuring fermata alone`);

  const cleanup = new Cleanup();
  try {
    const sink = await startSinkProcess();
    cleanup.add(() => sink.close());
    // No far-future spill in this one: it starts once the service is quiet, and the service is
    // quiet while BullMQ is measured on the same cores (with it, BullMQ's bulk adds came out at
    // 8,614–11,058/s against about 20,000). The memory run below measures it, with the defaults.
    const fermata = await startFermata(baseDir, 'compare', { args: ['--far-horizon', 'off'] });
    const stopFermata = (): Promise<void> => fermata.stop();
    cleanup.add(stopFermata);

    progress(`compare: fermata, ${compareShape.singleWriters} writers of single adds, a request each (${measureS} s)`);
    const fSingleRequest = await fermataSingleAdds(fermata.url, sizes.timing, 'request');
    progress(`compare: fermata, ${compareShape.singleWriters} writers of single adds on an add stream (${measureS} s)`);
    const fSingle = await fermataSingleAdds(fermata.url, sizes.timing, 'stream');
    progress(`compare: fermata, bulk adds of ${compareShape.batchRows} (${measureS} s)`);
    const fBulk = await fermataBulkAdds(fermata.url, sizes.timing);
    progress(`compare: fermata, delivery of ${sizes.deliveryTimers} timers due at once`);
    await sink.reset();
    const fDelivery = await fermataDelivery(fermata.url, sink, sizes.deliveryTimers, leadMs(sizes.deliveryTimers, fBulk));

    // BullMQ on Redis with appendfsync everysec: everything but the memory run, which waits
    // until fermata's lateness run (that needs both delivery rates) is done.
    const everysec = bull.kind === 'ready' ? await everysecFirstHalf(bull.bull, baseDir, sizes, sink, cleanup, progress) : undefined;

    const slowest = Math.min(fDelivery.perS, everysec?.delivery.perS ?? Infinity);
    const latenessPerS = Math.max(1, Math.min(latenessRateMaxPerS, Math.floor(slowest / 2)));
    const latenessTimers = Math.max(1, Math.round((latenessPerS * sizes.latenessSpanMs) / 1000));
    const latenessSpanS = sizes.latenessSpanMs / 1000;
    progress(`compare: fermata, lateness of ${latenessTimers} timers due over ${latenessSpanS} s`);
    await sink.reset();
    const fLateness = await fermataLateness(fermata.url, sink, schedule(latenessPerS, sizes.latenessSpanMs, leadMs(latenessTimers, fBulk)));
    options.chart?.(distributionChart('compare.lateness_ms.fermata', fLateness.latenessUs, 1000, 'ms'));
    await cleanup.now(stopFermata);

    let bullSide: BullFigures | undefined;
    if (bull.kind === 'ready' && everysec !== undefined) {
      const { side, stop } = everysec;
      progress(`compare: BullMQ (appendfsync everysec), lateness of ${latenessTimers} jobs due over ${latenessSpanS} s`);
      await sink.reset();
      const lateness = await side.lateness(sink, schedule(latenessPerS, sizes.latenessSpanMs, leadMs(latenessTimers, everysec.bulkPerS)));
      options.chart?.(distributionChart('compare.lateness_ms.bullmq', lateness.latenessUs, 1000, 'ms'));
      progress(`compare: BullMQ (appendfsync everysec), memory of ${sizes.bullmqMemoryTimers} far-future jobs`);
      const memory = await side.memory(sizes.bullmqMemoryTimers);
      const failures = side.failures;
      await cleanup.now(stop);

      const always = await redisFor(baseDir, 'always');
      const alwaysSide = new BullMqSide(bull.bull, always.redis);
      const stopAlways = async (): Promise<void> => {
        try {
          await alwaysSide.close();
        } finally {
          await always.stop();
        }
      };
      cleanup.add(stopAlways);
      progress(`compare: BullMQ (appendfsync always), ${compareShape.singleWriters} writers of single adds (${measureS} s)`);
      const singleAlways = await alwaysSide.singleAdds(sizes.timing);
      progress(`compare: BullMQ (appendfsync always), addBulk of ${compareShape.batchRows} (${measureS} s)`);
      const bulkAlwaysPerS = await alwaysSide.bulkAdds(sizes.timing);
      await cleanup.now(stopAlways);
      bullSide = { single: everysec.single, bulkPerS: everysec.bulkPerS, delivery: everysec.delivery, lateness, memory, singleAlways, bulkAlwaysPerS, failures };
    }

    progress(`compare: fermata, memory of ${sizes.memoryTimers} far-future timers (a fresh server, until its loader settles; then restarted on them)`);
    const { memory: fMemory, spilled: fSpilled } = await fermataMemory(baseDir, sizes.memoryTimers);

    const facts: Record<string, Fact> = {
      node: process.version,
      cpus: cpus().length,
      dir: baseDir,
      quick: options.quick,
      bullmq: bull.kind === 'ready' ? bullmqVersion : `unavailable: ${bull.reason}`,
      redis: bull.kind === 'ready' ? bull.redisVersion : 'unavailable',
      single_add_writers: compareShape.singleWriters,
      fermata_single_add: 'one JSON line per add on one open POST /v1/timers/stream (HTTP/2, one connection), answered once durable; _request figures: one POST /v1/timers per add (HTTP/2, one connection)',
      batch_rows: compareShape.batchRows,
      payload_bytes: compareShape.payloadBytes,
      delivery_timers: sizes.deliveryTimers,
      lateness_rate_per_s: latenessPerS,
      lateness_timers: latenessTimers,
      memory_timers: sizes.memoryTimers,
      bullmq_memory_timers: sizes.bullmqMemoryTimers,
      fermata_far_horizon: 'off (--far-horizon off) in the adds, delivery and lateness runs, so that no spill runs in the background while BullMQ is measured; the default (60m) in the memory run',
      fermata_memory: fMemory.measure,
      fermata_spilled_memory: fSpilled.measure,
      fermata_spilled_timers: fSpilled.spilled,
      bullmq_memory: bullSide?.memory.measure ?? 'not measured',
      bullmq_worker_concurrency: compareShape.workerConcurrency,
    };
    const fermataSide: FermataFigures = { single: fSingle, singleRequest: fSingleRequest, bulkPerS: fBulk, delivery: fDelivery, lateness: fLateness, memory: fMemory, spilled: fSpilled };
    const figures = compareFigures(facts, fermataSide, bullSide);
    const failed = await cleanup.all();
    if (failed.length > 0) throw new AggregateError(failed, 'compare: stopping what the suite started failed');
    return figures;
  } catch (err) {
    for (const failure of await cleanup.all()) progress(`compare: while stopping after an error: ${failure instanceof Error ? (failure.stack ?? failure.message) : String(failure)}`);
    throw err;
  }
}

interface EverysecRuns {
  readonly side: BullMqSide;
  /** Closes the side, stops its Redis and removes its directory. */
  readonly stop: () => Promise<void>;
  readonly single: SingleAdds;
  readonly bulkPerS: number;
  readonly delivery: Delivery;
}

async function everysecFirstHalf(bull: BullMq, baseDir: string, sizes: Sizes, sink: BenchSink, cleanup: Cleanup, progress: (message: string) => void): Promise<EverysecRuns> {
  const measureS = sizes.timing.measureMs / 1000;
  const redis = await redisFor(baseDir, 'everysec');
  const side = new BullMqSide(bull, redis.redis);
  const stop = async (): Promise<void> => {
    try {
      await side.close();
    } finally {
      await redis.stop();
    }
  };
  cleanup.add(stop);
  progress(`compare: BullMQ (appendfsync everysec), ${compareShape.singleWriters} writers of single adds (${measureS} s)`);
  const single = await side.singleAdds(sizes.timing);
  progress(`compare: BullMQ (appendfsync everysec), addBulk of ${compareShape.batchRows} (${measureS} s)`);
  const bulkPerS = await side.bulkAdds(sizes.timing);
  progress(`compare: BullMQ (appendfsync everysec), delivery of ${sizes.deliveryTimers} jobs due at once`);
  await sink.reset();
  const delivery = await side.delivery(sink, sizes.deliveryTimers, leadMs(sizes.deliveryTimers, bulkPerS));
  return { side, stop, single, bulkPerS, delivery };
}

function p99Ms(histogram: Histogram): number {
  return roundTo(histogram.getValueAtPercentile(99) / 1000, 3);
}

/**
 * The suite's figures, grouped by workload: each ratio first, then the absolute figures of both
 * sides it divides, so that a ratio is never read without them. Memory per far-future timer is
 * reported as fermata's range and BullMQ's figure; its ratio divides by the upper end of
 * fermata's, a few MB of VmRSS over a million timers being within how much a process at rest moves.
 */
export function compareFigures(facts: Record<string, Fact>, fermata: FermataFigures, bull: BullFigures | undefined): Figure[] {
  const figure = (name: string, value: number, unit: string): Figure => ({ suite, name, value, unit });
  const ratio = (name: string, value: number, decimals = 3): Figure => figure(name, roundTo(value, decimals), 'ratio');
  const latenessFigures = (side: string, lateness: Lateness): Figure[] => [
    figure(`compare.lateness_ms.${side}.p50`, roundTo(lateness.latenessUs.getValueAtPercentile(50) / 1000, 3), 'ms'),
    figure(`compare.lateness_ms.${side}.p99`, p99Ms(lateness.latenessUs), 'ms'),
    figure(`compare.lateness_ms.${side}.max`, roundTo(lateness.latenessUs.maxValue / 1000, 3), 'ms'),
  ];
  const fMemory = fermata.memory;
  const fermataRam: Figure[] = [
    figure('compare.ram_per_timer.fermata.bytes_max', roundTo(fMemory.bytesPerTimerMax, 1), 'B'),
    figure('compare.ram_per_timer.fermata.bytes', roundTo(fMemory.bytesPerTimer, 1), 'B'),
    figure('compare.ram_per_timer.fermata.bytes_min', roundTo(fMemory.bytesPerTimerMin, 1), 'B'),
    figure('compare.ram_per_timer.fermata.live_bytes', roundTo(fMemory.liveBytesPerTimer, 1), 'B'),
    figure('compare.ram_per_timer.fermata.filled_bytes', roundTo(fMemory.filledBytesPerTimer, 1), 'B'),
    figure('compare.ram_per_timer.fermata_spilled.counted_bytes', roundTo(fermata.spilled.countedBytesPerTimer, 2), 'B'),
    figure('compare.ram_per_timer.fermata_spilled.process_bytes', roundTo(fermata.spilled.processBytesPerTimer, 2), 'B'),
    figure('compare.ram_per_timer.fermata_spilled.process_bytes_max', roundTo(fermata.spilled.processBytesPerTimerMax, 2), 'B'),
  ];
  const single: Figure[] = [
    figure('compare.single_add.fermata.per_s', Math.round(fermata.single.perS), '1/s'),
    figure('compare.single_add.fermata.latency_ms.p99', p99Ms(fermata.single.latencyUs), 'ms'),
    figure('compare.single_add.fermata_request.per_s', Math.round(fermata.singleRequest.perS), '1/s'),
    figure('compare.single_add.fermata_request.latency_ms.p99', p99Ms(fermata.singleRequest.latencyUs), 'ms'),
  ];
  const bulk = [figure('compare.bulk_add.fermata.timers_per_s', Math.round(fermata.bulkPerS), '1/s')];
  const delivery = [figure('compare.dispatch.fermata.per_s', Math.round(fermata.delivery.perS), '1/s')];
  const lateness = latenessFigures('fermata', fermata.lateness);
  const ram: Figure[] = [...fermataRam];
  let errors = fermata.single.errors + fermata.singleRequest.errors;
  let early = fermata.delivery.early + fermata.lateness.early;
  if (bull !== undefined) {
    const fermataLateP99 = Math.max(latenessFloorMs, p99Ms(fermata.lateness.latenessUs));
    const bullLateP99 = Math.max(latenessFloorMs, p99Ms(bull.lateness.latenessUs));
    single.unshift(
      ratio('compare.single_add.ratio_everysec', fermata.single.perS / bull.single.perS),
      ratio('compare.single_add.ratio_always', fermata.single.perS / bull.singleAlways.perS),
      ratio('compare.single_add.ratio_everysec_request', fermata.singleRequest.perS / bull.single.perS),
      ratio('compare.single_add.ratio_always_request', fermata.singleRequest.perS / bull.singleAlways.perS),
    );
    single.push(
      figure('compare.single_add.bullmq_everysec.per_s', Math.round(bull.single.perS), '1/s'),
      figure('compare.single_add.bullmq_everysec.latency_ms.p99', p99Ms(bull.single.latencyUs), 'ms'),
      figure('compare.single_add.bullmq_always.per_s', Math.round(bull.singleAlways.perS), '1/s'),
      figure('compare.single_add.bullmq_always.latency_ms.p99', p99Ms(bull.singleAlways.latencyUs), 'ms'),
    );
    bulk.unshift(ratio('compare.bulk_add.ratio', fermata.bulkPerS / bull.bulkPerS));
    bulk.push(
      figure('compare.bulk_add.bullmq_everysec.timers_per_s', Math.round(bull.bulkPerS), '1/s'),
      figure('compare.bulk_add.bullmq_always.timers_per_s', Math.round(bull.bulkAlwaysPerS), '1/s'),
    );
    delivery.unshift(ratio('compare.dispatch.ratio', fermata.delivery.perS / bull.delivery.perS));
    delivery.push(figure('compare.dispatch.bullmq.per_s', Math.round(bull.delivery.perS), '1/s'));
    lateness.unshift(ratio('compare.lateness_p99.ratio', bullLateP99 / fermataLateP99));
    lateness.push(...latenessFigures('bullmq', bull.lateness));
    const bullBytes = bull.memory.bytesPerTimer;
    ram.unshift(ratio('compare.ram_per_timer.ratio', bullBytes / fMemory.bytesPerTimerMax));
    ram.push(
      figure('compare.ram_per_timer.bullmq.bytes', roundTo(bullBytes, 1), 'B'),
      ratio('compare.ram_per_timer.spilled_ratio.counted', bullBytes / fermata.spilled.countedBytesPerTimer, 1),
      ratio('compare.ram_per_timer.spilled_ratio.process', bullBytes / fermata.spilled.processBytesPerTimerMax, 1),
    );
    errors += bull.single.errors + bull.singleAlways.errors + bull.failures;
    early += bull.delivery.early + bull.lateness.early;
  }
  const ramInWords =
    `fermata ≤ ${fMemory.bytesPerTimerMax.toFixed(1)} B a timer (VmRSS, the upper end of readings from ${fMemory.bytesPerTimerMin.toFixed(1)} B)` +
    (bull === undefined ? '' : ` against BullMQ's ${bull.memory.bytesPerTimer.toFixed(1)} B (Redis used_memory)`);
  return [
    metaLine(suite, { ...facts, ram_per_timer: ramInWords }),
    ...single,
    ...bulk,
    ...delivery,
    ...lateness,
    ...ram,
    figure('compare.errors', errors, 'requests'),
    figure('compare.early_deliveries', early, 'timers'),
  ];
}
