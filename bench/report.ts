// What every benchmark suite shares: how figures are printed (JSON lines for scripts, an aligned
// table for people) and stored (bench/results/), folded over runs and drawn, and the hdr
// histogram settings. The figure itself and its JSON line are loadgen/report.ts's, shared with
// `fermata bench`. A suite returns figures; only bench/run.ts prints them, so a suite never
// writes to stdout and `--json` output stays one parseable object per line.
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import * as hdr from 'hdr-histogram-js';
import { type Figure, figureKeys, roundTo, toJsonLines } from '../loadgen/report.ts';
import { barChartSvg, lineChartSvg } from './svg-chart.ts';

export { type Fact, type Figure, metaLine, roundTo, toJsonLines } from '../loadgen/report.ts';

export interface SuiteOptions {
  /** Short measurements (the whole suite well under 30 s) instead of the default long ones. */
  readonly quick: boolean;
  /** Directory under which the suite makes (and removes) its temporary directories. */
  readonly baseDir: string;
  /** Progress for people; goes to stderr. */
  readonly progress: (message: string) => void;
  /** Data for a chart beside the figures (bench/results/<run>/*.svg); never printed. */
  readonly chart?: (chart: ChartData) => void;
}

/**
 * What a suite hands the runner to draw: a percentile distribution (x = percentile, y = the
 * value at it) or a time series (x = seconds since the measurement started, y = a rate).
 */
export interface ChartData {
  readonly kind: 'distribution' | 'series';
  /** Becomes the file name (`<name>.svg`) and the title. */
  readonly name: string;
  readonly unit: string;
  readonly points: readonly (readonly [number, number])[];
}

/** Percentiles drawn for a distribution: dense toward the tail, where lateness goes wrong. */
const chartPercentiles: readonly number[] = [0, 10, 20, 30, 40, 50, 60, 70, 80, 90, 95, 99, 99.5, 99.9, 99.99, 100];

/** A histogram's values at `chartPercentiles`, divided by `divisor` (1000 turns µs into ms). */
export function distributionChart(name: string, histogram: hdr.Histogram, divisor: number, unit: string): ChartData {
  const points = chartPercentiles.map((percentile): [number, number] => [percentile, roundTo(histogram.getValueAtPercentile(percentile) / divisor, 3)]);
  return { kind: 'distribution', name, unit, points };
}

export type Suite = (options: SuiteOptions) => Promise<Figure[]>;

/** Figures as an aligned table; the facts of a meta line become one `key=value` row. */
export function toTable(figures: readonly Figure[]): string {
  const rows = figures.map((figure): [string, string, string] => {
    const facts = Object.entries(figure).filter(([key]) => !figureKeys.has(key));
    if (facts.length > 0) return [figure.name, '', facts.map(([key, fact]) => `${key}=${String(fact)}`).join('  ')];
    return [figure.name, String(figure.value), figure.unit];
  });
  const nameWidth = Math.max(...rows.map(([name]) => name.length));
  const valueWidth = Math.max(...rows.map(([, value]) => value.length));
  return rows.map(([name, value, unit]) => `${name.padEnd(nameWidth)}  ${value.padStart(valueWidth)}  ${unit}`.trimEnd() + '\n').join('');
}

/** Writes `<resultsDir>/<suite>-<timestamp>/results.jsonl` and returns its path. */
export async function saveResults(resultsDir: string, suite: string, startedAt: Date, figures: readonly Figure[]): Promise<string> {
  const runDir = join(resultsDir, `${suite}-${isoBasicTimestamp(startedAt)}`);
  await mkdir(runDir, { recursive: true });
  const path = join(runDir, 'results.jsonl');
  await writeFile(path, toJsonLines(figures));
  return path;
}

/** ISO 8601 basic format (20250102T030405Z): sorts by time and has no colons to trip up paths. */
function isoBasicTimestamp(date: Date): string {
  return date.toISOString().replace(/[-:]/g, '').replace(/\.\d+Z$/, 'Z');
}

/** Values from 1 to 60,000,000 (a minute in microseconds) to 3 significant digits. */
export function newHistogram(): hdr.Histogram {
  return hdr.build({ lowestDiscernibleValue: 1, highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: 3 });
}

/** Records a duration in microseconds (at least 1, the histogram's floor). */
export function recordMs(histogram: hdr.Histogram, ms: number): void {
  histogram.recordValue(Math.max(1, Math.round(ms * 1000)));
}

/** A percentile of a histogram of microseconds, in milliseconds to 3 decimals. */
export function percentileMs(histogram: hdr.Histogram, percentile: number): number {
  return roundTo(histogram.getValueAtPercentile(percentile) / 1000, 3);
}

/** The measured span, in performance.now() time; it starts after the warm-up. */
export interface Span {
  readonly start: number;
  readonly end: number;
  readonly seconds: number;
}

export function startSpan(timing: { readonly warmupMs: number; readonly measureMs: number }): Span {
  const start = performance.now() + timing.warmupMs;
  return { start, end: start + timing.measureMs, seconds: timing.measureMs / 1000 };
}

export function inSpan(span: Span, at: number): boolean {
  return at >= span.start && at < span.end;
}

/** The median of a non-empty list (the mean of the middle two for an even count). */
export function median(values: readonly number[]): number {
  if (values.length === 0) throw new RangeError('median of no values');
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[middle] as number) : ((sorted[middle - 1] as number) + (sorted[middle] as number)) / 2;
}

/** One figure over N runs of a suite: as the first run printed it, and its value in each run that did. */
export interface FigureRuns {
  readonly first: Figure;
  readonly values: readonly number[];
}

/** Runs of one suite grouped by figure name, in the order names first appear. */
export function figureRuns(runs: readonly (readonly Figure[])[]): FigureRuns[] {
  const byName = new Map<string, { readonly first: Figure; readonly values: number[] }>();
  for (const run of runs) {
    for (const figure of run) {
      const entry = byName.get(figure.name);
      if (entry === undefined) byName.set(figure.name, { first: figure, values: [figure.value] });
      else entry.values.push(figure.value);
    }
  }
  return [...byName.values()];
}

/** A meta line with the run count added, or `first` with the median of `values`. */
function medianOf({ first, values }: FigureRuns, runCount: number): Figure {
  if (first.unit === 'info') return Object.assign({}, first, { runs: runCount });
  return { suite: first.suite, name: first.name, value: roundTo(median(values), 3), unit: first.unit };
}

/**
 * N runs of one suite folded into one list: each figure's median under its own name, then
 * `<name>.min` and `<name>.max`, in the first run's order. The meta line is the first run's,
 * with `runs` added; a figure missing from some runs is the median of the runs that have it.
 */
export function medianFigures(runs: readonly (readonly Figure[])[]): Figure[] {
  return figureRuns(runs).flatMap((entry) => {
    const folded = medianOf(entry, runs.length);
    if (folded.unit === 'info') return [folded];
    const at = (name: string, value: number): Figure => ({ suite: folded.suite, name, value: roundTo(value, 3), unit: folded.unit });
    return [folded, at(`${folded.name}.min`, Math.min(...entry.values)), at(`${folded.name}.max`, Math.max(...entry.values))];
  });
}

/** N runs folded as medianFigures does, without the `.min` and `.max` figures. */
export function medianOnlyFigures(runs: readonly (readonly Figure[])[]): Figure[] {
  return figureRuns(runs).map((entry) => medianOf(entry, runs.length));
}

/** Figures drawn as bars: memory per timer (or per key), in bytes, from any suite; disk use is not RAM. */
export function ramPerTimerFigures(figures: readonly Figure[]): Figure[] {
  return figures.filter((figure) => figure.unit === 'B' && /per_(timer|key)|ram_per_timer/.test(figure.name) && !figure.name.includes('disk'));
}

/**
 * Draws the run's charts into `runDir`: one SVG per chart a suite handed over, plus
 * `ram_per_timer.svg` when the figures hold memory per timer. Returns the file names.
 */
export async function saveCharts(runDir: string, suite: string, figures: readonly Figure[], charts: readonly ChartData[]): Promise<string[]> {
  const files: [string, string][] = charts.map((chart) => [
    `${chart.name}.svg`,
    lineChartSvg({
      title: chart.kind === 'distribution' ? `${chart.name}: value at each percentile` : `${chart.name} over time`,
      xLabel: chart.kind === 'distribution' ? 'percentile (tail-stretched scale)' : 'seconds',
      yLabel: chart.unit,
      points: chart.points,
      xScale: chart.kind === 'distribution' ? 'tail' : 'linear',
    }),
  ]);
  const ram = ramPerTimerFigures(figures);
  if (ram.length > 0) {
    files.push(['ram_per_timer.svg', barChartSvg({ title: `${suite}: RAM per timer`, unit: 'bytes', bars: ram.map((figure) => ({ label: figure.name, value: figure.value })) })]);
  }
  for (const [name, svg] of files) await writeFile(join(runDir, name), svg);
  return files.map(([name]) => name);
}
