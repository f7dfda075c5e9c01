// TimerStream (ingest/http/timer-stream.ts) on in-memory streams with a coalescer that
// answers only when told: a stream stops reading at linesInFlightMax unanswered lines and at
// an answer nobody reads, and reads on once there is room; answers leave in input order
// whatever order the admits end in; lines split across chunks are lines.
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { setImmediate as turn } from 'node:timers/promises';
import { test } from 'node:test';
import type { AdmitWaiter } from '../../engine/admit-coalescer.ts';
import type { TimerSpec } from '../../engine/batch/timer-batch.ts';
import { systemClock } from '../../engine/engine.ts';
import { streamLimits } from '../../ingest/http/route-limits.ts';
import { TimerStream } from '../../ingest/http/timer-stream.ts';

/** Holds every admit until the test answers it. */
class HeldAdmits {
  readonly held: { spec: TimerSpec; waiter: AdmitWaiter }[] = [];

  admitOneTo(spec: TimerSpec, waiter: AdmitWaiter): void {
    this.held.push({ spec, waiter });
  }

  /** Answers the held admits at these positions (ids name the position). */
  answer(positions: Iterable<number>): void {
    for (const at of positions) this.held[at]?.waiter.admitted(`id-${at}`, false, undefined);
  }
}

const line = (n: number): string => `${JSON.stringify({ fire_at: 1_900_000_000_000 + n, target: 'https://a.example/hook' })}\n`;

function open(): { body: PassThrough; out: PassThrough; admits: HeldAdmits; ended: { value: boolean } } {
  const body = new PassThrough();
  const out = new PassThrough({ highWaterMark: 1024 * 1024 });
  const admits = new HeldAdmits();
  const ended = { value: false };
  new TimerStream(body, out, admits, systemClock, () => (ended.value = true), (err) => assert.fail(`unexpected: ${String(err)}`));
  return { body, out, admits, ended };
}

/** Everything written to the answer so far. */
function readAll(out: PassThrough): string {
  let text = '';
  for (let chunk = out.read() as Buffer | null; chunk !== null; chunk = out.read() as Buffer | null) text += chunk.toString();
  return text;
}

/** Every answer line written so far. */
function answersIn(out: PassThrough): { line: number; id: string }[] {
  return readAll(out)
    .split('\n')
    .filter((part) => part !== '')
    .map((part) => JSON.parse(part) as { line: number; id: string });
}

test('a stream stops reading at linesInFlightMax unanswered lines and reads on once answers make room', async () => {
  const { body, admits, out } = open();
  const sent = streamLimits.linesInFlightMax + 1000;
  // One chunk a line, as an HTTP/2 client's writes arrive.
  for (let n = 0; n < sent; n++) body.write(line(n));
  for (let i = 0; i < 10; i++) await turn();
  assert.equal(admits.held.length, streamLimits.linesInFlightMax, 'no line past the limit is read while none is answered');
  assert.ok(body.isPaused());
  admits.answer(Array.from({ length: 600 }, (_, at) => at));
  for (let i = 0; i < 10; i++) await turn();
  assert.equal(admits.held.length, streamLimits.linesInFlightMax + 600, 'each answer makes room for one more line');
  assert.equal(answersIn(out).length, 600);
});

test('answers leave in input order whatever order the admits end in; a line split across chunks is one line', async () => {
  const { body, admits, out, ended } = open();
  const text = [0, 1, 2, 3].map(line).join('');
  // Cut inside the second and the fourth lines.
  for (const part of [text.slice(0, 70), text.slice(70, 150), text.slice(150)]) body.write(part);
  body.end();
  for (let i = 0; i < 5; i++) await turn();
  assert.equal(admits.held.length, 4);
  assert.deepEqual(admits.held.map((held) => held.spec.fireAtMs), [0, 1, 2, 3].map((n) => 1_900_000_000_000 + n));
  admits.answer([2, 3]);
  await turn();
  assert.deepEqual(answersIn(out), [], 'lines 3 and 4 wait for lines 1 and 2');
  admits.answer([1]);
  await turn();
  assert.deepEqual(answersIn(out), [], 'line 2 waits for line 1');
  admits.answer([0]);
  await turn();
  assert.deepEqual(answersIn(out).map((answer) => [answer.line, answer.id]), [[1, 'id-0'], [2, 'id-1'], [3, 'id-2'], [4, 'id-3']]);
  assert.equal(ended.value, true, 'every line answered and the body ended: the stream is done');
});

test('a client that does not read the answer holds the stream back from reading more', async () => {
  const body = new PassThrough();
  // An answer with room for a few lines only.
  const out = new PassThrough({ highWaterMark: 1024, readableHighWaterMark: 1024 });
  const admits = new HeldAdmits();
  new TimerStream(body, out, admits, systemClock, () => undefined, (err) => assert.fail(`unexpected: ${String(err)}`));
  for (let n = 0; n < 200; n++) body.write(line(n));
  for (let i = 0; i < 5; i++) await turn();
  assert.equal(admits.held.length, 200);
  admits.answer(Array.from({ length: 200 }, (_, at) => at));
  // The 200 answers go out together, filling the answer past its high-water mark.
  await turn();
  for (let n = 200; n < 400; n++) body.write(line(n));
  for (let i = 0; i < 5; i++) await turn();
  // The check follows each chunk read: the one being read when the answer filled is finished.
  assert.equal(admits.held.length, 201, 'the answers are not read: no more lines are');
  assert.ok(body.isPaused());
  out.resume();
  for (let i = 0; i < 10; i++) await turn();
  assert.equal(admits.held.length, 400, 'once they are read, the stream reads on');
});

test('an admit that fails for a bug is answered 500 INTERNAL without its text, and logged; the stream goes on', async () => {
  const body = new PassThrough();
  const out = new PassThrough();
  const admits = new HeldAdmits();
  const logged: unknown[] = [];
  new TimerStream(body, out, admits, systemClock, () => undefined, (err) => logged.push(err));
  body.write(line(0) + line(1));
  for (let i = 0; i < 5; i++) await turn();
  const bug = new TypeError('secret internals');
  admits.held[0]?.waiter.refused(bug);
  admits.answer([1]);
  await turn();
  const text = readAll(out).trimEnd().split('\n');
  const first = JSON.parse(text[0] ?? '') as { line: number; status: number; error: { code: string; message: string } };
  assert.deepEqual([first.line, first.status, first.error.code], [1, 500, 'INTERNAL']);
  assert.doesNotMatch(first.error.message, /secret/);
  assert.deepEqual(logged, [bug]);
  assert.equal((JSON.parse(text[1] ?? '') as { status: number }).status, 201);
});

test('answers that become known together leave in one write', async () => {
  const body = new PassThrough();
  const out = new PassThrough({ highWaterMark: 1024 * 1024 });
  let writes = 0;
  const write = out.write.bind(out);
  out.write = ((chunk: unknown, ...rest: never[]) => {
    writes++;
    return write(chunk as Buffer, ...rest);
  }) as typeof out.write;
  const admits = new HeldAdmits();
  new TimerStream(body, out, admits, systemClock, () => undefined, (err) => assert.fail(`unexpected: ${String(err)}`));
  body.write(Array.from({ length: 100 }, (_, n) => line(n)).join(''));
  for (let i = 0; i < 5; i++) await turn();
  admits.answer(Array.from({ length: 100 }, (_, at) => at));
  await turn();
  assert.equal(writes, 1, 'a record of 100 admits is answered in one write');
  assert.equal(answersIn(out).length, 100);
});
