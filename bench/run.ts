// `npm run bench -- <suite>… [--quick] [--json] [--runs N] [--dir D] [--baseline [--machine M]]`:
// runs the named suites one after another (`all`: every suite in `allOrder` that is registered).
// Figures go to stdout (JSON lines with --json, else a table) and to
// bench/results/<suite>-<timestamp>/ (results.jsonl, summary.md, *.svg charts); with --runs N
// each figure is the median of N runs, plus its min and max. With --baseline (full runs only),
// each suite's runs are written into bench/baseline.json as its tracked figures' medians and
// ranges (bench/baseline-writer.ts), and README.md's figures table is regenerated.
// `npm run bench -- check [<suite>…]` runs the quick suites (default: all) and prints each figure
// beside its baseline with a verdict (bench/check.ts); it exits 1 when one is more than 20% worse.
// Progress and errors go to stderr (a bar only on a terminal), so stdout under --json is nothing
// but figures (or check lines). Exit 2 for a usage error, 1 if a suite fails. A new suite is one
// entry in `suites` (and in `allOrder` if `all` should run it).
import { stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { tuneHeapGrowth } from '../bin/heap-growth.js';
import { startWithRuntimeSettings } from '../bin/runtime-settings.js';
import { type Baseline, readBaseline, writeBaseline } from '../scripts/baseline-file.ts';
import { writeReadmeFigures } from '../scripts/figures-table.ts';
import { gitHead, machineFor, type RunStamp, withSuiteRuns } from './baseline-writer.ts';
import { checkFails, checkFigures, checkJsonLines, checkSummary, checkTable, type CheckLine } from './check.ts';
import { progressBar } from './progress.ts';
import { type ChartData, type Figure, medianFigures, medianOnlyFigures, saveCharts, saveResults, type Suite, toJsonLines, toTable } from './report.ts';
import { saveMarkdownSummary } from './summary-markdown.ts';
import { walSuite } from './wal.ts';

// The benchmarks measure fermata as `fermata serve` runs it, so with the same memory pages and V8
// thread pool (their child processes inherit the environment) and the same heap growth
// (in-process suites).
startWithRuntimeSettings(import.meta.filename);
tuneHeapGrowth();

const suites: Readonly<Record<string, Suite>> = {
  wal: walSuite,
  store: async (options) => (await import('./store.ts')).storeSuite(options),
  ingest: async (options) => (await import('./ingest.ts')).ingestSuite(options),
  dispatch: async (options) => (await import('./dispatch.ts')).dispatchSuite(options),
  compare: async (options) => (await import('./compare.ts')).compareSuite(options),
  flight: async (options) => (await import('./flight.ts')).flightSuite(options),
  grpc: async (options) => (await import('./grpc.ts')).grpcSuite(options),
  http3: async (options) => (await import('./http3.ts')).http3Suite(options),
  abuse: async (options) => (await import('./abuse.ts')).abuseSuite(options),
  memory: async (options) => (await import('./memory.ts')).memorySuite(options),
  recovery: async (options) => (await import('./recovery.ts')).recoverySuite(options),
  'h2-clients': async (options) => (await import('./h2-clients.ts')).h2ClientsSuite(options),
  lifecycle: async (options) => (await import('./lifecycle.ts')).lifecycleSuite(options),
  ui: async (options) => (await import('./ui.ts')).uiSuite(options),
  schedules: async (options) => (await import('./schedules.ts')).schedulesSuite(options),
  'pg-log': async (options) => (await import('./pg-log.ts')).pgLogSuite(options),
  cluster: async (options) => (await import('./cluster.ts')).clusterSuite(options),
  clients: async (options) => (await import('./clients.ts')).clientsSuite(options),
};

/**
 * What `all` runs, in this order: the measurement suites, not flight, http3, h2-clients and abuse
 * (protocol and client comparisons, hostile-input checks; http3 also needs caddy and chromium). Names not
 * registered yet are skipped, so a suite being built elsewhere joins `all` by being registered.
 */
const allOrder: readonly string[] = ['wal', 'store', 'ingest', 'dispatch', 'memory', 'recovery', 'lifecycle', 'schedules', 'compare'];
const runsMax = 99;

const usage = `usage: npm run bench -- <suite>... [--quick] [--json] [--runs N] [--dir D] [--baseline [--machine M]]
       npm run bench -- check [<suite>...] [--json] [--runs N] [--dir D]
  suites     ${Object.keys(suites).join(', ')}, all (${allOrder.filter((name) => Object.hasOwn(suites, name)).join(', ')})
  check      run the quick suites (all without names) and read each figure beside bench/baseline.json;
             exit 1 when one is more than 20% worse than its baseline median
  --quick    short measurements (a suite in about a minute at most)
  --json     one JSON object per figure (per check line) on stdout
  --runs N   run each suite N times (1-${runsMax}); each figure is the median, with .min and .max
  --dir D    where temporary directories go (default ${tmpdir()}); put it on the disk to measure
  --baseline write each suite's tracked figures (median, min, max, runs, commit, date, machine) into
             bench/baseline.json and regenerate README.md's figures table; full runs only
  --machine M  the key in baseline.json's "machines" of the machine measured (default: its only one)`;

const root = join(import.meta.dirname, '..');
const resultsDir = join(import.meta.dirname, 'results');

interface Invocation {
  readonly mode: 'run' | 'check';
  readonly suiteNames: string[];
  readonly quick: boolean;
  readonly json: boolean;
  readonly runs: number;
  readonly baseDir: string;
  /** With --baseline: what the written figures are stamped with. */
  readonly stamp: RunStamp | undefined;
}

function usageError(message: string): never {
  process.stderr.write(`bench: ${message}\n${usage}\n`);
  process.exit(2);
}

function parseInvocation(args: string[]): Invocation | 'help' {
  let parsed;
  try {
    parsed = parseArgs({
      args,
      allowPositionals: true,
      options: {
        quick: { type: 'boolean', default: false },
        json: { type: 'boolean', default: false },
        runs: { type: 'string', default: '1' },
        dir: { type: 'string', default: tmpdir() },
        baseline: { type: 'boolean', default: false },
        machine: { type: 'string' },
        help: { type: 'boolean', short: 'h', default: false },
      },
    });
  } catch (err) {
    usageError(err instanceof Error ? err.message : String(err));
  }
  const { values } = parsed;
  if (values.help) return 'help';
  const mode = parsed.positionals[0] === 'check' ? 'check' : 'run';
  const positionals = mode === 'check' ? parsed.positionals.slice(1) : parsed.positionals;
  if (mode === 'run' && positionals.length === 0) usageError('name a suite to run');
  const unknown = positionals.filter((name) => name !== 'all' && !Object.hasOwn(suites, name));
  if (unknown.length > 0) usageError(`unknown suite ${unknown.map((name) => `"${name}"`).join(', ')}; known suites: ${Object.keys(suites).join(', ')}, all`);
  const runs = Number(values.runs);
  if (!/^\d+$/.test(values.runs) || runs < 1 || runs > runsMax) usageError(`--runs wants a whole number from 1 to ${runsMax}, not "${values.runs}"`);
  if (values.baseline && (mode === 'check' || values.quick)) usageError('--baseline records full runs: not with check or --quick');
  if (values.machine !== undefined && !values.baseline) usageError('--machine goes with --baseline');
  const named = mode === 'check' && positionals.length === 0 ? ['all'] : positionals;
  const suiteNames = named.flatMap((name) => (name === 'all' ? allOrder.filter((known) => Object.hasOwn(suites, known)) : [name]));
  let stamp: RunStamp | undefined;
  if (values.baseline) {
    try {
      stamp = baselineStamp(readBaseline(root), values.machine, runs, args);
    } catch (err) {
      usageError(err instanceof Error ? err.message : String(err));
    }
  }
  return { mode, suiteNames, quick: mode === 'check' || values.quick, json: values.json, runs, baseDir: resolve(values.dir), stamp };
}

/** What --baseline stamps the figures with; the commit and the tree's state are read before any suite runs. */
function baselineStamp(baseline: Baseline, machine: string | undefined, runs: number, args: readonly string[]): RunStamp {
  const head = gitHead(root);
  const command = `\`npm run bench -- ${args.join(' ')}\``;
  return {
    commit: head.commit,
    date: new Date().toISOString().slice(0, 10),
    machine: machineFor(baseline, machine),
    source: `${runs === 1 ? 'one full run' : `${runs} full runs one after another`} of ${command}${head.dirty ? ', on HEAD with uncommitted changes' : ''}`,
  };
}

/** Writes a suite's runs into bench/baseline.json and README.md's table; says what it wrote on stderr. */
function recordBaseline(suite: string, runs: readonly (readonly Figure[])[], stamp: RunStamp, progress: (message: string) => void): void {
  const update = withSuiteRuns(readBaseline(root), suite, runs, stamp);
  writeBaseline(root, update.baseline);
  writeReadmeFigures(root, update.baseline);
  progress(`${suite}: bench/baseline.json: wrote ${update.written.length} figures${update.absent.length > 0 ? `; not printed, left as they were: ${update.absent.join(', ')}` : ''}`);
}

async function main(): Promise<void> {
  const invocation = parseInvocation(process.argv.slice(2));
  if (invocation === 'help') {
    process.stdout.write(`${usage}\n`);
    return;
  }
  const isDir = await stat(invocation.baseDir).then((info) => info.isDirectory(), () => false);
  if (!isDir) usageError(`--dir ${invocation.baseDir} is not a directory`);

  const { suiteNames, runs } = invocation;
  const baseline = invocation.mode === 'check' ? readBaseline(root) : undefined;
  const checked: CheckLine[] = [];
  const bar = progressBar(process.stderr, suiteNames.length * runs);
  const progress = (message: string): void => {
    bar.log(message);
  };
  try {
    for (const [index, name] of suiteNames.entries()) {
      const suite = suites[name] as Suite;
      const startedAt = new Date();
      const runFigures: Figure[][] = [];
      let charts: ChartData[] = [];
      for (let run = 0; run < runs; run++) {
        bar.update(index * runs + run, runs > 1 ? `${name} (run ${run + 1} of ${runs})` : name);
        // Charts are the last run's: a distribution has no meaningful median across runs.
        const collected: ChartData[] = [];
        runFigures.push(await suite({ quick: invocation.quick, baseDir: invocation.baseDir, progress, chart: (chart) => collected.push(chart) }));
        charts = collected;
      }
      const figures = runs > 1 ? medianFigures(runFigures) : (runFigures[0] as Figure[]);
      if (baseline !== undefined) {
        const lines = checkFigures(runs > 1 ? medianOnlyFigures(runFigures) : figures, baseline);
        checked.push(...lines);
        process.stdout.write(invocation.json ? checkJsonLines(lines) : checkTable(lines));
      } else {
        process.stdout.write(invocation.json ? toJsonLines(figures) : toTable(figures));
      }
      const saved = await saveResults(resultsDir, name, startedAt, figures);
      const chartFiles = await saveCharts(dirname(saved), name, figures, charts);
      await saveMarkdownSummary(saved, name, startedAt, figures, chartFiles);
      progress(`${name}: ${((Date.now() - startedAt.getTime()) / 1000).toFixed(1)} s, results in ${saved}`);
      if (invocation.stamp !== undefined) recordBaseline(name, runFigures, invocation.stamp, progress);
    }
  } finally {
    bar.finish();
  }
  if (baseline !== undefined) {
    process.stderr.write(checkSummary(checked));
    if (checkFails(checked)) process.exitCode = 1;
  }
}

await main().catch((err: unknown) => {
  process.stderr.write(`bench: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exitCode = 1;
});
