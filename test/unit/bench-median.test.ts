// --runs N folds runs with bench/report.ts medianFigures: each figure's median (mean of the
// middle two for an even count), min and max, in the first run's order; the meta line once,
// with the run count; a figure absent from a run is folded over the runs that have it.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type Figure, median, medianFigures } from '../../bench/report.ts';

const f = (name: string, value: number, unit = '1/s'): Figure => ({ suite: 's', name, value, unit });

test('median of odd and even counts, unsorted input left alone', () => {
  const values = [5, 1, 3];
  assert.equal(median(values), 3);
  assert.deepEqual(values, [5, 1, 3]);
  assert.equal(median([4, 1, 3, 2]), 2.5);
  assert.equal(median([7]), 7);
  assert.throws(() => median([]), RangeError);
});

test('runs fold into median, min and max per figure, meta line once with runs', () => {
  const meta: Figure = Object.assign(f('s.meta', 0, 'info'), { cpus: 2 });
  const runs = [
    [meta, f('s.a', 100), f('s.b', 10, 'ms')],
    [meta, f('s.a', 300), f('s.b', 30, 'ms')],
    [meta, f('s.a', 120), f('s.b', 20, 'ms'), f('s.c', 1)],
  ];
  const folded = medianFigures(runs);
  assert.deepEqual(folded[0], { suite: 's', name: 's.meta', value: 0, unit: 'info', cpus: 2, runs: 3 });
  assert.deepEqual(
    folded.slice(1).map((figure) => [figure.name, figure.value, figure.unit]),
    [
      ['s.a', 120, '1/s'],
      ['s.a.min', 100, '1/s'],
      ['s.a.max', 300, '1/s'],
      ['s.b', 20, 'ms'],
      ['s.b.min', 10, 'ms'],
      ['s.b.max', 30, 'ms'],
      ['s.c', 1, '1/s'],
      ['s.c.min', 1, '1/s'],
      ['s.c.max', 1, '1/s'],
    ],
  );
  for (const figure of folded.slice(1)) assert.deepEqual(Object.keys(figure), ['suite', 'name', 'value', 'unit']);
});
