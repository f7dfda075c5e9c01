// The PATCH figures of the `lifecycle` suite (its file calls lifecyclePatchFigures): single
// reschedules over HTTP/2 (h2c) with 256 streams kept busy on a running service, measured the way
// bench/ingest.ts's one-process mode measures single adds (one node:http2 session, warm-up, then
// only answers completed inside the span count), and one-timer adds measured the same way in the
// same run (adds, PATCHes, PATCHes, adds, half the span each), so their ratio mostly cancels the
// shared machine's drift:
//
//   lifecycle.patch.per_s            200s of PATCH /v1/timers/{id} {"delay_ms": …} a second
//   lifecycle.patch.latency_ms.p50/.p99
//   lifecycle.patch.adds_per_s       201s of a one-timer JSON POST /v1/timers a second
//   lifecycle.patch.ratio            per_s ÷ adds_per_s (the issue asks ≥ 0.5)
//
// Each PATCH names another timer of a pool added first (NDJSON batches, an hour ahead), so no
// two streams wait on one timer (PATCHes of one timer are applied one at a time).
import http2 from 'node:http2';
import { performance } from 'node:perf_hooks';
import type { Histogram } from 'hdr-histogram-js';
import { type Figure, inSpan, newHistogram, percentileMs, recordMs, roundTo, startSpan } from './report.ts';

const suite = 'lifecycle';
const streams = 256;
const payloadChars = 128;
const target = 'https://example.com/hook';
const hourMs = 3_600_000;
const poolBatchRows = 10_000;

export interface PatchTiming {
  readonly warmupMs: number;
  readonly measureMs: number;
}

export interface LifecyclePatchOptions {
  /** The running service's cleartext base URL (h2c with prior knowledge), e.g. http://127.0.0.1:7070. */
  readonly url: string;
  readonly timing: PatchTiming;
  /** Timers added up front for the PATCHes to change (each span's requests cycle through them). */
  readonly poolTimers?: number;
  readonly progress?: (line: string) => void;
}

interface Run {
  readonly ok: number;
  readonly errors: number;
  readonly seconds: number;
  readonly latencyUs: Histogram;
  readonly firstError: string | undefined;
}

/** What one request of a load sends. */
interface Request {
  readonly method: string;
  readonly path: string;
  readonly body: Buffer;
}

/** PATCH and add figures measured on the service at `options.url`. */
export async function lifecyclePatchFigures(options: LifecyclePatchOptions): Promise<Figure[]> {
  const progress = options.progress ?? (() => undefined);
  const session = await connect(options.url);
  try {
    const poolSize = options.poolTimers ?? 50_000;
    progress(`lifecycle: ${poolSize} timers for the PATCHes to change`);
    const pool = await addPool(session, poolSize);
    const addBody = Buffer.from(JSON.stringify({ delay_ms: hourMs, target, payload: 'p'.repeat(payloadChars) }));
    let next = 0;
    const measureAdds = (timing: PatchTiming): Promise<Run> => {
      progress(`lifecycle: ${streams} streams of one-timer adds`);
      return runLoad(session, timing, 201, () => ({ method: 'POST', path: '/v1/timers', body: addBody }));
    };
    const measurePatches = (timing: PatchTiming): Promise<Run> => {
      progress(`lifecycle: ${streams} streams of PATCHes`);
      return runLoad(session, timing, 200, () => {
        const id = pool[next++ % pool.length] as string;
        return { method: 'PATCH', path: `/v1/timers/${id}`, body: Buffer.from(`{"delay_ms":${hourMs + (next % 1000)}}`) };
      });
    };
    // Adds, PATCHes, PATCHes, adds (each half the span): a drift of the shared machine's speed
    // over the run weighs on both alike.
    const half = { warmupMs: options.timing.warmupMs, measureMs: options.timing.measureMs / 2 };
    const addsFirst = await measureAdds(half);
    const patchesFirst = await measurePatches(half);
    const patchesSecond = await measurePatches(half);
    const addsSecond = await measureAdds(half);
    const adds = joined(addsFirst, addsSecond);
    const patches = joined(patchesFirst, patchesSecond);
    for (const [what, run] of [['adds', adds], ['PATCHes', patches]] as const) {
      if (run.errors > 0) process.stderr.write(`lifecycle: ${run.errors} ${what} failed; first: ${run.firstError}\n`);
    }
    const patchPerS = patches.ok / patches.seconds;
    const addPerS = adds.ok / adds.seconds;
    const figure = (name: string, value: number, unit: string): Figure => ({ suite, name, value, unit });
    return [
      figure('lifecycle.patch.per_s', Math.round(patchPerS), '1/s'),
      figure('lifecycle.patch.latency_ms.p50', percentileMs(patches.latencyUs, 50), 'ms'),
      figure('lifecycle.patch.latency_ms.p99', percentileMs(patches.latencyUs, 99), 'ms'),
      figure('lifecycle.patch.adds_per_s', Math.round(addPerS), '1/s'),
      figure('lifecycle.patch.ratio', addPerS === 0 ? 0 : roundTo(patchPerS / addPerS, 3), 'ratio'),
    ];
  } finally {
    await new Promise<void>((resolve) => session.close(() => resolve()));
  }
}

function connect(url: string): Promise<http2.ClientHttp2Session> {
  const session = http2.connect(url);
  session.on('error', () => undefined); // a session error fails the streams, which count it
  return new Promise((resolve, reject) => {
    session.once('connect', () => resolve(session));
    session.once('error', reject);
  });
}

/** One request, its status and body. */
function send(session: http2.ClientHttp2Session, request: Request, contentType = 'application/json'): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const stream = session.request({ ':method': request.method, ':path': request.path, 'content-type': contentType, 'content-length': String(request.body.length) });
    let status = 0;
    let body = '';
    stream.on('response', (headers) => {
      status = Number(headers[':status']);
    });
    stream.setEncoding('utf8');
    stream.on('data', (chunk: string) => (body += chunk));
    stream.on('end', () => resolve({ status, body }));
    stream.on('error', reject);
    stream.end(request.body);
  });
}

/** `count` timers an hour ahead, added in NDJSON batches; their ids. */
async function addPool(session: http2.ClientHttp2Session, count: number): Promise<string[]> {
  const ids: string[] = [];
  const line = `${JSON.stringify({ delay_ms: hourMs, target, payload: 'p'.repeat(payloadChars) })}\n`;
  while (ids.length < count) {
    const rows = Math.min(poolBatchRows, count - ids.length);
    const answer = await send(session, { method: 'POST', path: '/v1/timers', body: Buffer.from(line.repeat(rows)) }, 'application/x-ndjson');
    if (answer.status !== 201) throw new Error(`lifecycle: adding the PATCH pool answered ${answer.status}: ${answer.body.slice(0, 300)}`);
    ids.push(...(JSON.parse(answer.body) as { ids: string[] }).ids);
  }
  return ids;
}

/** Two spans of one load as one. */
function joined(first: Run, second: Run): Run {
  first.latencyUs.add(second.latencyUs);
  return { ok: first.ok + second.ok, errors: first.errors + second.errors, seconds: first.seconds + second.seconds, latencyUs: first.latencyUs, firstError: first.firstError ?? second.firstError };
}

/** `streams` loops on one session, each sending the next request and waiting for its whole answer. */
async function runLoad(session: http2.ClientHttp2Session, timing: PatchTiming, okStatus: number, nextRequest: () => Request): Promise<Run> {
  const latencyUs = newHistogram();
  const span = startSpan(timing);
  let ok = 0;
  let errors = 0;
  let firstError: string | undefined;
  const once = async (): Promise<void> => {
    const started = performance.now();
    try {
      const answer = await send(session, nextRequest());
      const now = performance.now();
      if (answer.status !== okStatus) {
        errors++;
        firstError ??= `${answer.status} ${answer.body.slice(0, 300)}`;
      } else if (inSpan(span, now)) {
        ok++;
        recordMs(latencyUs, now - started);
      }
    } catch (err) {
      errors++;
      firstError ??= err instanceof Error ? err.message : String(err);
    }
  };
  const loop = async (): Promise<void> => {
    while (performance.now() < span.end && !session.destroyed) await once();
  };
  await Promise.all(Array.from({ length: streams }, loop));
  return { ok, errors, seconds: span.seconds, latencyUs, firstError };
}
