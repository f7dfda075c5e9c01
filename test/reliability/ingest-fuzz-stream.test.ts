// Fuzzing POST /v1/timers/stream with NDJSON bodies of mutated timers (test/helpers/fuzz-json.ts:
// wrong types, huge numbers, deep nesting, unicode, repeated fields; cut, joined and flipped
// bytes, bytes that are not UTF-8). In process through fastify's inject() into the service's
// own handler on a simulated disk. Each body must be answered 200 with exactly one answer line
// per line that is not blank (not UTF-8 counts as not blank), in input order, each a 2xx with an
// id or a 4xx with an error code, never a 5xx; afterwards the service still takes a valid add.
//
// Sizes: `npm test` 3,000 bodies (up to 20 lines each); `npm run soak` 200,000.
// The bodies go in a worker thread (stream-fuzz-in-process.ts), where the test runner's async hook
// does not slow every promise.
import { test } from 'node:test';
import { offHarness } from '../helpers/off-harness.ts';
import { propertyRuns } from '../helpers/property.ts';
import { soak } from '../helpers/soak.ts';
import type { StreamFuzzJob } from './stream-fuzz-in-process.ts';

const bodies = soak ? 200_000 : 3_000;

test(`add streams: ${bodies} hostile NDJSON bodies, one answer a line that is not blank, in order, never a 5xx`, { timeout: soak ? 7_200_000 : 300_000 }, async (t) => {
  const job: StreamFuzzJob = { bodies, seed: propertyRuns(bodies).seed };
  t.diagnostic(await offHarness<string>({ module: new URL('./stream-fuzz-in-process.ts', import.meta.url), name: 'fuzzStreamInProcess', input: job }));
});
