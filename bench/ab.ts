// `node bench/ab.ts --before DIR --after DIR [--runs N] [--quick] SUITE…`: the same suites run
// alternately in two checkouts of fermata (before, after, before, after, … N times each), so both
// sides meet the same machine states; prints one JSON line a figure with each side's median, min
// and max and the ratio of the medians (after ÷ before). Each checkout needs its own `npm ci`.
// Progress goes to stderr; stdout is only figures.
import { spawnSync } from 'node:child_process';
import { join, resolve } from 'node:path';
import { parseArgs } from 'node:util';
import { median } from './report.ts';

interface Sample {
  readonly name: string;
  readonly value: number;
  readonly unit: string;
}

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: {
    before: { type: 'string' },
    after: { type: 'string' },
    runs: { type: 'string', default: '5' },
    quick: { type: 'boolean', default: false },
  },
});
if (values.before === undefined || values.after === undefined || positionals.length === 0) {
  process.stderr.write('usage: node bench/ab.ts --before DIR --after DIR [--runs N] [--quick] SUITE...\n');
  process.exit(2);
}
const runs = Number(values.runs);
const sides = { before: resolve(values.before), after: resolve(values.after) } as const;

function runSuites(dir: string): Sample[] {
  const args = [join(dir, 'bench/run.ts'), ...positionals, '--json', ...(values.quick ? ['--quick'] : [])];
  const run = spawnSync(join(dir, 'node_modules/.bin/node'), args, { cwd: dir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 64 << 20 });
  if (run.status !== 0) throw new Error(`bench in ${dir} exited ${run.status}`);
  return run.stdout
    .split('\n')
    .filter((line) => line.startsWith('{'))
    .map((line) => JSON.parse(line) as Sample)
    .filter((sample) => sample.unit !== 'info' && Number.isFinite(sample.value));
}

const samples = { before: new Map<string, number[]>(), after: new Map<string, number[]>() };
const units = new Map<string, string>();
for (let run = 1; run <= runs; run++) {
  for (const side of ['before', 'after'] as const) {
    process.stderr.write(`ab: run ${run}/${runs} ${side} (${sides[side]})\n`);
    for (const sample of runSuites(sides[side])) {
      const list = samples[side].get(sample.name) ?? [];
      list.push(sample.value);
      samples[side].set(sample.name, list);
      units.set(sample.name, sample.unit);
    }
  }
}

const summary = (list: readonly number[] | undefined) => (list === undefined ? undefined : { median: median(list), min: Math.min(...list), max: Math.max(...list), runs: list.length });
for (const [name, unit] of units) {
  const before = summary(samples.before.get(name));
  const after = summary(samples.after.get(name));
  const ratio = before !== undefined && after !== undefined && before.median !== 0 ? after.median / before.median : null;
  process.stdout.write(`${JSON.stringify({ name, unit, before, after, ratio })}\n`);
}
