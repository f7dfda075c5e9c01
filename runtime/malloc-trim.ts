// glibc's malloc_trim, called through node:ffi: hands the pages of memory freed inside malloc's
// heaps back to the kernel. Tuning beside the data structures: `fermata serve` hands it to the
// memory loader, which calls it on the main thread when the service goes quiet or after a spill.
//
// Node allocates every ArrayBuffer with malloc: request bodies, decoded Arrow batches, the
// store's byte slabs, a checkpoint's buffers. glibc returns freed memory to the kernel only from
// the top of a heap, so once a fill of far-future timers is spilled and its garbage collected,
// the freed megabytes lie between chunks still in use and stay resident. Measured on 1,000,000
// far-future timers (compare's memory run), the main heap held 264 MB after the spill and its
// collection against 22 MB before the fill; malloc_trim(0), which also releases whole free
// pages inside a heap (MADV_DONTNEED), took it back to 36 MB in 11–13 ms.
//
// node:ffi is on by default in the pinned Node (26.12.1) but experimental: loading it emits an
// ExperimentalWarning, which would land on stderr beside the service's JSON log, so it is loaded
// with process.emitWarning silenced for that one call, and the service's log names what it uses.
// Absent (undefined) where it cannot be had: not Linux, not glibc, node:ffi missing or turned
// off (`--no-experimental-ffi`), libc not found.
import { platform } from 'node:process';

/** What mallocTrim() found, once looked for (null: none to be had). */
let found: ((pad?: number) => boolean) | null | undefined;

/** glibc's malloc_trim(pad), true when memory was released; undefined where there is none. */
export function mallocTrim(): ((pad?: number) => boolean) | undefined {
  found ??= lookUp() ?? null;
  return found ?? undefined;
}

function lookUp(): ((pad?: number) => boolean) | undefined {
  if (platform !== 'linux') return undefined;
  const glibc = (process.report.getReport() as { header?: { glibcVersionRuntime?: unknown } }).header?.glibcVersionRuntime;
  if (typeof glibc !== 'string') return undefined;
  const emitWarning = process.emitWarning;
  process.emitWarning = () => undefined;
  try {
    const ffi = process.getBuiltinModule('node:ffi') as FfiModule | undefined;
    if (ffi === undefined) return undefined;
    const { functions } = ffi.dlopen('libc.so.6', { malloc_trim: { arguments: ['uint64'], return: 'int32' } });
    const trim = functions.malloc_trim;
    if (trim === undefined) return undefined;
    return (pad = 0) => trim(BigInt(pad)) === 1;
  } catch {
    return undefined;
  } finally {
    process.emitWarning = emitWarning;
  }
}

/** The part of node:ffi used here (Node 26 ships no types for it). */
interface FfiModule {
  dlopen(path: string, definitions: Record<string, { arguments: string[]; return: string }>): { functions: Record<string, (...args: bigint[]) => number> };
}
