// `fermata serve` (or another Node server) as a child process for the benchmarks: a fresh data directory under the
// suite's --dir, 127.0.0.1 port 0, the service's own FERMATA_* variables kept out of its
// environment. Resolved once its "listening" line names the URL; its error lines then go to
// stderr. Stopped with SIGTERM (SIGKILL if it lingers) and its directory removed. Its resident set is read from /proc (Linux).
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

/** It must be listening, and later gone after SIGTERM, within this. */
const childTimeoutMs = 30_000;

export interface ListeningChild {
  readonly url: string;
  readonly pid: number;
  /** SIGTERM (SIGKILL if it lingers), then its directory is removed. */
  stop(): Promise<void>;
}

export interface FermataChild extends ListeningChild {
  /** VmRSS of the server process, bytes. */
  residentBytes(): Promise<number>;
}

export const fermataBin = fileURLToPath(new URL('../bin/fermata.js', import.meta.url));

/**
 * A Node child process (`argsFor` its fresh directory under `baseDir`), without the service's
 * FERMATA_* variables, resolved once its first "listening" log line names the URL.
 */
export async function startListeningChild(baseDir: string, label: string, argsFor: (dir: string) => string[]): Promise<ListeningChild> {
  const dir = await mkdtemp(join(baseDir, `fermata-bench-${label}-`));
  const env = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.startsWith('FERMATA_')));
  const child = spawn(process.execPath, argsFor(dir), { env, stdio: ['ignore', 'pipe', 'inherit'] });
  const stop = async (): Promise<void> => {
    await stopChild(child);
    await rm(dir, { recursive: true, force: true });
  };
  try {
    const url = await listeningUrl(child);
    return { url, pid: child.pid as number, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}

export interface FermataOptions {
  /** Serve this data directory (the caller's to remove) instead of a fresh one under the child's directory: a restart sees what the last run left. */
  readonly dataDir?: string;
  /** More `fermata serve` options (e.g. `--memory-budget 2MiB`). */
  readonly args?: readonly string[];
}

export async function startFermata(baseDir: string, label: string, options: FermataOptions = {}): Promise<FermataChild> {
  const child = await startListeningChild(baseDir, label, (dir) => [fermataBin, 'serve', '--data', options.dataDir ?? join(dir, 'data'), '--listen', '127.0.0.1:0', ...(options.args ?? [])]);
  return { ...child, residentBytes: () => residentBytes(child.pid) };
}

async function listeningUrl(child: ChildProcess): Promise<string> {
  const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
  const timer = setTimeout(() => child.kill('SIGKILL'), childTimeoutMs);
  try {
    for await (const text of lines) {
      const url = listeningLineUrl(text);
      if (url !== undefined) {
        // Keep reading its log, so a full pipe never blocks the server; its errors go to our
        // stderr (a suite's stdout holds figures only), so a 500 a suite meets names its cause.
        createInterface({ input: child.stdout as NodeJS.ReadableStream }).on('line', (line) => {
          if (/"level":[56]0/.test(line)) process.stderr.write(`fermata (pid ${child.pid}) logged: ${line}\n`);
        });
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

/** SIGTERM, then SIGKILL if it is still there after `killAfterMs`; resolves once it has exited. */
export async function stopChild(child: ChildProcess, killAfterMs: number = childTimeoutMs): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = once(child, 'exit');
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), killAfterMs);
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
