// The `flight` suite: Arrow record batches into the real `fermata serve` (a child process on a
// fresh data directory, 127.0.0.1) two ways, in the same run, with the same 10,000-timer batch:
//
//   arrow_h2   POST /v1/timers with the batch as an Arrow IPC stream over HTTP/2 cleartext,
//              `streams` requests kept in flight on one node:http2 session
//   doput      Arrow Flight DoPut (gRPC, @grpc/grpc-js client): `streams` calls, each writing
//              the batch again and again (with the channel's backpressure); a batch counts when
//              its PutResult (the batch is durable) arrives inside the measured span
//
// Both clients run in this process, the server in its own, so the two differ only in the
// protocol. Each run warms up, then counts what completes inside the span. MB is 1,048,576 bytes
// of the batch's IPC stream (the same bytes both ways; Flight's framing is not counted).
import http2 from 'node:http2';
import { createServer } from 'node:net';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { flightDataOf, FlightTestClient, timersDescriptor } from '../ingest/flight/flight-client.ts';
import { fermataBin, startListeningChild } from './fermata-child.ts';
import { type Figure, inSpan, metaLine, roundTo, startSpan, type SuiteOptions } from './report.ts';
import { farFutureArrowStream } from './arrow-timers.ts';

const suite = 'flight';
const MiB = 1024 * 1024;
const limits = {
  batchRows: 10_000,
  payloadBytes: 128,
  /** Requests (HTTP/2) or calls (Flight) in flight at once. */
  streams: 4,
  /** Batches a DoPut call may have written but not yet seen answered: the client's window. */
  putBatchesAheadMax: 8,
} as const;
const target = 'https://example.com/hook';
const hourMs = 3_600_000;

interface Timing {
  readonly warmupMs: number;
  readonly measureMs: number;
}

const quickTiming: Timing = { warmupMs: 1000, measureMs: 4000 };
const fullTiming: Timing = { warmupMs: 2000, measureMs: 15_000 };

interface Run {
  /** Batches acknowledged inside the span. */
  readonly batches: number;
  readonly errors: number;
  readonly seconds: number;
  readonly firstError: string | undefined;
}

export async function flightSuite(options: SuiteOptions): Promise<Figure[]> {
  const timing = options.quick ? quickTiming : fullTiming;
  const batch = buildBatch(Date.now());
  const mb = batch.length / MiB;
  const seconds = (timing.warmupMs + timing.measureMs) / 1000;

  options.progress(`flight: Arrow over HTTP/2, ${limits.streams} streams of ${limits.batchRows}-timer batches, ${roundTo(mb, 2)} MB each (${seconds} s)`);
  const h2 = await withService(options.baseDir, 'h2', ({ url }) => runHttp2(url, batch, timing));
  options.progress(`flight: DoPut, ${limits.streams} calls of the same batches (${seconds} s)`);
  const put = await withService(options.baseDir, 'doput', ({ flight }) => runDoPut(flight, batch, timing));
  for (const [what, run] of [['arrow_h2', h2], ['doput', put]] as const) {
    if (run.errors > 0) process.stderr.write(`flight: WARNING: ${what}: ${run.errors} failed; first: ${run.firstError}\n`);
  }

  const figure = (name: string, value: number, unit: string): Figure => ({ suite, name, value, unit });
  const perRun = (name: string, run: Run): Figure[] => [
    figure(`flight.${name}.timers_per_s`, Math.round((run.batches * limits.batchRows) / run.seconds), '1/s'),
    figure(`flight.${name}.mb_per_s`, roundTo((run.batches * mb) / run.seconds, 1), 'MB/s'),
  ];
  return [
    metaLine(suite, { node: process.version, cpus: cpus().length, dir: options.baseDir, quick: options.quick, batch_rows: limits.batchRows, streams: limits.streams, clients: 'this process (node:http2, @grpc/grpc-js)', server: 'fermata serve child process' }),
    ...perRun('arrow_h2', h2),
    ...perRun('doput', put),
    figure('flight.doput_to_arrow_h2_ratio', roundTo(put.batches / Math.max(1, h2.batches), 3), 'ratio'),
    figure('flight.errors', h2.errors + put.errors, 'batches'),
  ];
}

/** A port free a moment ago: `fermata serve --flight` takes an address, and its log line is read by the child helper only up to the HTTP one. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no TCP address');
  return address.port;
}

async function withService<T>(baseDir: string, label: string, measure: (service: { url: string; flight: string }) => Promise<T>): Promise<T> {
  const port = await freePort();
  const child = await startListeningChild(baseDir, `flight-${label}`, (dir) => [fermataBin, 'serve', '--data', join(dir, 'data'), '--listen', '127.0.0.1:0', '--flight', `127.0.0.1:${port}`]);
  try {
    return await measure({ url: child.url, flight: `127.0.0.1:${port}` });
  } finally {
    await child.stop();
  }
}

async function runHttp2(url: string, batch: Buffer, timing: Timing): Promise<Run> {
  const session = http2.connect(url);
  session.on('error', () => undefined); // a session error fails the streams, which count it
  await new Promise<void>((resolve, reject) => {
    session.once('connect', () => resolve());
    session.once('error', reject);
  });
  const span = startSpan(timing);
  let batches = 0;
  let errors = 0;
  let firstError: string | undefined;
  const headers = { ':method': 'POST', ':path': '/v1/timers', 'content-type': 'application/vnd.apache.arrow.stream', 'content-length': String(batch.length) };
  const post = (): Promise<void> =>
    new Promise((resolve) => {
      const stream = session.request(headers);
      let status = 0;
      stream.on('response', (answer) => (status = Number(answer[':status'])));
      stream.resume();
      stream.on('end', () => {
        if (status === 201) {
          if (inSpan(span, performance.now())) batches++;
        } else {
          errors++;
          firstError ??= `status ${status}`;
        }
        resolve();
      });
      stream.on('error', (err) => {
        errors++;
        firstError ??= err.message;
        resolve();
      });
      stream.end(batch);
    });
  const loop = async (): Promise<void> => {
    while (performance.now() < span.end && !session.destroyed) await post();
  };
  try {
    await Promise.all(Array.from({ length: limits.streams }, loop));
  } finally {
    await new Promise<void>((resolve) => session.close(() => resolve()));
  }
  return { batches, errors, seconds: span.seconds, firstError };
}

async function runDoPut(address: string, batch: Buffer, timing: Timing): Promise<Run> {
  const client = new FlightTestClient(address);
  // The schema message (with the descriptor), then the record batch message, reused for every write.
  const [schemaMessage, batchMessage] = flightDataOf(timersDescriptor(), [batch]) as [Buffer, Buffer];
  const span = startSpan(timing);
  let batches = 0;
  let errors = 0;
  let firstError: string | undefined;
  const call = (): Promise<void> =>
    new Promise((resolve) => {
      const stream = client.putCall();
      let written = 0;
      let answered = 0;
      let ended = false;
      let closing = false;
      const finish = (): void => {
        if (ended) return;
        ended = true;
        resolve();
      };
      const writeMore = (): void => {
        if (closing) return;
        while (!ended && performance.now() < span.end && written - answered < limits.putBatchesAheadMax) {
          written++;
          if (!stream.write(batchMessage)) break;
        }
        if (performance.now() >= span.end) {
          closing = true;
          stream.end();
        }
      };
      stream.on('data', () => {
        answered++;
        if (inSpan(span, performance.now())) batches++;
        writeMore();
      });
      stream.on('drain', writeMore);
      stream.on('error', (err) => {
        errors++;
        firstError ??= err.message;
        finish();
      });
      stream.on('status', finish);
      stream.write(schemaMessage);
      writeMore();
    });
  try {
    await Promise.all(Array.from({ length: limits.streams }, call));
  } finally {
    client.close();
  }
  return { batches, errors, seconds: span.seconds, firstError };
}

/** One Arrow IPC stream: fire_at Timestamp(ms, UTC) 1 h–30 d ahead of `nowMs`, target Utf8, payload Binary of payloadBytes. */
function buildBatch(nowMs: number): Buffer {
  return farFutureArrowStream({ nowMs, rows: limits.batchRows, payloadBytes: limits.payloadBytes, target, fireSpanMs: 29 * 24 * hourMs });
}
