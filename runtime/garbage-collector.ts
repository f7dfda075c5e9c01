// Memory handed back after a large spill (memoryLimits.collectAfterSpilledRows says why): a full
// garbage collection, then glibc's malloc_trim (runtime/malloc-trim.ts) for the ArrayBuffers it freed.
// `fermata serve` hands it to the memory loader, which calls it on the main thread.
//
// Node offers a collection on demand only under V8's --expose-gc; set while the process runs,
// that flag puts `gc` into contexts made after it, so one is made to fetch it and the service's
// own global scope stays as it was. A thorough return (after a far-future spill, when no
// delivery is due for a minute) asks for V8's last-resort collection (CollectAllAvailableGarbage:
// full collections until nothing more is freed, then the young generation shrunk and V8's pooled
// pages released): on 1,000,000 spilled far-future timers it left VmRSS 464 MB where a regular
// full collection left 512 MB, and held the main thread 74–114 ms where a regular one took
// 22–26; otherwise (a spill for the budget, deliveries going on) a regular full collection. Both
// are synchronous, so every ArrayBuffer freed is back with malloc when they return and
// malloc_trim can follow at once (trimming a second later released no more).
import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import { mallocTrim } from './malloc-trim.ts';

type Collect = (options: { type: 'major'; execution: 'sync'; flavor: 'regular' | 'last-resort' }) => void;

/** What one return of memory did, for the log. */
export type MemoryReturned = {
  readonly collectionMs: number;
  /** Absent where malloc_trim is not to be had. */
  readonly trimMs?: number;
  readonly rssBeforeBytes: number;
  readonly rssAfterBytes: number;
};

/** A function that collects the garbage and returns freed memory to the kernel, or undefined where no collection can be had. */
export function memoryReturn(): ((thorough: boolean) => MemoryReturned) | undefined {
  const collect = collector();
  if (collect === undefined) return undefined;
  const trim = mallocTrim();
  return (thorough) => {
    const rssBeforeBytes = process.memoryUsage.rss();
    const startedMs = performance.now();
    collect({ type: 'major', execution: 'sync', flavor: thorough ? 'last-resort' : 'regular' });
    const collectedMs = performance.now();
    if (trim === undefined) return { collectionMs: collectedMs - startedMs, rssBeforeBytes, rssAfterBytes: process.memoryUsage.rss() };
    trim();
    return { collectionMs: collectedMs - startedMs, trimMs: performance.now() - collectedMs, rssBeforeBytes, rssAfterBytes: process.memoryUsage.rss() };
  };
}

function collector(): Collect | undefined {
  const given = (globalThis as { gc?: unknown }).gc;
  if (typeof given === 'function') return given as Collect;
  v8.setFlagsFromString('--expose-gc');
  const gc = runInNewContext('typeof gc === "function" ? gc : undefined') as unknown;
  return typeof gc === 'function' ? (gc as Collect) : undefined;
}
