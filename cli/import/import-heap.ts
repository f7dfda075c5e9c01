// The importing process's JavaScript heap, kept near what it holds live. `fermata import` sets
// it once, before it reads the file; main thread.
//
// An import holds little live (one row group's columns and the batches in flight) but turns
// over its garbage fast: each row's strings are decoded, mapped, encoded and answered, one
// batch after another. Two V8 settings let that garbage make most of the importer's peak
// resident set (the clients bench's clients.import.rss_mb), and both are read each time V8
// sizes a space, so they can be set here, after start-up:
//
//   old generation   the launcher gives every command the service's growth (bin/heap-growth.js:
//                    four times the live size between collections, which spares a service with
//                    a small heap the collections); the import lets it grow by half
//   young generation V8 doubles it, up to tens of MB, while much is allocated; the import keeps
//                    it at its start-up size (--semi-space-growth-factor=1): each scavenge is of
//                    a small space, and what lives on (a row group's columns) is promoted as it
//                    would be anyway
//
// A setting of either on the command line wins over this one.
import v8 from 'node:v8';
import { heapGrowthFlag } from '../../bin/heap-growth.js';

/** V8's old-generation growth between collections while importing: the heap may grow by half its live size. */
export const importHeapGrowingPercent = 50;

/** Command-line flags that size the young generation (either spelling, or negated). */
const youngGenerationFlag = /^--(no[-_])?(semi|max[-_]semi|min[-_]semi)[-_]space[-_]/;

/** Sets the import's heap sizing where the command line sets none; returns the flags set. */
export function keepImportHeapSmall(execArgv: readonly string[] = process.execArgv): string[] {
  const flags: string[] = [];
  if (heapGrowthFlag(execArgv) !== undefined) flags.push(`--heap-growing-percent=${importHeapGrowingPercent}`);
  if (!execArgv.some((arg) => youngGenerationFlag.test(arg))) flags.push('--semi-space-growth-factor=1');
  for (const flag of flags) v8.setFlagsFromString(flag);
  return flags;
}
