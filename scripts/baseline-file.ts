// bench/baseline.json as data: the figures the project tracks (what each is, its unit, which way
// is better, its target) and, for each, the summary of its last full runs (median, range, run
// count, and the commit, day and machine they measured), or null until it has been measured.
// Read by the README's figures table (figures-table.ts), by `npm run bench -- check` and by the
// writer behind `--baseline` (bench/baseline-writer.ts). Plain functions over plain objects on the
// caller's main thread; nothing in the service imports it.
//
//   { "version": 2, "machines": { key: description },
//     "figures": [ { name, suite, title, unit, target, better,
//                    measured: { median, min, max, runs, commit, date, machine, source } | null } ] }
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export type Better = 'higher' | 'lower';

/** The summary of a figure's full runs of one session. */
export interface Measured {
  /** The median of the runs (the mean of the middle two for an even count). */
  readonly median: number;
  readonly min: number;
  readonly max: number;
  /** Runs that printed the figure; min = median = max for one. */
  readonly runs: number;
  /** The commit measured (7–40 hex digits). */
  readonly commit: string;
  /** The day of the runs, YYYY-MM-DD (UTC). */
  readonly date: string;
  /** A key of `Baseline.machines`. */
  readonly machine: string;
  /** Where the numbers come from, in a sentence. */
  readonly source: string;
}

/** A figure the project tracks, as the benches print it. */
export interface BaselineFigure {
  /** The bench's own key, e.g. `store.recovery.timers_per_s`. */
  readonly name: string;
  readonly suite: string;
  /** What the README's row says the figure is. */
  readonly title: string;
  readonly unit: string;
  /** The figure the project aims at, or null where there is none. */
  readonly target: number | null;
  readonly better: Better;
  /** Its last full runs, or null when it has not been measured yet. */
  readonly measured: Measured | null;
}

export interface Baseline {
  readonly version: 2;
  readonly machines: Readonly<Record<string, string>>;
  readonly figures: readonly BaselineFigure[];
}

/** Every field a figure must have, in the order the schema lists them. */
export const figureFields = ['name', 'suite', 'title', 'unit', 'target', 'better', 'measured'] as const;
/** Every field of a figure's `measured`, in the order the schema lists them. */
export const measuredFields = ['median', 'min', 'max', 'runs', 'commit', 'date', 'machine', 'source'] as const;

export const baselineUnits: ReadonlySet<string> = new Set(['1/s', 'ratio', 'B', 'ms', 'MB/s']);

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function fail(where: string, what: string): never {
  throw new Error(`bench/baseline.json: ${where}: ${what}`);
}

function onlyFields(raw: Record<string, unknown>, fields: readonly string[], where: string): void {
  for (const key of Object.keys(raw)) if (!fields.includes(key)) fail(where, `unknown field "${key}"`);
}

function checkMeasured(raw: unknown, label: string, machines: Readonly<Record<string, string>>): Measured {
  if (!isRecord(raw)) fail(label, '"measured" must be an object or null');
  onlyFields(raw, measuredFields, `${label}.measured`);
  for (const key of ['commit', 'date', 'machine', 'source'] as const) {
    if (typeof raw[key] !== 'string' || raw[key] === '') fail(label, `"${key}" must be a non-empty string`);
  }
  for (const key of ['median', 'min', 'max'] as const) {
    if (typeof raw[key] !== 'number' || !Number.isFinite(raw[key])) fail(label, `"${key}" must be a finite number`);
  }
  const measured = raw as unknown as Measured;
  if (!(measured.min <= measured.median && measured.median <= measured.max)) fail(label, 'min ≤ median ≤ max does not hold');
  if (!Number.isInteger(measured.runs) || measured.runs < 1) fail(label, '"runs" must be an integer ≥ 1');
  if (measured.runs === 1 && measured.min !== measured.max) fail(label, 'one run has min = median = max');
  if (!/^[0-9a-f]{7,40}$/.test(measured.commit)) fail(label, '"commit" must be a git commit id (7–40 hex digits)');
  if (!/^\d{4}-\d{2}-\d{2}$/.test(measured.date)) fail(label, '"date" must be YYYY-MM-DD');
  if (!Object.hasOwn(machines, measured.machine)) fail(label, `machine "${measured.machine}" is not in "machines"`);
  return measured;
}

function checkFigure(raw: unknown, at: number, machines: Readonly<Record<string, string>>): BaselineFigure {
  const where = `figures[${at}]`;
  if (!isRecord(raw)) fail(where, 'not an object');
  onlyFields(raw, figureFields, where);
  for (const key of ['name', 'suite', 'title', 'unit'] as const) {
    if (typeof raw[key] !== 'string' || raw[key] === '') fail(where, `"${key}" must be a non-empty string`);
  }
  const figure = raw as unknown as BaselineFigure;
  const label = `${where} (${figure.name})`;
  if (!figure.name.startsWith(`${figure.suite}.`)) fail(label, `the name does not start with its suite "${figure.suite}."`);
  if (!baselineUnits.has(figure.unit)) fail(label, `unit "${figure.unit}" is not one of ${[...baselineUnits].join(', ')}`);
  if (figure.target !== null && (typeof figure.target !== 'number' || !Number.isFinite(figure.target))) {
    fail(label, '"target" must be a finite number or null');
  }
  if (figure.better !== 'higher' && figure.better !== 'lower') fail(label, '"better" must be "higher" or "lower"');
  if (!Object.hasOwn(raw, 'measured')) fail(label, '"measured" is missing (null until the figure is measured)');
  if (figure.measured !== null) checkMeasured(figure.measured, label, machines);
  return figure;
}

/** The baseline file's content, checked field by field (bench/baseline.schema.json says the same). */
export function parseBaseline(json: unknown): Baseline {
  if (!isRecord(json)) fail('top level', 'not an object');
  onlyFields(json, ['$schema', 'version', 'machines', 'figures'], 'top level');
  if (json['version'] !== 2) fail('version', 'must be 2');
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
  return { version: 2, machines: machines as Record<string, string>, figures: checked };
}

/** The file's text for `baseline`: two-space JSON, fields in the schema's order, a final newline. */
export function baselineText(baseline: Baseline): string {
  const figures = baseline.figures.map((figure) => ({
    name: figure.name,
    suite: figure.suite,
    title: figure.title,
    unit: figure.unit,
    target: figure.target,
    better: figure.better,
    measured:
      figure.measured === null
        ? null
        : Object.fromEntries(measuredFields.map((key) => [key, (figure.measured as Measured)[key]])),
  }));
  return `${JSON.stringify({ $schema: './baseline.schema.json', version: baseline.version, machines: baseline.machines, figures }, null, 2)}\n`;
}

export function baselinePath(root: string): string {
  return join(root, 'bench', 'baseline.json');
}

export function readBaseline(root: string): Baseline {
  return parseBaseline(JSON.parse(readFileSync(baselinePath(root), 'utf8')));
}

/** Writes `baseline` to bench/baseline.json, once it passes the checks a reader makes. */
export function writeBaseline(root: string, baseline: Baseline): void {
  const text = baselineText(baseline);
  parseBaseline(JSON.parse(text));
  writeFileSync(baselinePath(root), text);
}
