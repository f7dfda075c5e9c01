// The `ui` suite: what the dashboard asks of the service, timed as a page asks it. Each part is a
// function returning its figures; the suite runs them in turn (a part to add goes in `parts`).
//
//   due_histogram_ms   GET /v1/stats/due-histogram over HTTP/1.1 on loopback (keep-alive), one
//                      request after another, with N pending timers: due over the next 60 days
//                      (1 in 50 within the hour), most of them spilled to disk by checkpoints
//                      (the watermark a day ahead) as a memory-bound service holds them. p50, p99,
//                      max of the request's round trip; `engine_ms.p99` the engine's part alone.
//   first_data_ms      the page itself: navigation to GET /ui to its first numbers in headless
//                      Chromium, against a `fermata serve` of its own (bench/ui-first-data.ts)
//
// N is 10,000,000; 1,000,000 with --quick. The timers are admitted in batches of 10,000 with a
// 16-byte payload and no key, a checkpoint every 1,000,000. In this process (the engine and the
// HTTP server beside the client, as on one machine).
import assert from 'node:assert/strict';
import { mkdtemp, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { pino } from 'pino';
import type { TimerBatch } from '../engine/batch/timer-batch.ts';
import { Engine } from '../engine/engine.ts';
import { createHttpServer } from '../ingest/http/server.ts';
import { type Fact, type Figure, metaLine, newHistogram, percentileMs, recordMs, type SuiteOptions } from './report.ts';
import { firstDataFigures } from './ui-first-data.ts';

const suite = 'ui';
const batchRows = 10_000;
const perCheckpoint = 1_000_000;
const payloadBytes = 16;
const dayMs = 86_400_000;
const spreadMs = 60 * dayMs;
const soonEvery = 50;

interface Timing {
  readonly pending: number;
  readonly requests: number;
  readonly warmupRequests: number;
}

const timings: Record<'quick' | 'full', Timing> = {
  quick: { pending: 1_000_000, requests: 300, warmupRequests: 30 },
  full: { pending: 10_000_000, requests: 1000, warmupRequests: 100 },
};

/** A part of the suite: its figures and the facts of its run (for the meta line), measured in its own temporary directory under `dir`. */
type Part = (options: SuiteOptions, timing: Timing, dir: string) => Promise<{ readonly figures: Figure[]; readonly facts: Record<string, Fact> }>;

const parts: readonly Part[] = [dueHistogramPart, (options) => firstDataFigures(suite, options)];

export async function uiSuite(options: SuiteOptions): Promise<Figure[]> {
  const timing = options.quick ? timings.quick : timings.full;
  const dir = await mkdtemp(join(options.baseDir, 'fermata-bench-ui-'));
  try {
    const figures: Figure[] = [];
    const facts: Record<string, Fact> = { pending: timing.pending, requests: timing.requests, spread_days: spreadMs / dayMs, payload_bytes: payloadBytes };
    for (const part of parts) {
      const done = await part(options, timing, dir);
      figures.push(...done.figures);
      Object.assign(facts, done.facts);
    }
    return [metaLine(suite, facts), ...figures];
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

async function dueHistogramPart(options: SuiteOptions, timing: Timing, dir: string): Promise<{ figures: Figure[]; facts: Record<string, Fact> }> {
  const engine = await Engine.open({ dataDir: join(dir, 'due-histogram') });
  const app = createHttpServer({ logger: pino({ level: 'silent' }), engine });
  try {
    options.progress(`ui: ${timing.pending.toLocaleString('en')} pending timers over ${spreadMs / dayMs} days`);
    await fill(engine, timing.pending, options);
    const stats = engine.stats();
    assert.equal(stats.pending, timing.pending, 'every timer is pending');
    await app.listen({ host: '127.0.0.1', port: 0 });
    const address = app.server.address();
    assert.ok(address !== null && typeof address === 'object', 'listening on a port');
    const url = `http://127.0.0.1:${address.port}/v1/stats/due-histogram`;
    options.progress(`ui: ${timing.requests} requests of /v1/stats/due-histogram`);
    const http = newHistogram();
    for (let i = 0; i < timing.warmupRequests + timing.requests; i++) {
      const start = performance.now();
      const response = await fetch(url);
      const body = (await response.json()) as { total: number };
      const ms = performance.now() - start;
      assert.equal(body.total, timing.pending, 'the histogram holds every pending timer');
      if (i >= timing.warmupRequests) recordMs(http, ms);
    }
    const inEngine = newHistogram();
    for (let i = 0; i < timing.requests; i++) {
      const start = performance.now();
      engine.dueHistogram();
      recordMs(inEngine, performance.now() - start);
    }
    return {
      facts: { due_histogram_resident: stats.resident, due_histogram_spilled: stats.spill.spilled },
      figures: [
        { suite, name: 'ui.due_histogram_ms.p50', value: percentileMs(http, 50), unit: 'ms' },
        { suite, name: 'ui.due_histogram_ms.p99', value: percentileMs(http, 99), unit: 'ms' },
        { suite, name: 'ui.due_histogram_ms.max', value: percentileMs(http, 100), unit: 'ms' },
        { suite, name: 'ui.due_histogram_engine_ms.p99', value: percentileMs(inEngine, 99), unit: 'ms' },
      ],
    };
  } finally {
    await app.close();
    await engine.close();
  }
}

/** Admits `count` timers in batches, checkpointing every perCheckpoint with the watermark a day ahead. */
async function fill(engine: Engine, count: number, options: SuiteOptions): Promise<void> {
  assert.ok(count % batchRows === 0, `the pending count is a multiple of ${batchRows}`);
  const batch = newBatch();
  const width = engine.bucketWidthMs;
  for (let done = 0; done < count; done += batchRows) {
    const now = Date.now();
    const fireAt = batch.fireAtMs;
    for (let row = 0; row < batchRows; row++) fireAt[row] = now + 1000 + Math.floor(Math.random() * (row % soonEvery === 0 ? 3_600_000 : spreadMs));
    await engine.admit(batch);
    if ((done + batchRows) % perCheckpoint === 0) {
      await engine.checkpoint((Math.floor((now + dayMs) / width) + 1) * width);
      options.progress(`ui: ${(done + batchRows).toLocaleString('en')} admitted`);
    }
  }
}

/** A batch of batchRows timers: one target, the default queue, a 16-byte payload, no headers or keys (fire times set by fill). */
function newBatch(): TimerBatch {
  return {
    rows: batchRows,
    fireAtMs: new Float64Array(batchRows),
    targets: ['https://bench.example/hooks/ui'],
    targetIndex: new Int32Array(batchRows),
    queues: ['default'],
    queueIndex: new Int32Array(batchRows),
    payload: { values: new Uint8Array(batchRows * payloadBytes).fill(0x61), offsets: Int32Array.from({ length: batchRows + 1 }, (_, i) => i * payloadBytes) },
    headers: { values: new Uint8Array(0), offsets: new Int32Array(batchRows + 1) },
    keys: { values: new Uint8Array(0), offsets: new Int32Array(batchRows + 1) },
  };
}
