// The `flight` suite: Arrow record batches into the real `fermata serve` (a child process on a
// fresh data directory, 127.0.0.1) two ways, in the same run, with the same 10,000-timer batch:
//
//   arrow_h2   POST /v1/timers with the batch as an Arrow IPC stream over HTTP/2 cleartext,
//              `streams` requests kept in flight on one node:http2 session
//   doput      Arrow Flight DoPut (gRPC, @grpc/grpc-js client): `streams` calls, each writing
//              the batch again and again (with the channel's backpressure); a batch counts when
//              its PutResult (the batch is durable) arrives inside the measured span
//   doget      pull delivery: `pullTimers` timers already due, DoPut into a "pull" queue, then
//              taken by `pullers` clients looping DoGet (max_rows = batchRows) whose ticket acks
//              the previous lease; timers/s from the first DoGet until every timer's ack is
//              durable (the acks ride the log's group commits like any outcome)
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
  /** Due timers the doget run drains (quick / full), and the clients pulling them at once. */
  pullTimersQuick: 50_000,
  pullTimersFull: 200_000,
  pullers: 2,
  /** The doget run gives up after this long (a stuck pull is an error, not a hang). */
  pullTimeoutMs: 120_000,
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
  const pullTimers = options.quick ? limits.pullTimersQuick : limits.pullTimersFull;
  options.progress(`flight: DoGet, ${limits.pullers} clients pulling ${pullTimers} due timers with acks`);
  const get = await withService(options.baseDir, 'doget', (service) => runDoGet(service, pullTimers));
  for (const [what, run] of [['arrow_h2', h2], ['doput', put]] as const) {
    if (run.errors > 0) process.stderr.write(`flight: WARNING: ${what}: ${run.errors} failed; first: ${run.firstError}\n`);
  }
  if (get.errors > 0) process.stderr.write(`flight: WARNING: doget: ${get.errors} failed; first: ${get.firstError}\n`);

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
    figure('flight.doget.timers_per_s', Math.round(get.timers / get.seconds), '1/s'),
    figure('flight.doget.leases', get.leases, 'leases'),
    figure('flight.errors', h2.errors + put.errors, 'batches'),
    figure('flight.doget.errors', get.errors, 'calls'),
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

interface PullRun {
  /** Timers taken and acked. */
  readonly timers: number;
  readonly leases: number;
  readonly seconds: number;
  readonly errors: number;
  readonly firstError: string | undefined;
}

async function runDoGet(service: { url: string; flight: string }, pullTimers: number): Promise<PullRun> {
  const queue = 'pulled';
  const configured = await fetch(`${service.url}/v1/queues/${queue}`, { method: 'PUT', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ delivery: 'pull', batch_rows_max: limits.batchRows }) });
  if (configured.status !== 200) throw new Error(`PUT /v1/queues/${queue}: ${configured.status} ${await configured.text()}`);
  const client = new FlightTestClient(service.flight);
  try {
    // Fire times 2–31 days ago: due at once.
    const due = farFutureArrowStream({ nowMs: Date.now() - 31 * 24 * hourMs - hourMs, rows: limits.batchRows, payloadBytes: limits.payloadBytes, target, fireSpanMs: 29 * 24 * hourMs });
    const put = await client.doPut(flightDataOf(timersDescriptor(queue), Array.from({ length: Math.ceil(pullTimers / limits.batchRows) }, () => due)));
    if (put.error !== undefined) throw new Error(`DoPut of the due timers: ${put.error.details}`);
    const total = Math.ceil(pullTimers / limits.batchRows) * limits.batchRows;
    let taken = 0;
    let acked = 0;
    let leases = 0;
    let errors = 0;
    let firstError: string | undefined;
    const started = performance.now();
    // When the last ack was durable: a puller still waiting in a DoGet then is not counted.
    let finishedAt = Infinity;
    const giveUpAt = started + limits.pullTimeoutMs;
    const puller = async (): Promise<void> => {
      let ack: { lease: string; rows: number } | undefined;
      while (performance.now() < giveUpAt) {
        if (taken >= total && ack === undefined) return;
        // A DoGet that acks does not wait (its ack's durability is known when it answers); one with nothing to ack waits up to a second for timers.
        const got = await client.doGet(Buffer.from(JSON.stringify({ queue, max_rows: limits.batchRows, wait_ms: ack === undefined ? 1_000 : 0, ...(ack === undefined ? {} : { ack: ack.lease }) })));
        if (got.error !== undefined) {
          errors++;
          firstError ??= got.error.details;
          ack = undefined;
          continue;
        }
        acked += ack?.rows ?? 0;
        if (acked >= total) finishedAt = Math.min(finishedAt, performance.now());
        ack = undefined;
        const batch = got.messages.find((message) => message.appMetadata.length > 0);
        if (batch === undefined) continue;
        ack = JSON.parse(batch.appMetadata.toString()) as { lease: string; rows: number };
        taken += ack.rows;
        leases++;
      }
    };
    await Promise.all(Array.from({ length: limits.pullers }, puller));
    const failed = acked < total ? `only ${acked} of ${total} pulled and acked in ${limits.pullTimeoutMs} ms` : undefined;
    return { timers: acked, leases, seconds: (Math.min(finishedAt, performance.now()) - started) / 1000, errors: errors + (failed === undefined ? 0 : 1), firstError: firstError ?? failed };
  } finally {
    client.close();
  }
}

/** One Arrow IPC stream: fire_at Timestamp(ms, UTC) 1 h–30 d ahead of `nowMs`, target Utf8, payload Binary of payloadBytes. */
function buildBatch(nowMs: number): Buffer {
  return farFutureArrowStream({ nowMs, rows: limits.batchRows, payloadBytes: limits.payloadBytes, target, fireSpanMs: 29 * 24 * hourMs });
}
