// What a schedule's rule costs (engine/schedules/rule.ts), for the `schedules` suite's budget:
// one after(now, 1) call (the next occurrence, as a schedule asks each time it creates one) for
// every_ms and for cron, in UTC and in a zone with daylight saving, fixed-time and elapsed-time
// (the latter pays for the gap correction); one compileRule (a PUT, or a schedule brought back
// at start-up); and the heap a compiled rule holds. Not a suite of bench/run.ts: run it alone,
//
//   node bench/schedule-rule.ts            # one JSON figure a line on stdout (the four keys of bench/README.md)
//
// Each per-call figure is the median of 5 rounds of `calls` calls, with `now` moving 37 minutes
// a call through 2025 so that both daylight-saving changes are crossed; the zone tables are
// built in the warm-up (they are cached per zone and year, as in the service).
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { compileRule, type RuleSpec, type ScheduleRule } from '../engine/schedules/rule.ts';

const suite = 'schedule-rule';
const yearStart = Date.UTC(2025, 0, 1);
const stepMs = 37 * 60_000;
const calls = 20_000;
const rounds = 5;

function emit(name: string, value: number, unit: string): void {
  process.stdout.write(`${JSON.stringify({ suite, name: `schedule_rule.${name}`, value, unit })}\n`);
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
}

/** Nanoseconds per call of `run(i)`, the median of `rounds` rounds after one warm-up round. */
function nsPerCall(run: (i: number) => void, count = calls): number {
  const perRound: number[] = [];
  for (let round = 0; round <= rounds; round++) {
    const started = process.hrtime.bigint();
    for (let i = 0; i < count; i++) run(i);
    const elapsed = Number(process.hrtime.bigint() - started);
    if (round > 0) perRound.push(elapsed / count);
  }
  return median(perRound);
}

const base: RuleSpec = { name: 'bench', anchorMs: yearStart, jitterMs: 0 };
const cases: ReadonlyArray<readonly [string, RuleSpec]> = [
  ['every_ms', { ...base, everyMs: 3_600_000 }],
  ['cron_utc', { ...base, cron: '0 9 * * MON-FRI' }],
  ['cron_berlin_fixed', { ...base, cron: '0 9 * * MON-FRI', timeZone: 'Europe/Berlin' }],
  ['cron_berlin_every15', { ...base, cron: '*/15 * * * *', timeZone: 'Europe/Berlin' }],
];

let sink = 0;
const perCall = new Map<string, number>();
for (const [label, spec] of cases) {
  const rule: ScheduleRule = compileRule(spec);
  const ns = nsPerCall((i) => {
    sink += rule.after(yearStart + ((i * stepMs) % (365 * 86_400_000)), 1)[0] ?? 0;
  });
  perCall.set(label, ns);
  emit(`after1.${label}.ns`, Math.round(ns), 'ns');
}
const every = perCall.get('every_ms') ?? Number.NaN;
emit('after1.cron_berlin_fixed_to_every_ms_ratio', Number(((perCall.get('cron_berlin_fixed') ?? Number.NaN) / every).toFixed(1)), 'ratio');

for (const [label, spec] of cases) {
  const ns = nsPerCall((i) => {
    sink += compileRule({ ...spec, name: `bench-${i}` }).spec.anchorMs;
  }, 2000);
  emit(`compile.${label}.ns`, Math.round(ns), 'ns');
}

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;
/** Heap the rules hold: the heap with them, less the heap once they are dropped (each after a full GC). */
function heapPerRule(spec: RuleSpec, count: number): number {
  let kept: ScheduleRule[] = [];
  for (let i = 0; i < count; i++) kept.push(compileRule({ ...spec, name: `rule-${i}` }));
  gc();
  const withRules = process.memoryUsage().heapUsed;
  sink += kept.length;
  kept = [];
  gc();
  return (withRules - process.memoryUsage().heapUsed) / count;
}

for (const [label, spec] of cases) emit(`heap_per_rule.${label}.bytes`, Math.round(heapPerRule(spec, 100_000)), 'B');

emit('meta', 0, 'info');
process.stderr.write(`node ${process.version}; ${calls} calls a round, median of ${rounds} rounds (sink ${sink > 0 ? 'used' : 'empty'})\n`);
