// A full garbage collection on demand, for the memory loader after a large spill
// (memoryLimits.collectAfterSpilledRows says why). Node offers one only under V8's --expose-gc;
// set while the process runs, that flag puts `gc` into contexts made after it, so one is made
// to fetch it and the service's own global scope stays as it was.
import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';

/** A function that runs a full collection, or undefined where none can be had. */
export function fullCollection(): (() => void) | undefined {
  const given = (globalThis as { gc?: unknown }).gc;
  if (typeof given === 'function') return () => void given();
  v8.setFlagsFromString('--expose-gc');
  const gc = runInNewContext('typeof gc === "function" ? gc : undefined') as unknown;
  return typeof gc === 'function' ? () => void gc() : undefined;
}
