// How much memory the resident window may use: the smallest of the cgroup's limit (v2
// `memory.max`, or v1 `memory.limit_in_bytes`), the machine's RAM and the configured budget,
// times the share resident timers get (the rest is Node, buffers in flight, the OS). Read once
// at start on the main thread; the loader compares the store's bytes with it.
import { readFileSync } from 'node:fs';
import { totalmem } from 'node:os';
import { memoryLimits, storeLimits } from './limits.ts';
import { columnsBytes, residentCapacityLimit } from './store/resident-store.ts';

export interface MemoryBudget {
  /** Bytes the resident store may hold. */
  readonly bytes: number;
  /** Which limit decided it. */
  readonly source: 'configured' | 'cgroup' | 'machine';
  /** The limit it came from, before the resident share was applied. */
  readonly limitBytes: number;
}

const cgroupLimitFiles = ['/sys/fs/cgroup/memory.max', '/sys/fs/cgroup/memory/memory.limit_in_bytes'];

/** The cgroup's memory limit in bytes, or undefined when there is none (or no cgroup file to read). */
export function cgroupMemoryLimit(files: readonly string[] = cgroupLimitFiles): number | undefined {
  for (const file of files) {
    let text: string;
    try {
      text = readFileSync(file, 'utf8').trim();
    } catch {
      continue;
    }
    if (text === 'max') return undefined;
    const bytes = Number(text);
    // cgroup v1 writes a huge page-aligned number for "no limit".
    if (Number.isSafeInteger(bytes) && bytes > 0) return bytes;
  }
  return undefined;
}

/**
 * The resident budget. `configuredBytes` is --memory-budget (what the whole process may use);
 * the cgroup and machine limits apply whether or not it is set.
 */
export function memoryBudget(configuredBytes?: number, cgroupBytes: number | undefined = cgroupMemoryLimit(), machineBytes = totalmem()): MemoryBudget {
  let limitBytes = machineBytes;
  let source: MemoryBudget['source'] = 'machine';
  if (cgroupBytes !== undefined && cgroupBytes < limitBytes) {
    limitBytes = cgroupBytes;
    source = 'cgroup';
  }
  if (configuredBytes !== undefined && configuredBytes < limitBytes) {
    limitBytes = configuredBytes;
    source = 'configured';
  }
  return { bytes: Math.floor(limitBytes * memoryLimits.residentShare), source, limitBytes };
}

/**
 * The resident store's slot limit for a memory budget. The budget counts a timer's columns at
 * the slots in use, not the columns' capacity (up to twice that, and during a growth old and
 * new side by side), so the slots are bounded to keep those columns within a quarter of the
 * budget: never below storeLimits.residentTimersMax, never past what a handle addresses. A 12.6
 * GB budget (a 24 GiB machine) gets 2^25 slots instead of 2^24: at 3/4 of 2^24 it spilled
 * 12.6 million timers with a quarter of its budget in use. Engine.open replays every timer a
 * log holds even past the limit (a restart with a smaller budget), so the limit may change
 * from one life to the next.
 */
export function residentSlotsFor(budgetBytes: number): number {
  // Old and new columns during the last growth, a doubling: 1.5 times the columns at the limit.
  const slots = budgetBytes / 4 / 1.5 / (columnsBytes(1024) / 1024);
  // A power of two: the columns double up to it (a last growth of a few percent would copy them all).
  const limit = slots >= 1 ? 2 ** Math.floor(Math.log2(slots)) : 1;
  return Math.min(residentCapacityLimit, Math.max(storeLimits.residentTimersMax, limit));
}
