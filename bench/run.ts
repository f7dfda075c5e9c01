// `npm run bench -- <suite>… [--quick] [--json] [--runs N] [--dir D]`: runs the named suites one
// after another (`all`: every suite in `allOrder` that is registered). Figures go to stdout (JSON
// lines with --json, else a table) and to bench/results/<suite>-<timestamp>/ (results.jsonl,
// summary.md, *.svg charts); with --runs N each figure is the median of N runs, plus its min and
// max. Progress and errors go to stderr (a bar only on a terminal), so stdout under --json is
// nothing but figures. Exit 2 for a usage error, 1 if a suite fails. A new suite is one entry in
// `suites` (and in `allOrder` if `all` should run it).
import { stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { tuneHeapGrowth } from '../bin/heap-growth.js';
import { startWithRuntimeSettings } from '../bin/runtime-settings.js';
import { progressBar } from './progress.ts';
import { type ChartData, type Figure, medianFigures, saveCharts, saveResults, type Suite, toJsonLines, toTable } from './report.ts';
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
  http3: async (options) => (await import('./http3.ts')).http3Suite(options),
  abuse: async (options) => (await import('./abuse.ts')).abuseSuite(options),
  memory: async (options) => (await import('./memory.ts')).memorySuite(options),
  recovery: async (options) => (await import('./recovery.ts')).recoverySuite(options),
  'h2-clients': async (options) => (await import('./h2-clients.ts')).h2ClientsSuite(options),
};

/**
 * What `all` runs, in this order: the measurement suites, not flight, http3, h2-clients and abuse
 * (protocol and client comparisons, hostile-input checks; http3 also needs caddy and chromium). Names not
 * registered yet are skipped, so a suite being built elsewhere joins `all` by being registered.
 */
const allOrder: readonly string[] = ['wal', 'store', 'ingest', 'dispatch', 'memory', 'recovery', 'compare'];
const runsMax = 99;

const usage = `usage: npm run bench -- <suite>... [--quick] [--json] [--runs N] [--dir D]
  suites     ${Object.keys(suites).join(', ')}, all (${allOrder.filter((name) => Object.hasOwn(suites, name)).join(', ')})
  --quick    short measurements (a suite in under 30 s)
  --json     one JSON object per figure on stdout
  --runs N   run each suite N times (1-${runsMax}); each figure is the median, with .min and .max
  --dir D    where temporary directories go (default ${tmpdir()}); put it on the disk to measure`;

const resultsDir = join(import.meta.dirname, 'results');

interface Invocation {
  readonly suiteNames: string[];
  readonly quick: boolean;
  readonly json: boolean;
  readonly runs: number;
  readonly baseDir: string;
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
        help: { type: 'boolean', short: 'h', default: false },
      },
    });
  } catch (err) {
    usageError(err instanceof Error ? err.message : String(err));
  }
  const { values, positionals } = parsed;
  if (values.help) return 'help';
  if (positionals.length === 0) usageError('name a suite to run');
  const unknown = positionals.filter((name) => name !== 'all' && !Object.hasOwn(suites, name));
  if (unknown.length > 0) usageError(`unknown suite ${unknown.map((name) => `"${name}"`).join(', ')}; known suites: ${Object.keys(suites).join(', ')}, all`);
  const runs = Number(values.runs);
  if (!/^\d+$/.test(values.runs) || runs < 1 || runs > runsMax) usageError(`--runs wants a whole number from 1 to ${runsMax}, not "${values.runs}"`);
  const suiteNames = positionals.flatMap((name) => (name === 'all' ? allOrder.filter((known) => Object.hasOwn(suites, known)) : [name]));
  return { suiteNames, quick: values.quick, json: values.json, runs, baseDir: resolve(values.dir) };
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
      process.stdout.write(invocation.json ? toJsonLines(figures) : toTable(figures));
      const saved = await saveResults(resultsDir, name, startedAt, figures);
      const chartFiles = await saveCharts(dirname(saved), name, figures, charts);
      await saveMarkdownSummary(saved, name, startedAt, figures, chartFiles);
      progress(`${name}: ${((Date.now() - startedAt.getTime()) / 1000).toFixed(1)} s, results in ${saved}`);
    }
  } finally {
    bar.finish();
  }
}

await main().catch((err: unknown) => {
  process.stderr.write(`bench: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exitCode = 1;
});
