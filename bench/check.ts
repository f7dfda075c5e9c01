// `npm run bench -- check`: quick runs read beside bench/baseline.json. This module is the
// verdict, a pure function of the figures a run printed and the baseline, and its two printed
// forms (an aligned table, JSON lines); bench/run.ts runs the suites and prints. Main thread of
// the bench process.
//
// A tracked figure is worse when it is more than worseShareMax of its baseline median on the
// wrong side (below it where higher is better, above it where lower is); exactly that share is
// not worse. The ratio is oriented the same way: value ÷ median where higher is better, median ÷
// value where lower is, so above 1 always reads "better than the baseline". A figure the
// baseline does not track, or tracks without a measurement yet, is printed as having none and
// never fails; so is one whose unit changed. A tracked figure of a suite that ran but did not
// print it (compare without BullMQ) is listed as not printed, and does not fail either.
import type { Baseline, Better, Measured } from '../scripts/baseline-file.ts';
import { type Figure, roundTo } from './report.ts';

/** Worse than the baseline median by more than this share fails the check. */
export const worseShareMax = 0.2;
/** Floating-point slack, so that a figure exactly worseShareMax worse is not called worse. */
const shareSlack = 1e-9;

export type Verdict = 'ok' | 'worse' | 'no baseline' | 'unit differs' | 'not printed';

export interface CheckLine {
  readonly suite: string;
  readonly name: string;
  /** The run's value; null for a tracked figure the run did not print. */
  readonly value: number | null;
  readonly unit: string;
  readonly better: Better | null;
  /** The baseline's last full runs, when it has them. */
  readonly baseline: Measured | null;
  /** value against the baseline median, oriented so that above 1 is better; null when it cannot be formed. */
  readonly ratio: number | null;
  /** How far worse than the median, as a share of it (0.25: 25% worse; ≤ 0: not worse); null without a comparison. */
  readonly worseBy: number | null;
  readonly verdict: Verdict;
  readonly target: number | null;
  /** Whether the value meets the target; null without a target or a value. */
  readonly meetsTarget: boolean | null;
}

/** The share by which `value` is worse than `median`: below it for higher-is-better, above it for lower. */
export function worseShare(value: number, median: number, better: Better): number {
  const wrongWay = better === 'higher' ? median - value : value - median;
  if (median === 0) return wrongWay > 0 ? Infinity : 0;
  return wrongWay / Math.abs(median);
}

function orientedRatio(value: number, median: number, better: Better): number | null {
  const [over, under] = better === 'higher' ? [value, median] : [median, value];
  return under === 0 ? null : over / under;
}

function meets(value: number, target: number | null, better: Better): boolean | null {
  if (target === null) return null;
  return better === 'higher' ? value >= target : value <= target;
}

/**
 * Every figure of `figures` but the meta lines, in their order, each beside its baseline and with
 * its verdict; then the tracked figures of the suites that ran which the run did not print.
 */
export function checkFigures(figures: readonly Figure[], baseline: Baseline): CheckLine[] {
  const tracked = new Map(baseline.figures.map((figure) => [figure.name, figure]));
  const lines: CheckLine[] = [];
  const printed = new Set<string>();
  const suites = new Set<string>();
  for (const figure of figures) {
    suites.add(figure.suite);
    if (figure.unit === 'info') continue;
    printed.add(figure.name);
    const base = { suite: figure.suite, name: figure.name, value: figure.value, unit: figure.unit };
    const known = tracked.get(figure.name);
    if (known === undefined) {
      lines.push({ ...base, better: null, baseline: null, ratio: null, worseBy: null, verdict: 'no baseline', target: null, meetsTarget: null });
      continue;
    }
    const { better, target, measured } = known;
    if (known.unit !== figure.unit) {
      lines.push({ ...base, better, baseline: measured, ratio: null, worseBy: null, verdict: 'unit differs', target, meetsTarget: null });
      continue;
    }
    const meetsTarget = meets(figure.value, target, better);
    if (measured === null) {
      lines.push({ ...base, better, baseline: null, ratio: null, worseBy: null, verdict: 'no baseline', target, meetsTarget });
      continue;
    }
    const worseBy = worseShare(figure.value, measured.median, better);
    const verdict = worseBy > worseShareMax + shareSlack ? 'worse' : 'ok';
    lines.push({ ...base, better, baseline: measured, ratio: orientedRatio(figure.value, measured.median, better), worseBy, verdict, target, meetsTarget });
  }
  for (const known of baseline.figures) {
    if (!suites.has(known.suite) || printed.has(known.name)) continue;
    const { suite, name, unit, better, target, measured } = known;
    lines.push({ suite, name, value: null, unit, better, baseline: measured, ratio: null, worseBy: null, verdict: 'not printed', target, meetsTarget: null });
  }
  return lines;
}

/** Whether the check fails: some figure more than worseShareMax worse than its baseline median. */
export function checkFails(lines: readonly CheckLine[]): boolean {
  return lines.some((line) => line.verdict === 'worse');
}

const number = (value: number): string => value.toLocaleString('en-US', { maximumFractionDigits: 3 });

function baselineCell(measured: Measured | null): string {
  if (measured === null) return '—';
  if (measured.runs === 1) return `${number(measured.median)} (1 run)`;
  return `${number(measured.median)} (${number(measured.min)}–${number(measured.max)}, ${measured.runs} runs)`;
}

function verdictCell(line: CheckLine): string {
  const words =
    line.verdict === 'worse' ? `WORSE by ${Math.round((line.worseBy ?? 0) * 100)}%` : line.verdict === 'unit differs' ? `unit differs from the baseline's` : line.verdict;
  if (line.target === null || line.meetsTarget === null) return words;
  return `${words}; target ${line.better === 'higher' ? '≥' : '≤'} ${number(line.target)} ${line.meetsTarget ? 'met' : 'MISSED'}`;
}

/** The check as an aligned table: figure, value, unit, baseline median (range, runs), oriented ratio, verdict. */
export function checkTable(lines: readonly CheckLine[]): string {
  const rows: string[][] = [
    ['figure', 'value', 'unit', 'baseline median (range, runs)', 'ratio', 'verdict'],
    ...lines.map((line) => [
      line.name,
      line.value === null ? '—' : number(line.value),
      line.unit,
      baselineCell(line.baseline),
      line.ratio === null ? '—' : `${line.ratio.toFixed(2)}×`,
      verdictCell(line),
    ]),
  ];
  const widths = rows[0]?.map((_, column) => Math.max(...rows.map((row) => (row[column] ?? '').length))) ?? [];
  const rightAligned = new Set([1, 3, 4]);
  return rows
    .map((row) => row.map((cell, column) => (rightAligned.has(column) ? cell.padStart(widths[column] ?? 0) : cell.padEnd(widths[column] ?? 0))).join('  ').trimEnd() + '\n')
    .join('');
}

/** One JSON object a line: the figure, its baseline, the oriented ratio and the verdict. */
export function checkJsonLines(lines: readonly CheckLine[]): string {
  return lines
    .map(
      (line) =>
        JSON.stringify({
          suite: line.suite,
          name: line.name,
          value: line.value,
          unit: line.unit,
          better: line.better,
          baseline_median: line.baseline?.median ?? null,
          baseline_min: line.baseline?.min ?? null,
          baseline_max: line.baseline?.max ?? null,
          baseline_runs: line.baseline?.runs ?? null,
          ratio: line.ratio === null ? null : roundTo(line.ratio, 4),
          worse_by: line.worseBy !== null && Number.isFinite(line.worseBy) ? roundTo(line.worseBy, 4) : null,
          verdict: line.verdict,
          target: line.target,
          meets_target: line.meetsTarget,
        }) + '\n',
    )
    .join('');
}

/** One sentence for the end of a check: how many tracked figures were compared, and which were worse. */
export function checkSummary(lines: readonly CheckLine[]): string {
  const compared = lines.filter((line) => line.verdict === 'ok' || line.verdict === 'worse');
  const worse = compared.filter((line) => line.verdict === 'worse');
  const missed = lines.filter((line) => line.meetsTarget === false);
  const missedText = missed.length === 0 ? '' : `; target missed: ${missed.map((line) => line.name).join(', ')}`;
  if (worse.length === 0) return `check: none of ${compared.length} figures with a baseline is more than ${worseShareMax * 100}% worse than its median${missedText}\n`;
  return `check: ${worse.length} of ${compared.length} figures with a baseline more than ${worseShareMax * 100}% worse than their median: ${worse.map((line) => line.name).join(', ')}${missedText}\n`;
}
