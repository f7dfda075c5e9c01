// The `abuse` suite: how much slower legitimate requests get while fermata is under HTTP abuse.
// A `fermata serve` child on a fresh data directory; this process runs a closed loop of valid
// one-timer JSON adds over HTTP/2 (4 streams); each attack runs in a third process
// (test/helpers/attack-child.ts, the attacks of test/helpers/http-attacks.ts), so the attacker's
// CPU is not this process's; each attack connects from its own loopback address (127.0.0.2–6),
// the legitimate load from 127.0.0.1, so the server's per-peer penalty
// (ingest/http/listen/peer-guard.ts) can tell them apart. After a 2 s unmeasured warm-up, a baseline
// (no attack), a control, then each attack in turn, each for the same span:
//
//   busy_loop           no attack: a process that only spins, taking a core as an attacker would
//   rapid_reset         HTTP/2 streams opened and cancelled at once, 4 sessions
//   continuation_flood  HEADERS without END_HEADERS, then CONTINUATION frames, connection after connection
//   header_flood        HTTP/1.1 header lines without end, connection after connection
//   slowloris           500 HTTP/1.1 requests whose headers trickle in
//   idle_connections    min(10,000, ulimit -n − 1,024) idle HTTP/2 sessions held open
//
// Figures per phase: abuse.<phase>.p50_ms, .p99_ms, .adds (answered 201 in the span), .failures,
// .server_cpu_ms (the server process's user + system CPU in the span), and for the control and
// the attacks .p99_ratio (p99 ÷ the baseline's p99; the target is ≤ 2) and .attacker_cpu_ms
// (the attacking or spinning process's CPU, its start included). On a 2-core machine the
// server, the attacker and this client share the cores: the ratio includes that contention,
// and busy_loop's ratio is what the contention alone costs. The attacker's own facts (streams
// reset, connections closed by the server, …) are printed as progress.
import { execFileSync, spawn } from 'node:child_process';
import { once } from 'node:events';
import { readFile } from 'node:fs/promises';
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

const clockTicksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());

/** User + system CPU of process `pid` so far, ms (/proc/PID/stat, Linux). */
async function processCpuMs(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces, so split after its closing paren): utime and stime are the 12th and 13th.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / clockTicksPerSecond;
}

/** A process that only spins for `durationMs`: an attacker's CPU without its traffic. Resolves with its CPU, ms. */
async function busyLoop(durationMs: number): Promise<number> {
  const child = spawn(process.execPath, ['-e', `const end = Date.now() + ${durationMs}; while (Date.now() < end); const u = process.cpuUsage(); console.log((u.user + u.system) / 1000);`], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (text: string) => (out += text));
  await once(child, 'exit');
  return Number(out.trim());
}

interface PhaseResult {
  readonly latenciesMs: readonly number[];
  readonly failures: number;
  readonly serverCpuMs: number;
  readonly attackerCpuMs?: number;
}

function phaseFigures(phase: string, result: PhaseResult, baselineP99Ms: number | undefined): Figure[] {
  const { latenciesMs } = result;
  const p99 = quantile(latenciesMs, 0.99);
  const figures: Figure[] = [
    { suite, name: `${suite}.${phase}.p50_ms`, value: roundTo(quantile(latenciesMs, 0.5), 2), unit: 'ms' },
    { suite, name: `${suite}.${phase}.p99_ms`, value: roundTo(p99, 2), unit: 'ms' },
    { suite, name: `${suite}.${phase}.adds`, value: latenciesMs.length, unit: 'requests' },
    { suite, name: `${suite}.${phase}.failures`, value: result.failures, unit: 'requests' },
    { suite, name: `${suite}.${phase}.server_cpu_ms`, value: Math.round(result.serverCpuMs), unit: 'ms' },
  ];
  if (baselineP99Ms !== undefined) figures.push({ suite, name: `${suite}.${phase}.p99_ratio`, value: roundTo(p99 / baselineP99Ms, 2), unit: 'ratio' });
  if (result.attackerCpuMs !== undefined) figures.push({ suite, name: `${suite}.${phase}.attacker_cpu_ms`, value: Math.round(result.attackerCpuMs), unit: 'ms' });
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
    let cpuMs = await processCpuMs(server.pid);
    /** The server's CPU since the last call. */
    const serverCpuSpan = async (): Promise<number> => {
      const before = cpuMs;
      cpuMs = await processCpuMs(server.pid);
      return cpuMs - before;
    };
    const baseline = await legitimateLoad(server.url, phaseMs);
    const baselineP99Ms = quantile(baseline.latenciesMs, 0.99);
    figures.push(...phaseFigures('baseline', { latenciesMs: baseline.latenciesMs, failures: baseline.failures.length, serverCpuMs: await serverCpuSpan() }, undefined));

    options.progress(`abuse: busy_loop, ${phaseMs} ms`);
    const spinning = busyLoop(phaseMs);
    const control = await legitimateLoad(server.url, phaseMs);
    const controlCpu = { serverCpuMs: await serverCpuSpan(), attackerCpuMs: await spinning };
    figures.push(...phaseFigures('busy_loop', { latenciesMs: control.latenciesMs, failures: control.failures.length, ...controlCpu }, baselineP99Ms));

    for (const name of attackNames) {
      options.progress(`abuse: ${name}, ${phaseMs} ms`);
      const attacker = spawnAttacker(name, server.url, phaseMs, idleCount);
      await attacker.started;
      await serverCpuSpan();
      const load = await legitimateLoad(server.url, phaseMs);
      const serverCpuMs = await serverCpuSpan();
      const { facts } = await attacker.report;
      options.progress(`abuse: ${name}: attacker ${JSON.stringify(facts)}`);
      const attackerCpuMs = facts.attacker_cpu_ms;
      figures.push(...phaseFigures(name, { latenciesMs: load.latenciesMs, failures: load.failures.length, serverCpuMs, ...(attackerCpuMs === undefined ? {} : { attackerCpuMs }) }, baselineP99Ms));
    }
  } finally {
    await server.stop();
  }
  return figures;
}
