// isoOf (ingest/http/iso-time.ts) writes exactly what Date.prototype.toISOString writes, for any
// epoch ms a Date holds: days before and after 1970, the edges of a day, of the four-digit
// years and past them, and fractions; also once its day cache has started over.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { isoOf } from '../../ingest/http/iso-time.ts';

const day = 86_400_000;
const dateMax = 8.64e15;

test('isoOf is toISOString at the edges', () => {
  const edges = [0, -1, 1, 999, 1000, day - 1, day, -day, -day - 1, 1_796_442_627_930, 951_782_400_000 /* 2000-02-29 */, -62_167_219_200_000, -62_167_219_200_001, 253_402_300_799_999, 253_402_300_800_000, dateMax, -dateMax, 1.5, -1.5];
  for (const ms of edges) assert.equal(isoOf(ms), new Date(ms).toISOString(), `ms ${ms}`);
});

test('isoOf is toISOString for any epoch ms, and after its day cache started over', () => {
  fc.assert(
    fc.property(fc.integer({ min: -dateMax, max: dateMax }), (ms) => isoOf(ms) === new Date(ms).toISOString()),
    { numRuns: 20_000 },
  );
  // More distinct days than the cache holds, then the first of them again.
  for (let n = 0; n < 5000; n++) assert.equal(isoOf(n * day + n), new Date(n * day + n).toISOString());
  assert.equal(isoOf(123), new Date(123).toISOString());
});
