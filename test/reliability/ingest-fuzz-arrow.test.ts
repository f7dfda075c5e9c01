// Fuzzing POST /v1/timers with Arrow IPC streams: byte-level mutations (flip, insert, delete,
// truncate, splice, boundary integers) of timer batches written by apache-arrow and by pyarrow
// (test/fixtures/arrow/pyarrow-seeds, each first checked to be a valid add) and of Arrow's own
// malformed, foreign and compressed test streams (test/helpers/fuzz-arrow.ts). Every answer must
// pass the verdict of test/helpers/fuzz-verdict.ts (a 2xx, or a 4xx with a JSON error code; no
// 5xx; no hang: nothing over 1 s and 20 times its baseline, twice); afterwards the server still takes a valid add.
//
// The bulk goes in process through fastify's inject() into the service's handler, inside a worker
// thread with a capped heap (arrow-fuzz-worker.ts): a case that hangs the decoder or exhausts
// memory is caught by a watchdog here and named, instead of freezing or killing the test process.
// The rest go over real HTTP/2 sockets to a `fermata serve` child, which must still be running.
//
// Sizes: `npm test` 20,000 streams (18,000 in process + 2,000 over sockets); `npm run soak`
// 1,000,000 (980,000 + 20,000). FERMATA_PROPERTY_SEED=N replays a seed.
//
// Bugs B1, B3 and B4 (docs/reliability.md, each with its own regression test in this folder)
// were found here: hostile streams that hung the decoder, answered 500, or reached the log.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { Worker } from 'node:worker_threads';
import fc from 'fast-check';
import { arrowCase, arrowSeeds, writtenSeedCount } from '../helpers/fuzz-arrow.ts';
import { assertStillAdds, sendAll, socketSend, Tally } from '../helpers/fuzz-verdict.ts';
import { H2Client } from '../helpers/h2-client.ts';
import { propertyRuns } from '../helpers/property.ts';
import { testScratch } from '../helpers/scratch.ts';
import { startService } from '../helpers/service.ts';
import { startH2Sink } from '../helpers/sinks.ts';
import { soak } from '../helpers/soak.ts';
import { type ArrowFuzzJob, type ArrowFuzzMessage, arrowRequest } from './arrow-fuzz-worker.ts';

const sizes = {
  inProcess: soak ? 980_000 : 18_000,
  overSockets: soak ? 20_000 : 2_000,
  requestTimeoutMs: 10_000,
  /** A case the worker has not finished by then is a hang (the verdict's own bound is 1 s, twice). */
  caseMsMax: 10_000,
  /** The worker's heap: far above what a decoded 64 MiB body needs, far below the machine. */
  workerHeapMb: 1_024,
} as const;


const scratch = testScratch('fermata-fuzz-arrow');
const sink = await startH2Sink();
after(() => sink.close());

/** Runs the worker; resolves with its summary, rejects naming the case that failed, hung or ran out of memory. */
function fuzzInWorker(job: ArrowFuzzJob): Promise<string> {
  const worker = new Worker(new URL('./arrow-fuzz-worker.ts', import.meta.url), { workerData: job, resourceLimits: { maxOldGenerationSizeMb: sizes.workerHeapMb } });
  let last: Extract<ArrowFuzzMessage, { kind: 'case' }> | undefined;
  const lastCase = (): string => (last === undefined ? 'before the first case' : `case ${last.index} (seed stream ${last.seedName}), body base64 ${last.bodyBase64}`);
  return new Promise<string>((resolve, reject) => {
    let watchdog: NodeJS.Timeout | undefined;
    const settle = (outcome: () => void): void => {
      clearTimeout(watchdog);
      worker.removeAllListeners();
      worker.on('error', () => undefined);
      void worker.terminate();
      outcome();
    };
    const arm = (): void => {
      clearTimeout(watchdog);
      watchdog = setTimeout(() => settle(() => reject(new Error(`no answer within ${sizes.caseMsMax} ms: ${lastCase()}`))), sizes.caseMsMax);
    };
    worker.on('message', (message: ArrowFuzzMessage) => {
      if (message.kind === 'case') {
        last = message;
        arm();
      } else if (message.kind === 'done') settle(() => resolve(message.summary));
      else settle(() => reject(new Error(message.message)));
    });
    worker.on('error', (err: Error) => settle(() => reject(new Error(`the worker died (${err.message}; heap cap ${sizes.workerHeapMb} MB) on ${lastCase()}`))));
    worker.on('exit', (code) => settle(() => reject(new Error(`the worker exited (${code}) on ${lastCase()}`))));
    arm();
  });
}

test(`Arrow IPC streams, ${sizes.inProcess} in process: 2xx or 4xx with an error code, no hang, bounded memory`, { timeout: soak ? 7_200_000 : 300_000 }, async (t) => {
  const summary = await fuzzInWorker({ target: sink.url, cases: sizes.inProcess, seed: propertyRuns(1).seed });
  t.diagnostic(summary);
});

test(`Arrow IPC streams, ${sizes.overSockets} over HTTP/2 to fermata serve: the same verdict, and the service survives`, { timeout: soak ? 3_600_000 : 300_000 }, async (t) => {
  const service = await startService(scratch.tempDir('data'), (child) => scratch.children.add(child));
  const seeds = arrowSeeds(sink.url);
  const seed = propertyRuns(1).seed ?? Math.floor(Math.random() * 2 ** 31);
  const cases = fc.sample(arrowCase(seeds.length), { numRuns: sizes.overSockets, seed }).map((fuzzCase) => arrowRequest(fuzzCase, seeds));
  const client = await H2Client.connect(service.url, sizes.requestTimeoutMs);
  try {
    // The fermata-shaped seeds (apache-arrow's and pyarrow's) are valid adds: mutating them explores the accepting path.
    const send = socketSend(client);
    for (const written of seeds.slice(0, writtenSeedCount)) {
      const answer = await send({ headers: { 'content-type': 'application/vnd.apache.arrow.stream' }, body: Buffer.from(written.bytes) });
      assert.equal(answer.status, 201, `seed ${written.name} is a valid add: ${answer.body.toString('utf8').slice(0, 300)}`);
    }
    const tally = new Tally();
    const problems = await sendAll(socketSend(client), cases, tally);
    t.diagnostic(tally.summary(`over sockets (fc.sample seed ${seed})`));
    assert.deepEqual(problems.slice(0, 3), [], `${problems.length} cases failed over sockets (fc.sample seed ${seed}); the first 3 shown`);
    assert.equal(service.child.exitCode, null, `fermata exited:\n${service.output().slice(-2_000)}`);
    assert.equal(service.child.signalCode, null);
    await assertStillAdds(socketSend(client), sink.url);
  } finally {
    client.close();
  }
});
