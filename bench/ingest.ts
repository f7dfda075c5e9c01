// The `ingest` suite: timers added over HTTP/2 (h2c on loopback, 127.0.0.1) through the real
// HTTP adapter (ingest/http/server.ts) into a real engine on a fresh data directory, so every
// counted answer is a durable timer:
//
//   json_single   one node:http2 session, 256 streams kept busy, each POST /v1/timers of one
//                 JSON timer (128-char payload); 201s counted, ack latency in hdr histograms
//   ceiling       the same load against POST /noop on a second server created the same way
//                 (same listener, same fastify options, same JSON parsing), answering {}
//   arrow         one Arrow IPC stream of 10,000 timers, POSTed again and again on 4 streams
//
// Server and client share this one process (and the machine's cores): the figures are what
// one process can both generate and serve, not what the server alone could take. Each
// measurement warms up, then counts only responses that complete inside the measured span.
// MB is 1,048,576 bytes.
import { mkdtemp, rm } from 'node:fs/promises';
import http2 from 'node:http2';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Binary, Field, makeData, RecordBatch, Schema, Struct, Table, tableToIPC, Timestamp, TimeUnit, Utf8 } from 'apache-arrow';
import type { Histogram } from 'hdr-histogram-js';
import { pino } from 'pino';
import { Engine } from '../engine/engine.ts';
import { createHttpServer, type HttpServer } from '../ingest/http/server.ts';
import { type Figure, inSpan, metaLine, newHistogram, percentileMs, recordMs, roundTo, startSpan, type SuiteOptions } from './report.ts';

const suite = 'ingest';
const MiB = 1024 * 1024;
const singleStreams = 256;
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

interface LoadRun {
  /** 2xx answers completed inside the span. */
  readonly ok: number;
  /** Non-2xx answers and stream errors, over the whole run (warm-up included). */
  readonly errors: number;
  readonly seconds: number;
  /** Request start to end of the answer, in microseconds, for answers inside the span. */
  readonly latencyUs: Histogram;
}

interface Load {
  readonly path: string;
  readonly contentType: string;
  readonly body: Uint8Array;
  readonly streams: number;
}

export async function ingestSuite(options: SuiteOptions): Promise<Figure[]> {
  const timing = options.quick ? quickTiming : fullTiming;
  const seconds = (timing.warmupMs + timing.measureMs) / 1000;
  const { baseDir, progress } = options;
  const warnings: string[] = [];

  const jsonBody = Buffer.from(JSON.stringify({ delay_ms: hourMs, target, payload: 'p'.repeat(payloadChars) }));
  const jsonLoad = (path: string): Load => ({ path, contentType: 'application/json', body: jsonBody, streams: singleStreams });

  progress(`ingest: ${singleStreams} streams of one-timer JSON adds (${seconds} s)`);
  const single = await withServer(baseDir, 'json', false, (port) => runLoad(port, jsonLoad('/v1/timers'), timing, 201));
  progress(`ingest: ${singleStreams} streams against the no-op route (${seconds} s)`);
  const ceiling = await withServer(baseDir, 'noop', true, (port) => runLoad(port, jsonLoad('/noop'), timing, 200));

  const arrowBody = buildArrowStream(Date.now());
  progress(`ingest: ${arrowStreams} streams of ${arrowRows}-timer Arrow batches, ${roundTo(arrowBody.length / MiB, 2)} MB each (${seconds} s)`);
  const arrowLoad: Load = { path: '/v1/timers', contentType: 'application/vnd.apache.arrow.stream', body: arrowBody, streams: arrowStreams };
  const arrow = await withServer(baseDir, 'arrow', false, (port) => runLoad(port, arrowLoad, timing, 201));

  const errors = single.errors + ceiling.errors + arrow.errors;
  if (errors > 0) warnings.push(`${errors} requests failed (json ${single.errors}, noop ${ceiling.errors}, arrow ${arrow.errors})`);
  for (const warning of warnings) process.stderr.write(`ingest: WARNING: ${warning}\n`);

  const singlePerS = single.ok / single.seconds;
  const ceilingPerS = ceiling.ok / ceiling.seconds;
  const figure = (name: string, value: number, unit: string): Figure => ({ suite, name, value, unit });
  return [
    metaLine(suite, { node: process.version, cpus: cpus().length, dir: baseDir, quick: options.quick, process: 'one (server and client)' }),
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

/** A fresh data dir, an engine on it and the HTTP server on 127.0.0.1:0; all closed and removed afterwards. */
async function withServer<T>(baseDir: string, label: string, noop: boolean, measure: (port: number) => Promise<T>): Promise<T> {
  const dir = await mkdtemp(join(baseDir, `fermata-bench-ingest-${label}-`));
  try {
    const engine = await Engine.open({ dataDir: dir });
    try {
      const app: HttpServer = createHttpServer({ logger: pino({ level: 'silent' }), engine });
      if (noop) app.post('/noop', async () => ({}));
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
  return { ok, errors, seconds: span.seconds, latencyUs };
}

/** One Arrow IPC stream: fire_at Timestamp(ms) 1 h–30 d ahead of `nowMs`, target Utf8, payload Binary of 128 bytes. */
function buildArrowStream(nowMs: number): Buffer {
  const rows = arrowRows;
  const fireAt = new BigInt64Array(rows);
  for (let row = 0; row < rows; row++) fireAt[row] = BigInt(nowMs + hourMs + Math.floor(Math.random() * arrowFireSpanMs));

  const targetBytes = Buffer.from(target);
  const targetOffsets = new Int32Array(rows + 1);
  const targetValues = new Uint8Array(rows * targetBytes.length);
  const payloadOffsets = new Int32Array(rows + 1);
  const payloadValues = new Uint8Array(rows * payloadChars);
  for (let row = 0; row < rows; row++) {
    targetValues.set(targetBytes, row * targetBytes.length);
    targetOffsets[row + 1] = (row + 1) * targetBytes.length;
    payloadValues.fill(row & 0xff, row * payloadChars, (row + 1) * payloadChars);
    payloadOffsets[row + 1] = (row + 1) * payloadChars;
  }
  const columns = [
    ['fire_at', makeData({ type: new Timestamp(TimeUnit.MILLISECOND, 'UTC'), length: rows, data: fireAt })],
    ['target', makeData({ type: new Utf8(), length: rows, valueOffsets: targetOffsets, data: targetValues })],
    ['payload', makeData({ type: new Binary(), length: rows, valueOffsets: payloadOffsets, data: payloadValues })],
  ] as const;
  const schema = new Schema(columns.map(([name, data]) => new Field(name, data.type, false)));
  const struct = makeData({ type: new Struct(schema.fields), length: rows, children: columns.map(([, data]) => data) });
  const ipc = tableToIPC(new Table([new RecordBatch(schema, struct)]), 'stream');
  return Buffer.from(ipc.buffer, ipc.byteOffset, ipc.byteLength);
}
