// The RESCHEDULE record's bytes (docs/format/engine-records.md, "RESCHEDULE (8)"): the worked
// examples (a fire time and payload; a callback) as golden copies, a round trip of every field, and the malformed bodies replay refuses;
// and the manifest's list of rescheduled timers (docs/format/spill.md) that checkpoints keep.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { decodeReschedule, encodeReschedule, rescheduleChanged, rescheduleFixedBytes, type RescheduleRecord } from '../../engine/records.ts';
import { callbackBytesOf, failureCallbackBytesOf, packCallbacks } from '../../engine/store/callback-bytes.ts';
import { decodeManifest, encodeManifest, type Manifest } from '../../engine/spill/manifest.ts';
import type { RunMeta } from '../../engine/spill/run-meta.ts';

const hex = (text: string): Uint8Array => Uint8Array.from(text.split(/\s+/).filter(Boolean), (byte) => Number.parseInt(byte, 16));

// The worked example, byte for byte as the doc prints it.
const golden = hex(`
  01 09 00 00 02 00 00 00  00 00 00 00 00 00 1c 40
  00 00 00 c5 85 31 7a 42  02 00 00 00 00 00 00 00
  00 00 a6 d3 85 31 7a 42  02 00 00 00 68 69
`);

const example: RescheduleRecord = {
  seq: 7,
  row: 2,
  bucketAtMs: 1_800_000_000_000,
  revision: 2,
  changed: rescheduleChanged.fireAt | rescheduleChanged.payload,
  fireAtMs: 1_800_000_060_000,
  payload: new TextEncoder().encode('hi'),
};

test('the worked example encodes to the documented 46 bytes and decodes back', () => {
  const bytes = encodeReschedule(example);
  assert.deepEqual(bytes, golden);
  const decoded = decodeReschedule(golden);
  assert.ok(decoded !== undefined);
  assert.deepEqual({ ...decoded, payload: [...(decoded.payload ?? [])] }, { ...example, payload: [...(example.payload ?? [])] });
});

// The second worked example: a PATCH that sets only the callback.
const goldenCallbacks = hex(`
  01 20 00 00 02 00 00 00  00 00 00 00 00 00 1c 40
  00 00 a6 d3 85 31 7a 42  03 00 00 00 00 00 00 00
  00 00 a6 d3 85 31 7a 42  18 00 00 00 14 00 00 00
  68 74 74 70 73 3a 2f 2f  72 2e 65 78 61 6d 70 6c
  65 2f 63 62
`);

const callbacksExample: RescheduleRecord = {
  seq: 7,
  row: 2,
  bucketAtMs: 1_800_000_060_000,
  revision: 3,
  changed: rescheduleChanged.callbacks,
  fireAtMs: 1_800_000_060_000,
  callbacks: packCallbacks(new TextEncoder().encode('https://r.example/cb'), new Uint8Array(0)),
};

test('the callbacks example encodes to the documented 68 bytes and decodes back; the first example is unchanged by the new bit', () => {
  assert.deepEqual(encodeReschedule(callbacksExample), goldenCallbacks);
  const decoded = decodeReschedule(goldenCallbacks);
  assert.ok(decoded !== undefined && decoded.callbacks !== undefined);
  assert.equal(new TextDecoder().decode(callbackBytesOf(decoded.callbacks)), 'https://r.example/cb');
  assert.equal(failureCallbackBytesOf(decoded.callbacks).length, 0);
  assert.equal(decodeReschedule(golden)?.callbacks, undefined, 'a record without bit 32 leaves the callbacks alone');
  // Both removed: an empty run.
  const removed = decodeReschedule(encodeReschedule({ ...callbacksExample, callbacks: new Uint8Array(0) }));
  assert.equal(removed?.callbacks?.length, 0);
  for (let length = rescheduleFixedBytes; length < goldenCallbacks.length; length++) assert.equal(decodeReschedule(goldenCallbacks.subarray(0, length)), undefined, `cut to ${length} bytes`);
  // A run whose lengths do not add up to its field's.
  const lying = goldenCallbacks.slice();
  lying[44] = 0x13;
  assert.equal(decodeReschedule(lying), undefined, 'a callbacks run that is not whole');
});

test('every field round-trips, in bit order, with empty values kept', () => {
  const record: RescheduleRecord = {
    seq: 2 ** 40,
    row: 16_777_215,
    bucketAtMs: 1_900_000_000_000,
    revision: 9,
    changed: 63,
    fireAtMs: 1_900_000_000_001,
    target: 'https://é.example/x',
    queue: 'mail',
    payload: new Uint8Array(0),
    headers: new TextEncoder().encode('{"x-a":"1"}'),
    callbacks: packCallbacks(new TextEncoder().encode('https://cb.example/a'), new TextEncoder().encode('https://cb.example/b')),
  };
  const decoded = decodeReschedule(encodeReschedule(record));
  assert.ok(decoded !== undefined);
  assert.equal(decoded.target, record.target);
  assert.equal(decoded.queue, 'mail');
  assert.equal(decoded.payload?.length, 0);
  assert.equal(new TextDecoder().decode(decoded.headers), '{"x-a":"1"}');
  assert.equal(new TextDecoder().decode(failureCallbackBytesOf(decoded.callbacks ?? new Uint8Array(0))), 'https://cb.example/b');
  assert.deepEqual([decoded.seq, decoded.row, decoded.revision, decoded.changed, decoded.fireAtMs, decoded.bucketAtMs], [2 ** 40, 16_777_215, 9, 63, 1_900_000_000_001, 1_900_000_000_000]);
});

test('malformed bodies are refused: every cut, a bad version, changed, revision, reserved bytes, trailing bytes', () => {
  for (let length = 0; length < golden.length; length++) assert.equal(decodeReschedule(golden.subarray(0, length)), undefined, `cut to ${length} bytes`);
  const altered = (at: number, value: number): Uint8Array => {
    const copy = golden.slice();
    copy[at] = value;
    return copy;
  };
  assert.equal(decodeReschedule(altered(0, 2)), undefined, 'version 2');
  assert.equal(decodeReschedule(altered(1, 0)), undefined, 'nothing changed');
  assert.equal(decodeReschedule(altered(1, 0x49)), undefined, 'an unknown bit');
  assert.equal(decodeReschedule(altered(2, 1)), undefined, 'reserved u16');
  assert.equal(decodeReschedule(altered(24, 1)), undefined, 'revision 1');
  assert.equal(decodeReschedule(altered(28, 1)), undefined, 'reserved u32');
  assert.equal(decodeReschedule(Uint8Array.from([...golden, 0])), undefined, 'a byte after the last field');
  assert.throws(() => encodeReschedule({ ...example, revision: 1 }));
  assert.throws(() => encodeReschedule({ ...example, changed: 0 }));
});

test('the manifest keeps the rescheduled timers (seq, row, revision, fire time); none leaves the bytes as before; a bad entry is SPILL_CORRUPT', () => {
  const run: RunMeta = { runId: 1, version: 2, stamp: 5, bucketWidthMs: 3_600_000, rows: 0, bytes: 600, headBytes: 500, headCrc32: 1, tailOffset: 500, tailCrc32: 2, keysBytes: 32, buckets: [] };
  const base: Manifest = {
    checkpointSeq: 5,
    watermarkMs: Infinity,
    releasedExpiryMaxMs: -Infinity,
    nextRunId: 2,
    residentRun: run,
    spilledRuns: [],
    queues: [],
    tombstones: { seqs: new Float64Array(0), rows: new Uint32Array(0), fireAtMs: new Float64Array(0) },
  };
  const rescheduled = { seqs: Float64Array.of(3, 4), rows: Uint32Array.of(1, 0), revisions: Uint32Array.of(2, 7), fireAtMs: Float64Array.of(1_800_000_060_000, 1_800_000_000_000) };
  const decoded = decodeManifest(encodeManifest({ ...base, rescheduled }));
  assert.deepEqual(decoded.rescheduled, rescheduled);
  const none = encodeManifest(base);
  assert.deepEqual(encodeManifest({ ...base, rescheduled: { seqs: new Float64Array(0), rows: new Uint32Array(0), revisions: new Uint32Array(0), fireAtMs: new Float64Array(0) } }), none);
  assert.equal(decodeManifest(none).rescheduled?.seqs.length, 0);
  assert.throws(() => encodeManifest({ ...base, rescheduled: { ...rescheduled, revisions: Uint32Array.of(1, 7) } }), /rescheduled entry 0/);
});
