// HistogramRuns (dispatch/histogram-runs.ts) against recording every value one by one: random
// sequences of values (few distinct ones, so runs form) spread over a few histogram pairs,
// including the same histogram as both targets, give histograms with the same counts.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import * as hdr from 'hdr-histogram-js';
import { HistogramRuns } from '../../dispatch/histogram-runs.ts';
import { propertyRuns } from '../helpers/property.ts';

const build = (): hdr.Histogram => hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 3_600_000, numberOfSignificantValueDigits: 3 });

/** The whole distribution, as hdr-histogram-js prints it (every recorded value's count and percentile). */
const countsOf = (histogram: hdr.Histogram): string => `${histogram.totalCount} ${histogram.outputPercentileDistribution(1000)}`;

test('runs of values record what one recordValue each records', () => {
  fc.assert(
    fc.property(
      fc.array(fc.record({ value: fc.constantFrom(0, 1, 2, 3, 7, 1000, 1000.5, 3_599_999), pair: fc.integer({ min: 0, max: 2 }), second: fc.boolean() }), { maxLength: 200 }),
      (entries) => {
        const runs = [build(), build(), build()];
        const each = [build(), build(), build()];
        const recorder = new HistogramRuns();
        for (const { value, pair, second } of entries) {
          // Pair p is histograms p and p+1 (mod 3), or p alone; pair 2 with second is 2 and 0.
          const first = pair;
          const other = second ? (pair + 1) % 3 : undefined;
          recorder.add(value, runs[first] as hdr.Histogram, other === undefined ? undefined : (runs[other] as hdr.Histogram));
          (each[first] as hdr.Histogram).recordValue(value);
          if (other !== undefined) (each[other] as hdr.Histogram).recordValue(value);
        }
        recorder.flush();
        for (let h = 0; h < 3; h++) assert.deepEqual(countsOf(runs[h] as hdr.Histogram), countsOf(each[h] as hdr.Histogram));
      },
    ),
    propertyRuns(200),
  );
});

test('the same histogram as both targets records the value twice', () => {
  const histogram = build();
  const recorder = new HistogramRuns();
  for (let i = 0; i < 5; i++) recorder.add(4, histogram, histogram);
  recorder.flush();
  assert.equal(histogram.totalCount, 10);
  assert.equal(histogram.minNonZeroValue, 4);
  assert.equal(histogram.maxValue, 4);
});

test('a run is recorded at flush, once', () => {
  const histogram = build();
  const recorder = new HistogramRuns();
  recorder.add(9, histogram);
  recorder.add(9, histogram);
  assert.equal(histogram.totalCount, 0, 'nothing is recorded before flush');
  recorder.flush();
  recorder.flush();
  assert.equal(histogram.totalCount, 2);
  assert.equal(histogram.maxValue, 9);
});
