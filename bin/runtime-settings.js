// Settings the runtime reads only when a process starts: glibc's huge pages (bin/huge-pages.js)
// and the size of V8's thread pool (bin/v8-pool.js). When either is missing, the launcher starts
// itself again in place with them added to its environment: process.execve() replaces this
// process image with the same program (same pid, same open files, same arguments). It is done
// before any TypeScript is loaded, so it costs one bare Node start-up (about 30 ms); the second
// start finds both settings made and goes on (each is judged by the environment variable it
// sets, so a start never asks for a setting its own environment already holds).
import { hugePagesEnvironment } from './huge-pages.js';
import { v8PoolSizeOption } from './v8-pool.js';

/** The environment to start again with, or undefined when the process should go on as it is. */
export function runtimeEnvironment(env = process.env, execArgv = process.execArgv, cores = undefined) {
  const hugePages = hugePagesEnvironment(env);
  const pool = v8PoolSizeOption(env, execArgv, cores);
  if (hugePages === undefined && pool === undefined) return undefined;
  const next = { ...(hugePages ?? env) };
  if (pool !== undefined) next.NODE_OPTIONS = [env.NODE_OPTIONS, pool].filter((part) => part !== undefined && part !== '').join(' ');
  return next;
}

/**
 * Starts this program again with the settings it lacks; returns only when it has them all (or
 * when process.execve is missing or fails: the process then goes on without them, which is
 * slower but correct).
 */
export function startWithRuntimeSettings(script) {
  const env = runtimeEnvironment();
  if (env === undefined || typeof process.execve !== 'function') return;
  try {
    process.execve(process.execPath, [process.execPath, ...process.execArgv, script, ...process.argv.slice(2)], env);
  } catch {
    // execve failed before replacing the image (e.g. a seccomp policy): run as we are.
  }
}
