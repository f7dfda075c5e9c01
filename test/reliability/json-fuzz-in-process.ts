// The in-process half of test/reliability/ingest-fuzz-json.test.ts: plain functions, run by the
// test in a worker thread (test/helpers/off-harness.ts), away from the test runner's async hook,
// which every promise of fastify's inject() and the engine would pay for.
import fc from 'fast-check';
import { type FuzzBody, jsonFuzzBody } from '../helpers/fuzz-json.ts';
import { assertStillAdds, describeRequest, type FuzzRequest, InProcessApi, judged, Tally } from '../helpers/fuzz-verdict.ts';

export interface JsonFuzzJob {
  /** The delivery target the valid fields name. */
  readonly target: string;
  readonly cases: number;
  /** fast-check's seed; undefined draws one (fast-check names it in a failure). */
  readonly seed: number | undefined;
}

export const requestOf = (fuzz: FuzzBody): FuzzRequest => ({ headers: fuzz.contentType === undefined ? {} : { 'content-type': fuzz.contentType }, body: fuzz.body });

/** Runs the cases through inject(); resolves with the tally, rejects with fast-check's report of the shrunk failing case. */
export async function fuzzJsonInProcess(job: JsonFuzzJob): Promise<string> {
  const api = new InProcessApi();
  const tally = new Tally();
  try {
    await fc.assert(
      fc.asyncProperty(jsonFuzzBody(job.target), async (fuzz) => {
        const request = requestOf(fuzz);
        const problem = await judged(api.send, request, tally);
        if (problem !== undefined) throw new Error(`${problem}; ${describeRequest(request)}`);
      }),
      { numRuns: job.cases, ...(job.seed === undefined ? {} : { seed: job.seed }) },
    );
    await assertStillAdds(api.send, job.target);
    return tally.summary('in process');
  } catch (err) {
    // fast-check's message names the seed and the shrunk case; its cause is the property's own error (the verdict and the body).
    if (err instanceof Error && err.cause instanceof Error) err.message += `\n${err.cause.message}`;
    throw err;
  } finally {
    await api.close();
  }
}
