// The ring of one-second samples (engine/stats-series.ts): each sample is the growth of the
// counters since the one before, a second's lateness quantiles come from the cumulative
// histogram's difference (null when no first attempt started), and the ring keeps the newest
// samples in order once it wraps.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import * as hdr from 'hdr-histogram-js';
import { type SeriesSources, StatsSeries } from '../../engine/stats-series.ts';

function fakeSources(): SeriesSources & { added_: number; delivered_: number; failed_: number; syncs_: number; histogram: hdr.Histogram; byQueue: Map<string, number> } {
  const histogram = hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 3_600_000, numberOfSignificantValueDigits: 3 });
  return {
    added_: 0,
    delivered_: 0,
    failed_: 0,
    histogram,
    byQueue: new Map(),
    syncs_: 0,
    syncs() {
      return this.syncs_;
    },
    deliveredByQueue() {
      return this.byQueue;
    },
    added() {
      return this.added_;
    },
    delivered() {
      return this.delivered_;
    },
    failed() {
      return this.failed_;
    },
    lateness() {
      return this.histogram;
    },
  };
}

test('a sample is what the counters grew by since the sample before, counted from the ring\'s start', () => {
  const sources = fakeSources();
  sources.added_ = 1000; // before the ring: not counted
  let now = 1_000_000;
  const series = new StatsSeries(sources, { now: () => now, capacity: 10 });
  sources.added_ += 7;
  sources.delivered_ += 5;
  sources.failed_ += 2;
  now += 1000;
  const first = series.sample();
  assert.deepEqual({ ...first }, { atMs: 1_001_000, adds: 7, deliveries: 5, failures: 2, latenessP50Ms: NaN, latenessP99Ms: NaN, latenessMaxMs: NaN });
  now += 1000;
  const second = series.sample();
  assert.equal(second.adds, 0);
  assert.equal(second.deliveries, 0);
});

test('a second\'s lateness is that second\'s first attempts only', () => {
  const sources = fakeSources();
  const series = new StatsSeries(sources, { capacity: 10 });
  for (let i = 0; i < 1000; i++) sources.histogram.recordValue(500); // an old, slow second
  series.sample();
  for (let i = 1; i <= 100; i++) sources.histogram.recordValue(i);
  const sample = series.sample();
  assert.equal(sample.latenessP50Ms, 50);
  assert.equal(sample.latenessP99Ms, 99);
  assert.equal(sample.latenessMaxMs, 100);
  const quiet = series.sample();
  assert.ok(Number.isNaN(quiet.latenessP50Ms) && Number.isNaN(quiet.latenessMaxMs), 'no first attempt started: no lateness');
  const columns = series.columns();
  assert.deepEqual(Array.from(columns.latenessMaxMs), [500, 100, NaN]);
});

test('the ring keeps the newest samples, oldest first, and after_ms picks those taken later', () => {
  const sources = fakeSources();
  let now = 0;
  const series = new StatsSeries(sources, { now: () => now, capacity: 4 });
  for (let i = 1; i <= 6; i++) {
    now = i * 1000;
    sources.added_ += i;
    series.sample();
  }
  assert.equal(series.size, 4);
  const columns = series.columns();
  assert.deepEqual(Array.from(columns.atMs), [3000, 4000, 5000, 6000]);
  assert.deepEqual(Array.from(columns.adds), [3, 4, 5, 6]);
  assert.deepEqual(Array.from(series.columns(4500).atMs), [5000, 6000]);
  assert.deepEqual(Array.from(series.columns(6000).atMs), []);
});

test('listeners hear each sample until they unsubscribe or the ring stops', () => {
  const sources = fakeSources();
  const series = new StatsSeries(sources, { capacity: 4 });
  const heard: number[] = [];
  const unsubscribe = series.onSample((sample) => heard.push(sample.adds));
  sources.added_ = 3;
  series.sample();
  unsubscribe();
  sources.added_ = 5;
  series.sample();
  assert.deepEqual(heard, [3]);
});

test('a queue\'s rate is its deliveries a second over the last minute of samples, from the start or its first delivery', () => {
  const sources = fakeSources();
  sources.byQueue.set('billing', 500); // before the start: not a rate
  const series = new StatsSeries(sources, { capacity: 10 });
  series.sample();
  assert.equal(series.deliveredPerSecond('billing'), 0);
  for (let second = 1; second <= 70; second++) {
    sources.byQueue.set('billing', 500 + second * 3);
    if (second > 40) sources.byQueue.set('late', (second - 40) * 2); // its figures appear with its first deliveries
    series.sample();
  }
  assert.equal(series.deliveredPerSecond('billing'), 3, 'the last 60 seconds');
  assert.equal(series.deliveredPerSecond('late'), 1, '60 deliveries since it first delivered, over the minute');
  assert.equal(series.deliveredPerSecond('never'), 0);
});

test('the log\'s last sync is the time of the sample that saw its syncs grow', () => {
  const sources = fakeSources();
  sources.syncs_ = 40; // before the start
  let now = 1000;
  const series = new StatsSeries(sources, { now: () => now, capacity: 10 });
  series.sample();
  assert.ok(Number.isNaN(series.lastSyncAtMs), 'none since the start');
  now = 2000;
  sources.syncs_ = 41;
  series.sample();
  now = 3000;
  series.sample();
  assert.equal(series.lastSyncAtMs, 2000);
});
