// The importing process's JavaScript heap, kept near what it holds live. `fermata import` sets
// it once, before it reads the file; main thread.
//
// The launcher gives every command the service's heap growth (bin/heap-growth.js): V8 may let
// the heap grow to four times its live size between collections, which spares a service whose
// heap is small the collections. An import holds little live (one row group's columns and the
// batches in flight) but turns over its garbage fast: each row's strings are decoded, mapped,
// encoded and answered, one batch after another. Let grow four times between collections, that
// garbage made most of the importer's peak resident set (the clients bench's
// clients.import.rss_mb); grown by half, V8 collects it at a fraction of that size, for a few
// more collections of a small heap. A --heap-growing-percent on the command line wins.
import v8 from 'node:v8';
import { heapGrowthFlag } from '../../bin/heap-growth.js';

/** V8's old-generation growth between collections while importing: the heap may grow by half its live size. */
export const importHeapGrowingPercent = 50;

/** Sets the import's heap growth unless the command line sets one; returns the flag set, if any. */
export function keepImportHeapSmall(execArgv: readonly string[] = process.execArgv): string | undefined {
  if (heapGrowthFlag(execArgv) === undefined) return undefined;
  const flag = `--heap-growing-percent=${importHeapGrowingPercent}`;
  v8.setFlagsFromString(flag);
  return flag;
}
