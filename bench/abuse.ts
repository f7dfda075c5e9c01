// The `abuse` suite: how much slower legitimate requests get while fermata is under HTTP abuse.
// A `fermata serve` child on a fresh data directory; this process runs a closed loop of valid
// one-timer JSON adds over HTTP/2 (4 streams); each attack runs in a third process
// (test/helpers/attack-child.ts, the attacks of test/helpers/http-attacks.ts), so the attacker's
// CPU is not this process's. After a 2 s unmeasured warm-up, a baseline (no attack), then each
// attack in turn, each for the same span:
//
//   rapid_reset         HTTP/2 streams opened and cancelled at once, 4 sessions
//   continuation_flood  HEADERS without END_HEADERS, then CONTINUATION frames, connection after connection
//   header_flood        HTTP/1.1 header lines without end, connection after connection
//   slowloris           500 HTTP/1.1 requests whose headers trickle in
//   idle_connections    min(10,000, ulimit -n − 1,024) idle HTTP/2 sessions held open
//
// Figures per phase: abuse.<phase>.p50_ms, .p99_ms, .adds (answered 201 in the span), .failures,
// and for attacks .p99_ratio (p99 ÷ the baseline's p99; the target is ≤ 2). On a 2-core machine
// the server, the attacker and this client share the cores: the ratio includes that contention.
// The attacker's own facts (streams reset, connections closed by the server, …) are printed as
// progress.
import { execFileSync } from 'node:child_process';
import { cpus } from 'node:os';
import { attackNames, spawnAttacker } from '../test/helpers/attack-child.ts';
import { legitimateLoad, quantile } from '../test/helpers/http-attacks.ts';
import { startFermata } from './fermata-child.ts';
import { type Figure, metaLine, roundTo, type SuiteOptions } from './report.ts';

const suite = 'abuse';
const abuseLimits = {
  phaseMsFull: 10_000,
  phaseMsQuick: 3_000,
  warmupMs: 2_000,
  idleConnectionsMax: 10_000,
  descriptorsSpare: 1_024,
} as const;

function openFilesLimit(): number {
  const text = execFileSync('sh', ['-c', 'ulimit -n'], { encoding: 'utf8' }).trim();
  return text === 'unlimited' ? Number.MAX_SAFE_INTEGER : Number(text);
}

function phaseFigures(phase: string, latenciesMs: readonly number[], failures: number, baselineP99Ms: number | undefined): Figure[] {
  const p99 = quantile(latenciesMs, 0.99);
  const figures: Figure[] = [
    { suite, name: `${suite}.${phase}.p50_ms`, value: roundTo(quantile(latenciesMs, 0.5), 2), unit: 'ms' },
    { suite, name: `${suite}.${phase}.p99_ms`, value: roundTo(p99, 2), unit: 'ms' },
    { suite, name: `${suite}.${phase}.adds`, value: latenciesMs.length, unit: 'requests' },
    { suite, name: `${suite}.${phase}.failures`, value: failures, unit: 'requests' },
  ];
  if (baselineP99Ms !== undefined) figures.push({ suite, name: `${suite}.${phase}.p99_ratio`, value: roundTo(p99 / baselineP99Ms, 2), unit: 'ratio' });
  return figures;
}

export async function abuseSuite(options: SuiteOptions): Promise<Figure[]> {
  const phaseMs = options.quick ? abuseLimits.phaseMsQuick : abuseLimits.phaseMsFull;
  const idleCount = Math.min(abuseLimits.idleConnectionsMax, openFilesLimit() - abuseLimits.descriptorsSpare);
  const figures: Figure[] = [metaLine(suite, { node: process.version, cpus: cpus().length, quick: options.quick, phase_ms: phaseMs, idle_connections: idleCount })];
  const server = await startFermata(options.baseDir, suite);
  try {
    // Unmeasured: the server's and this client's code paths compiled before the baseline counts.
    await legitimateLoad(server.url, abuseLimits.warmupMs);
    options.progress(`abuse: baseline, ${phaseMs} ms`);
    const baseline = await legitimateLoad(server.url, phaseMs);
    const baselineP99Ms = quantile(baseline.latenciesMs, 0.99);
    figures.push(...phaseFigures('baseline', baseline.latenciesMs, baseline.failures.length, undefined));
    for (const name of attackNames) {
      options.progress(`abuse: ${name}, ${phaseMs} ms`);
      const attacker = spawnAttacker(name, server.url, phaseMs, idleCount);
      await attacker.started;
      const load = await legitimateLoad(server.url, phaseMs);
      options.progress(`abuse: ${name}: attacker ${JSON.stringify((await attacker.report).facts)}`);
      figures.push(...phaseFigures(name, load.latenciesMs, load.failures.length, baselineP99Ms));
    }
  } finally {
    await server.stop();
  }
  return figures;
}
