// The README's figures table, generated from bench/baseline.json: the one place figures appear in
// prose. `npm run figures` rewrites the block between the markers in README.md; `--check` only
// says whether it is current (test/unit/readme-figures.test.ts does the same in process).
// Runs on the main thread of a short-lived script; nothing in the service imports it.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type Baseline, type BaselineFigure, readBaseline } from './baseline-file.ts';

export const beginMarker = '<!-- figures:begin (generated from bench/baseline.json by `npm run figures`) -->';
export const endMarker = '<!-- figures:end -->';

const unitSuffix: Readonly<Record<string, string>> = { '1/s': '/s', ratio: '×', B: ' B', ms: ' ms', 'MB/s': ' MB/s' };

/** Thousands separated; one decimal from 10 up, three below, none from 1,000 up. */
export function formatNumber(value: number): string {
  const magnitude = Math.abs(value);
  const digits = magnitude >= 1000 ? 0 : magnitude >= 10 ? 1 : 3;
  return value.toLocaleString('en-US', { maximumFractionDigits: digits });
}

function withUnit(value: number, unit: string): string {
  return `${formatNumber(value)}${unitSuffix[unit] ?? ` ${unit}`}`;
}

function targetCell(figure: BaselineFigure): string {
  if (figure.target === null) return '—';
  return `${figure.better === 'higher' ? '≥' : '≤'} ${withUnit(figure.target, figure.unit)}`;
}

function medianCell(figure: BaselineFigure): string {
  return figure.measured === null ? 'not measured yet' : withUnit(figure.measured.median, figure.unit);
}

function rangeCell(figure: BaselineFigure): string {
  const measured = figure.measured;
  if (measured === null) return '—';
  if (measured.runs === 1) return `1 run, ${measured.date}`;
  return `${formatNumber(measured.min)}–${withUnit(measured.max, figure.unit)}, ${measured.runs} runs, ${measured.date}`;
}

/** The Markdown table, one row a figure, in the file's order. */
export function figuresTable(baseline: Baseline): string {
  const rows = baseline.figures.map(
    (figure) => `| ${figure.title} | ${medianCell(figure)} | ${rangeCell(figure)} | ${targetCell(figure)} | \`${figure.name}\` |`,
  );
  const machines = Object.values(baseline.machines).join('; ');
  return [
    '| figure | median | range of the runs | target | bench key |',
    '|---|---:|---|---:|---|',
    ...rows,
    '',
    `Machine: ${machines}.`,
  ].join('\n');
}

/** `readme` with the block between the markers replaced by `table`; throws when a marker is missing. */
export function withFigures(readme: string, table: string): string {
  const begin = readme.indexOf(beginMarker);
  const end = readme.indexOf(endMarker);
  if (begin < 0 || end < begin) throw new Error(`README.md: the markers ${beginMarker} … ${endMarker} are missing`);
  return `${readme.slice(0, begin + beginMarker.length)}\n${table}\n${readme.slice(end)}`;
}

/** README.md under `root` with its figures table generated from `baseline`. */
export function readmeWithFigures(root: string, baseline: Baseline): { readonly path: string; readonly current: string; readonly next: string } {
  const path = join(root, 'README.md');
  const current = readFileSync(path, 'utf8');
  return { path, current, next: withFigures(current, figuresTable(baseline)) };
}

/** Rewrites README.md's figures table from `baseline`; true when it changed. */
export function writeReadmeFigures(root: string, baseline: Baseline): boolean {
  const readme = readmeWithFigures(root, baseline);
  if (readme.next === readme.current) return false;
  writeFileSync(readme.path, readme.next);
  return true;
}

function main(argv: readonly string[]): number {
  const root = join(import.meta.dirname, '..');
  const baseline = readBaseline(root);
  if (argv.includes('--check')) {
    const readme = readmeWithFigures(root, baseline);
    if (readme.next === readme.current) return 0;
    process.stderr.write('README.md: the figures table differs from bench/baseline.json; run `npm run figures`\n');
    return 1;
  }
  writeReadmeFigures(root, baseline);
  return 0;
}

if (import.meta.main) process.exitCode = main(process.argv.slice(2));
