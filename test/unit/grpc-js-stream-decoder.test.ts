// grpc-js's StreamDecoder as patches/@grpc+grpc-js+1.14.7.patch leaves it (decision 0030): a
// message whole within a chunk comes out as a view of the chunk instead of a copy, and every
// other way a message can arrive (split anywhere, several to a chunk, empty) still comes out
// byte for byte, the size limit still refused.
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { test } from 'node:test';

type Decoder = { write(data: Buffer): Buffer[] };
const { StreamDecoder } = createRequire(import.meta.url)('@grpc/grpc-js/build/src/stream-decoder.js') as { StreamDecoder: new (maxReadMessageLength: number) => Decoder };

/** A gRPC message as HTTP/2 carries it: flag, big-endian length, the bytes. */
function framed(body: Buffer): Buffer {
  const frame = Buffer.alloc(5 + body.length);
  frame.writeUInt32BE(body.length, 1);
  body.copy(frame, 5);
  return frame;
}

const bodies = [Buffer.from('first message'), Buffer.alloc(0), Buffer.alloc(300, 7), Buffer.from('last')];
/** The stream in memory of its own (Buffer.alloc: not the pool a copy would come from). */
const stream = Buffer.alloc(bodies.reduce((sum, body) => sum + 5 + body.length, 0));
Buffer.concat(bodies.map(framed)).copy(stream);

test('messages whole within a chunk come out as views of it, byte for byte', () => {
  const decoder = new StreamDecoder(-1);
  const messages = decoder.write(stream);
  assert.deepEqual(messages, bodies.map(framed));
  for (const message of messages) assert.equal(message.buffer, stream.buffer, 'a view of the chunk, not a copy');
});

test('a stream cut at every byte decodes to the same messages', () => {
  for (let cut = 1; cut < stream.length; cut++) {
    const decoder = new StreamDecoder(-1);
    const messages = [...decoder.write(stream.subarray(0, cut)), ...decoder.write(stream.subarray(cut))];
    assert.deepEqual(messages, bodies.map(framed), `cut at ${cut}`);
  }
});

test('a stream fed a byte at a time decodes to the same messages', () => {
  const decoder = new StreamDecoder(-1);
  const messages: Buffer[] = [];
  for (let at = 0; at < stream.length; at++) messages.push(...decoder.write(stream.subarray(at, at + 1)));
  assert.deepEqual(messages, bodies.map(framed));
});

test('a message over the limit is refused, whole in the chunk or not', () => {
  assert.throws(() => new StreamDecoder(100).write(framed(Buffer.alloc(101))), /larger than max \(101 vs 100\)/);
  assert.throws(() => new StreamDecoder(100).write(framed(Buffer.alloc(101)).subarray(0, 5)), /larger than max \(101 vs 100\)/);
  assert.equal(new StreamDecoder(100).write(framed(Buffer.alloc(100))).length, 1);
});
