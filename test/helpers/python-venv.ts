// A Python virtual environment with given pip packages, for tests that drive fermata with a real
// third-party client (pyarrow). It lives in a cache folder outside the tracked tree
// (node_modules/.cache, git-ignored) and is reused while its packages import. It is built in a
// scratch folder and renamed into place, so an interrupted install never leaves a half-made venv
// that a later run would trust. What the machine cannot provide (no python3, no package index,
// no such package) is answered as a reason to skip; anything else is thrown.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, renameSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { withTimeout } from './timeout.ts';

const venvCache = fileURLToPath(new URL('../../node_modules/.cache/', import.meta.url));

/**
 * The cache folder of the venv for one set of packages. Each set has its own, so tests that want
 * different packages never rebuild each other's venv (a probe that fails removes the venv).
 */
export function venvDirFor(packages: readonly string[]): string {
  const name = [...packages].sort().map((spec) => spec.replace(/[^A-Za-z0-9._-]+/g, '_')).join('+');
  return join(venvCache, `fermata-pyvenv-${name}`);
}

export interface RunResult {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs a program to its end; SIGKILLs it (and rejects, naming `what`) after `timeoutMs`. Rejects with ENOENT if it does not exist. */
export async function run(file: string, args: readonly string[], timeoutMs: number, what: string, env: NodeJS.ProcessEnv = process.env): Promise<RunResult> {
  const child = spawn(file, args, { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (stdout += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const done = new Promise<RunResult>((resolve, reject) => {
    child.once('error', reject);
    child.once('close', (code, signal) => resolve({ code, signal, stdout, stderr }));
  });
  try {
    return await withTimeout(done, timeoutMs, what);
  } catch (err) {
    if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    if (err instanceof Error && !(err as NodeJS.ErrnoException).code) err.message += `\nstdout: ${tail(stdout)}\nstderr: ${tail(stderr)}`;
    throw err;
  }
}

const tail = (text: string, chars = 2_000): string => (text.length > chars ? `…${text.slice(-chars)}` : text);

/** pip's words for "the index is unreachable or does not carry the package". */
const unobtainable = [
  /No matching distribution found/i,
  /Could not find a version that satisfies the requirement/i,
  /Failed to establish a new connection/i,
  /Max retries exceeded/i,
  /Temporary failure in name resolution/i,
  /Name or service not known/i,
  /Network is unreachable/i,
  /Connection refused/i,
  /ReadTimeoutError|ConnectTimeoutError/i,
  /No such file or directory: '\/?[^']*\/simple/i, // a file:// index that is not there
];

export type VenvResult = { readonly python: string; readonly reused: boolean } | { readonly skip: string };

export interface VenvOptions {
  readonly dir?: string;
  readonly basePython?: string;
  readonly installTimeoutMs?: number;
  /** The modules that must import (default: the package names, for packages whose module has their name). */
  readonly imports?: readonly string[];
}

/**
 * A venv at `dir` in which `import <module>` works for every package, made with
 * `python3 -m venv` and `pip install` when it does not already.
 */
export async function ensureVenv(packages: readonly string[], options: VenvOptions = {}): Promise<VenvResult> {
  const dir = options.dir ?? venvDirFor(packages);
  const basePython = options.basePython ?? 'python3';
  const installTimeoutMs = options.installTimeoutMs ?? 10 * 60_000;
  const imports = `import ${(options.imports ?? packages).join(', ')}`;
  const python = join(dir, 'bin', 'python');
  const env: NodeJS.ProcessEnv = { ...process.env, PIP_DISABLE_PIP_VERSION_CHECK: '1', PYTHONDONTWRITEBYTECODE: '1' };
  delete env.PYTHONPATH;
  delete env.PYTHONHOME;
  delete env.VIRTUAL_ENV;

  if (existsSync(python)) {
    const probe = await run(python, ['-c', imports], 60_000, `${python} -c '${imports}'`, env).catch(() => undefined);
    if (probe?.code === 0) return { python, reused: true };
    rmSync(dir, { recursive: true, force: true }); // broken or incomplete: build it again
  }

  let version: RunResult;
  try {
    version = await run(basePython, ['--version'], 30_000, `${basePython} --version`, env);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return { skip: `${basePython} is not installed (not on PATH)` };
    throw err;
  }
  if (version.code !== 0) return { skip: `${basePython} --version exited ${version.code}: ${tail(version.stderr || version.stdout, 300)}` };

  mkdirSync(dirname(dir), { recursive: true });
  const building = `${dir}.building-${process.pid}`;
  rmSync(building, { recursive: true, force: true });
  try {
    const venv = await run(basePython, ['-m', 'venv', building], 120_000, `${basePython} -m venv`, env);
    if (venv.code !== 0) throw new Error(`${basePython} -m venv ${building} exited ${venv.code}:\n${tail(venv.stderr || venv.stdout)}`);
    // One retry an index, not pip's five with backoff: where an index is configured but out of
    // reach (a machine with a local package index beside an unreachable default one), pip's
    // retries with backoff cost seconds for every package before it goes on to the index that
    // answers, and a venv build took minutes of the test run.
    const pip = await run(join(building, 'bin', 'python'), ['-m', 'pip', 'install', '--quiet', '--retries', '1', ...packages], installTimeoutMs, `pip install ${packages.join(' ')}`, env);
    if (pip.code !== 0) {
      const output = `${pip.stderr}\n${pip.stdout}`;
      if (unobtainable.some((pattern) => pattern.test(output))) {
        return { skip: `pip could not get ${packages.join(', ')} (no package index reachable, or it lacks them): ${tail(output.trim(), 600)}` };
      }
      throw new Error(`pip install ${packages.join(' ')} exited ${pip.code}:\n${tail(output)}`);
    }
    // The venv's python finds its prefix from pyvenv.cfg beside it, so the renamed venv works
    // (its bin/pip shebang names the scratch path; this helper only ever uses `python -m pip`).
    try {
      renameSync(building, dir);
    } catch (err) {
      if (!existsSync(python)) throw err; // else a concurrent run got there first: use its venv
    }
  } finally {
    rmSync(building, { recursive: true, force: true });
  }
  const check = await run(python, ['-c', imports], 60_000, `${python} -c '${imports}'`, env);
  if (check.code !== 0) throw new Error(`after pip install, ${python} -c '${imports}' exited ${check.code}:\n${tail(check.stderr)}`);
  return { python, reused: false };
}

/** A python with pyarrow and its Flight module, or why there is none (a test skips with it). */
export async function pyarrowFlightPython(installTimeoutMs: number): Promise<{ readonly python: string } | { readonly skip: string }> {
  const venv = await ensureVenv(['pyarrow'], { installTimeoutMs });
  if ('skip' in venv) return { skip: `pyarrow.flight client not run: ${venv.skip}` };
  const probe = await run(venv.python, ['-c', 'import pyarrow.flight'], 60_000, 'import pyarrow.flight');
  if (probe.code !== 0) return { skip: `this pyarrow build has no Flight module: ${probe.stderr.trim().split('\n').at(-1) ?? ''}` };
  return { python: venv.python };
}
