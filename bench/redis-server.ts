// Redis for the compare suite: makes sure a `redis-server` binary is there (Debian's package,
// installed with apt-get as root or `sudo -n` otherwise; never by downloading anything else),
// and runs one as a child process on 127.0.0.1, on a free port, with its data in a directory
// of the caller's, AOF on (`appendonly yes`) with the fsync policy asked for, no RDB snapshots.
// Stopped with SIGTERM (SIGKILL if it lingers); the caller removes the directory.
import { type ChildProcess, execFile, spawn } from 'node:child_process';
import net from 'node:net';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { stopChild } from './fermata-child.ts';

export type AppendFsync = 'everysec' | 'always';

export type RedisAvailability = { readonly kind: 'ready'; readonly version: string } | { readonly kind: 'unavailable'; readonly reason: string };

export interface RedisServer {
  readonly port: number;
  readonly pid: number;
  readonly fsync: AppendFsync;
  stop(): Promise<void>;
}

const installTimeoutMs = 10 * 60_000;
const startTimeoutMs = 20_000;
const stopTimeoutMs = 60_000;
/** Tries at a free port: another process may take the one we found before redis binds it. */
const startTries = 3;

interface Ran {
  readonly ok: boolean;
  readonly output: string;
}

function run(command: string, args: readonly string[], timeoutMs: number): Promise<Ran> {
  return new Promise((resolve) => {
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
    execFile(command, [...args], { encoding: 'utf8', timeout: timeoutMs, env, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      resolve({ ok: err === null, output: `${stdout}${stderr}`.trim() || (err?.message ?? '') });
    });
  });
}

async function redisVersion(): Promise<string | undefined> {
  const ran = await run('redis-server', ['--version'], 10_000);
  if (!ran.ok) return undefined;
  return /v=(\S+)/.exec(ran.output)?.[1] ?? ran.output;
}

/** redis-server on the PATH, installing Debian's package when it is not and this user may. */
export async function ensureRedisServer(progress: (message: string) => void): Promise<RedisAvailability> {
  const present = await redisVersion();
  if (present !== undefined) return { kind: 'ready', version: present };
  const asRoot = process.getuid?.() === 0;
  const apt = (args: readonly string[]): Promise<Ran> => (asRoot ? run('apt-get', args, installTimeoutMs) : run('sudo', ['-n', 'apt-get', ...args], installTimeoutMs));
  progress(`compare: redis-server is not installed; installing Debian's redis-server with ${asRoot ? 'apt-get' : 'sudo -n apt-get'}`);
  let installed = await apt(['install', '-y', '--no-install-recommends', 'redis-server']);
  if (!installed.ok) {
    // A fresh machine may not have read the package lists yet.
    const updated = await apt(['update']);
    if (updated.ok) installed = await apt(['install', '-y', '--no-install-recommends', 'redis-server']);
  }
  const version = await redisVersion();
  if (version !== undefined) return { kind: 'ready', version };
  const last = installed.output.split('\n').slice(-3).join(' / ');
  return { kind: 'unavailable', reason: `redis-server could not be installed (${asRoot ? 'apt-get' : 'sudo -n apt-get'}: ${last})` };
}

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const port = (server.address() as net.AddressInfo).port;
      server.close(() => resolve(port));
    });
  });
}

/** Starts redis-server with its files in `dir`; resolves once it accepts connections. */
export async function startRedis(dir: string, fsync: AppendFsync): Promise<RedisServer> {
  let lastError: unknown;
  for (let attempt = 0; attempt < startTries; attempt++) {
    try {
      return await startOnce(dir, fsync, await freePort());
    } catch (err) {
      lastError = err;
      await sleep(100);
    }
  }
  throw lastError;
}

async function startOnce(dir: string, fsync: AppendFsync, port: number): Promise<RedisServer> {
  const args = [
    '--port', String(port),
    '--bind', '127.0.0.1',
    '--dir', dir,
    '--appendonly', 'yes',
    '--appendfsync', fsync,
    '--save', '',
    '--daemonize', 'no',
    '--protected-mode', 'yes',
    // BullMQ needs every key kept: no eviction.
    '--maxmemory-policy', 'noeviction',
    '--logfile', '',
  ];
  const child: ChildProcess = spawn('redis-server', args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  const lines = createInterface({ input: child.stdout as NodeJS.ReadableStream });
  const ready = new Promise<void>((resolve, reject) => {
    lines.on('line', (line) => {
      output += line + '\n';
      if (line.includes('Ready to accept connections')) resolve();
    });
    child.once('exit', (code, signal) => reject(new Error(`redis-server exited (${code ?? signal}) before it was ready:\n${output}`)));
  });
  const timer = setTimeout(() => child.kill('SIGKILL'), startTimeoutMs);
  try {
    await ready;
  } finally {
    clearTimeout(timer);
  }
  // Keep draining its output so a full pipe never blocks it.
  child.stdout?.resume();
  return { port, pid: child.pid as number, fsync, stop: () => stopChild(child, stopTimeoutMs) };
}


/** `used_memory` from INFO memory text: bytes the allocator has handed out. */
export function usedMemoryBytes(info: string): number {
  const match = /^used_memory:(\d+)\r?$/m.exec(info);
  if (match === null) throw new Error(`INFO memory has no used_memory line:\n${info}`);
  return Number(match[1]);
}
