// `npm run bench -- check`'s verdict (bench/check.ts checkFigures): a figure more than 20% worse
// than its baseline median fails, on either side of "better"; exactly 20% passes; figures the
// baseline lacks, tracks without a measurement, or tracks in another unit never fail; meta lines
// are not figures; the ratio reads above 1 as better either way; and the printed forms carry it.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import type { Baseline, BaselineFigure, Measured } from '../../scripts/baseline-file.ts';
import { checkFails, checkFigures, checkJsonLines, checkSummary, checkTable, worseShare } from '../../bench/check.ts';
import { type Figure, metaLine } from '../../bench/report.ts';

const measured = (median: number): Measured => ({ median, min: median * 0.9, max: median * 1.1, runs: 10, commit: 'abcdef0', date: '2026-12-06', machine: 'vm', source: 'synthetic' });

const tracked = (name: string, unit: string, better: 'higher' | 'lower', median: number | null, target: number | null = null): BaselineFigure => ({
  name,
  suite: name.split('.')[0] as string,
  title: name,
  unit,
  target,
  better,
  measured: median === null ? null : measured(median),
});

const baseline: Baseline = {
  version: 2,
  machines: { vm: 'a test machine' },
  figures: [
    tracked('s.rate', '1/s', 'higher', 1000, 900),
    tracked('s.bytes', 'B', 'lower', 200, 200),
    tracked('s.new', 'ratio', 'higher', null, 1),
    tracked('s.unit', 'ms', 'lower', 10),
    tracked('s.gone', '1/s', 'higher', 50),
    tracked('other.rate', '1/s', 'higher', 5),
  ],
};

const fig = (name: string, value: number, unit: string): Figure => ({ suite: name.split('.')[0] as string, name, value, unit });

function verdictOf(figures: readonly Figure[], name: string): ReturnType<typeof checkFigures>[number] {
  const line = checkFigures(figures, baseline).find((one) => one.name === name);
  assert.ok(line !== undefined, `a line for ${name}`);
  return line;
}

test('higher is better: more than 20% below the median is worse, exactly 20% is not', () => {
  assert.equal(verdictOf([fig('s.rate', 799, '1/s')], 's.rate').verdict, 'worse');
  assert.equal(verdictOf([fig('s.rate', 800, '1/s')], 's.rate').verdict, 'ok');
  assert.equal(verdictOf([fig('s.rate', 5000, '1/s')], 's.rate').verdict, 'ok');
  const line = verdictOf([fig('s.rate', 750, '1/s')], 's.rate');
  assert.equal(line.ratio, 0.75);
  assert.equal(line.worseBy, 0.25);
});

test('lower is better: more than 20% above the median is worse, exactly 20% is not', () => {
  assert.equal(verdictOf([fig('s.bytes', 240.1, 'B')], 's.bytes').verdict, 'worse');
  assert.equal(verdictOf([fig('s.bytes', 240, 'B')], 's.bytes').verdict, 'ok');
  // 198 × 1.2 is not exactly 237.6 in binary floating point; the verdict does not care.
  assert.equal(checkFigures([fig('s.bytes', 237.6, 'B')], { ...baseline, figures: [tracked('s.bytes', 'B', 'lower', 198)] })[0]?.verdict, 'ok');
  assert.equal(verdictOf([fig('s.bytes', 100, 'B')], 's.bytes').verdict, 'ok');
  const line = verdictOf([fig('s.bytes', 250, 'B')], 's.bytes');
  assert.equal(line.ratio, 0.8, 'median ÷ value: below 1 reads worse');
  assert.equal(line.worseBy, 0.25);
  assert.equal(verdictOf([fig('s.bytes', 100, 'B')], 's.bytes').ratio, 2, 'above 1 reads better');
});

test('a median of 0: any value on the wrong side is worse', () => {
  assert.equal(worseShare(1, 0, 'lower'), Infinity);
  assert.equal(worseShare(0, 0, 'lower'), 0);
  assert.equal(worseShare(-1, 0, 'lower'), 0);
});

test('no baseline, a baseline not measured yet, another unit: printed, never failing', () => {
  const figures = [fig('s.untracked', 1, '1/s'), fig('s.new', 0.1, 'ratio'), fig('s.unit', 1e9, 's')];
  const lines = checkFigures(figures, baseline);
  assert.equal(lines.find((line) => line.name === 's.untracked')?.verdict, 'no baseline');
  const fresh = lines.find((line) => line.name === 's.new');
  assert.equal(fresh?.verdict, 'no baseline');
  assert.equal(fresh?.meetsTarget, false, 'the target is read even without a measurement');
  assert.equal(lines.find((line) => line.name === 's.unit')?.verdict, 'unit differs');
  assert.equal(checkFails(lines), false);
});

test('meta lines (unit info) are not figures; tracked figures of a suite that ran but did not print them are listed, not failed', () => {
  const lines = checkFigures([metaLine('s', { cpus: 2 }), fig('s.rate', 1000, '1/s')], baseline);
  assert.ok(!lines.some((line) => line.name === 's.meta'));
  const names = lines.map((line) => `${line.name}:${line.verdict}`);
  assert.ok(names.includes('s.gone:not printed'));
  assert.ok(!names.some((name) => name.startsWith('other.')), "a suite that did not run is not listed");
  assert.equal(checkFails(lines), false);
});

test('targets: met and missed on either side, beside the verdict', () => {
  assert.equal(verdictOf([fig('s.rate', 900, '1/s')], 's.rate').meetsTarget, true);
  assert.equal(verdictOf([fig('s.rate', 899, '1/s')], 's.rate').meetsTarget, false);
  assert.equal(verdictOf([fig('s.bytes', 200, 'B')], 's.bytes').meetsTarget, true);
  assert.equal(verdictOf([fig('s.bytes', 230, 'B')], 's.bytes').meetsTarget, false);
  assert.equal(verdictOf([fig('s.bytes', 230, 'B')], 's.bytes').verdict, 'ok', 'a missed target alone does not fail the check');
});

test('one worse figure fails the check; the printed forms say which', () => {
  const lines = checkFigures([fig('s.rate', 500, '1/s'), fig('s.bytes', 190, 'B')], baseline);
  assert.equal(checkFails(lines), true);
  const table = checkTable(lines);
  assert.match(table, /^s\.rate .*500 .*1\/s .*1,000 \(900–1,100, 10 runs\) .*0\.50× .*WORSE by 50%; target ≥ 900 MISSED$/m);
  assert.match(table, /^s\.bytes .*1\.05× .*ok; target ≤ 200 met$/m);
  const json = checkJsonLines(lines)
    .trim()
    .split('\n')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
  assert.deepEqual(json[0], {
    suite: 's',
    name: 's.rate',
    value: 500,
    unit: '1/s',
    better: 'higher',
    baseline_median: 1000,
    baseline_min: 900,
    baseline_max: 1100,
    baseline_runs: 10,
    ratio: 0.5,
    worse_by: 0.5,
    verdict: 'worse',
    target: 900,
    meets_target: false,
  });
  assert.match(checkSummary(lines), /1 of 2 figures .* worse than their median: s\.rate; target missed: s\.rate/);
});
