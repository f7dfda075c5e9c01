// Transparent huge pages for the process's ArrayBuffers, set up before anything else runs.
//
// fermata keeps its timers in typed-array columns and 4 MiB byte slabs. Node allocates those
// with glibc's malloc/calloc, so filling a fresh store (recovery, large batches) touches
// hundreds of MB of new memory one 4 KiB page at a time, and each first touch is a page fault:
// measured, faults were about half of the main thread's time replaying the WAL on a VM.
// glibc ≥ 2.35 can ask the kernel for 2 MiB pages for the memory it maps
// (`glibc.malloc.hugetlb=1`, madvise(MADV_HUGEPAGE)), which cut Engine.open of 1,000,000
// timers from 1.9–2.2 s to 1.3–1.5 s here. The tunable is read once, when the process starts,
// so the only way to set it from inside is to start again with it in the environment
// (bin/runtime-settings.js).
//
// Skipped when it cannot help or was decided already: not Linux or not glibc, transparent huge
// pages disabled (`never`), GLIBC_TUNABLES already naming glibc.malloc.hugetlb (a choice made
// by whoever started us, or our own earlier exec), or FERMATA_HUGE_PAGES=0.
import { readFileSync } from 'node:fs';

const tunable = 'glibc.malloc.hugetlb';
const thpModeFile = '/sys/kernel/mm/transparent_hugepage/enabled';

/** glibc's version as [major, minor], or undefined when Node is not linked against glibc. */
function glibcVersion() {
  const version = process.report?.getReport().header.glibcVersionRuntime;
  if (typeof version !== 'string') return undefined;
  const [major, minor] = version.split('.').map(Number);
  return [major ?? 0, minor ?? 0];
}

/** The kernel's transparent huge page mode (`always`, `madvise` or `never`), or undefined. */
function thpMode() {
  try {
    return /\[(\w+)\]/.exec(readFileSync(thpModeFile, 'utf8'))?.[1];
  } catch {
    return undefined;
  }
}

/** The environment to start again with, or undefined when the process should go on as it is. */
export function hugePagesEnvironment(env = process.env) {
  if (process.platform !== 'linux' || env.FERMATA_HUGE_PAGES === '0') return undefined;
  if ((env.GLIBC_TUNABLES ?? '').includes(tunable)) return undefined;
  const glibc = glibcVersion();
  if (glibc === undefined || glibc[0] < 2 || (glibc[0] === 2 && glibc[1] < 35)) return undefined;
  const mode = thpMode();
  if (mode !== 'always' && mode !== 'madvise') return undefined;
  const tunables = [env.GLIBC_TUNABLES, `${tunable}=1`].filter((part) => part !== undefined && part !== '').join(':');
  return { ...env, GLIBC_TUNABLES: tunables };
}
