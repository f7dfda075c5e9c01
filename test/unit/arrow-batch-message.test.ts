// engine/arrow-batch-message.ts: a record batch message written from column buffers is, byte for
// byte, the one apache-arrow's own stream writer makes of the same columns (nulls, empty
// validity, variable-width, 64-bit and odd-sized buffers that need padding), and a stream of the
// writer's schema message, such messages and the end reads back as the same rows.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Binary, Field, makeData, RecordBatch, Schema, Struct, Table, tableFromIPC, tableToIPC, Timestamp, TimeUnit, Uint16, Utf8 } from 'apache-arrow';
import { recordBatchMessage } from '../../engine/arrow-batch-message.ts';

const schema = new Schema([
  new Field('name', new Utf8(), false),
  new Field('at', new Timestamp(TimeUnit.MILLISECOND, 'UTC'), true),
  new Field('status', new Uint16(), true),
  new Field('payload', new Binary(), false),
]);
const endOfStream = Uint8Array.of(0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0);

function bytes(values: Int32Array | Uint16Array | BigInt64Array): Uint8Array {
  return new Uint8Array(values.buffer, values.byteOffset, values.byteLength);
}

/** Three rows: a null time and status on row 1, an empty payload on row 2. */
function columns() {
  const encoder = new TextEncoder();
  const names = encoder.encode('alphabetagamma!');
  return {
    rows: 3,
    names,
    nameOffsets: Int32Array.of(0, 5, 9, 15),
    at: BigInt64Array.of(1_796_220_000_000n, 0n, 1_796_220_000_007n),
    atValid: Uint8Array.of(0b101),
    status: Uint16Array.of(200, 0, 503),
    payload: Uint8Array.of(1, 2, 3, 4, 5, 6, 7),
    payloadOffsets: Int32Array.of(0, 3, 7, 7),
  };
}

test('a record batch message is the bytes apache-arrow writes for the same columns', () => {
  const c = columns();
  const children = [
    makeData({ type: new Utf8(), length: c.rows, valueOffsets: c.nameOffsets, data: c.names }),
    makeData({ type: new Timestamp(TimeUnit.MILLISECOND, 'UTC'), length: c.rows, data: c.at, nullBitmap: c.atValid, nullCount: 1 }),
    makeData({ type: new Uint16(), length: c.rows, data: c.status, nullBitmap: c.atValid, nullCount: 1 }),
    makeData({ type: new Binary(), length: c.rows, valueOffsets: c.payloadOffsets, data: c.payload }),
  ];
  const batch = new RecordBatch(schema, makeData({ type: new Struct(schema.fields), length: c.rows, nullCount: 0, children }));
  const stream = tableToIPC(new Table([batch]), 'stream');
  const schemaOnly = tableToIPC(new Table(schema), 'stream');
  const theirs = stream.subarray(schemaOnly.length - endOfStream.length, stream.length - endOfStream.length);

  const ours = recordBatchMessage(c.rows, [
    { nullCount: 0, buffers: [new Uint8Array(0), bytes(c.nameOffsets), c.names] },
    { nullCount: 1, buffers: [c.atValid, bytes(c.at)] },
    { nullCount: 1, buffers: [c.atValid, bytes(c.status)] },
    { nullCount: 0, buffers: [new Uint8Array(0), bytes(c.payloadOffsets), c.payload] },
  ]);
  assert.deepEqual(Buffer.from(ours), Buffer.from(theirs));
  assert.equal(ours.length % 8, 0, 'a message ends on an 8-byte boundary');

  const table = tableFromIPC(Buffer.concat([schemaOnly.subarray(0, schemaOnly.length - endOfStream.length), ours, ours, endOfStream]));
  assert.equal(table.numRows, 6);
  assert.deepEqual(table.getChild('name')?.toArray(), ['alpha', 'beta', 'gamma!', 'alpha', 'beta', 'gamma!']);
  assert.deepEqual([...(table.getChild('status') ?? [])], [200, null, 503, 200, null, 503]);
  assert.deepEqual([...(table.getChild('at') ?? [])].slice(0, 3), [1_796_220_000_000, null, 1_796_220_000_007]);
  assert.deepEqual(
    [...(table.getChild('payload') ?? [])].map((value) => [...(value as Uint8Array)]),
    [[1, 2, 3], [4, 5, 6, 7], [], [1, 2, 3], [4, 5, 6, 7], []],
  );
});
