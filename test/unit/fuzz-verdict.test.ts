// The fuzz tests' hang verdict (test/helpers/fuzz-verdict.ts): a case slow twice is a problem
// only when it is many times its baseline (a trivial request right after it, and its body's
// JSON.parse), so a loaded machine, which slows every answer alike, fails no case, and a body
// that keeps the handler busy does.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type FuzzAnswer, type FuzzRequest, judged, Tally } from '../helpers/fuzz-verdict.ts';

const refused: Omit<FuzzAnswer, 'elapsedMs'> = { status: 400, contentType: 'application/json', body: Buffer.from('{"error":{"code":"BATCH_INVALID","message":"no"}}') };
const trivial = (request: FuzzRequest): boolean => request.body.toString() === '{}';
const hostile: FuzzRequest = { headers: { 'content-type': 'application/json' }, body: Buffer.from('[[[[[[') };

test('a body answered slowly twice while a trivial request is fast is a hang', async () => {
  const tally = new Tally();
  const problem = await judged(async (request) => ({ ...refused, elapsedMs: trivial(request) ? 2 : 1_500 }), hostile, tally);
  assert.match(problem ?? '', /answered in 1500 ms twice .* \d+ times its baseline's 2\.\d ms/);
});

test('every answer slow alike (the machine, not the body): no problem, counted as such', async () => {
  const tally = new Tally();
  const problem = await judged(async () => ({ ...refused, elapsedMs: 1_500 }), hostile, tally);
  assert.equal(problem, undefined);
  assert.equal(tally.slowOnce, 1);
  assert.equal(tally.slowWithMachine, 1);
});

test('slow once, then fast: no problem', async () => {
  const tally = new Tally();
  let calls = 0;
  const problem = await judged(async () => ({ ...refused, elapsedMs: calls++ === 0 ? 1_500 : 3 }), hostile, tally);
  assert.equal(problem, undefined);
  assert.equal(tally.slowWithMachine, 0);
});
