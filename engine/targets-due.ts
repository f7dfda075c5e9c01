// Whom deliveries go to soon: the distinct targets of resident timers due before a time, read
// off the heap without taking anything out. Main thread. The dispatcher asks once when a
// service starts, to open its sessions to those origins before the first of them falls due.
import type { EngineState } from './state.ts';

/** The distinct targets of pending and retrying resident timers due before `untilMs`, looking at `timersMax` timers at most. */
export function targetsDueBefore(s: EngineState, untilMs: number, timersMax: number): string[] {
  const store = s.store;
  const targets = new Set<string>();
  s.heap.visitDueBefore(untilMs, timersMax, (slot) => targets.add(store.targetOf(slot)));
  return [...targets];
}
