// The engine's columnar batch form: exact round trips (including sliced offsets), and bytes it
// did not write refused with an error, never a crash, a hang or a wrong batch.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { decodeBatch, encodeBatch } from '../../engine/batch/batch-codec.ts';
import { batchFromSpecs, bytesAt, type TimerBatch } from '../../engine/batch/timer-batch.ts';
import { Prng } from '../helpers/prng.ts';

const join = (parts: readonly Uint8Array[]): Uint8Array => Uint8Array.from(parts.flatMap((part) => Array.from(part)));
const text = (bytes: Uint8Array): string => new TextDecoder().decode(bytes);

function rowsOf(batch: TimerBatch): unknown[] {
  return Array.from({ length: batch.rows }, (_, row) => [
    batch.fireAtMs[row],
    batch.targets[batch.targetIndex[row] as number],
    batch.queues[batch.queueIndex[row] as number],
    Array.from(bytesAt(batch.payload, row)),
    text(bytesAt(batch.headers, row)),
    text(bytesAt(batch.keys, row)),
  ]);
}

const sample = batchFromSpecs([
  { fireAtMs: 1_796_220_000_000, target: 'https://a.example/hook', payload: 'hello', key: 'k1', queue: 'billing' },
  { fireAtMs: 0, target: 'https://b.example/ü', payload: Uint8Array.of(0, 255, 7), headers: { 'x-a': '1' } },
  { fireAtMs: 2 ** 47, target: 'https://a.example/hook' },
]);

test('a batch survives the columnar form unchanged, also from a slice of a larger column', () => {
  assert.deepEqual(rowsOf(decodeBatch(join(encodeBatch(sample)))), rowsOf(sample));
  const sliced: TimerBatch = { ...sample, rows: 1, fireAtMs: sample.fireAtMs.subarray(1), targetIndex: sample.targetIndex.subarray(1), queueIndex: sample.queueIndex.subarray(1), payload: { values: sample.payload.values, offsets: sample.payload.offsets.subarray(1) }, headers: { values: sample.headers.values, offsets: sample.headers.offsets.subarray(1) }, keys: { values: sample.keys.values, offsets: sample.keys.offsets.subarray(1) } };
  assert.deepEqual(rowsOf(decodeBatch(join(encodeBatch(sliced)))), rowsOf(sample).slice(1, 2));
});

test('batches wider than the element-by-element path, whole and sliced, survive unchanged', () => {
  const prng = new Prng(7);
  const wide = batchFromSpecs(
    Array.from({ length: 40 }, (_, row) => ({
      fireAtMs: 1_796_220_000_000 + prng.below(1e6),
      target: `https://t${row % 3}.example/`,
      payload: prng.bytes(prng.below(50)),
      ...(row % 2 === 0 ? { key: `key-${row}` } : {}),
      ...(row % 5 === 0 ? { queue: 'other', headers: { 'x-row': String(row) } } : {}),
    })),
  );
  assert.deepEqual(rowsOf(decodeBatch(join(encodeBatch(wide)))), rowsOf(wide));
  const from = 3;
  const sliced: TimerBatch = {
    ...wide,
    rows: 30,
    fireAtMs: wide.fireAtMs.subarray(from),
    targetIndex: wide.targetIndex.subarray(from),
    queueIndex: wide.queueIndex.subarray(from),
    payload: { values: wide.payload.values, offsets: wide.payload.offsets.subarray(from) },
    headers: { values: wide.headers.values, offsets: wide.headers.offsets.subarray(from) },
    keys: { values: wide.keys.values, offsets: wide.keys.offsets.subarray(from) },
  };
  assert.deepEqual(rowsOf(decodeBatch(join(encodeBatch(sliced)))), rowsOf(wide).slice(from, from + 30));
});

test('long byte runs travel as parts of their own and come back intact', () => {
  const large = batchFromSpecs([
    { fireAtMs: 1, target: 'https://a.example/', payload: Uint8Array.from({ length: 10_000 }, (_, i) => i & 0xff) },
    { fireAtMs: 2, target: 'https://a.example/', payload: 'short' },
  ]);
  const parts = encodeBatch(large);
  assert.ok(parts.includes(large.payload.values.subarray(0, large.payload.offsets[2])) || parts.some((part) => part.buffer === large.payload.values.buffer), 'the payload run is not copied');
  assert.deepEqual(rowsOf(decodeBatch(join(parts))), rowsOf(large));
});

test('every truncation and 5,000 random byte changes are refused or decode to a well-formed batch, never a crash', () => {
  const bytes = join(encodeBatch(sample));
  for (let cut = 0; cut < bytes.length; cut++) assert.throws(() => decodeBatch(bytes.subarray(0, cut)), /./, `cut at ${cut}`);
  const prng = new Prng(41);
  for (let i = 0; i < 5_000; i++) {
    const damaged = bytes.slice();
    damaged[prng.below(damaged.length)] = prng.below(256);
    try {
      const batch = decodeBatch(damaged);
      for (let row = 0; row < batch.rows; row++) {
        assert.ok((batch.targetIndex[row] as number) < batch.targets.length);
        bytesAt(batch.payload, row);
      }
    } catch (err) {
      assert.ok(err instanceof RangeError || err instanceof TypeError, String(err));
    }
  }
});

test('batchFromSpecs builds a one-timer batch (its own path) exactly as the same timer inside a larger batch, sharing no memory with the spec', () => {
  const payload = Uint8Array.of(1, 2, 3, 250);
  const specs = [
    { fireAtMs: 1_800_000_000_123, target: 'https://a.example/x', payload, headers: { 'x-a': '1' }, key: 'k-1', queue: 'billing' },
    { fireAtMs: 5, target: 'https://b.example/', payload: 'text payload' },
    { fireAtMs: 6, target: 'https://b.example/' },
  ];
  const row = (batch: TimerBatch, r: number): object => ({
    fireAtMs: batch.fireAtMs[r],
    target: batch.targets[batch.targetIndex[r] as number],
    queue: batch.queues[batch.queueIndex[r] as number],
    payload: Array.from(bytesAt(batch.payload, r)),
    headers: new TextDecoder().decode(bytesAt(batch.headers, r)),
    key: new TextDecoder().decode(bytesAt(batch.keys, r)),
  });
  const many = batchFromSpecs(specs);
  for (const [r, spec] of specs.entries()) {
    const one = batchFromSpecs([spec]);
    assert.equal(one.rows, 1);
    assert.deepEqual(row(one, 0), row(many, r), `timer ${r}`);
    // The same shapes as a larger batch's: offsets from 0, dictionaries of one entry.
    assert.deepEqual([one.targets.length, one.queues.length, one.payload.offsets.length, one.headers.offsets.length, one.keys.offsets.length], [1, 1, 2, 2, 2]);
  }
  const one = batchFromSpecs([specs[0] as (typeof specs)[0]]);
  payload[0] = 99;
  assert.equal(bytesAt(one.payload, 0)[0], 1, 'changing the spec afterwards does not change the batch');
  assert.deepEqual(rowsOf(decodeBatch(join(encodeBatch(one)))), rowsOf(one), 'it survives the columnar form');
});
