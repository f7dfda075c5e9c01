// Runs a long, promise-heavy simulation in a worker thread, away from node:test's harness.
//
// The test runner keeps an async hook in each test file's process (to tie asynchronous work to
// the test that started it): every promise made there pays an `init` call and a destroy hook.
// A simulation that makes millions of promises spends about half its CPU on that. async hooks
// belong to a thread, so the same code in a worker thread runs at full speed. The worker imports
// `module` and awaits `module[name](input)`; a throw there (an assertion naming its seed) rejects
// here with the same message and stack, so the test fails as if the code had run in it.
import { Worker } from 'node:worker_threads';

export interface OffHarnessCall {
  /** The module to import in the worker (a plain module: one that registers no tests). */
  readonly module: URL;
  /** The exported async function to call. */
  readonly name: string;
  /** Its one argument (structured-cloned into the worker). */
  readonly input?: unknown;
}

/** `module[name](input)` in a worker thread; resolves with its (cloned) result. */
export function offHarness<T = unknown>(call: OffHarnessCall): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const worker = new Worker(new URL('./off-harness-worker.ts', import.meta.url), {
      workerData: { module: call.module.href, name: call.name, input: call.input },
    });
    let settled = false;
    worker.once('message', (message: { ok: true; value: T } | { ok: false; message: string; stack: string; assertion: boolean }) => {
      settled = true;
      if (message.ok) return resolve(message.value);
      const err = new Error(message.message);
      err.name = message.assertion ? 'AssertionError' : 'Error';
      err.stack = message.stack;
      reject(err);
    });
    worker.once('error', (err) => {
      settled = true;
      reject(err);
    });
    worker.once('exit', (code) => {
      if (!settled) reject(new Error(`the worker running ${call.name} exited with code ${code} before answering`));
    });
  });
}
