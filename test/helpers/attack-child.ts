// One attack of http-attacks.ts in a process of its own, so that the attacker's CPU does not
// slow the measuring process's own requests. spawnAttacker() (bench/abuse.ts,
// test/reliability/http-abuse.test.ts) runs this file as
//
//   node test/helpers/attack-child.ts ATTACK URL DURATION_MS [IDLE_CONNECTIONS]
//
// which prints one JSON AttackReport line on stdout when it is done. For idle_connections it
// first prints {"ready": N} once the connections are open, holds them DURATION_MS, then reports.
//
// Each attack connects from a loopback address of its own (attackSources), never 127.0.0.1,
// where the legitimate load comes from: the server's per-peer penalty then falls on the
// attacker alone, and a penalty one attack earned does not meet the next attack.
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { type AttackReport, attackLimits, continuationFlood, headerFlood, idleConnections, rapidReset, slowloris } from './http-attacks.ts';

export const attackNames = ['rapid_reset', 'continuation_flood', 'header_flood', 'slowloris', 'idle_connections'] as const;
export type AttackName = (typeof attackNames)[number];

/** The source address each attack connects from. */
export const attackSources: Readonly<Record<AttackName, string>> = {
  rapid_reset: '127.0.0.2',
  continuation_flood: '127.0.0.3',
  header_flood: '127.0.0.4',
  slowloris: '127.0.0.5',
  idle_connections: '127.0.0.6',
};

async function run(name: string, url: string, durationMs: number, idleCount: number): Promise<AttackReport> {
  const port = Number(new URL(url).port);
  switch (name) {
    case 'rapid_reset':
      return rapidReset(url, durationMs, attackSources[name]);
    case 'continuation_flood':
      return continuationFlood(port, durationMs, attackSources[name]);
    case 'header_flood':
      return headerFlood(port, durationMs, attackSources[name]);
    case 'slowloris':
      return slowloris(port, durationMs, attackSources[name]);
    case 'idle_connections': {
      const idle = await idleConnections(port, idleCount, attackSources[name]);
      process.stdout.write(`${JSON.stringify({ ready: idle.opened })}\n`);
      await sleep(durationMs);
      const closed = idle.closedByServer();
      idle.close();
      return { attack: name, facts: { connections: idle.opened, closed_by_server: closed } };
    }
    default:
      throw new Error(`unknown attack ${name} (known: ${attackNames.join(', ')})`);
  }
}

export interface AttackerRun {
  /** Resolves when the attacker is attacking (at once, or once its idle connections are open). */
  readonly started: Promise<void>;
  /** The attacker's report, once it is done (rejects if it died or overran its time). */
  readonly report: Promise<AttackReport>;
}

/** Runs one attack in a child process for `durationMs`; it is killed if it overruns by attackerGraceMs. */
export function spawnAttacker(name: AttackName, url: string, durationMs: number, idleCount: number): AttackerRun {
  const child = spawn(process.execPath, [fileURLToPath(import.meta.url), name, url, String(durationMs), String(idleCount)], { stdio: ['ignore', 'pipe', 'inherit'] });
  const lines = createInterface({ input: child.stdout });
  let markStarted: () => void = () => undefined;
  const started = new Promise<void>((resolve) => (markStarted = resolve));
  if (name !== 'idle_connections') markStarted();
  const timer = setTimeout(() => child.kill('SIGKILL'), durationMs + attackLimits.attackerGraceMs);
  const report = new Promise<AttackReport>((resolve, reject) => {
    let last = '';
    lines.on('line', (line) => {
      if (line.startsWith('{"ready"')) markStarted();
      else last = line;
    });
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      markStarted();
      if (code === 0) resolve(JSON.parse(last) as AttackReport);
      else reject(new Error(`attacker ${name} exited (${code ?? signal})`));
    });
  });
  return { started, report };
}

if (import.meta.main) {
  const [name = '', url = '', durationText = '', idleText = '10000'] = process.argv.slice(2);
  const report = await run(name, url, Number(durationText), Number(idleText));
  // The attacker's own CPU (user + system), which it takes from the cores it shares with the server and the client.
  const { user, system } = process.cpuUsage();
  process.stdout.write(`${JSON.stringify({ ...report, facts: { ...report.facts, attacker_cpu_ms: Math.round((user + system) / 1000) } })}\n`);
}
