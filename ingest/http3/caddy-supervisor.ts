// fermata's HTTP/3 adapter: a `caddy run` child process (Debian package caddy) that terminates
// QUIC and forwards to fermata's cleartext port over h2c (caddy-config.ts). Node's own QUIC is
// not in its official builds and the npm QUIC stacks lack HTTP/3 or are far slower, so a
// production HTTP/3 terminator runs beside the service instead, supervised here:
//
//   start ─► write <dir>/caddy.json ─► spawn ─► healthy within startTimeoutMs? ─ no ─► stop, throw
//                                        ▲                      │ yes
//                                        │                      ▼
//      restart after backoff (doubling, ◄── exit, or healthFailuresMax checks in a row fail
//      reset once it ran stableAfterMs)                         (the child is killed first)
//
//   stop ─► SIGTERM (Caddy finishes requests in flight) ─► SIGKILL after stopTimeoutMs
//
// Caddy writes its pid to <dir>/caddy.pid. A fermata killed with SIGKILL cannot stop its Caddy,
// which would go on holding the HTTP/3 port (the next start's Caddy could not bind it): start
// first stops the process that file names if its command line names this config file.
//
// The health check is GET /healthz through Caddy's TCP side (h2 over TLS, the same server and
// certificate as its QUIC side), so it proves Caddy is up and reaches fermata. Caddy's own
// warnings and errors are relayed to the log. Owned by the main thread's event loop.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import http2 from 'node:http2';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import type { Logger } from 'pino';
import { caddyConfig, type CaddyConfigInput } from './caddy-config.ts';

export const http3Limits = {
  healthIntervalMs: 2_000,
  healthTimeoutMs: 2_000,
  /** Failed health checks in a row before the child is killed and started again. */
  healthFailuresMax: 3,
  /** How long a (re)started Caddy has to answer its first health check. */
  startTimeoutMs: 15_000,
  restartBackoffMsMin: 250,
  restartBackoffMsMax: 30_000,
  /** A child that ran this long resets the backoff to its minimum. */
  stableAfterMs: 60_000,
  stopTimeoutMs: 5_000,
  /** Lines of Caddy's stderr kept to explain an exit. */
  stderrLinesKept: 20,
} as const;

/** What Caddy warns about at every start with this config: on purpose, so not relayed. */
const expectedWarnings = new Set(['admin endpoint disabled', 'automatic HTTPS is completely disabled for server', 'stapling OCSP']);

/** Caddy is not installed: the message names the package. */
export class CaddyMissingError extends Error {
  override readonly name = 'CaddyMissingError';
}

export interface CaddySupervisorOptions {
  /** <data>/http3: the config, the access log and Caddy's own storage go here. */
  readonly dir: string;
  readonly config: Omit<CaddyConfigInput, 'accessLogFile'>;
  readonly logger: Logger;
  /** The caddy executable (default: `caddy` on PATH). */
  readonly binary?: string;
}

const missingMessage = (binary: string): string =>
  `--http3 needs Caddy as its QUIC terminator, and "${binary}" is not installed: install the Debian package caddy (apt-get install caddy)`;

/** Throws CaddyMissingError when `binary version` cannot run. */
export function checkCaddyInstalled(binary = 'caddy'): string {
  const probe = spawnSync(binary, ['version'], { encoding: 'utf8', timeout: 10_000 });
  if (probe.error !== undefined || probe.status !== 0) throw new CaddyMissingError(missingMessage(binary));
  return probe.stdout.trim();
}

export class CaddySupervisor {
  readonly #options: CaddySupervisorOptions;
  readonly #binary: string;
  readonly #configFile: string;
  readonly #pidFile: string;
  readonly accessLogFile: string;
  #child: ChildProcess | undefined;
  #startedAt = 0;
  #backoffMs: number = http3Limits.restartBackoffMsMin;
  #restartTimer: NodeJS.Timeout | undefined;
  #healthTimer: NodeJS.Timeout | undefined;
  #failures = 0;
  #stopping = false;
  /** Until the first health check passes an exit fails start() instead of restarting. */
  #starting = false;
  #restarts = 0;
  readonly #stderr: string[] = [];

  constructor(options: CaddySupervisorOptions) {
    this.#options = options;
    this.#binary = options.binary ?? 'caddy';
    this.#configFile = join(options.dir, 'caddy.json');
    this.#pidFile = join(options.dir, 'caddy.pid');
    this.accessLogFile = join(options.dir, 'access.log');
  }

  /** Times Caddy was started again after an exit or failed health checks. */
  get restarts(): number {
    return this.#restarts;
  }

  get pid(): number | undefined {
    return this.#child?.pid;
  }

  /** Writes the config, starts Caddy and resolves once it answers a health check; throws (after stopping it) if it never does. */
  async start(): Promise<void> {
    const version = checkCaddyInstalled(this.#binary);
    mkdirSync(this.#options.dir, { recursive: true });
    await this.#stopLeftOver();
    writeFileSync(this.#configFile, JSON.stringify(caddyConfig({ ...this.#options.config, accessLogFile: this.accessLogFile }), null, 2));
    this.#starting = true;
    this.#spawn();
    const deadline = Date.now() + http3Limits.startTimeoutMs;
    while (!(await this.#healthy())) {
      if (Date.now() >= deadline || this.#child === undefined) {
        const output = this.#stderr.join('\n');
        await this.stop();
        throw new Error(`Caddy did not answer on ${this.#options.config.host}:${this.#options.config.port} within ${http3Limits.startTimeoutMs} ms; its last lines:\n${output}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    this.#starting = false;
    this.#options.logger.info({ caddy: version, pid: this.#child?.pid, config: this.#configFile, accessLog: this.accessLogFile }, 'caddy running');
    this.#healthTimer = setInterval(() => void this.#check(), http3Limits.healthIntervalMs);
    this.#healthTimer.unref();
  }

  /** Stops Caddy (SIGTERM, SIGKILL after stopTimeoutMs) and supervising it. */
  async stop(): Promise<void> {
    this.#stopping = true;
    clearInterval(this.#healthTimer);
    clearTimeout(this.#restartTimer);
    const child = this.#child;
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
    const exited = once(child, 'exit');
    child.kill('SIGTERM');
    const kill = setTimeout(() => child.kill('SIGKILL'), http3Limits.stopTimeoutMs);
    try {
      await exited;
    } finally {
      clearTimeout(kill);
    }
  }

  #spawn(): void {
    const { dir, logger } = this.#options;
    // Caddy keeps its storage (autosave, locks) under HOME/XDG dirs: inside the data directory, not the user's.
    const env = { ...process.env, HOME: dir, XDG_DATA_HOME: join(dir, 'data'), XDG_CONFIG_HOME: join(dir, 'config') };
    const child = spawn(this.#binary, ['run', '--config', this.#configFile, '--pidfile', this.#pidFile], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    this.#child = child;
    this.#startedAt = Date.now();
    this.#failures = 0;
    createInterface({ input: child.stderr as NodeJS.ReadableStream }).on('line', (line) => this.#relay(line));
    child.on('error', (err) => logger.error({ err }, 'caddy could not be started'));
    child.on('exit', (code, signal) => {
      if (this.#child === child) this.#child = undefined;
      if (this.#stopping || this.#starting) return;
      logger.warn({ code, signal, restartInMs: this.#nextBackoff(), lines: this.#stderr.slice(-5) }, 'caddy exited: starting it again');
      this.#restartTimer = setTimeout(() => {
        this.#restarts++;
        this.#spawn();
        logger.info({ pid: this.#child?.pid, restarts: this.#restarts }, 'caddy restarted');
      }, this.#backoffMs);
    });
  }

  /**
   * Stops the Caddy an earlier life of this data directory left running (fermata killed with
   * SIGKILL): the process caddy.pid names, if its command line is `caddy run` of this config file
   * (a reused pid of another program is left alone). SIGTERM, then SIGKILL after stopTimeoutMs.
   */
  async #stopLeftOver(): Promise<void> {
    let pid: number;
    let commandLine: string[];
    try {
      pid = Number.parseInt(readFileSync(this.#pidFile, 'utf8'), 10);
      commandLine = readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    } catch {
      return; // no pid file, or its process is gone
    }
    if (!commandLine.includes('run') || !commandLine.includes(this.#configFile)) return;
    this.#options.logger.warn({ pid }, 'caddy left running by an earlier start of this data directory: stopping it');
    const gone = (): boolean => {
      try {
        process.kill(pid, 0);
        return false;
      } catch {
        return true;
      }
    };
    const waitGone = async (): Promise<boolean> => {
      const deadline = Date.now() + http3Limits.stopTimeoutMs;
      while (!gone() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
      return gone();
    };
    const signal = (name: NodeJS.Signals): void => {
      try {
        process.kill(pid, name);
      } catch {
        // gone meanwhile
      }
    };
    signal('SIGTERM');
    if (await waitGone()) return;
    signal('SIGKILL');
    // A zombie (nobody reaped it) still answers kill(pid, 0) but holds no port: go on regardless.
    await waitGone();
  }

  #nextBackoff(): number {
    if (Date.now() - this.#startedAt >= http3Limits.stableAfterMs) this.#backoffMs = http3Limits.restartBackoffMsMin;
    else this.#backoffMs = Math.min(this.#backoffMs * 2, http3Limits.restartBackoffMsMax);
    return this.#backoffMs;
  }

  async #check(): Promise<void> {
    if (this.#stopping || this.#child === undefined) return;
    if (await this.#healthy()) {
      this.#failures = 0;
      return;
    }
    if (++this.#failures < http3Limits.healthFailuresMax || this.#stopping) return;
    this.#options.logger.warn({ failures: this.#failures }, 'caddy failed its health checks: killing it (it is started again)');
    this.#child?.kill('SIGKILL');
  }

  /** GET /healthz through Caddy's TLS side; true on a 200 within healthTimeoutMs. */
  async #healthy(): Promise<boolean> {
    const { host, port } = this.#options.config;
    const dialHost = host === '0.0.0.0' ? '127.0.0.1' : host === '::' ? '::1' : host;
    const authority = `https://${dialHost.includes(':') ? `[${dialHost}]` : dialHost}:${port}`;
    return new Promise((resolve) => {
      // Caddy's certificate is the one fermata configured (maybe self-signed): this checks liveness, not identity.
      const session = http2.connect(authority, { rejectUnauthorized: false });
      const done = (ok: boolean): void => {
        clearTimeout(timer);
        session.destroy();
        resolve(ok);
      };
      const timer = setTimeout(() => done(false), http3Limits.healthTimeoutMs);
      session.on('error', () => done(false));
      const request = session.request({ ':path': '/healthz' });
      request.on('response', (headers) => {
        request.resume();
        request.on('end', () => done(headers[':status'] === 200));
      });
      request.on('error', () => done(false));
      request.end();
    });
  }

  #relay(line: string): void {
    this.#stderr.push(line);
    if (this.#stderr.length > http3Limits.stderrLinesKept) this.#stderr.shift();
    let entry: { level?: unknown; msg?: unknown };
    try {
      entry = JSON.parse(line) as { level?: unknown; msg?: unknown };
    } catch {
      return;
    }
    if (entry.level === 'error' || entry.level === 'fatal' || entry.level === 'panic') this.#options.logger.error({ caddy: entry }, `caddy: ${String(entry.msg)}`);
    else if (entry.level === 'warn' && !expectedWarnings.has(String(entry.msg))) this.#options.logger.warn({ caddy: entry }, `caddy: ${String(entry.msg)}`);
  }
}
