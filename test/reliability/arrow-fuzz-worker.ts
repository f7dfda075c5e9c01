// The in-process half of test/reliability/ingest-fuzz-arrow.test.ts, in a worker thread so that a
// case which hangs the decoder or exhausts memory is caught (the test terminates the worker and
// names the case) instead of freezing or killing the test process. Runs `cases` fast-check cases
// of mutated Arrow streams through fastify's inject() into the service's handler; before each
// case it posts the body it is about to send, and at the end the tally or the shrunk failure.
import { parentPort, workerData } from 'node:worker_threads';
import fc from 'fast-check';
import { type ArrowCase, type ArrowSeed, arrowCase, arrowCaseBytes, arrowSeeds } from '../helpers/fuzz-arrow.ts';
import { assertStillAdds, describeRequest, type FuzzRequest, InProcessApi, judged, Tally } from '../helpers/fuzz-verdict.ts';

export interface ArrowFuzzJob {
  readonly target: string;
  readonly cases: number;
  readonly seed: number | undefined;
}

/** What the worker tells the test. */
export type ArrowFuzzMessage =
  | { readonly kind: 'case'; readonly index: number; readonly seedName: string; readonly bodyBase64: string }
  | { readonly kind: 'done'; readonly summary: string }
  | { readonly kind: 'failed'; readonly message: string };

const arrowType = 'application/vnd.apache.arrow.stream';

export function arrowRequest(fuzzCase: ArrowCase, seeds: readonly ArrowSeed[]): FuzzRequest {
  const headers: Record<string, string> = { 'content-type': arrowType };
  if (fuzzCase.acceptArrow) headers.accept = arrowType;
  return { headers, body: Buffer.from(arrowCaseBytes(fuzzCase, seeds)) };
}

async function run(job: ArrowFuzzJob, post: (message: ArrowFuzzMessage) => void): Promise<void> {
  const seeds = arrowSeeds(job.target);
  const api = new InProcessApi();
  const tally = new Tally();
  let index = 0;
  try {
    await fc.assert(
      fc.asyncProperty(arrowCase(seeds.length), async (fuzzCase) => {
        const request = arrowRequest(fuzzCase, seeds);
        const seedName = (seeds[fuzzCase.seed % seeds.length] as ArrowSeed).name;
        post({ kind: 'case', index: index++, seedName, bodyBase64: request.body.toString('base64') });
        const problem = await judged(api.send, request, tally);
        if (problem !== undefined) throw new Error(`${problem}; seed stream ${seedName}; ${describeRequest(request)}`);
      }),
      { numRuns: job.cases, ...(job.seed === undefined ? {} : { seed: job.seed }) },
    );
    await assertStillAdds(api.send, job.target);
    post({ kind: 'done', summary: tally.summary('in process') });
  } catch (err) {
    // fast-check's message names the seed and the shrunk case; its cause is the property's own error (the verdict and the body).
    const cause = err instanceof Error && err.cause instanceof Error ? `\n${err.cause.message}` : '';
    post({ kind: 'failed', message: `${err instanceof Error ? err.message : String(err)}${cause}` });
  } finally {
    await api.close();
  }
}

if (parentPort !== null) {
  const port = parentPort;
  await run(workerData as ArrowFuzzJob, (message) => port.postMessage(message));
}
