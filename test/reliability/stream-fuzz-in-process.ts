// The add-stream fuzzing of test/reliability/ingest-fuzz-stream.test.ts (which says what it
// checks): plain functions, run by the test in a worker thread (test/helpers/off-harness.ts), away
// from the test runner's async hook, which every promise of inject() and the engine would pay for.
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { pino } from 'pino';
import { Engine } from '../../engine/engine.ts';
import { createHttpServer } from '../../ingest/http/server.ts';
import { streamFuzzBody } from '../helpers/fuzz-json.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';

const target = 'https://fuzz.example/hook';
const utf8 = new TextDecoder('utf-8', { fatal: true });

/** The 1-based numbers of the body's lines that must be answered: all but the blank ones. */
function answeredLines(body: Buffer): number[] {
  const lines: number[] = [];
  let start = 0;
  // Segments between newlines; what follows the last newline is a line when there is any.
  for (let line = 1; start < body.length; line++) {
    let end = body.indexOf(0x0a, start);
    if (end < 0) end = body.length;
    const bytes = body.subarray(start, end);
    let blank: boolean;
    try {
      blank = utf8.decode(bytes).trim() === '';
    } catch {
      blank = false;
    }
    if (!blank) lines.push(line);
    start = end + 1;
  }
  return lines;
}

interface StreamAnswer {
  readonly line?: unknown;
  readonly status?: unknown;
  readonly id?: unknown;
  readonly error?: { readonly code?: unknown };
}

/** What is wrong with the answer to `body`, or undefined. */
function problemOf(body: Buffer, status: number, text: string): string | undefined {
  if (status !== 200) return `status ${status}: ${text.slice(0, 300)}`;
  const answers = text === '' ? [] : text.replace(/\n$/, '').split('\n');
  const expected = answeredLines(body);
  const got: number[] = [];
  for (const raw of answers) {
    let answer: StreamAnswer;
    try {
      answer = JSON.parse(raw) as StreamAnswer;
    } catch {
      return `an answer line is not JSON: ${raw.slice(0, 300)}`;
    }
    if (typeof answer.line !== 'number' || typeof answer.status !== 'number') return `an answer line without line and status: ${raw.slice(0, 300)}`;
    if (answer.status >= 500) return `a 5xx answer: ${raw.slice(0, 300)}`;
    if (answer.status >= 200 && answer.status < 300 && typeof answer.id !== 'string') return `a 2xx answer without an id: ${raw.slice(0, 300)}`;
    if (answer.status >= 400 && typeof answer.error?.code !== 'string') return `a 4xx answer without an error code: ${raw.slice(0, 300)}`;
    got.push(answer.line);
  }
  if (got.join(',') !== expected.join(',')) return `answered lines ${got.join(',')}, expected ${expected.join(',')}`;
  return undefined;
}

export interface StreamFuzzJob {
  readonly bodies: number;
  /** fast-check's seed; undefined draws one (fast-check names it in a failure). */
  readonly seed: number | undefined;
}

/** Runs the bodies through inject(); resolves with the answers counted by status, rejects with fast-check's report of the shrunk failing body. */
export async function fuzzStreamInProcess(job: StreamFuzzJob): Promise<string> {
  let engine = await Engine.open({ dataDir: '/data', fs: new SimFileSystem({ seed: 1 }) });
  let app = createHttpServer({ logger: pino({ level: 'silent' }), engine });
  let opened = 1;
  const statuses = new Map<number, number>();
  try {
    await fc.assert(
      fc.asyncProperty(streamFuzzBody(target), async (body) => {
        // A fresh engine now and then, as a long soak would otherwise fill one store.
        if (opened * 20_000 < (statuses.get(201) ?? 0)) {
          await app.close();
          await engine.close();
          engine = await Engine.open({ dataDir: '/data', fs: new SimFileSystem({ seed: ++opened }) });
          app = createHttpServer({ logger: pino({ level: 'silent' }), engine });
        }
        const response = await app.inject({ method: 'POST', url: '/v1/timers/stream', headers: { 'content-type': 'application/x-ndjson' }, payload: body });
        for (const line of response.body.split('\n')) {
          const status = /"status":(\d+)/.exec(line)?.[1];
          if (status !== undefined) statuses.set(Number(status), (statuses.get(Number(status)) ?? 0) + 1);
        }
        const problem = problemOf(body, response.statusCode, response.body);
        if (problem !== undefined) throw new Error(`${problem}; body ${JSON.stringify(body.toString('latin1').slice(0, 400))}`);
      }),
      { numRuns: job.bodies, ...(job.seed === undefined ? {} : { seed: job.seed }) },
    );
    assert.ok((statuses.get(201) ?? 0) > 0 && (statuses.get(400) ?? 0) > 0, 'the bodies held both good and bad lines');
    const still = await app.inject({ method: 'POST', url: '/v1/timers/stream', headers: { 'content-type': 'application/x-ndjson' }, payload: `${JSON.stringify({ delay_ms: 3_600_000, target })}\n` });
    assert.match(still.body, /^\{"line":1,"status":201,/, 'the service still takes a valid add');
    return `answers by status: ${[...statuses].sort(([a], [b]) => a - b).map(([status, count]) => `${status}×${count}`).join(' ')}`;
  } catch (err) {
    // fast-check's message names the seed and the shrunk body; its cause is the property's own error (what was wrong).
    if (err instanceof Error && err.cause instanceof Error) err.message += `\n${err.cause.message}`;
    throw err;
  } finally {
    await app.close();
    await engine.close();
  }
}
