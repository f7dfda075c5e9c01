// The compare suite's figures (bench/compare.ts compareFigures) from synthetic measurements:
// memory per far-future timer divides BullMQ's bytes by the upper end of fermata's range (a few
// MB of VmRSS over a million timers is noise), and prints fermata's range and BullMQ's bytes
// beside it; every ratio is followed by the absolute figures of both sides it divides. And
// growthRange: the median growth, and the least and most the readings' extremes allow.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type BullFigures, compareFigures, type FermataFigures } from '../../bench/compare.ts';
import { growthRange } from '../../bench/compare-shape.ts';
import { newHistogram } from '../../bench/report.ts';

function latency(ms: number): ReturnType<typeof newHistogram> {
  const histogram = newHistogram();
  histogram.recordValue(ms * 1000);
  return histogram;
}

const fermata: FermataFigures = {
  single: { perS: 20_000, latencyUs: latency(5), errors: 0 },
  singleRequest: { perS: 11_000, latencyUs: latency(20), errors: 0 },
  bulkPerS: 1_000_000,
  delivery: { perS: 30_000, early: 0 },
  lateness: { latenessUs: latency(4), early: 0 },
  memory: { bytesPerTimer: 3, bytesPerTimerMin: -1, bytesPerTimerMax: 6, liveBytesPerTimer: 2, filledBytesPerTimer: 150, measure: 'synthetic' },
  spilled: { countedBytesPerTimer: 0.5, processBytesPerTimer: 3, processBytesPerTimerMax: 6, spilled: 1_000_000, measure: 'synthetic' },
};

const bull: BullFigures = {
  single: { perS: 30_000, latencyUs: latency(8), errors: 0 },
  singleAlways: { perS: 10_000, latencyUs: latency(25), errors: 0 },
  bulkPerS: 20_000,
  bulkAlwaysPerS: 15_000,
  delivery: { perS: 15_000, early: 0 },
  lateness: { latenessUs: latency(80), early: 0 },
  memory: { bytesPerTimer: 930, measure: 'synthetic' },
  failures: 0,
};

test('RAM per timer: the ratio divides by the upper end of fermata’s range, which is printed beside it with BullMQ’s bytes', () => {
  const figures = compareFigures({}, fermata, bull);
  const value = (name: string): number | undefined => figures.find((figure) => figure.name === name)?.value;
  assert.equal(value('compare.ram_per_timer.ratio'), 155, "930 B ÷ 6 B, not ÷ 3 B");
  assert.equal(value('compare.ram_per_timer.fermata.bytes_max'), 6);
  assert.equal(value('compare.ram_per_timer.fermata.bytes'), 3);
  assert.equal(value('compare.ram_per_timer.fermata.bytes_min'), -1);
  assert.equal(value('compare.ram_per_timer.bullmq.bytes'), 930);
  assert.equal(value('compare.ram_per_timer.spilled_ratio.process'), 155, 'the restart figure too, over its upper end');
  assert.match(String((figures[0] as unknown as Record<string, unknown>)['ram_per_timer']), /^fermata ≤ 6\.0 B a timer .* against BullMQ's 930\.0 B/);
});

test('each ratio is followed by the absolute figures of both sides', () => {
  const names = compareFigures({}, fermata, bull).map((figure) => figure.name);
  const after = (ratio: string, ...rates: string[]): void => {
    const at = names.indexOf(ratio);
    assert.ok(at >= 0, `${ratio} is printed`);
    for (const rate of rates) {
      const rateAt = names.indexOf(rate);
      assert.ok(rateAt > at, `${rate} follows ${ratio}`);
      const workload = ratio.split('.').slice(0, 2).join('.');
      assert.ok(names.slice(at, rateAt + 1).every((name) => name.startsWith(`${workload}.`)), `${rate} is in ${ratio}'s group`);
    }
  };
  after('compare.bulk_add.ratio', 'compare.bulk_add.fermata.timers_per_s', 'compare.bulk_add.bullmq_everysec.timers_per_s');
  after('compare.dispatch.ratio', 'compare.dispatch.fermata.per_s', 'compare.dispatch.bullmq.per_s');
  after('compare.single_add.ratio_always_request', 'compare.single_add.fermata_request.per_s', 'compare.single_add.bullmq_always.per_s');
  const figures = compareFigures({}, fermata, bull);
  const value = (name: string): number | undefined => figures.find((figure) => figure.name === name)?.value;
  assert.equal(value('compare.bulk_add.ratio'), 50);
  assert.equal(value('compare.dispatch.ratio'), 2);
  assert.equal(value('compare.single_add.ratio_always_request'), 1.1);
});

test('without BullMQ: fermata’s figures alone, no ratio', () => {
  const figures = compareFigures({}, fermata, undefined);
  assert.ok(!figures.some((figure) => figure.name.includes('ratio') || figure.name.includes('bullmq')));
  assert.ok(figures.some((figure) => figure.name === 'compare.ram_per_timer.fermata.bytes_max'));
});

test('growthRange: medians for the figure, extremes for its range', () => {
  assert.deepEqual(growthRange([100, 90, 110], [130, 120, 150], 10), { median: 3, min: 1, max: 6 });
});
