// `--baseline` (bench/baseline-writer.ts withSuiteRuns) on a small synthetic result: each tracked
// figure of the suite gets the median, min and max of the runs that printed it, their count and
// the stamp; other suites' figures, untracked figures and tracked ones no run printed are left as
// they were; a unit that changed and an unknown machine are refused; and what it writes passes
// the file's own checks and prints as the README table.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type Baseline, type BaselineFigure, baselineText, parseBaseline } from '../../scripts/baseline-file.ts';
import { figuresTable } from '../../scripts/figures-table.ts';
import { machineFor, type RunStamp, withSuiteRuns } from '../../bench/baseline-writer.ts';
import { type Figure, metaLine } from '../../bench/report.ts';

const old = { median: 5, min: 5, max: 5, runs: 1, commit: '1234567', date: '2026-12-01', machine: 'vm', source: 'an old run' };

const tracked = (name: string, unit: string, measured: BaselineFigure['measured']): BaselineFigure => ({
  name,
  suite: name.split('.')[0] as string,
  title: `title of ${name}`,
  unit,
  target: null,
  better: 'higher',
  measured,
});

const baseline: Baseline = {
  version: 2,
  machines: { vm: 'a test machine', other: 'another' },
  figures: [tracked('s.rate', '1/s', old), tracked('s.fresh', 'ratio', null), tracked('s.absent', 'ms', old), tracked('t.rate', '1/s', old)],
};

const stamp: RunStamp = { commit: 'abcdef0', date: '2026-12-07', machine: 'vm', source: '4 full runs one after another of `npm run bench -- s --runs 4 --baseline`' };

const fig = (name: string, value: number, unit: string): Figure => ({ suite: 's', name, value, unit });
const runs: Figure[][] = [
  [metaLine('s', { cpus: 2 }), fig('s.rate', 100, '1/s'), fig('s.fresh', 1.5, 'ratio'), fig('s.untracked', 9, '1/s')],
  [metaLine('s', { cpus: 2 }), fig('s.rate', 300, '1/s'), fig('s.fresh', 0.5, 'ratio')],
  [metaLine('s', { cpus: 2 }), fig('s.rate', 120, '1/s')],
  [metaLine('s', { cpus: 2 }), fig('s.rate', 110.12345, '1/s'), fig('s.fresh', 1, 'ratio')],
];

test('the runs of a suite become each tracked figure’s median, range and run count, with the stamp', () => {
  const update = withSuiteRuns(baseline, 's', runs, stamp);
  assert.deepEqual(update.written, ['s.rate', 's.fresh']);
  assert.deepEqual(update.absent, ['s.absent']);
  const [rate, fresh, absent, other] = update.baseline.figures;
  assert.deepEqual(rate?.measured, { median: 115.062, min: 100, max: 300, runs: 4, ...stamp });
  assert.deepEqual(fresh?.measured, { median: 1, min: 0.5, max: 1.5, runs: 3, ...stamp }, 'a figure some runs lack: the runs that printed it');
  assert.deepEqual(absent?.measured, old, 'no run printed it: left as it was');
  assert.deepEqual(other?.measured, old, "another suite's figure: left as it was");
  assert.ok(!update.baseline.figures.some((figure) => figure.name === 's.untracked'), 'only tracked figures are written');
  assert.equal(rate?.title, 'title of s.rate', 'what a figure is stays as the file says');
});

test('what the writer makes passes the file’s checks, round-trips and prints as the README table', () => {
  const written = withSuiteRuns(baseline, 's', runs, stamp).baseline;
  const text = baselineText(written);
  assert.deepEqual(parseBaseline(JSON.parse(text)), written);
  assert.equal(baselineText(parseBaseline(JSON.parse(text))), text);
  assert.match(figuresTable(written), /\| title of s\.rate \| 115\.1\/s \| 100–300\/s, 4 runs, 2026-12-07 \| — \| `s\.rate` \|/);
});

test('one run: min = median = max', () => {
  const update = withSuiteRuns(baseline, 's', runs.slice(0, 1), stamp);
  assert.deepEqual(update.baseline.figures[0]?.measured, { median: 100, min: 100, max: 100, runs: 1, ...stamp });
});

test('a tracked figure printed in another unit, or an unknown machine, is refused', () => {
  assert.throws(() => withSuiteRuns(baseline, 's', [[fig('s.rate', 1, 'ms')]], stamp), /s\.rate was printed in "ms", the file has it in "1\/s"/);
  assert.throws(() => withSuiteRuns(baseline, 's', runs, { ...stamp, machine: 'laptop' }), /machine "laptop"/);
});

test('the machine: the one named, else the file’s only one', () => {
  assert.equal(machineFor(baseline, 'other'), 'other');
  assert.throws(() => machineFor(baseline, 'laptop'), /--machine laptop/);
  assert.throws(() => machineFor(baseline, undefined), /2 machines/);
  assert.equal(machineFor({ ...baseline, machines: { vm: 'one' } }, undefined), 'vm');
});
