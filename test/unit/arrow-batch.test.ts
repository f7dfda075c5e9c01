// "arrow" delivery's body and batch key (dispatch/arrow-batch.ts), from a task built as the
// dispatcher builds one: every column row-aligned and byte-exact, empty keys and headers null,
// and the batch key the SHA-256 of the ids in order (so a resent batch has the same key).
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { test } from 'node:test';
import { tableFromIPC } from 'apache-arrow';
import { arrowBatchKey, encodeArrowBatch, warmUpArrowEncoder } from '../../dispatch/arrow-batch.ts';
import { taskBuffers } from '../../dispatch/delivery-task.ts';
import { DeliveryTaskBuilder, type TaskTimer } from '../../dispatch/task-builder.ts';
import { encodeTimerId } from '../../engine/ids.ts';
import { defaultQueueConfig } from '../../engine/queues.ts';

const utf8 = new TextEncoder();
const fireAt = 1_796_220_000_000;

/** Runs of four timers with one target (the builder copies a repeated target instead of encoding it again), of two byte lengths. */
const targetOf = (i: number): string => `https://t${Math.floor(i / 4) % 3}.example/${i % 8 < 4 ? 'hook' : 'crochet-é'}`;

/** Payload, headers and key back to back, as a task timer carries them (the store's layout). */
function timerBytes(payload: Uint8Array, headers: Uint8Array, key: Uint8Array): Pick<TaskTimer, 'bytes' | 'bytesStart' | 'payloadLength' | 'headersLength' | 'keyLength'> {
  return { bytes: Buffer.concat([payload, headers, key]), bytesStart: 0, payloadLength: payload.length, headersLength: headers.length, keyLength: key.length };
}

function task(count: number) {
  // A small first buffer, so the builder also grows it.
  const builder = new DeliveryTaskBuilder(count, 'http://127.0.0.1:1/ingest', 64);
  for (let i = 0; i < count; i++) {
    builder.add({
      seq: 7 + i,
      row: i * 3,
      target: targetOf(i),
      ...timerBytes(
        Uint8Array.from({ length: i * 5 }, (_, j) => (i + j) & 0xff),
        i % 2 === 0 ? utf8.encode(`{"x-n":"${i}"}`) : new Uint8Array(0),
        i % 3 === 0 ? new Uint8Array(0) : utf8.encode(`key-${i}`),
      ),
      fireAtMs: fireAt + i,
      attempt: 1 + (i % 4),
      timeoutMs: 1000,
      policy: defaultQueueConfig,
    });
  }
  return builder.finish().task;
}

test('every column row-aligned and byte-exact; empty keys and headers are null', () => {
  const count = 37;
  const table = tableFromIPC(encodeArrowBatch(task(count)));
  assert.equal(table.numRows, count);
  for (let i = 0; i < count; i++) {
    assert.equal(table.getChild('id')?.get(i), encodeTimerId(7 + i, i * 3, fireAt + i));
    assert.equal(Number(table.getChild('fire_at')?.get(i)), fireAt + i);
    assert.equal(table.getChild('attempt')?.get(i), 1 + (i % 4));
    assert.equal(table.getChild('target')?.get(i), targetOf(i));
    assert.equal(table.getChild('key')?.get(i), i % 3 === 0 ? null : `key-${i}`);
    assert.deepEqual(Array.from(table.getChild('payload')?.get(i) as Uint8Array), Array.from({ length: i * 5 }, (_, j) => (i + j) & 0xff));
    assert.equal(table.getChild('headers')?.get(i), i % 2 === 0 ? `{"x-n":"${i}"}` : null);
  }
});

test('the batch key is the SHA-256 of the ids in order', () => {
  const count = 20;
  const hash = createHash('sha256');
  for (let i = 0; i < count; i++) hash.update(encodeTimerId(7 + i, i * 3, fireAt + i));
  assert.equal(arrowBatchKey(task(count)), `batch_${hash.digest('base64url').slice(0, 32)}`);
  assert.notEqual(arrowBatchKey(task(count)), arrowBatchKey(task(count - 1)));
});

test('the body is a copy: a worker may hand the task\'s buffers back once it is encoded', () => {
  const built = task(25);
  const body = encodeArrowBatch(built);
  const before = Buffer.from(body);
  for (const buffer of taskBuffers(built)) new Uint8Array(buffer).fill(0xee);
  assert.ok(Buffer.from(body).equals(before), 'the body did not change with the task\'s buffers');
  assert.equal(tableFromIPC(body).getChild('id')?.get(3), encodeTimerId(10, 9, fireAt + 3));
});

test('payloads back to back in one buffer, and repeated targets, are copied joined, byte-exact, by flush()', () => {
  // 300 payloads of 1–9 bytes back to back in one buffer, as a batch's rows lie in the store's
  // arena; every 7th timer has headers and a key after its payload (which ends a joined run), and
  // the target changes every 50 timers. A 16-byte first payload buffer grows while bytes are owed.
  const count = 300;
  const lengthOf = (i: number): number => 1 + (i % 9);
  const extraOf = (i: number): Uint8Array => (i % 7 === 3 ? utf8.encode(`{"x":"${i}"}k${i}`) : new Uint8Array(0));
  const source = new Uint8Array(count * 40);
  const starts: number[] = [];
  let at = 0;
  for (let i = 0; i < count; i++) {
    starts.push(at);
    for (let j = 0; j < lengthOf(i); j++) source[at++] = (i * 13 + j) & 0xff;
    source.set(extraOf(i), at);
    at += extraOf(i).length;
  }
  const targetOfRow = (i: number): string => `https://run${Math.floor(i / 50)}.example/${'p'.repeat(i % 3 === 0 && i < 50 ? 0 : 5)}`;
  const builder = new DeliveryTaskBuilder(count, 'http://127.0.0.1:1/ingest', 16);
  for (let i = 0; i < count; i++) {
    const extra = extraOf(i).length;
    builder.add({
      seq: 1,
      row: i,
      target: targetOfRow(i),
      bytes: source,
      bytesStart: starts[i] as number,
      payloadLength: lengthOf(i),
      headersLength: extra === 0 ? 0 : extra - `k${i}`.length,
      keyLength: extra === 0 ? 0 : `k${i}`.length,
      fireAtMs: fireAt,
      attempt: 1,
      timeoutMs: 1000,
      policy: defaultQueueConfig,
    });
    // What is flushed is copied: the source may change after it. Flushed in the middle of a
    // target's run too (rows 100–149 share one), whose repeats then go on after the flush.
    if (i === 149 || i === 124 || i === 125) {
      builder.flush();
      source.fill(0xee, 0, starts[i + 1] as number);
    }
  }
  const table = tableFromIPC(encodeArrowBatch(builder.finish().task));
  assert.equal(table.numRows, count);
  for (let i = 0; i < count; i++) {
    assert.deepEqual(Array.from(table.getChild('payload')?.get(i) as Uint8Array), Array.from({ length: lengthOf(i) }, (_, j) => (i * 13 + j) & 0xff), `payload ${i}`);
    assert.equal(table.getChild('target')?.get(i), targetOfRow(i), `target ${i}`);
    assert.equal(table.getChild('key')?.get(i), i % 7 === 3 ? `k${i}` : null, `key ${i}`);
    assert.equal(table.getChild('headers')?.get(i), i % 7 === 3 ? `{"x":"${i}"}` : null, `headers ${i}`);
  }
});

test('a task carries its timers\' latest notBeforeMs and longest timeoutMs (an Arrow batch waits for the one and allows the other)', () => {
  const builder = new DeliveryTaskBuilder(3, 'http://127.0.0.1:1/ingest');
  const bytes = new Uint8Array(4);
  const rows: Array<{ notBeforeMs: number; timeoutMs: number }> = [
    { notBeforeMs: fireAt + 30, timeoutMs: 500 },
    { notBeforeMs: fireAt + 90, timeoutMs: 250 },
    { notBeforeMs: fireAt + 10, timeoutMs: 2000 },
  ];
  rows.forEach(({ notBeforeMs, timeoutMs }, row) =>
    builder.add({ seq: 1, row, target: 'https://t.example/', bytes, bytesStart: 0, payloadLength: 4, headersLength: 0, keyLength: 0, fireAtMs: fireAt, notBeforeMs, attempt: 1, timeoutMs, policy: defaultQueueConfig }),
  );
  const task = builder.finish().task;
  assert.equal(task.notBeforeMsMax, fireAt + 90);
  assert.equal(task.timeoutMsMax, 2000);
});

test('the worker\'s warm-up encodes a whole made-up batch through the same code, with nothing of a real timer\'s', () => {
  const table = tableFromIPC(warmUpArrowEncoder());
  assert.equal(table.numRows, 1024);
  assert.deepEqual(table.schema.fields.map((field) => field.name), ['id', 'fire_at', 'attempt', 'target', 'key', 'payload', 'headers']);
  for (const row of [0, 511, 1023]) {
    assert.equal(table.getChild('target')?.get(row), 'http://warm-up.invalid/', 'a target that names no host');
    assert.equal((table.getChild('payload')?.get(row) as Uint8Array).length, 128);
    assert.equal(table.getChild('key')?.get(row), null);
    assert.equal(table.getChild('attempt')?.get(row), 1);
  }
});
