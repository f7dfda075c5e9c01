// What the ingest fuzz tests share: a request to POST /v1/timers, the verdict on its answer, the
// tally printed as the run's figures, and the two ways of sending: in process through fastify's
// inject() into createHttpServer() over an Engine on the simulated disk (no fdatasync, so a slow
// answer is the handler's doing, not the shared disk's), and over real HTTP/2 sockets.
//
// Verdict: a 2xx, or a 4xx whose JSON body is {"error": {"code", "message"}}; anything else (a
// 5xx, 503 and 507 included: nothing in a fuzz run overloads or fills a disk) is a problem, and
// so is a stream closed without an answer. An answer slower than answerMsMax is sent once more
// alone; only a case slow twice, the second time also slowRatioMin times slower than its
// baseline, is a problem: a trivial request sent right after it plus JSON.parse of its body in
// this process (a hang repeats and is the handler's doing; a loaded machine slows the baseline as
// much, and a big body costs its parse however it is handled).
import assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { pino } from 'pino';
import { Engine } from '../../engine/engine.ts';
import { createHttpServer, type HttpServer } from '../../ingest/http/server.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';
import type { H2Client } from './h2-client.ts';

export const fuzzVerdictLimits = {
  /** An answer slower than this, twice, is a hang, if it is also slowRatioMin times its baseline (a trivial request's answer and the body's JSON.parse). */
  answerMsMax: 1_000,
  slowRatioMin: 20,
  /** Streams in flight at once over sockets. */
  streamsInFlight: 16,
  /** A socket run stops after this many problems: past the first few they only repeat. */
  problemsMax: 5,
  /** The in-process engine starts afresh this often, so a soak's accepted timers do not pile up in the simulated disk. */
  casesPerEngine: 50_000,
} as const;

export interface FuzzRequest {
  readonly headers: Readonly<Record<string, string>>;
  readonly body: Buffer;
}

export interface FuzzAnswer {
  readonly status: number;
  readonly contentType: string | undefined;
  readonly body: Buffer;
  readonly elapsedMs: number;
}

export type Send = (request: FuzzRequest) => Promise<FuzzAnswer>;

function errorOf(body: Buffer): { code?: unknown; message?: unknown } | undefined {
  try {
    return (JSON.parse(body.toString('utf8')) as { error?: { code?: unknown; message?: unknown } }).error;
  } catch {
    return undefined;
  }
}

/** What is wrong with an answer, or undefined. */
export function problemOf(answer: FuzzAnswer): string | undefined {
  if (answer.status >= 200 && answer.status < 300) return undefined;
  if (answer.status < 400 || answer.status >= 500) return `status ${answer.status}: ${answer.body.toString('utf8').slice(0, 300)}`;
  if (!/^application\/json\b/.test(answer.contentType ?? '')) return `a ${answer.status} with content-type ${answer.contentType}`;
  const error = errorOf(answer.body);
  if (typeof error?.code !== 'string' || error.code === '' || typeof error.message !== 'string') {
    return `a ${answer.status} without an error code: ${answer.body.toString('utf8').slice(0, 300)}`;
  }
  return undefined;
}

/** Answers by status and error code, and the slowest answer: a run's figures. */
export class Tally {
  readonly statuses = new Map<number, number>();
  readonly codes = new Map<string, number>();
  cases = 0;
  slowestMs = 0;
  slowOnce = 0;
  /** Cases slow twice while a trivial request was slow too: the machine's doing. */
  slowWithMachine = 0;

  count(answer: FuzzAnswer): void {
    this.cases++;
    this.statuses.set(answer.status, (this.statuses.get(answer.status) ?? 0) + 1);
    if (answer.status >= 400) {
      const code = errorOf(answer.body)?.code;
      const name = typeof code === 'string' ? code : '?';
      this.codes.set(name, (this.codes.get(name) ?? 0) + 1);
    }
    this.slowestMs = Math.max(this.slowestMs, answer.elapsedMs);
  }

  summary(label: string): string {
    const statuses = [...this.statuses].sort(([a], [b]) => a - b).map(([status, n]) => `${status}×${n}`).join(' ');
    const codes = [...this.codes].sort(([, a], [, b]) => b - a).map(([code, n]) => `${code}×${n}`).join(' ');
    return `${label}: ${this.cases} cases; ${statuses}; slowest ${this.slowestMs.toFixed(1)} ms; slow once then fast ${this.slowOnce}; slow with the machine ${this.slowWithMachine}; codes ${codes}`;
  }
}

/** A body refused at once (BATCH_INVALID): how long the service takes to answer anything just now. */
const trivialRequest: FuzzRequest = { headers: { 'content-type': 'application/json' }, body: Buffer.from('{}') };

/** How long JSON.parse takes to read (or refuse) `body` here now. */
function parseMs(body: Buffer): number {
  const started = performance.now();
  try {
    JSON.parse(body.toString('utf8'));
  } catch {
    // Refused: the time it took is the figure.
  }
  return performance.now() - started;
}

/** Sends a case; a slow answer is sent once more alone, and the verdict comes from the second. */
export async function judged(send: Send, request: FuzzRequest, tally: Tally): Promise<string | undefined> {
  let answer = await send(request);
  if (answer.elapsedMs > fuzzVerdictLimits.answerMsMax) {
    tally.slowOnce++;
    answer = await send(request);
    if (answer.elapsedMs > fuzzVerdictLimits.answerMsMax) {
      const baselineMs = (await send(trivialRequest)).elapsedMs + parseMs(request.body);
      if (answer.elapsedMs > fuzzVerdictLimits.slowRatioMin * baselineMs) {
        return `answered in ${answer.elapsedMs.toFixed(0)} ms twice (the bound is ${fuzzVerdictLimits.answerMsMax} ms), ${(answer.elapsedMs / baselineMs).toFixed(0)} times its baseline's ${baselineMs.toFixed(1)} ms`;
      }
      tally.slowWithMachine++;
    }
  }
  tally.count(answer);
  return problemOf(answer);
}

export const describeRequest = (request: FuzzRequest): string =>
  `headers ${JSON.stringify(request.headers)}, ${request.body.length} bytes, base64 ${request.body.subarray(0, 4_096).toString('base64')}`;

/** The API in this process over an engine on the simulated disk; `send` goes through fastify's inject(). */
export class InProcessApi {
  #engine: Engine | undefined;
  #app: HttpServer | undefined;
  #opened = 0;
  #sent = 0;

  readonly send: Send = async (request) => {
    if (this.#app === undefined || this.#sent % fuzzVerdictLimits.casesPerEngine === 0) await this.#renew();
    this.#sent++;
    const app = this.#app as HttpServer;
    const started = performance.now();
    const response = await app.inject({ method: 'POST', url: '/v1/timers', headers: request.headers, payload: request.body });
    const contentType = response.headers['content-type'];
    return { status: response.statusCode, contentType: typeof contentType === 'string' ? contentType : undefined, body: response.rawPayload, elapsedMs: performance.now() - started };
  };

  async close(): Promise<void> {
    await this.#app?.close();
    await this.#engine?.close();
  }

  async #renew(): Promise<void> {
    await this.close();
    this.#engine = await Engine.open({ dataDir: '/data', fs: new SimFileSystem({ seed: ++this.#opened }) });
    this.#app = createHttpServer({ logger: pino({ level: 'silent' }), engine: this.#engine });
    await this.#app.ready();
  }
}

/** POST /v1/timers over an HTTP/2 session. */
export function socketSend(client: H2Client): Send {
  return async (request) => {
    const answer = await client.request({ method: 'POST', path: '/v1/timers', headers: request.headers, body: request.body });
    return { status: answer.status, contentType: answer.headers['content-type'], body: answer.body, elapsedMs: answer.elapsedMs };
  };
}

/** Sends every case, streamsInFlight at a time, until problemsMax problems; the problems, each naming its case. */
export async function sendAll(send: Send, cases: readonly FuzzRequest[], tally: Tally): Promise<string[]> {
  const problems: string[] = [];
  let next = 0;
  const lane = async (): Promise<void> => {
    for (let index = next++; index < cases.length && problems.length < fuzzVerdictLimits.problemsMax; index = next++) {
      const request = cases[index] as FuzzRequest;
      const problem = await judged(send, request, tally).catch((err: unknown) => (err instanceof Error ? err.message : String(err)));
      if (problem !== undefined) problems.push(`case ${index}: ${problem}; ${describeRequest(request)}`);
    }
  };
  await Promise.all(Array.from({ length: fuzzVerdictLimits.streamsInFlight }, lane));
  return problems;
}

/** The server still takes a valid add (201 with an id). */
export async function assertStillAdds(send: Send, target: string): Promise<void> {
  const answer = await send({ headers: { 'content-type': 'application/json' }, body: Buffer.from(JSON.stringify({ delay_ms: 3_600_000, target: `${target}/after` })) });
  assert.equal(answer.status, 201, answer.body.toString('utf8'));
  const { id } = JSON.parse(answer.body.toString('utf8')) as { id?: unknown };
  assert.equal(typeof id, 'string');
}
