// The README's figures table, generated from bench/baseline.json: the one place figures appear in
// prose. `npm run figures` rewrites the block between the markers in README.md; `--check` only
// says whether it is current (test/unit/readme-figures.test.ts does the same in process).
// Runs on the main thread of a short-lived script; nothing in the service imports it.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export const beginMarker = '<!-- figures:begin (generated from bench/baseline.json by `npm run figures`) -->';
export const endMarker = '<!-- figures:end -->';

export type Better = 'higher' | 'lower';

/** One figure as the benches print it, summarised over the runs of one session. */
export interface BaselineFigure {
  /** The bench's own key, e.g. `store.recovery.timers_per_s`. */
  readonly name: string;
  readonly suite: string;
  /** What the README's row says the figure is. */
  readonly title: string;
  readonly unit: string;
  readonly median: number;
  readonly min: number;
  readonly max: number;
  readonly runs: number;
  /** The figure the project aims at, or null where there is none. */
  readonly target: number | null;
  readonly better: Better;
  readonly commit: string;
  /** The day of the runs, YYYY-MM-DD (UTC). */
  readonly date: string;
  /** A key of `Baseline.machines`. */
  readonly machine: string;
  /** Where the numbers were taken from, in a sentence. */
  readonly source: string;
}

export interface Baseline {
  readonly version: 1;
  readonly machines: Readonly<Record<string, string>>;
  readonly figures: readonly BaselineFigure[];
}

/** Every field a figure must have, in the order the schema lists them. */
export const figureFields = [
  'name', 'suite', 'title', 'unit', 'median', 'min', 'max', 'runs',
  'target', 'better', 'commit', 'date', 'machine', 'source',
] as const;

const units = new Set(['1/s', 'ratio', 'B', 'ms', 'MB/s']);
const stringFields = ['name', 'suite', 'title', 'unit', 'commit', 'date', 'machine', 'source'] as const;
const numberFields = ['median', 'min', 'max'] as const;

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function fail(where: string, what: string): never {
  throw new Error(`bench/baseline.json: ${where}: ${what}`);
}

function checkFigure(raw: unknown, at: number, machines: Readonly<Record<string, string>>): BaselineFigure {
  const where = `figures[${at}]`;
  if (!isRecord(raw)) fail(where, 'not an object');
  for (const key of Object.keys(raw)) {
    if (!(figureFields as readonly string[]).includes(key)) fail(where, `unknown field "${key}"`);
  }
  for (const key of stringFields) {
    if (typeof raw[key] !== 'string' || raw[key] === '') fail(where, `"${key}" must be a non-empty string`);
  }
  for (const key of numberFields) {
    if (typeof raw[key] !== 'number' || !Number.isFinite(raw[key])) fail(where, `"${key}" must be a finite number`);
  }
  const figure = raw as unknown as BaselineFigure;
  const label = `${where} (${figure.name})`;
  if (!figure.name.startsWith(`${figure.suite}.`)) fail(label, `the name does not start with its suite "${figure.suite}."`);
  if (!units.has(figure.unit)) fail(label, `unit "${figure.unit}" is not one of ${[...units].join(', ')}`);
  if (!(figure.min <= figure.median && figure.median <= figure.max)) fail(label, 'min ≤ median ≤ max does not hold');
  if (!Number.isInteger(figure.runs) || figure.runs < 1) fail(label, '"runs" must be an integer ≥ 1');
  if (figure.runs === 1 && figure.min !== figure.max) fail(label, 'one run has min = median = max');
  if (figure.target !== null && (typeof figure.target !== 'number' || !Number.isFinite(figure.target))) {
    fail(label, '"target" must be a finite number or null');
  }
  if (figure.better !== 'higher' && figure.better !== 'lower') fail(label, '"better" must be "higher" or "lower"');
  if (!/^[0-9a-f]{7,40}$/.test(figure.commit)) fail(label, '"commit" must be a git commit id (7–40 hex digits)');
  if (!/^\d{4}-\d{2}-\d{2}$/.test(figure.date)) fail(label, '"date" must be YYYY-MM-DD');
  if (!Object.hasOwn(machines, figure.machine)) fail(label, `machine "${figure.machine}" is not in "machines"`);
  return figure;
}

/** The baseline file's content, checked field by field (bench/baseline.schema.json says the same). */
export function parseBaseline(json: unknown): Baseline {
  if (!isRecord(json)) fail('top level', 'not an object');
  for (const key of Object.keys(json)) {
    if (!['$schema', 'version', 'machines', 'figures'].includes(key)) fail('top level', `unknown field "${key}"`);
  }
  if (json['version'] !== 1) fail('version', 'must be 1');
  const machines = json['machines'];
  if (!isRecord(machines) || Object.keys(machines).length === 0) fail('machines', 'must be a non-empty object');
  for (const [key, text] of Object.entries(machines)) {
    if (typeof text !== 'string' || text === '') fail(`machines.${key}`, 'must be a non-empty string');
  }
  const figures = json['figures'];
  if (!Array.isArray(figures) || figures.length === 0) fail('figures', 'must be a non-empty array');
  const checked = figures.map((raw: unknown, at) => checkFigure(raw, at, machines as Record<string, string>));
  const seen = new Set<string>();
  for (const figure of checked) {
    if (seen.has(figure.name)) fail('figures', `"${figure.name}" appears twice`);
    seen.add(figure.name);
  }
  return { version: 1, machines: machines as Record<string, string>, figures: checked };
}

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

function rangeCell(figure: BaselineFigure): string {
  const runs = figure.runs === 1 ? '1 run' : `${figure.runs} runs`;
  if (figure.runs === 1) return `${runs}, ${figure.date}`;
  return `${formatNumber(figure.min)}–${withUnit(figure.max, figure.unit)}, ${runs}, ${figure.date}`;
}

/** The Markdown table, one row a figure, in the file's order. */
export function figuresTable(baseline: Baseline): string {
  const rows = baseline.figures.map(
    (figure) =>
      `| ${figure.title} | ${withUnit(figure.median, figure.unit)} | ${rangeCell(figure)} | ${targetCell(figure)} | \`${figure.name}\` |`,
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

export function readBaseline(root: string): Baseline {
  return parseBaseline(JSON.parse(readFileSync(join(root, 'bench', 'baseline.json'), 'utf8')));
}

function main(argv: readonly string[]): number {
  const root = join(import.meta.dirname, '..');
  const readmePath = join(root, 'README.md');
  const readme = readFileSync(readmePath, 'utf8');
  const next = withFigures(readme, figuresTable(readBaseline(root)));
  if (argv.includes('--check')) {
    if (next === readme) return 0;
    process.stderr.write('README.md: the figures table differs from bench/baseline.json; run `npm run figures`\n');
    return 1;
  }
  if (next !== readme) writeFileSync(readmePath, next);
  return 0;
}

if (import.meta.main) process.exitCode = main(process.argv.slice(2));
