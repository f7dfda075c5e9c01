// The `grpc` suite: single-timer adds into the real `fermata serve --grpc` (a child process on a
// fresh data directory, 127.0.0.1), over gRPC and over HTTP/2 in the same run, so each gRPC
// figure has its HTTP counterpart measured seconds apart on the same machine state:
//
//   unary_add    fermata.v1.Timers/AddTimer, 256 calls kept in flight on one HTTP/2 session
//   h2_json_add  POST /v1/timers, one JSON timer, 256 streams kept busy on one node:http2
//                session (the path HTTP clients take: answered before fastify, decision 0013)
//   stream_add   StreamAddTimers: 4 calls, each keeping 64 requests written and not yet answered
//   http_stream  POST /v1/timers/stream over HTTP/2: 4 requests, each keeping 64 NDJSON lines
//                written and not yet answered
//
// Every add is the same timer (due in an hour, a 128-byte payload, no key). Each of the four
// loads first runs once unmeasured (the service's first calls on a path compile it), then each
// is measured: a figure counts the adds answered OK inside the span, after a warm-up. Every client is node:http2 in this
// process (gRPC's framing written by hand around the request proto-loader serialized once, the
// status read from the trailers), one after the other, the server in its own: so the two differ
// only in the protocol and the server's handling of it. (A @grpc/grpc-js client costs this
// process more CPU per call than the server spends on it, and would measure itself.)
import http2 from 'node:http2';
import { createServer } from 'node:net';
import { cpus } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { timersPackage } from '../ingest/grpc/proto-files.ts';
import { fermataBin, startListeningChild } from './fermata-child.ts';
import { type Figure, inSpan, metaLine, roundTo, type Span, startSpan, type SuiteOptions } from './report.ts';

const suite = 'grpc';
const limits = {
  /** Unary calls (gRPC) and requests (HTTP/2) in flight at once. */
  unaryInFlight: 256,
  /** Streaming calls (gRPC) and requests (HTTP/2), and the adds each keeps unanswered. */
  streams: 4,
  streamAhead: 64,
  payloadBytes: 128,
} as const;
const target = 'https://example.com/hook';
const delayMs = 3_600_000;

interface Timing {
  readonly warmupMs: number;
  readonly measureMs: number;
}

const quickTiming: Timing = { warmupMs: 1000, measureMs: 4000 };
const fullTiming: Timing = { warmupMs: 2000, measureMs: 15_000 };

interface Run {
  readonly adds: number;
  readonly errors: number;
  readonly firstError: string | undefined;
}

/** The per-run counter: adds answered inside the span, and failures. */
class Tally {
  adds = 0;
  errors = 0;
  firstError: string | undefined;
  readonly #span: Span;
  constructor(span: Span) {
    this.#span = span;
  }
  ok(count = 1): void {
    if (inSpan(this.#span, performance.now())) this.adds += count;
  }
  failed(what: string): void {
    this.errors++;
    this.firstError ??= what;
  }
  run(): Run {
    return { adds: this.adds, errors: this.errors, firstError: this.firstError };
  }
}

const payload = Buffer.alloc(limits.payloadBytes, 0x61);
const grpcTimer = { timer: { delay: { seconds: delayMs / 1000, nanos: 0 }, target, payload } };
const jsonTimer = JSON.stringify({ delay_ms: delayMs, target, payload: payload.toString('latin1') });

/** A gRPC message as HTTP/2 carries it: uncompressed flag, big-endian length, the protobuf bytes. */
function grpcFrame(message: Buffer): Buffer {
  const frame = Buffer.alloc(5 + message.length);
  frame.writeUInt32BE(message.length, 1);
  message.copy(frame, 5);
  return frame;
}

const timersPath = '/fermata.v1.Timers/';
const grpcHeaders = (method: string): http2.OutgoingHttpHeaders => ({ ':method': 'POST', ':path': timersPath + method, 'content-type': 'application/grpc', te: 'trailers' });

export async function grpcSuite(options: SuiteOptions): Promise<Figure[]> {
  const timing = options.quick ? quickTiming : fullTiming;
  const seconds = (timing.warmupMs + timing.measureMs) / 1000;
  const port = await freePort();
  const child = await startListeningChild(options.baseDir, 'grpc', (dir) => [fermataBin, 'serve', '--data', join(dir, 'data'), '--listen', '127.0.0.1:0', '--grpc', `127.0.0.1:${port}`]);
  const methods = timersPackage()['fermata.v1.Timers'] as Record<string, { requestSerialize(value: unknown): Buffer }>;
  const addFrame = grpcFrame((methods.AddTimer as { requestSerialize(value: unknown): Buffer }).requestSerialize(grpcTimer));
  const streamFrame = grpcFrame((methods.StreamAddTimers as { requestSerialize(value: unknown): Buffer }).requestSerialize(grpcTimer));
  const grpcUrl = `http://127.0.0.1:${port}`;
  try {
    await waitForPort(grpcUrl);
    // The service's first calls on each path compile it (grpc-js, protobufjs and the HTTP fast
    // path alike): each load runs once unmeasured, so neither protocol pays for it in its figure.
    options.progress(`grpc: warming both paths up (${(4 * 2 * timing.warmupMs) / 1000} s)`);
    const warmUp = { warmupMs: 0, measureMs: 2 * timing.warmupMs };
    await runUnary(grpcUrl, addFrame, warmUp);
    await runH2Json(child.url, warmUp);
    await runGrpcStream(grpcUrl, streamFrame, warmUp);
    await runHttpStream(child.url, warmUp);
    options.progress(`grpc: AddTimer, ${limits.unaryInFlight} in flight (${seconds} s)`);
    const unary = await runUnary(grpcUrl, addFrame, timing);
    options.progress(`grpc: one-timer JSON adds over HTTP/2, ${limits.unaryInFlight} streams (${seconds} s)`);
    const h2 = await runH2Json(child.url, timing);
    options.progress(`grpc: StreamAddTimers, ${limits.streams} calls × ${limits.streamAhead} ahead (${seconds} s)`);
    const stream = await runGrpcStream(grpcUrl, streamFrame, timing);
    options.progress(`grpc: POST /v1/timers/stream, ${limits.streams} requests × ${limits.streamAhead} ahead (${seconds} s)`);
    const httpStream = await runHttpStream(child.url, timing);
    for (const [what, run] of [['unary_add', unary], ['h2_json_add', h2], ['stream_add', stream], ['http_stream_add', httpStream]] as const) {
      if (run.errors > 0) process.stderr.write(`grpc: WARNING: ${what}: ${run.errors} failed; first: ${run.firstError}\n`);
    }
    const figure = (name: string, value: number, unit: string): Figure => ({ suite, name, value, unit });
    const perS = (run: Run): number => Math.round(run.adds / (timing.measureMs / 1000));
    return [
      metaLine(suite, { node: process.version, cpus: cpus().length, dir: options.baseDir, quick: options.quick, unary_in_flight: limits.unaryInFlight, streams: limits.streams, stream_ahead: limits.streamAhead, clients: 'this process (node:http2 for both protocols)', server: 'fermata serve child process' }),
      figure('grpc.unary_add.per_s', perS(unary), '1/s'),
      figure('grpc.h2_json_add.per_s', perS(h2), '1/s'),
      figure('grpc.unary_add.ratio', roundTo(unary.adds / Math.max(1, h2.adds), 3), 'ratio'),
      figure('grpc.stream_add.per_s', perS(stream), '1/s'),
      figure('grpc.http_stream_add.per_s', perS(httpStream), '1/s'),
      figure('grpc.stream_add.ratio', roundTo(stream.adds / Math.max(1, httpStream.adds), 3), 'ratio'),
      figure('grpc.errors', unary.errors + h2.errors + stream.errors + httpStream.errors, 'adds'),
    ];
  } finally {
    await child.stop();
  }
}

async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  await new Promise<void>((resolve) => server.close(() => resolve()));
  if (address === null || typeof address === 'string') throw new Error('no TCP address');
  return address.port;
}

async function runUnary(url: string, frame: Buffer, timing: Timing): Promise<Run> {
  const session = await connect(url);
  const span = startSpan(timing);
  const tally = new Tally(span);
  const headers = grpcHeaders('AddTimer');
  const call = (): Promise<void> =>
    new Promise((resolve) => {
      const stream = session.request(headers);
      let grpcStatus: string | undefined;
      stream.on('response', (answer) => (grpcStatus = answer['grpc-status'] as string | undefined));
      stream.on('trailers', (trailers) => (grpcStatus = trailers['grpc-status'] as string | undefined));
      stream.resume();
      stream.on('end', () => {
        if (grpcStatus === '0') tally.ok();
        else tally.failed(`grpc-status ${grpcStatus}`);
        resolve();
      });
      stream.on('error', (err) => {
        tally.failed(err.message);
        resolve();
      });
      stream.end(frame);
    });
  const loop = async (): Promise<void> => {
    while (performance.now() < span.end && !session.destroyed) await call();
  };
  try {
    await Promise.all(Array.from({ length: limits.unaryInFlight }, loop));
  } finally {
    await new Promise<void>((resolve) => session.close(() => resolve()));
  }
  return tally.run();
}

async function connect(url: string): Promise<http2.ClientHttp2Session> {
  const session = http2.connect(url);
  session.on('error', () => undefined); // a session error fails the streams, which count it
  await new Promise<void>((resolve, reject) => {
    session.once('connect', () => resolve());
    session.once('error', reject);
  });
  return session;
}

/** The gRPC port binds after the HTTP one's "listening" line (the child helper's cue): tried until it takes a connection. */
async function waitForPort(url: string): Promise<void> {
  const giveUp = performance.now() + 30_000;
  for (;;) {
    try {
      const session = await connect(url);
      await new Promise<void>((resolve) => session.close(() => resolve()));
      return;
    } catch (err) {
      if (performance.now() > giveUp) throw err;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
}

async function runH2Json(url: string, timing: Timing): Promise<Run> {
  const session = await connect(url);
  const span = startSpan(timing);
  const tally = new Tally(span);
  const headers = { ':method': 'POST', ':path': '/v1/timers', 'content-type': 'application/json' };
  const post = (): Promise<void> =>
    new Promise((resolve) => {
      const stream = session.request(headers);
      let status = 0;
      stream.on('response', (answer) => (status = Number(answer[':status'])));
      stream.resume();
      stream.on('end', () => {
        if (status === 201) tally.ok();
        else tally.failed(`status ${status}`);
        resolve();
      });
      stream.on('error', (err) => {
        tally.failed(err.message);
        resolve();
      });
      stream.end(jsonTimer);
    });
  const loop = async (): Promise<void> => {
    while (performance.now() < span.end && !session.destroyed) await post();
  };
  try {
    await Promise.all(Array.from({ length: limits.unaryInFlight }, loop));
  } finally {
    await new Promise<void>((resolve) => session.close(() => resolve()));
  }
  return tally.run();
}

/**
 * Keeps `limits.streamAhead` adds written and unanswered on one streaming call until the span
 * ends, then ends its side and waits for the rest of the answers.
 */
function keepAhead(write: () => boolean, end: () => void, span: Span): { answered(count: number): void; start(): void; onDrain(): void } {
  let written = 0;
  let answered = 0;
  let closing = false;
  const more = (): void => {
    if (closing) return;
    while (performance.now() < span.end && written - answered < limits.streamAhead) {
      written++;
      if (!write()) return;
    }
    if (performance.now() >= span.end) {
      closing = true;
      end();
    }
  };
  return {
    answered(count) {
      answered += count;
      more();
    },
    start: more,
    onDrain: more,
  };
}

async function runGrpcStream(url: string, frame: Buffer, timing: Timing): Promise<Run> {
  const session = await connect(url);
  const span = startSpan(timing);
  const tally = new Tally(span);
  const headers = grpcHeaders('StreamAddTimers');
  const call = (): Promise<void> =>
    new Promise((resolve) => {
      const stream = session.request(headers);
      const window = keepAhead(() => stream.write(frame), () => stream.end(), span);
      // Answers are gRPC frames; an added one holds field 1 (tag 0x0a), an error field 2 (0x12).
      let pending: Buffer = Buffer.alloc(0);
      stream.on('data', (chunk: Buffer) => {
        pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
        let count = 0;
        while (pending.length >= 5 && pending.length >= 5 + pending.readUInt32BE(1)) {
          const length = pending.readUInt32BE(1);
          if (pending[5] === 0x0a) tally.ok();
          else tally.failed('a StreamAddTimers answer with an error');
          pending = pending.subarray(5 + length);
          count++;
        }
        if (count > 0) window.answered(count);
      });
      stream.on('drain', window.onDrain);
      stream.on('error', (err) => {
        tally.failed(err.message);
        resolve();
      });
      stream.on('end', () => resolve());
      window.start();
    });
  try {
    await Promise.all(Array.from({ length: limits.streams }, call));
  } finally {
    await new Promise<void>((resolve) => session.close(() => resolve()));
  }
  return tally.run();
}

async function runHttpStream(url: string, timing: Timing): Promise<Run> {
  const session = await connect(url);
  const span = startSpan(timing);
  const tally = new Tally(span);
  const line = `${jsonTimer}\n`;
  const headers = { ':method': 'POST', ':path': '/v1/timers/stream', 'content-type': 'application/x-ndjson' };
  const request = (): Promise<void> =>
    new Promise((resolve) => {
      const stream = session.request(headers);
      const window = keepAhead(() => stream.write(line), () => stream.end(), span);
      let partial = '';
      stream.setEncoding('utf8');
      stream.on('data', (chunk: string) => {
        const lines = (partial + chunk).split('\n');
        partial = lines.pop() ?? '';
        let ok = 0;
        for (const answer of lines) {
          if (answer.includes('"status":201')) ok++;
          else tally.failed(answer.slice(0, 200));
        }
        tally.ok(ok);
        window.answered(lines.length);
      });
      stream.on('drain', window.onDrain);
      stream.on('error', (err) => {
        tally.failed(err.message);
        resolve();
      });
      stream.on('end', () => resolve());
      window.start();
    });
  try {
    await Promise.all(Array.from({ length: limits.streams }, request));
  } finally {
    await new Promise<void>((resolve) => session.close(() => resolve()));
  }
  return tally.run();
}
