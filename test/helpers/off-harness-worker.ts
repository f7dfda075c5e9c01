// The worker side of off-harness.ts: imports the module, awaits the named function, posts the
// result or the failure (message and stack) back, and ends.
import { parentPort, workerData } from 'node:worker_threads';

const { module, name, input } = workerData as { module: string; name: string; input: unknown };
const port = parentPort;
if (port === null) throw new Error('off-harness-worker.ts runs only as a worker thread');

try {
  const imported = (await import(module)) as Record<string, unknown>;
  const fn = imported[name];
  if (typeof fn !== 'function') throw new Error(`${module} exports no function ${name}`);
  const value: unknown = await (fn as (input: unknown) => Promise<unknown>)(input);
  port.postMessage({ ok: true, value });
} catch (err) {
  const error = err instanceof Error ? err : new Error(String(err));
  port.postMessage({ ok: false, message: error.message, stack: error.stack ?? error.message, assertion: error.name === 'AssertionError' });
}
