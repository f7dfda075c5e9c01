// `npm run bench -- <suite>… [--quick] [--json] [--dir D]`: runs the named suites one after
// another. Figures go to stdout (JSON lines with --json, else a table) and to
// bench/results/<suite>-<timestamp>/ (results.jsonl, summary.md); progress and errors go to stderr, so
// stdout under --json is nothing but figures. Exit 2 for a usage error, 1 if a suite fails.
// A new suite is one entry in `suites`.
import { stat } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { saveResults, type Suite, toJsonLines, toTable } from './report.ts';
import { saveMarkdownSummary } from './summary-markdown.ts';
import { walSuite } from './wal.ts';

const suites: Readonly<Record<string, Suite>> = {
  wal: walSuite,
  store: async (options) => (await import('./store.ts')).storeSuite(options),
  ingest: async (options) => (await import('./ingest.ts')).ingestSuite(options),
  dispatch: async (options) => (await import('./dispatch.ts')).dispatchSuite(options),
  compare: async (options) => (await import('./compare.ts')).compareSuite(options),
  flight: async (options) => (await import('./flight.ts')).flightSuite(options),
  abuse: async (options) => (await import('./abuse.ts')).abuseSuite(options),
  memory: async (options) => (await import('./memory.ts')).memorySuite(options),
  recovery: async (options) => (await import('./recovery.ts')).recoverySuite(options),
};

const usage = `usage: npm run bench -- <suite>... [--quick] [--json] [--dir D]
  suites     ${Object.keys(suites).join(', ')}
  --quick    short measurements (a suite in under 30 s)
  --json     one JSON object per figure on stdout
  --dir D    where temporary directories go (default ${tmpdir()}); put it on the disk to measure`;

const resultsDir = join(import.meta.dirname, 'results');

interface Invocation {
  readonly suiteNames: string[];
  readonly quick: boolean;
  readonly json: boolean;
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
  const unknown = positionals.filter((name) => !Object.hasOwn(suites, name));
  if (unknown.length > 0) usageError(`unknown suite ${unknown.map((name) => `"${name}"`).join(', ')}; known suites: ${Object.keys(suites).join(', ')}`);
  return { suiteNames: positionals, quick: values.quick, json: values.json, baseDir: resolve(values.dir) };
}

async function main(): Promise<void> {
  const invocation = parseInvocation(process.argv.slice(2));
  if (invocation === 'help') {
    process.stdout.write(`${usage}\n`);
    return;
  }
  const isDir = await stat(invocation.baseDir).then((info) => info.isDirectory(), () => false);
  if (!isDir) usageError(`--dir ${invocation.baseDir} is not a directory`);

  const progress = (message: string): void => {
    process.stderr.write(`${message}\n`);
  };
  for (const name of invocation.suiteNames) {
    const suite = suites[name] as Suite;
    const startedAt = new Date();
    const figures = await suite({ quick: invocation.quick, baseDir: invocation.baseDir, progress });
    process.stdout.write(invocation.json ? toJsonLines(figures) : toTable(figures));
    const saved = await saveResults(resultsDir, name, startedAt, figures);
    await saveMarkdownSummary(saved, name, startedAt, figures);
    progress(`${name}: ${((Date.now() - startedAt.getTime()) / 1000).toFixed(1)} s, results in ${saved}`);
  }
}

await main().catch((err: unknown) => {
  process.stderr.write(`bench: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
  process.exitCode = 1;
});
