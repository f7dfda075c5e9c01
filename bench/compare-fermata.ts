// The fermata side of the compare suite: the same workloads as compare-bullmq.ts, against a
// `fermata serve` child (compare runs it) over HTTP/2 from this process. Single adds go
// through the load generator (JSON, closed loop: lines of an add stream, and a request each);
// batches (bulk adds, the timers of the delivery, lateness and memory runs) are Arrow IPC
// streams of 10,000 rows posted in turn; deliveries land on the suite's sink, which measures
// them the same way for both sides.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import http2 from 'node:http2';
import { mkdtemp, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { memoryLimits } from '../engine/limits.ts';
import { median } from './report.ts';
import { runLoad } from '../loadgen/load-generator.ts';
import { runStreamLoad } from '../loadgen/stream-load.ts';
import { awaitDelivery, awaitLateness, chunks, type CompareTiming, compareShape, type Delivery, deliveryWaitMs, type FermataMemoryUse, growthRange, type Lateness, type SingleAdds, type SpilledMemoryUse } from './compare-shape.ts';
import { startFermata } from './fermata-child.ts';
import type { BenchSink } from '../loadgen/sink.ts';
import { buildBodies, buildBody, type FireTimes, type RequestBody } from '../loadgen/timer-bodies.ts';

const farFuture: FireTimes = { kind: 'delay', minMs: compareShape.farDelayMinMs, maxMs: compareShape.farDelayMaxMs };
/** Streams a run of batches keeps in flight (the WAL groups what arrives together). */
const batchStreams = 2;
/** Settle time before reading the resident set after a fill. */
const settleMs = 1000;

function arrowBatch(fire: FireTimes, rows: number = compareShape.batchRows): RequestBody {
  return buildBody({ mode: 'arrow', rows, payloadBytes: compareShape.payloadBytes, target: compareShape.farTarget, fire });
}

/**
 * How a fermata client makes single adds: `stream`, one JSON line per add on one open POST
 * /v1/timers/stream (as ioredis carries BullMQ's adds on one connection), each answered once
 * durable; `request`, one POST /v1/timers per add, many streams on one HTTP/2 connection.
 */
export type SingleAddTransport = 'stream' | 'request';

/** `singleWriters` adds in flight, one JSON timer each, fire times 1 h–30 d ahead; closed loop. */
export async function fermataSingleAdds(url: string, timing: CompareTiming, transport: SingleAddTransport): Promise<SingleAdds> {
  const bodies = buildBodies({ mode: 'json', rows: 1, payloadBytes: compareShape.payloadBytes, target: compareShape.farTarget, fire: farFuture });
  const load = await (transport === 'stream' ? runStreamLoad : runLoad)({
    url,
    token: undefined,
    bodies,
    concurrency: compareShape.singleWriters,
    connections: 1,
    ratePerS: undefined,
    warmupMs: timing.warmupMs,
    durationMs: timing.measureMs,
    drainTimeoutMs: deliveryWaitMs,
  });
  const errors = [...load.errors.values()].reduce((sum, count) => sum + count, 0);
  return { perS: load.spanOkTimers / load.spanSeconds, latencyUs: load.latencyUs, errors };
}

/** One 10,000-row Arrow batch at a time: one warm-up batch, then batches until the span ends; timers ÷ time to the last answer. */
export async function fermataBulkAdds(url: string, timing: CompareTiming): Promise<number> {
  const bodies = [arrowBatch(farFuture), arrowBatch(farFuture)];
  await postBodies(url, bodies.slice(0, 1), 1);
  const load = await runLoad({ url, token: undefined, bodies, concurrency: 1, connections: 1, ratePerS: undefined, warmupMs: 0, durationMs: timing.measureMs, drainTimeoutMs: deliveryWaitMs });
  assert.equal(load.okRequests, load.sent, `every bulk add is acknowledged (${load.firstError ?? ''})`);
  return load.okTimers / load.elapsedSeconds;
}

/** `count` timers all due at one instant `leadMs` ahead, added first; rate from that instant to the last arrival at the sink. */
export async function fermataDelivery(url: string, sink: BenchSink, count: number, leadMs: number): Promise<Delivery> {
  const dueMs = Date.now() + leadMs;
  await postBodies(url, chunks(count).map((rows) => arrowBatchTo(sink, { kind: 'at', atMs: dueMs }, rows)), batchStreams);
  return awaitDelivery(sink, count, dueMs);
}

/** Timers due at the given instants (epoch ms), added ahead of the first; lateness of their arrivals. */
export async function fermataLateness(url: string, sink: BenchSink, fireAtMs: readonly number[]): Promise<Lateness> {
  const bodies: RequestBody[] = [];
  for (let first = 0; first < fireAtMs.length; first += compareShape.batchRows) {
    const slice = fireAtMs.slice(first, first + compareShape.batchRows);
    bodies.push(arrowBatchTo(sink, { kind: 'each', atMs: slice }, slice.length));
  }
  await postBodies(url, bodies, batchStreams);
  return awaitLateness(sink, fireAtMs);
}

/**
 * Empty services, and restarts on the filled data directory, whose VmRSS is measured
 * (alternately): an empty service's own RSS moves 166–180 MB from start to start on the bench
 * VM, a restarted one's 177–187 MB, against a difference of a few MB; the medians are compared.
 * Most of that difference is the restart's own, not the timers': restarts on 100,000 spilled
 * timers were 7.4–9.8 MB above empty services, on 1,000,000 2.2–6.1 MB (scratch runs,
 * alternated), and one full run's restarts came out 0.8 MB below (a ratio of −1,172). So the
 * figure is an upper bound, and never below what the empty services differ by among
 * themselves: a difference within that spread cannot be told from none, and the spread is
 * what is reported then. Its upper end (the highest restart over the lowest empty service) is
 * what a ratio divides by.
 */
const restartRssSamples = 5;
/** The fill waits at most this long for the loader to settle (the spilled count unchanged over a poll). */
const spillSettleMsMax = 180_000;

/**
 * Far-future timers the service is filled with before the reading the growth is measured from:
 * enough that their spill is followed by a memory return (memoryLimits.collectAfterSpilledRows),
 * as the measured fill's is, so that both readings are of a service at rest after one. Read
 * after a first batch instead, the baseline held that batch's garbage and a young generation
 * grown for ingest, which the measured fill's memory return then gave back as well: growths of
 * −20 B a timer.
 */
const warmupTimers = 2 * memoryLimits.collectAfterSpilledRows;
/**
 * VmRSS samples, a second apart, whose median is one reading at rest. A quiet service's VmRSS
 * still moves: a single reading now and then is 8–12 MB up (freed memory the loader trims the
 * next second), and V8's heap takes and frees a few MB between collections.
 */
const restSamples = 7;

/**
 * `count` far-future timers into a fresh `fermata serve` with its default settings, after a
 * warm-up fill (warmupTimers), looked at three ways: the growth of its VmRSS from the reading
 * at rest after the warm-up to the one once the loader has put the fill where it keeps it (the
 * far future on disk, once the service is quiet; also read a second after the last add, before
 * that), ÷ count; the engine's own count of what it holds in memory for them then (/v1/stats);
 * and the median VmRSS of the service restarted on them over the median of empty services
 * started alike (a restart holds none of the fill's garbage), ÷ timers held. The headline is
 * the larger of the two VmRSS figures: the live growth is within the process's own movement
 * at rest (it comes out negative as often as not), and the restart's is an upper bound that
 * never falls below what empty services differ by. Both come with the range their readings'
 * extremes allow; the larger upper end bounds what the timers can have cost.
 */
export async function fermataMemory(baseDir: string, count: number): Promise<{ memory: FermataMemoryUse; spilled: SpilledMemoryUse }> {
  const emptyRss: number[] = [];
  const restartedRss: number[] = [];
  const measureEmpty = async (): Promise<void> => {
    const empty = await startFermata(baseDir, 'compare-memory-empty');
    try {
      await sleep(settleMs);
      emptyRss.push(await empty.residentBytes());
    } finally {
      await empty.stop();
    }
  };
  await measureEmpty();
  const dataDir = await mkdtemp(join(baseDir, 'fermata-bench-compare-memory-data-'));
  try {
    const filling = await startFermata(baseDir, 'compare-memory', { dataDir });
    const atRest = async (): Promise<number[]> => {
      const samples: number[] = [];
      for (let sample = 0; sample < restSamples; sample++) {
        if (sample > 0) await sleep(settleMs);
        samples.push(await filling.residentBytes());
      }
      return samples;
    };
    const body = arrowBatch(farFuture);
    const fill = (timers: number): Promise<void> => postBodies(filling.url, chunks(timers).map((rows) => (rows === compareShape.batchRows ? body : arrowBatch(farFuture, rows))), batchStreams);
    let stats: MemoryStats;
    let live: ReturnType<typeof growthRange>;
    let filledBytesPerTimer: number;
    try {
      await fill(warmupTimers);
      const warm = await settledStats(filling.url, 0);
      await sleep(settleMs);
      const before = await atRest();
      await fill(count);
      await sleep(settleMs);
      const filled = await filling.residentBytes();
      stats = await settledStats(filling.url, warm.spilled);
      await sleep(settleMs);
      const settled = await atRest();
      live = growthRange(before, settled, count);
      filledBytesPerTimer = (filled - median(before)) / count;
    } finally {
      await filling.stop();
    }
    for (let sample = 0; sample < restartRssSamples; sample++) {
      const restarted = await startFermata(baseDir, 'compare-memory-restarted', { dataDir });
      try {
        await sleep(settleMs);
        restartedRss.push(await restarted.residentBytes());
        const again = await memoryStats(restarted.url);
        assert.equal(again.pending, stats.pending, 'the restarted service holds every timer');
      } finally {
        await restarted.stop();
      }
      if (emptyRss.length < restartRssSamples) await measureEmpty();
    }
    const mb = (values: readonly number[]): string => values.map((bytes) => (bytes / 1e6).toFixed(1)).join(', ');
    const difference = median(restartedRss) - median(emptyRss);
    const emptySpread = Math.max(...emptyRss) - Math.min(...emptyRss);
    const restart = growthRange(emptyRss, restartedRss, stats.pending);
    const spilled: SpilledMemoryUse = {
      countedBytesPerTimer: (stats.memory.resident_bytes + stats.memory.spill_metadata_bytes) / stats.pending,
      processBytesPerTimer: Math.max(difference, emptySpread) / stats.pending,
      processBytesPerTimerMax: Math.max(restart.max, emptySpread / stats.pending),
      spilled: stats.spilled,
      measure:
        `fermata serve (default settings): /v1/stats memory (resident_bytes + spill_metadata_bytes) once the loader settled, ÷ pending; and the median VmRSS of ` +
        `${restartRssSamples} starts of the service on the timers (${mb(restartedRss)} MB) over that of ${restartRssSamples} empty ones (${mb(emptyRss)} MB), alternated, ` +
        (difference >= emptySpread ? 'an upper bound (the restart holds memory of its own)' : `within the empty ones' spread, so that spread (${(emptySpread / 1e6).toFixed(1)} MB) instead`),
    };
    const memory: FermataMemoryUse = {
      bytesPerTimer: Math.max(live.median, spilled.processBytesPerTimer),
      bytesPerTimerMin: Math.max(live.min, restart.min),
      bytesPerTimerMax: Math.max(live.max, spilled.processBytesPerTimerMax),
      liveBytesPerTimer: live.median,
      filledBytesPerTimer,
      measure:
        `the larger of: the growth of the server process VmRSS (/proc/PID/status, median of ${restSamples} readings a second apart) from rest after a warm-up fill of ` +
        `${warmupTimers} far-future timers to rest once the loader settled (${stats.spilled} of ${stats.pending} timers spilled), ${live.median.toFixed(1)} B a timer ` +
        `(${live.min.toFixed(1)} to ${live.max.toFixed(1)} B from the readings' extremes); and the restarted service's (spilled_process_bytes), ` +
        `${spilled.processBytesPerTimer.toFixed(1)} B a timer (at most ${spilled.processBytesPerTimerMax.toFixed(1)} B); ${filledBytesPerTimer.toFixed(1)} B a timer a second after the last add`,
    };
    return { memory, spilled };
  } finally {
    await rm(dataDir, { recursive: true, force: true });
  }
}

interface MemoryStats {
  readonly pending: number;
  readonly spilled: number;
  readonly memory: { readonly budget_bytes: number | null; readonly resident_bytes: number; readonly spill_metadata_bytes: number };
}

async function memoryStats(url: string): Promise<MemoryStats> {
  const response = await fetch(`${url}/v1/stats`, { signal: AbortSignal.timeout(10_000) });
  assert.equal(response.status, 200);
  return (await response.json()) as MemoryStats;
}

/**
 * /v1/stats once the loader has spilled what it will (the far future, once adds are quiet): the
 * resident timers within the budget, more spilled than `spilledBefore` (a fill's spill has
 * happened), and the spilled count unchanged over two looks a loader step apart.
 */
async function settledStats(url: string, spilledBefore: number): Promise<MemoryStats> {
  const deadline = Date.now() + spillSettleMsMax;
  let last = await memoryStats(url);
  for (;;) {
    await sleep(2 * memoryLimits.loaderIntervalMs);
    const now = await memoryStats(url);
    const withinBudget = now.memory.budget_bytes !== null && now.memory.resident_bytes <= now.memory.budget_bytes;
    if (withinBudget && now.spilled > spilledBefore && now.spilled === last.spilled) return now;
    assert.ok(Date.now() < deadline, `the loader did not settle within ${spillSettleMsMax} ms (spilled ${now.spilled}, resident ${now.memory.resident_bytes} B of a ${now.memory.budget_bytes} B budget)`);
    last = now;
  }
}

function arrowBatchTo(sink: BenchSink, fire: FireTimes, rows: number): RequestBody {
  return buildBody({ mode: 'arrow', rows, payloadBytes: compareShape.payloadBytes, target: `${sink.url}/hook`, fire });
}

/** Posts every body once on one session, `streams` at a time; fails on anything but a 2xx. */
async function postBodies(url: string, bodies: readonly RequestBody[], streams: number): Promise<void> {
  const session = http2.connect(url, { maxSessionMemory: 64 });
  session.on('error', () => undefined); // its streams fail with it
  try {
    await once(session, 'remoteSettings');
    let next = 0;
    const worker = async (): Promise<void> => {
      while (next < bodies.length) await postOne(session, bodies[next++] as RequestBody);
    };
    await Promise.all(Array.from({ length: Math.min(streams, bodies.length) }, worker));
  } finally {
    session.close();
  }
}

async function postOne(session: http2.ClientHttp2Session, body: RequestBody): Promise<void> {
  const stream = session.request({ ':method': 'POST', ':path': '/v1/timers', 'content-type': body.contentType, 'content-length': body.bytes.length });
  let status = 0;
  let answer = '';
  stream.once('response', (headers) => (status = Number(headers[':status'])));
  stream.setEncoding('utf8');
  stream.on('data', (chunk: string) => (answer += chunk));
  stream.end(body.bytes);
  await once(stream, 'end');
  assert.ok(status >= 200 && status <= 299, `POST /v1/timers answered ${status}: ${answer.slice(0, 500)}`);
}
