// Runs the `fermata` command as a person would, as a child process of the pinned Node, against
// a service the test started: its exit status, stdout and stderr, within a bounded time. The
// child is tracked for the test file's cleanup; FERMATA_URL and FERMATA_TOKEN come only from `env`.
import { type ChildProcess, spawn } from 'node:child_process';
import { binPath, serviceEnv } from './service.ts';
import { withTimeout } from './timeout.ts';

export interface CliResult {
  readonly code: number | null;
  readonly stdout: string;
  readonly stderr: string;
}

export interface CliRun {
  readonly child: ChildProcess;
  readonly done: Promise<CliResult>;
}

/** Starts `fermata ARGS`; `done` resolves when it exits. */
export function startCli(args: readonly string[], env: Record<string, string>, children: Set<ChildProcess>): CliRun {
  const base = serviceEnv();
  delete base.FERMATA_URL;
  delete base.FERMATA_TOKEN;
  const child = spawn(process.execPath, [binPath, ...args], { env: { ...base, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const done = new Promise<CliResult>((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
  return { child, done };
}

/** Runs `fermata ARGS` to its end (at most `timeoutMs`). */
export function runCli(args: readonly string[], env: Record<string, string>, children: Set<ChildProcess>, timeoutMs = 60_000): Promise<CliResult> {
  return withTimeout(startCli(args, env, children).done, timeoutMs, `fermata ${args.join(' ')}`);
}
