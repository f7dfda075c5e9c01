// What every benchmark suite shares: the shape of a figure, how figures are printed (JSON
// lines for scripts, an aligned table for people) and stored (bench/results/), and the hdr
// histogram settings. A suite returns figures; only bench/run.ts prints them, so a suite
// never writes to stdout and `--json` output stays one parseable object per line.
//
//   {"suite":"wal","name":"wal.append128.per_s","value":123,"unit":"1/s"}
//
// Every figure has exactly these four keys, in this order. The one exception is a suite's
// `<suite>.meta` line (unit "info", value 0), which carries facts about the machine after them.
import { mkdir, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import * as hdr from 'hdr-histogram-js';

export interface Figure {
  readonly suite: string;
  readonly name: string;
  readonly value: number;
  readonly unit: string;
}

export type Fact = string | number | boolean;

export interface SuiteOptions {
  /** Short measurements (the whole suite well under 30 s) instead of the default long ones. */
  readonly quick: boolean;
  /** Directory under which the suite makes (and removes) its temporary directories. */
  readonly baseDir: string;
  /** Progress for people; goes to stderr. */
  readonly progress: (message: string) => void;
}

export type Suite = (options: SuiteOptions) => Promise<Figure[]>;

const figureKeys: ReadonlySet<string> = new Set(['suite', 'name', 'value', 'unit']);

export function metaLine(suite: string, facts: Readonly<Record<string, Fact>>): Figure {
  return { suite, name: `${suite}.meta`, value: 0, unit: 'info', ...facts };
}

export function roundTo(value: number, decimals: number): number {
  const scale = 10 ** decimals;
  return Math.round(value * scale) / scale;
}

export function toJsonLines(figures: readonly Figure[]): string {
  return figures.map((figure) => JSON.stringify(figure) + '\n').join('');
}

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
