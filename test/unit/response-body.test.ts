// readResponseBody (dispatch/response-body.ts): the first bytes of a target's answer for a
// callback, bounded in bytes and in time, and never an error of its own.
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import { readResponseBody } from '../../dispatch/response-body.ts';

test('an answer longer than the bound is cut there, and the rest is drained', async () => {
  const body = new PassThrough();
  const read = readResponseBody(body, 64 * 1024, 5_000);
  for (let i = 0; i < 10; i++) body.write(Buffer.alloc(10 * 1024, i));
  body.end();
  const bytes = await read;
  assert.equal(bytes.length, 64 * 1024);
  assert.equal(bytes[0], 0);
  assert.equal(bytes[64 * 1024 - 1], 6, 'in order: the seventh chunk is the last one kept');
  assert.equal(body.readableFlowing, true, 'the rest flows on, unread');
});

test('a short answer is whole; one that stalls or fails gives what came', async () => {
  const whole = new PassThrough();
  const wholeRead = readResponseBody(whole, 64 * 1024, 5_000);
  whole.end('thanks');
  assert.equal(Buffer.from(await wholeRead).toString(), 'thanks');

  const stalled = new PassThrough();
  const stalledRead = readResponseBody(stalled, 64 * 1024, 50);
  stalled.write('par');
  const started = Date.now();
  assert.equal(Buffer.from(await stalledRead).toString(), 'par');
  assert.ok(Date.now() - started < 2_000, 'bounded by the wait');

  const failed = new PassThrough();
  const failedRead = readResponseBody(failed, 64 * 1024, 5_000);
  failed.write('half');
  await new Promise((resolve) => setImmediate(resolve));
  failed.destroy(new Error('reset'));
  assert.equal(Buffer.from(await failedRead).toString(), 'half');
});
