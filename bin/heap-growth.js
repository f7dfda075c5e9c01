// Old-generation headroom for the service's small JavaScript heap, set before anything else runs.
//
// fermata keeps its timers outside the JavaScript heap (typed-array columns, byte slabs), so
// the heap itself stays small (about 25 MB under load) while megabytes of ArrayBuffers come and
// go with each Arrow batch. V8 sets the heap's next collection limit from the live size times a
// growth factor it derives from recent mutator utilisation; under Arrow ingest that factor
// settled near 2, and V8 then started incremental marking about 15 times a second (`Start
// (task)` in --trace-incremental-marking, at 22 MB of a 46 MB limit), each costing the main
// thread 10–15 ms: 40% of its busy time. Pinning the factor at 4, V8's own maximum for large
// heaps (`--heap-growing-percent=300`), cut those collections threefold; what remains is
// started by external memory growth. Measured: 10,000-row Arrow batches acknowledged one at a
// time went from 600–620k to 790–870k timers/s. The cost is a heap that may grow to four times
// its live size between collections: tens of MB here.
//
// The flag is set with v8.setFlagsFromString, which V8 reads each time it computes a limit, so
// it applies from the first collection after this call. A --heap-growing-percent given on the
// command line wins.
import v8 from 'node:v8';

const flag = '--heap-growing-percent';
export const heapGrowingPercent = 300;

/** The V8 flag to set, or undefined when the command line already sets one. */
export function heapGrowthFlag(execArgv = process.execArgv) {
  if (execArgv.some((arg) => arg === flag || arg.startsWith(`${flag}=`) || arg === '--heap_growing_percent' || arg.startsWith('--heap_growing_percent='))) return undefined;
  return `${flag}=${heapGrowingPercent}`;
}

/** Sets the heap growth factor for this process (and the worker threads it starts); returns the flag set, if any. */
export function tuneHeapGrowth() {
  const setting = heapGrowthFlag();
  if (setting !== undefined) v8.setFlagsFromString(setting);
  return setting;
}
