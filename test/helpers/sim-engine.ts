// The setup the engine's unit tests share: an engine on the simulated file system under /data,
// with 4 KiB WAL segments (so a few adds fill several and a checkpoint has some to delete), and a
// manual clock that starts at t0, an hour boundary (so hour-wide spill buckets start on it).
// Everything here runs on the test's own thread.
import { type Admitted, type Clock, Engine, type EngineOptions } from '../../engine/engine.ts';
import type { FileSystem } from '../../engine/fs/file-system.ts';

export const dataDir = '/data';
export const hour = 3_600_000;
export const t0 = 1_796_220_000_000 - (1_796_220_000_000 % hour);
export const target = 'https://a.example/hook';

/** A clock that stands where a test sets it. */
export interface ManualClock extends Clock {
  set(ms: number): void;
}

export function manualClock(start = t0): ManualClock {
  let now = start;
  return { now: () => now, set: (ms) => (now = ms) };
}

/** An engine on `fs` at /data with small WAL segments; `extra` overrides any option. */
export function openEngine(fs: FileSystem, clock: Clock, extra: Partial<EngineOptions> = {}): Promise<Engine> {
  return Engine.open({ dataDir, fs, clock, walLimits: { segmentBytes: 4096 }, ...extra });
}

export const idsOf = (admitted: Admitted): string[] => Array.from({ length: admitted.rows }, (_, row) => admitted.idOf(row));
