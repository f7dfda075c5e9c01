// The body buffer pool (ingest/http/body/body-buffers.ts): a released buffer is lent again, one still
// lent never is, a second release or a foreign buffer changes nothing, the pool keeps few and
// small buffers; and its parser reads a body whole with the errors fastify's own parser gives.
import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import { BodyBuffers, pooledBodyParser } from '../../ingest/http/body/body-buffers.ts';

const view = (memory: ArrayBuffer, length = 10): Buffer => Buffer.from(memory, 0, length);

test('a released buffer is lent again; one still lent, released twice, or not the pool’s is not', () => {
  const pool = new BodyBuffers({ pooledBytesMax: 1 << 20, freeMax: 2 });
  const first = pool.acquire(1000);
  assert.ok(first.byteLength >= 1000);
  const second = pool.acquire(1000);
  assert.notEqual(second, first, 'a lent buffer is not lent twice');
  pool.release(view(first));
  pool.release(view(first));
  assert.equal(pool.freeCount, 1, 'a second release is ignored');
  pool.release(Buffer.alloc(10));
  pool.release(new Uint8Array(new ArrayBuffer(100_000)));
  assert.equal(pool.freeCount, 1, 'buffers the pool did not lend are ignored');
  assert.equal(pool.acquire(900), first, 'the released one is lent again');
  // The most recently released of equal fits comes first.
  const third = pool.acquire(1000);
  pool.release(view(second));
  pool.release(view(third));
  assert.equal(pool.acquire(1000), third);
});

test('the pool keeps at most freeMax buffers, none over pooledBytesMax, and no small body takes a large one', () => {
  const pool = new BodyBuffers({ pooledBytesMax: 1 << 20, freeMax: 2 });
  const lent = [pool.acquire(1000), pool.acquire(1000), pool.acquire(1000)];
  for (const memory of lent) pool.release(view(memory));
  assert.equal(pool.freeCount, 2);
  const large = pool.acquire(2 << 20);
  assert.equal(large.byteLength, 2 << 20, 'over pooledBytesMax: exactly what was asked');
  pool.release(view(large));
  assert.equal(pool.freeCount, 2, 'and not kept');
  const big = new BodyBuffers({ pooledBytesMax: 1 << 20, freeMax: 2 });
  const megabyte = big.acquire(1 << 20);
  big.release(view(megabyte));
  assert.notEqual(big.acquire(100), megabyte, 'a 100-byte body does not hold a 1 MiB buffer');
  assert.equal(big.acquire(300_000), megabyte, 'a body of a quarter of it or more does');
});

interface Parsed {
  readonly err: (Error & { code?: string; statusCode?: number }) | null;
  readonly body: Buffer | undefined;
}

/** Feeds `chunks` to the parser as a request stream; resolves with what it handed fastify. */
function parse(pool: BodyBuffers, limit: number, headers: Record<string, string>, chunks: readonly (Buffer | Error)[]): Promise<Parsed> {
  return new Promise((resolve) => {
    const payload = new PassThrough();
    pooledBodyParser(pool, limit)({ headers }, payload, (err, body) => resolve({ err: err as Parsed['err'], body }));
    for (const chunk of chunks) {
      if (chunk instanceof Error) {
        payload.destroy(chunk);
        return;
      }
      payload.write(chunk);
    }
    payload.end();
  });
}

test('the parser reads a body whole, with or without content-length, growing past its first buffer', async () => {
  const pool = new BodyBuffers({ pooledBytesMax: 8 << 20, freeMax: 4 });
  const parts = [Buffer.alloc(200_000, 1), Buffer.alloc(200_000, 2), Buffer.alloc(5, 3)];
  const whole = Buffer.concat(parts);
  for (const headers of [{ 'content-length': String(whole.length) }, {}]) {
    const { err, body } = await parse(pool, 1 << 20, headers, parts);
    assert.equal(err, null);
    assert.ok(body !== undefined && body.equals(whole), JSON.stringify(headers));
    pool.release(body);
  }
  assert.ok(pool.freeCount >= 1, 'the bodies go back to the pool');
});

test('the parser answers as fastify does: 413 over the limit (declared or sent), 400 on a short body or a failed stream', async () => {
  const pool = new BodyBuffers({ pooledBytesMax: 8 << 20, freeMax: 4 });
  const declared = await parse(pool, 1000, { 'content-length': '1001' }, []);
  assert.equal(declared.err?.code, 'FST_ERR_CTP_BODY_TOO_LARGE');
  const sent = await parse(pool, 1000, {}, [Buffer.alloc(600), Buffer.alloc(600)]);
  assert.equal(sent.err?.code, 'FST_ERR_CTP_BODY_TOO_LARGE');
  assert.equal(sent.err?.statusCode, 413);
  const short = await parse(pool, 1000, { 'content-length': '500' }, [Buffer.alloc(400)]);
  assert.equal(short.err?.code, 'FST_ERR_CTP_INVALID_CONTENT_LENGTH');
  const failed = await parse(pool, 1000, {}, [Buffer.alloc(10), new Error('reset')]);
  assert.equal(failed.err?.message, 'reset');
  assert.equal(failed.err?.statusCode, 400);
  // Three bodies took buffers (a 64 KiB one for the declared 500 bytes; one 256 KiB buffer for
  // the two of unknown length, in turn): both are back in the pool.
  assert.equal(pool.freeCount, 2, 'every buffer a failed body had is back in the pool');
});

test('a declared length takes memory as bytes arrive, not all of it up front', async () => {
  const pool = new BodyBuffers({ pooledBytesMax: 8 << 20, freeMax: 4 });
  const payload = new PassThrough();
  let answered = false;
  pooledBodyParser(pool, 64 << 20)({ headers: { 'content-length': String(64 << 20) } }, payload, () => (answered = true));
  payload.write(Buffer.alloc(10));
  payload.end();
  await new Promise((resolve) => setImmediate(resolve));
  assert.ok(answered);
  // The buffer the parser took (now back in the pool after the short body's 400) is 2 MiB.
  assert.equal(pool.freeCount, 1);
  assert.equal(pool.acquire(1 << 20).byteLength, 2 << 20);
});
