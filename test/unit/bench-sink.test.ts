// loadgen/sink.ts counts a delivery as early by the wall clock, the clock fermata's "never early"
// is stated in and its workers check before sending; the monotonic clock, which drifts from the
// wall clock by a millisecond or more while NTP slews it, only measures how late it was.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { countArrival, newTally } from '../../loadgen/sink.ts';

const fireAtMs = 1_796_400_000_000;
const headers = { 'fermata-fire-at': String(fireAtMs) };

test('sent at its fire time by the wall clock, it is not early, whatever the monotonic clock says', () => {
  const tally = newTally();
  // The monotonic clock reads 0.6 ms behind the wall clock here.
  countArrival(tally, headers, fireAtMs - 0.6, fireAtMs);
  assert.equal(tally.early, 0);
  assert.equal(tally.latenessUs.totalCount, 1, 'counted as (at least 1 µs) late instead');
  countArrival(tally, headers, fireAtMs + 2.5, fireAtMs + 2);
  assert.equal(tally.latenessUs.maxValue >= 2500 && tally.latenessUs.maxValue < 2510, true, 'lateness from the monotonic clock');
  assert.deepEqual([tally.requests, tally.timers], [2, 2]);
});

test('arrived before its fire time by the wall clock: early, not in the lateness histogram', () => {
  const tally = newTally();
  countArrival(tally, headers, fireAtMs + 0.3, fireAtMs - 1);
  assert.equal(tally.early, 1);
  assert.equal(tally.latenessUs.totalCount, 0);
});

test('an Arrow batch counts its rows; a request without a fire time only as a request', () => {
  const tally = newTally();
  countArrival(tally, { 'fermata-batch-rows': '250' }, fireAtMs, fireAtMs);
  assert.deepEqual([tally.requests, tally.timers, tally.early, tally.latenessUs.totalCount], [1, 250, 0, 0]);
});
