// The cron library's compiled patterns, shared and bounded. A croner pattern holds a table of
// 10,000 years (about 80 KB), so a compiled pattern per schedule would cost a schedule far more
// than its occurrences do. A rule keeps its pattern text and zone and asks here for the compiled
// pattern each time it computes; schedules with the same expression and zone share one, and at
// most compiledCronsCachedMax are kept (least recently used goes first; a miss recompiles, which
// is deterministic, so it changes only the time taken). Main thread.
import { Cron } from 'croner';
import { scheduleRuleLimits } from '../limits.ts';

const compiled = new Map<string, Cron>();

/**
 * The compiled `pattern` (already through cron-grammar.ts) in `zone`: fixed-time rules by the
 * local clock, others by elapsed time (croner's fixedTimeRule 'no-wildcard', dst-corrections.ts).
 * Throws the library's TypeError or RangeError for a pattern it refuses.
 */
export function compiledCron(pattern: string, zone: string): Cron {
  const key = `${zone} ${pattern}`;
  const hit = compiled.get(key);
  if (hit !== undefined) {
    // Map keeps insertion order: moving the entry to the end makes the first the least recently used.
    compiled.delete(key);
    compiled.set(key, hit);
    return hit;
  }
  const cron = new Cron(pattern, { paused: true, timezone: zone, mode: '5-or-6-parts', fixedTimeRule: 'no-wildcard' });
  if (compiled.size >= scheduleRuleLimits.compiledCronsCachedMax) {
    const oldest = compiled.keys().next();
    if (oldest.done !== true) compiled.delete(oldest.value);
  }
  compiled.set(key, cron);
  return cron;
}
