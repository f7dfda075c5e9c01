// How many threads V8 keeps for its own background work (parallel scavenges, concurrent
// marking, compilation), chosen before anything else runs.
//
// Node gives V8 four such threads whatever the machine. fermata keeps its cores busy with its
// own JavaScript threads already (the main thread, and a delivery worker on each other core), so
// on a small machine V8's four helpers compete with them: a delivery worker whose timer falls
// due waits for a core while helpers run. On the 2-vCPU VM of bench/README.md, alternated quick
// `dispatch` runs gave fire lateness p99 3, 3, 4, 3, 3, 5 ms with one helper against 4, 5, 7,
// 36, 6, 17 with four, and Arrow dispatch 147,000–194,000 timers/s against 131,000–176,000;
// Arrow ingest (medians 862,000 against 850,000 timers/s) and single JSON adds did not move.
// So the pool is the cores left after fermata's main thread (at least one), and V8's default
// where that is more.
//
// The size is read when the process starts (`--v8-pool-size`, a Node option), so it is passed
// in NODE_OPTIONS when the launcher starts itself again (bin/runtime-settings.js); the processes
// it starts inherit it. A size already given on the command line or in NODE_OPTIONS wins.
import { availableParallelism } from 'node:os';

const option = '--v8-pool-size';
/** Node's own default. */
export const nodeV8PoolSize = 4;

function names(args) {
  return args.some((arg) => arg === option || arg.startsWith(`${option}=`));
}

/** The NODE_OPTIONS entry to start with, or undefined when Node's default fits or a size is set already. */
export function v8PoolSizeOption(env = process.env, execArgv = process.execArgv, cores = availableParallelism()) {
  if (names(execArgv) || names((env.NODE_OPTIONS ?? '').split(/\s+/))) return undefined;
  const size = Math.max(1, cores - 1);
  return size < nodeV8PoolSize ? `${option}=${size}` : undefined;
}
