// `--baseline`: the runs of a suite written into bench/baseline.json as each tracked figure's
// median, min, max and run count, with the commit, day and machine they measured. Only figures
// the file already tracks are written (adding one is a decision: its title, which way is better,
// its target); a tracked figure the runs did not print keeps what it had. Pure functions here;
// bench/run.ts reads the file, calls them after each suite, and writes the file and README.md's
// table. Main thread of the bench process.
import { spawnSync } from 'node:child_process';
import type { Baseline, BaselineFigure, Measured } from '../scripts/baseline-file.ts';
import { type Figure, figureRuns, median, roundTo } from './report.ts';

/** What a session's runs have in common: the commit, the day, the machine and a sentence on the source. */
export interface RunStamp {
  readonly commit: string;
  readonly date: string;
  readonly machine: string;
  readonly source: string;
}

export interface BaselineUpdate {
  readonly baseline: Baseline;
  /** Tracked figures of the suite the runs printed, now measured by them. */
  readonly written: readonly string[];
  /** Tracked figures of the suite no run printed, left as they were. */
  readonly absent: readonly string[];
}

/** The measurement of a figure over the values its runs printed. */
export function measuredOf(values: readonly number[], stamp: RunStamp): Measured {
  return {
    median: roundTo(median(values), 3),
    min: roundTo(Math.min(...values), 3),
    max: roundTo(Math.max(...values), 3),
    runs: values.length,
    commit: stamp.commit,
    date: stamp.date,
    machine: stamp.machine,
    source: stamp.source,
  };
}

/**
 * `baseline` with every tracked figure of `suite` that `runs` printed measured anew. Throws when a
 * run printed a tracked figure in another unit (the file would describe a different figure), or
 * when the stamp names a machine the file does not describe.
 */
export function withSuiteRuns(baseline: Baseline, suite: string, runs: readonly (readonly Figure[])[], stamp: RunStamp): BaselineUpdate {
  if (!Object.hasOwn(baseline.machines, stamp.machine)) throw new Error(`baseline: machine "${stamp.machine}" is not in bench/baseline.json's "machines"`);
  const printed = new Map(figureRuns(runs).map((entry) => [entry.first.name, entry]));
  const written: string[] = [];
  const absent: string[] = [];
  const figures = baseline.figures.map((figure): BaselineFigure => {
    if (figure.suite !== suite) return figure;
    const entry = printed.get(figure.name);
    if (entry === undefined) {
      absent.push(figure.name);
      return figure;
    }
    if (entry.first.unit !== figure.unit) throw new Error(`baseline: ${figure.name} was printed in "${entry.first.unit}", the file has it in "${figure.unit}"`);
    written.push(figure.name);
    return { ...figure, measured: measuredOf(entry.values, stamp) };
  });
  return { baseline: { ...baseline, figures }, written, absent };
}

/** The machine `--machine` names, or the file's only one; throws when that cannot be told. */
export function machineFor(baseline: Baseline, asked: string | undefined): string {
  const keys = Object.keys(baseline.machines);
  if (asked !== undefined) {
    if (!keys.includes(asked)) throw new Error(`--machine ${asked} is not in bench/baseline.json's "machines" (${keys.join(', ')}): describe it there first`);
    return asked;
  }
  if (keys.length !== 1) throw new Error(`bench/baseline.json describes ${keys.length} machines (${keys.join(', ')}): name the one measured with --machine`);
  return keys[0] as string;
}

/** The commit HEAD is at, and whether tracked files differ from it; throws outside a git checkout. */
export function gitHead(root: string): { readonly commit: string; readonly dirty: boolean } {
  const git = (args: readonly string[]): string => {
    const ran = spawnSync('git', [...args], { cwd: root, encoding: 'utf8' });
    if (ran.status !== 0) throw new Error(`--baseline records the commit measured: git ${args.join(' ')} failed (${(ran.stderr || ran.error?.message || '').trim()})`);
    return ran.stdout.trim();
  };
  return { commit: git(['rev-parse', '--short=7', 'HEAD']), dirty: git(['status', '--porcelain', '--untracked-files=no']) !== '' };
}
