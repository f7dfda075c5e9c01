// A benchmark's measuring child: the suite's own file run again with --expose-gc (so it can
// collect before it reads memory), sending back one message. Its stdout goes to our stderr, so
// under --json our stdout carries figures only.
import { fork } from 'node:child_process';

/** Runs `file` with `args` in a child with --expose-gc; resolves with the one message it sends. */
export function runGcChild<T>(file: string, label: string, args: readonly string[]): Promise<T> {
  const child = fork(file, args, { execArgv: [...process.execArgv, '--expose-gc'], stdio: ['ignore', 2, 'inherit', 'ipc'] });
  return new Promise<T>((resolve, reject) => {
    let result: { value: T } | undefined;
    child.once('message', (message) => {
      result = { value: message as T };
    });
    child.once('error', reject);
    child.once('exit', (code, signal) => {
      if (result !== undefined && code === 0) resolve(result.value);
      else reject(new Error(`${label}: child ${args[0]} exited with ${signal ?? `status ${code}`}${result === undefined ? ' without a result' : ''}`));
    });
  });
}
