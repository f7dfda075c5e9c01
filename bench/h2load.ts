// h2load (nghttp2's HTTP/2 load generator; Debian package nghttp2-client) as a client that is
// not this project's code and runs in a process of its own: the ingest benchmark drives the
// server with it, and test/integration/h2load.test.ts checks the server against it. This module
// finds the binary, runs it bounded in time, and reads its summary and its per-request log.
//
//   finished in 540.07ms, 3703.23 req/s, 445.58KB/s
//   requests: 2000 total, 2000 started, 2000 done, 2000 succeeded, 0 failed, 0 errored, 0 timeout
//   status codes: 2000 2xx, 0 3xx, 0 4xx, 0 5xx
//
// The --log-file rows are tab-separated: start (µs since the epoch), status, µs to the end of
// the response.
import { execFile, execFileSync } from 'node:child_process';
import { readFile } from 'node:fs/promises';

/** Whether h2load is on the PATH (`h2load --version` answers). */
export const h2loadPresent: boolean = (() => {
  try {
    execFileSync('h2load', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

export const h2loadMissing = 'h2load is not installed (Debian: apt-get install nghttp2-client)';

export interface H2loadSummary {
  /** "Application protocol:" as negotiated: h2c on cleartext, h2 by ALPN over TLS. */
  readonly protocol: string;
  /** Seconds of the measured span ("finished in"). */
  readonly seconds: number;
  readonly requestsPerS: number;
  readonly total: number;
  readonly done: number;
  readonly succeeded: number;
  readonly failed: number;
  readonly errored: number;
  readonly timeout: number;
  readonly status2xx: number;
  readonly status3xx: number;
  readonly status4xx: number;
  readonly status5xx: number;
}

export interface H2loadRun {
  readonly summary: H2loadSummary;
  /** h2load's whole stdout, for messages when an assertion about it fails. */
  readonly output: string;
}

/** Runs h2load with `args`; rejects when it fails to run, exits non-zero or outlives `timeoutMs`. */
export function runH2load(args: readonly string[], timeoutMs: number): Promise<H2loadRun> {
  return new Promise((resolve, reject) => {
    execFile('h2load', [...args], { encoding: 'utf8', timeout: timeoutMs, killSignal: 'SIGKILL', maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      if (err !== null) {
        reject(new Error(`h2load ${args.join(' ')}: ${err.message}\n${stdout}\n${stderr}`));
        return;
      }
      try {
        resolve({ summary: parseH2loadSummary(stdout), output: stdout });
      } catch (parseError) {
        reject(parseError);
      }
    });
  });
}

export function parseH2loadSummary(output: string): H2loadSummary {
  const find = (pattern: RegExp, what: string): RegExpExecArray => {
    const match = pattern.exec(output);
    if (match === null) throw new Error(`h2load's output has no ${what}:\n${output}`);
    return match;
  };
  const finished = find(/^finished in ([\d.]+)(ms|s), ([\d.]+) req\/s/m, '"finished in" line');
  const requests = find(/^requests: (\d+) total, \d+ started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout/m, '"requests:" line');
  const statuses = find(/^status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx/m, '"status codes:" line');
  const protocol = /^Application protocol: (\S+)/m.exec(output)?.[1] ?? 'none';
  const n = (match: RegExpExecArray, group: number): number => Number(match[group]);
  return {
    protocol,
    seconds: n(finished, 1) / (finished[2] === 'ms' ? 1000 : 1),
    requestsPerS: n(finished, 3),
    total: n(requests, 1),
    done: n(requests, 2),
    succeeded: n(requests, 3),
    failed: n(requests, 4),
    errored: n(requests, 5),
    timeout: n(requests, 6),
    status2xx: n(statuses, 1),
    status3xx: n(statuses, 2),
    status4xx: n(statuses, 3),
    status5xx: n(statuses, 4),
  };
}

export interface LoggedRequest {
  readonly startUs: number;
  readonly status: number;
  readonly durationUs: number;
}

/** The rows of an h2load --log-file. */
export async function readH2loadLog(path: string): Promise<LoggedRequest[]> {
  const rows: LoggedRequest[] = [];
  for (const line of (await readFile(path, 'utf8')).split('\n')) {
    if (line === '') continue;
    const [start, status, duration] = line.split('\t');
    rows.push({ startUs: Number(start), status: Number(status), durationUs: Number(duration) });
  }
  return rows;
}
