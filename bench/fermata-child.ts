// `fermata serve` as a child process for the compare suite: a fresh data directory under the
// suite's --dir, 127.0.0.1 port 0, the service's own FERMATA_* variables kept out of its
// environment. Resolved once its "listening" line names the URL; stopped with SIGTERM (SIGKILL
// if it lingers) and its directory removed. Its resident set is read from /proc (Linux).
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const fermataBin = fileURLToPath(new URL('../bin/fermata.js', import.meta.url));
/** It must be listening, and later gone after SIGTERM, within this. */
const childTimeoutMs = 30_000;

export interface FermataChild {
  readonly url: string;
  readonly pid: number;
  /** VmRSS of the server process, bytes. */
  residentBytes(): Promise<number>;
  stop(): Promise<void>;
}

export async function startFermata(baseDir: string, label: string): Promise<FermataChild> {
  const dir = await mkdtemp(join(baseDir, `fermata-bench-${label}-`));
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('FERMATA_')));
  const child = spawn(process.execPath, [fermataBin, 'serve', '--data', join(dir, 'data'), '--listen', '127.0.0.1:0'], { env, stdio: ['ignore', 'pipe', 'inherit'] });
  const stop = async (): Promise<void> => {
    await stopChild(child);
    await rm(dir, { recursive: true, force: true });
  };
  try {
    const url = await listeningUrl(child);
    const pid = child.pid as number;
    return { url, pid, residentBytes: () => residentBytes(pid), stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

async function listeningUrl(child: ChildProcess): Promise<string> {
  const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
  const timer = setTimeout(() => child.kill('SIGKILL'), childTimeoutMs);
  try {
    for await (const text of lines) {
      const url = listeningLineUrl(text);
      if (url !== undefined) {
        // Keep reading (and dropping) its log, so a full pipe never blocks the server.
        child.stdout?.resume();
        return url;
      }
    }
    throw new Error(`fermata serve exited before listening (${child.exitCode ?? child.signalCode})`);
  } finally {
    clearTimeout(timer);
  }
}

function listeningLineUrl(text: string): string | undefined {
  try {
    const line = JSON.parse(text) as { msg?: unknown; url?: unknown };
    return line.msg === 'listening' && typeof line.url === 'string' ? line.url : undefined;
  } catch {
    return undefined;
  }
}

async function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), childTimeoutMs);
  try {
    await exited;
  } finally {
    clearTimeout(timer);
  }
}

export async function residentBytes(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, 'utf8');
  const match = /^VmRSS:\s+(\d+) kB$/m.exec(status);
  if (match === null) throw new Error(`/proc/${pid}/status has no VmRSS line`);
  return Number(match[1]) * 1024;
}
