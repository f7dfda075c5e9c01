// Fuzzing POST /v1/timers with JSON and NDJSON bodies mutated from valid timers
// (test/helpers/fuzz-json.ts: wrong types, numbers past double range, deep nesting, unicode,
// missing, extra and repeated fields, cut and flipped bytes). Every answer must pass the verdict
// of test/helpers/fuzz-verdict.ts (a 2xx, or a 4xx with a JSON error code; no 5xx; no hang:
// nothing over 1 s and 20 times its baseline, twice); afterwards the server still takes a valid add.
//
// The bulk goes in process through fastify's inject() into the service's own handler, where
// fast-check runs the cases one by one and shrinks a failure to a small body, printing the seed
// that replays it (FERMATA_PROPERTY_SEED=N); in a worker thread (json-fuzz-in-process.ts), where
// the test runner's async hook does not slow every promise. The rest go over real HTTP/2 sockets
// to a `fermata serve` child, 16 streams at a time, which must still be running at the end.
//
// Sizes: `npm test` 20,000 bodies (18,000 in process + 2,000 over sockets); `npm run soak`
// 1,000,000 (980,000 + 20,000).
import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import fc from 'fast-check';
import { jsonFuzzBody } from '../helpers/fuzz-json.ts';
import { assertStillAdds, sendAll, socketSend, Tally } from '../helpers/fuzz-verdict.ts';
import { H2Client } from '../helpers/h2-client.ts';
import { offHarness } from '../helpers/off-harness.ts';
import { propertyRuns } from '../helpers/property.ts';
import { testScratch } from '../helpers/scratch.ts';
import { startService } from '../helpers/service.ts';
import { startH2Sink } from '../helpers/sinks.ts';
import { soak } from '../helpers/soak.ts';
import { type JsonFuzzJob, requestOf } from './json-fuzz-in-process.ts';

const sizes = {
  inProcess: soak ? 980_000 : 18_000,
  overSockets: soak ? 20_000 : 2_000,
  requestTimeoutMs: 10_000,
} as const;

const scratch = testScratch('fermata-fuzz-json');
const sink = await startH2Sink();
after(() => sink.close());

test(`JSON and NDJSON bodies, ${sizes.inProcess} in process: 2xx or 4xx with an error code, no hang`, { timeout: soak ? 7_200_000 : 300_000 }, async (t) => {
  const job: JsonFuzzJob = { target: sink.url, cases: sizes.inProcess, seed: propertyRuns(sizes.inProcess).seed };
  t.diagnostic(await offHarness<string>({ module: new URL('./json-fuzz-in-process.ts', import.meta.url), name: 'fuzzJsonInProcess', input: job }));
});

test(`JSON and NDJSON bodies, ${sizes.overSockets} over HTTP/2 to fermata serve: the same verdict, and the service survives`, { timeout: soak ? 3_600_000 : 300_000 }, async (t) => {
  const service = await startService(scratch.tempDir('data'), (child) => scratch.children.add(child));
  const seed = propertyRuns(1).seed ?? Math.floor(Math.random() * 2 ** 31);
  const cases = fc.sample(jsonFuzzBody(sink.url), { numRuns: sizes.overSockets, seed }).map(requestOf);
  const client = await H2Client.connect(service.url, sizes.requestTimeoutMs);
  try {
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
