// Bug B3 (docs/reliability.md), found by test/reliability/ingest-fuzz-arrow.test.ts once B1's
// hangs were stepped around: an Arrow stream whose Utf8/Binary value offsets point past the
// column's data buffer (here one flipped bit in a two-batch stream written by apache-arrow)
// makes engine/batch/arrow-codec.ts throw a RangeError ("offset is out of bounds", from
// Uint8Array.set in copyBytes) instead of a FermataError, so POST /v1/timers answers 500
// INTERNAL where it must answer 400 BATCH_INVALID naming the column. A regression test (fixed: offsets are checked against the values):
//
//   node --test test/reliability/arrow-decode-errors.test.ts
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { batchFromArrow } from '../../engine/batch/arrow-codec.ts';
import { isFermataError } from '../../engine/errors.ts';
import { InProcessApi, problemOf } from '../helpers/fuzz-verdict.ts';

const arrowType = 'application/vnd.apache.arrow.stream';

/** 1,008 bytes: the fuzzer's shrunk case (seed stream two-batches, one bit flipped). */
const offsetsPastTheData = Buffer.from(
  '//////AAAAAQAAAAAAAKABAADgAHAAgACgAAAAAAAAEQAAAAAAAEAAgACAAAAAQACAAAAAQAAAADAAAAeAAAADQAAAAEAAAApP///xQAAAAAAAABGAAAAAAA' +
  'AAQUAAAABwAAAHBheWxvYWQAAAAAANT////Q////FAAAAAAAAAEYAAAAAAAABRgAAAAGAAAAdGFyZ2V0AAAAAAAABAAEAAQAAAAQABgABAALABMAFAAAAAwA' +
  'EAAAABQAAAAAAAABHAAAAAAAAAIgAAAACAAAAGRlbGF5X21zAAAAAAAAAAAIAAwACAAHAAgAAAAAAAABIAAAAAAAAAD/////CAEAABQAAAAAAAAADAAWABQA' +
  'DwAQAAQADAAAAGgAAAAAAAAAAAAAAxAAAAAEAAoAGAAMAAgABAAKAAAAFAAAAJgAAAACAAAAAAAAAAAAAAAIAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA' +
  'CAAAAAAAAAAIAAAAAAAAAAAAAAAAAAAACAAAAAAAAAAQAAAAAAAAABgAAAAAAAAAOAAAAAAAAABQAAAAAAAAAAAAAAAAAAAAUAAAAAAAAAAQAAAAAAAAAGAA' +
  'AAAAAAAACAAAAAAAAAAAAAAAAwAAAAIAAAAAAAAAAAAAAAAAAAACAAAAAAAAAAAAAAAAAAAAAgAAAAAAAAAAAAAAAAAAAIDuNgAA3W0AAAAAABwAAAA4AAAA' +
  'AAAAAGh0dHA6Ly8xMjcuMC4wLjE6NDIwOTcvdHdvLzBodHRwOi8vMTI3LjAuMC4xOjQyMDk3L3R3by8xAAAAAAEBAAABAAAAAAAAAAAAAAAAAAAA/////wgB' +
  'AAAUAAAAAAAAAAwAFgAUAA8AEAAEAAwAAABoAAAAAAAAAAAAAAMQAAAABAAKABgADAAIAAQACgAAABQAAACYAAAAAgAAAAAAAAAAAAAACAAAAAAAAAAAAAAA' +
  'AAAAAAAAAAAAAAAAAAAAAAgAAAAAAAAACAAAAAAAAAAAAAAAAAAAAAgAAAAAAAAAEAAAAAAAAAAYAAAAAAAAADgAAAAAAAAAUAAAAAAAAAAAAAAAAAAAAFAA' +
  'AAAAAAAAEAAAAAAAAABgAAAAAAAAAAgAAAAAAAAAAAAAAAMAAAACAAAAAAAAAAAAAAAAAAAAAgAAAAAAAAAAAAAAAAAAAAIAAAAAAAAAAAAAAAAAAACC7jYA' +
  'At1tAAAAAAAcAAAAOAAAAAAAAABodHRwOi8vMTI3LjAuMC4xOjQyMDk3L3R3by8yaHR0cDovLzEyNy4wLjAuMTo0MjA5Ny90d28vMwAAAAABAAAAAQAAAAAA' +
  'AAACAAAAAAAAAP////8AAAAA',
  'base64',
);

test('B3: value offsets past the data buffer are refused as BATCH_INVALID, in the decoder and over HTTP (400, not 500)', async () => {
  assert.throws(
    () => batchFromArrow(offsetsPastTheData, Date.now()),
    (err: unknown) => isFermataError(err) && err.code === 'BATCH_INVALID',
  );
  const api = new InProcessApi();
  try {
    const answer = await api.send({ headers: { 'content-type': arrowType }, body: offsetsPastTheData });
    assert.equal(problemOf(answer), undefined);
    assert.equal(answer.status, 400, answer.body.toString('utf8'));
  } finally {
    await api.close();
  }
});
