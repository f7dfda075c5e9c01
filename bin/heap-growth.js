// Headroom between collections for the service's small JavaScript heap and for its external
// memory, set before anything else runs.
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
// The collections started by external memory growth are the second flag's. V8 starts one each
// time the memory held by ArrayBuffers has grown 64 MB since the last, whatever it holds: the
// store's arena slabs and columns, which only grow while timers are added, count as much as a
// request body's garbage. 10,000-row Arrow batches acknowledged one at a time add ~200 MB of
// slabs a second, and a 10 s run took 37 full collections (--trace-gc), 850 ms of the main
// thread in a profile. `--external-memory-accounted-in-global-limit` sets that limit as V8 sets
// the heap's, from what is held after a collection times a growth factor of at most 1.3
// (`--external-memory-max-growing-factor`): 8 collections, and 1,241,763–1,264,401 timers/s
// against 1,028,928–1,097,135 (the compare suite's bulk adds after its single adds, two
// alternated pairs). The cost is external garbage that may reach 30% of what the arena holds
// before it is collected, within the headroom the memory budget leaves (half the machine's
// memory by default); the compare suite's RSS a timer was unchanged (363–372 B on both sides).
//
// The flags are set with v8.setFlagsFromString, which V8 reads each time it computes a limit, so
// they apply from the first collection after this call. Either flag given on the command line
// (or its negation) wins.
import v8 from 'node:v8';

const flag = '--heap-growing-percent';
export const heapGrowingPercent = 300;
const externalFlag = '--external-memory-accounted-in-global-limit';

/**
 * Whether the command line names V8 flag `name` (`--a-b`), in V8's either spelling (`--a_b`),
 * with or without a value, or (for a boolean flag) negated (`--no-a-b`, `--no_a_b`).
 */
function named(execArgv, name) {
  const bare = name.slice(2);
  const spellings = [bare, bare.replaceAll('-', '_')].flatMap((spelling) => [`--${spelling}`, `--no-${spelling}`, `--no_${spelling}`]);
  return execArgv.some((arg) => spellings.some((spelling) => arg === spelling || arg.startsWith(`${spelling}=`)));
}

/** The V8 flag to set, or undefined when the command line already sets one. */
export function heapGrowthFlag(execArgv = process.execArgv) {
  return named(execArgv, flag) ? undefined : `${flag}=${heapGrowingPercent}`;
}

/** The external memory flag to set, or undefined when the command line already sets it or its negation. */
export function externalMemoryFlag(execArgv = process.execArgv) {
  return named(execArgv, externalFlag) ? undefined : externalFlag;
}

/** Sets the heap and external memory growth for this process (and the worker threads it starts); returns the flags set. */
export function tuneHeapGrowth() {
  const settings = [heapGrowthFlag(), externalMemoryFlag()].filter((setting) => setting !== undefined);
  for (const setting of settings) v8.setFlagsFromString(setting);
  return settings;
}
