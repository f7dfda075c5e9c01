// The `ingest` suite: timers added over HTTP/2 (h2c on loopback, 127.0.0.1) through the real
// HTTP adapter (ingest/http/server.ts) into a real engine on a fresh data directory, so every
// counted answer is a durable timer:
//
//   json_single   256 streams kept busy, each POST /v1/timers of one JSON timer (128-char
//                 payload); 201s counted, ack latency in hdr histograms
//   ceiling       the same load against POST /noop on a server created the same way (same
//                 listener, same fastify options, same JSON parsing), answering {}; the adds
//                 are answered on the raw HTTP/2 stream, before fastify (decision 0013), so
//                 this fastify route is a reference, not a bound: the ratio may pass 1
//   arrow         one Arrow IPC stream of 10,000 timers, POSTed again and again on 4 streams
//
// Two ways to run it, the same figures either way:
//
//   processes     (the default when h2load is installed) the server is a child process (`fermata
//                 serve`, or bench/noop-server.ts for the ceiling) and h2load, a third process,
//                 is the client: 4 connections × 64 streams. The figures are the server's own.
//   one-process   (FERMATA_BENCH_INGEST=one-process, or when h2load is missing) server and a
//                 node:http2 client (one session, 256 streams) share this process and its event
//                 loop: what one process can both generate and serve, a lower bound.
//
// Each measurement warms up, then counts only responses that complete inside the measured span
// (h2load's --warm-up-time and -D do the same). MB is 1,048,576 bytes.
import { execFileSync } from 'node:child_process';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import http2 from 'node:http2';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import type { Histogram } from 'hdr-histogram-js';
import { pino } from 'pino';
import { Engine } from '../engine/engine.ts';
import { createHttpServer, type HttpServer } from '../ingest/http/server.ts';
import { fermataBin, startListeningChild } from './fermata-child.ts';
import { h2loadMissing, h2loadPresent, readH2loadLog, runH2load } from './h2load.ts';
import { type ChartData, type Fact, type Figure, inSpan, metaLine, newHistogram, percentileMs, recordMs, roundTo, startSpan, type SuiteOptions } from './report.ts';
import { farFutureArrowStream } from './arrow-timers.ts';

const suite = 'ingest';
const MiB = 1024 * 1024;
const singleStreams = 256;
/** h2load's split of the 256 streams: connections × streams on each. */
const h2loadConnections = 4;
const arrowStreams = 4;
const arrowRows = 10_000;
const payloadChars = 128;
const target = 'https://example.com/hook';
const hourMs = 3_600_000;
const arrowFireSpanMs = 30 * 24 * hourMs - hourMs;

interface Timing {
  readonly warmupMs: number;
  readonly measureMs: number;
}

// Three measurements: quick well under 60 s, full under about a minute of measuring.
const quickTiming: Timing = { warmupMs: 1000, measureMs: 4000 };
const fullTiming: Timing = { warmupMs: 2000, measureMs: 15_000 };

const noopServer = fileURLToPath(new URL('./noop-server.ts', import.meta.url));
/** A child server must be listening, and later gone after SIGTERM, within this. */
const childTimeoutMs = 30_000;

type Mode = 'processes' | 'one-process';
const modeVariable = 'FERMATA_BENCH_INGEST';

interface LoadRun {
  /** 2xx answers completed inside the span. */
  readonly ok: number;
  /** Non-2xx answers and stream errors, over the whole run (warm-up included). */
  readonly errors: number;
  readonly seconds: number;
  /** Request start to end of the answer, in microseconds, for answers inside the span. */
  readonly latencyUs: Histogram;
  /** 2xx answers completed in each whole second of the span, for the throughput chart. */
  readonly perSecond: readonly number[];
}

/** Adds one completion `sinceStartMs` into the span to its second's bucket. */
function countInSecond(perSecond: number[], sinceStartMs: number): void {
  const second = Math.floor(sinceStartMs / 1000);
  if (second < 0) return;
  while (perSecond.length <= second) perSecond.push(0);
  perSecond[second] = (perSecond[second] as number) + 1;
}

function rateChart(name: string, perSecond: readonly number[]): ChartData {
  return { kind: 'series', name, unit: 'requests/s', points: perSecond.map((count, second): [number, number] => [second + 1, count]) };
}

interface Load {
  readonly path: string;
  readonly contentType: string;
  readonly body: Uint8Array;
  readonly streams: number;
}

/** One of the three loads, as either mode runs it. */
type Measure = (load: Load, okStatus: number) => Promise<LoadRun>;

export async function ingestSuite(options: SuiteOptions): Promise<Figure[]> {
  const timing = options.quick ? quickTiming : fullTiming;
  const seconds = (timing.warmupMs + timing.measureMs) / 1000;
  const { baseDir, progress } = options;
  const mode = chooseMode(progress);
  const warnings: string[] = [];

  const jsonBody = Buffer.from(JSON.stringify({ delay_ms: hourMs, target, payload: 'p'.repeat(payloadChars) }));
  const jsonLoad = (path: string): Load => ({ path, contentType: 'application/json', body: jsonBody, streams: singleStreams });
  const measure = (server: 'fermata' | 'noop'): Measure =>
    mode === 'processes'
      ? (load, okStatus) => withChildServer(baseDir, server, (url) => runH2loadLoad(baseDir, url, load, timing, okStatus))
      : (load, okStatus) => withServer(baseDir, server, (port) => runLoad(port, load, timing, okStatus));

  progress(`ingest (${mode}): ${singleStreams} streams of one-timer JSON adds (${seconds} s)`);
  const single = await measure('fermata')(jsonLoad('/v1/timers'), 201);
  options.chart?.(rateChart('ingest.json_single.per_s', single.perSecond));
  progress(`ingest (${mode}): ${singleStreams} streams against the no-op route (${seconds} s)`);
  const ceiling = await measure('noop')(jsonLoad('/noop'), 200);

  const arrowBody = buildArrowStream(Date.now());
  progress(`ingest (${mode}): ${arrowStreams} streams of ${arrowRows}-timer Arrow batches, ${roundTo(arrowBody.length / MiB, 2)} MB each (${seconds} s)`);
  const arrowLoad: Load = { path: '/v1/timers', contentType: 'application/vnd.apache.arrow.stream', body: arrowBody, streams: arrowStreams };
  const arrow = await measure('fermata')(arrowLoad, 201);
  options.chart?.(rateChart('ingest.arrow.requests_per_s', arrow.perSecond));

  const errors = single.errors + ceiling.errors + arrow.errors;
  if (errors > 0) warnings.push(`${errors} requests failed (json ${single.errors}, noop ${ceiling.errors}, arrow ${arrow.errors})`);
  for (const warning of warnings) process.stderr.write(`ingest: WARNING: ${warning}\n`);

  const singlePerS = single.ok / single.seconds;
  const ceilingPerS = ceiling.ok / ceiling.seconds;
  const figure = (name: string, value: number, unit: string): Figure => ({ suite, name, value, unit });
  return [
    metaLine(suite, { node: process.version, cpus: cpus().length, dir: baseDir, quick: options.quick, ...modeFacts(mode) }),
    figure('ingest.json_single.per_s', Math.round(singlePerS), '1/s'),
    figure('ingest.json_single.latency_ms.p50', percentileMs(single.latencyUs, 50), 'ms'),
    figure('ingest.json_single.latency_ms.p99', percentileMs(single.latencyUs, 99), 'ms'),
    figure('ingest.json_single.ceiling.per_s', Math.round(ceilingPerS), '1/s'),
    figure('ingest.json_single.ceiling_ratio', roundTo(singlePerS / ceilingPerS, 3), 'ratio'),
    figure('ingest.arrow.timers_per_s', Math.round((arrow.ok * arrowRows) / arrow.seconds), '1/s'),
    figure('ingest.arrow.mb_per_s', roundTo((arrow.ok * arrowBody.length) / MiB / arrow.seconds, 1), 'MB/s'),
    figure('ingest.errors', errors, 'requests'),
  ];
}

function chooseMode(progress: (message: string) => void): Mode {
  const asked = process.env[modeVariable];
  if (asked !== undefined && asked !== '' && asked !== 'processes' && asked !== 'one-process') {
    throw new Error(`${modeVariable}="${asked}": expected "processes" or "one-process"`);
  }
  if (asked === 'one-process') return 'one-process';
  if (h2loadPresent) return 'processes';
  if (asked === 'processes') throw new Error(`${modeVariable}=processes needs h2load: ${h2loadMissing}`);
  progress(`ingest: ${h2loadMissing}; server and client run in this one process instead`);
  return 'one-process';
}

function modeFacts(mode: Mode): Record<string, Fact> {
  if (mode === 'one-process') return { process: 'one (server and node:http2 client)' };
  const version = execFileSync('h2load', ['--version'], { encoding: 'utf8' }).trim();
  return { process: 'server child process, h2load client', client: version, connections: h2loadConnections, streams_per_connection: singleStreams / h2loadConnections };
}

/**
 * `fermata serve` (or the no-op server) as a child process on a fresh data directory under
 * `baseDir`, listening on 127.0.0.1:0; stopped with SIGTERM and its directory removed afterwards.
 */
async function withChildServer<T>(baseDir: string, server: 'fermata' | 'noop', measure: (url: string) => Promise<T>): Promise<T> {
  const child = await startListeningChild(baseDir, `ingest-${server}`, (dir) =>
    server === 'fermata' ? [fermataBin, 'serve', '--data', join(dir, 'data'), '--listen', '127.0.0.1:0'] : [noopServer, join(dir, 'data')],
  );
  try {
    return await measure(child.url);
  } finally {
    await child.stop();
  }
}

/** h2load: `load.streams` spread over h2loadConnections connections, warm-up then the measured span; latency from its per-request log. */
async function runH2loadLoad(baseDir: string, url: string, load: Load, timing: Timing, okStatus: number): Promise<LoadRun> {
  const dir = await mkdtemp(join(baseDir, 'fermata-bench-h2load-'));
  try {
    const body = join(dir, 'body');
    const log = join(dir, 'requests.log');
    await writeFile(body, load.body);
    const connections = Math.min(h2loadConnections, load.streams);
    const args = [
      '-c', String(connections),
      '-m', String(Math.ceil(load.streams / connections)),
      '--warm-up-time', `${timing.warmupMs}ms`,
      '-D', `${timing.measureMs}ms`,
      '-d', body,
      '-H', `content-type: ${load.contentType}`,
      `--log-file=${log}`,
      `${url}${load.path}`,
    ];
    const run = await runH2load(args, timing.warmupMs + timing.measureMs + childTimeoutMs);
    const { summary } = run;
    // h2load's counters cover the measured span. Its log also holds, with status 0, the streams
    // that were in flight when the warm-up ended (counted in its 2xx, their latency unknown):
    // only rows with a status give latencies.
    const latencyUs = newHistogram();
    const perSecond: number[] = [];
    const logged = await readH2loadLog(log);
    // Seconds count from the first answered start: rows with status 0 began in the warm-up.
    // (a loop, not Math.min(...rows): a log of a few hundred thousand rows overflows the call stack).
    let firstStartUs = Infinity;
    for (const request of logged) if (request.status === okStatus && request.startUs < firstStartUs) firstStartUs = request.startUs;
    for (const request of logged) {
      if (request.status !== okStatus) continue;
      recordMs(latencyUs, request.durationUs / 1000);
      const sinceStartMs = (request.startUs + request.durationUs - firstStartUs) / 1000;
      // Answers after the span (started inside it) would draw a last, nearly empty second.
      if (sinceStartMs < timing.measureMs) countInSecond(perSecond, sinceStartMs);
    }
    const errors = summary.failed + summary.errored + summary.timeout + summary.status3xx + summary.status4xx + summary.status5xx;
    if (errors > 0) process.stderr.write(`ingest: ${load.path}: ${errors} of ${summary.total} requests failed; h2load said:\n${run.output}\n`);
    const ok = summary.status2xx;
    return { ok, errors, seconds: timing.measureMs / 1000, latencyUs, perSecond };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** A fresh data dir, an engine on it and the HTTP server on 127.0.0.1:0 in this process; all closed and removed afterwards. */
async function withServer<T>(baseDir: string, server: 'fermata' | 'noop', measure: (port: number) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(join(baseDir, `fermata-bench-ingest-${server}-`));
  try {
    const engine = await Engine.open({ dataDir: dir });
    try {
      const app: HttpServer = createHttpServer({ logger: pino({ level: 'silent' }), engine });
      if (server === 'noop') app.post('/noop', async () => ({}));
      await app.listen({ host: '127.0.0.1', port: 0 });
      try {
        const address = app.server.address();
        if (address === null || typeof address === 'string') throw new Error('the server has no TCP address');
        return await measure(address.port);
      } finally {
        await app.close();
      }
    } finally {
      await engine.close();
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** `load.streams` loops on one HTTP/2 session, each sending the body and waiting for the whole answer. */
async function runLoad(port: number, load: Load, timing: Timing, okStatus: number): Promise<LoadRun> {
  const session = http2.connect(`http://127.0.0.1:${port}`);
  session.on('error', () => undefined); // a session error fails the streams, which count it
  await new Promise<void>((resolve, reject) => {
    session.once('connect', () => resolve());
    session.once('error', reject);
  });
  const latencyUs = newHistogram();
  const perSecond: number[] = [];
  let ok = 0;
  let errors = 0;
  let firstError: string | undefined;
  const headers = { ':method': 'POST', ':path': load.path, 'content-type': load.contentType, 'content-length': String(load.body.length) };
  const span = startSpan(timing);

  const once = (): Promise<void> =>
    new Promise((resolve) => {
      const started = performance.now();
      const stream = session.request(headers);
      let status = 0;
      let answer = '';
      stream.on('response', (responseHeaders) => {
        status = Number(responseHeaders[':status']);
      });
      stream.setEncoding('utf8');
      stream.on('data', (chunk: string) => {
        if (status !== okStatus && answer.length < 500) answer += chunk;
      });
      stream.on('end', () => {
        const now = performance.now();
        if (status === okStatus) {
          if (inSpan(span, now)) {
            ok++;
            recordMs(latencyUs, now - started);
            countInSecond(perSecond, now - span.start);
          }
        } else {
          errors++;
          firstError ??= `${status} ${answer}`;
        }
        resolve();
      });
      stream.on('error', (err) => {
        errors++;
        firstError ??= err.message;
        resolve();
      });
      stream.end(load.body);
    });

  const loop = async (): Promise<void> => {
    while (performance.now() < span.end && !session.destroyed) await once();
  };
  try {
    await Promise.all(Array.from({ length: load.streams }, loop));
  } finally {
    await new Promise<void>((resolve) => session.close(() => resolve()));
  }
  if (firstError !== undefined) process.stderr.write(`ingest: ${load.path}: first error: ${firstError}\n`);
  return { ok, errors, seconds: span.seconds, latencyUs, perSecond };
}

/** One Arrow IPC stream: fire_at Timestamp(ms) 1 h–30 d ahead of `nowMs`, target Utf8, payload Binary of 128 bytes. */
function buildArrowStream(nowMs: number): Buffer {
  return farFutureArrowStream({ nowMs, rows: arrowRows, payloadBytes: payloadChars, target, fireSpanMs: arrowFireSpanMs });
}
