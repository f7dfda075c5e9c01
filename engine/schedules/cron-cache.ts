// The cron library's compiled patterns, shared and bounded. A croner pattern holds a table of
// 10,000 years (what a compiled rule cost: docs/decisions/0017-cron-library.md), so a compiled
// pattern per schedule would cost a schedule far more than its occurrences do. A rule keeps its pattern text and zone and asks here for the compiled
// pattern each time it computes; schedules with the same expression and zone share one, and at
// most compiledCronsCachedMax are kept (least recently used goes first; a miss recompiles, which
// is deterministic, so it changes only the time taken). Main thread.
import { Cron } from 'croner';
import { scheduleRuleLimits } from '../limits.ts';

const compiled = new Map<string, Cron>();
/** Patterns known to match some date, by the same key: whether one does depends on the pattern and zone alone. */
const matching = new Set<string>();

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

/**
 * Whether the pattern matches any date at all (`0 0 30 2 *` matches none). A cron pattern without
 * a year field repeats with the 400-year Gregorian cycle, so one that matches once matches for
 * ever, after any instant: the answer is asked of the library once (its search is bounded) and
 * remembered, and a compile of a known pattern costs no search.
 */
export function cronMatchesSomeDate(pattern: string, zone: string): boolean {
  const key = `${zone} ${pattern}`;
  if (matching.has(key)) return true;
  const found = compiledCron(pattern, zone).nextRun(new Date(Date.UTC(2000, 0, 1))) !== null;
  if (found) {
    if (matching.size >= scheduleRuleLimits.compiledCronsCachedMax * 16) matching.clear();
    matching.add(key);
  }
  return found;
}
