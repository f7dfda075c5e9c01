// Where fermata's daylight-saving rule (docs/api.md, "Schedule rules") differs from the cron
// library's, and the correction on top of it. Pure computation, main thread.
//
// croner 11 with fixedTimeRule 'no-wildcard' splits rules as fermata does: a fixed-time rule (no
// `*` and no step in seconds, minute, hour) fires a local time in a gap at the first instant
// after the gap, once however many of its times fall in the gap, and a repeated local time at
// its first occurrence; an elapsed-time rule fires at every instant whose local time matches,
// so both passes of a repeated hour, and `*/15 * * * *` keeps real elapsed time. Measured on
// the 2025 changes of four zones (test/unit/schedule-dst.test.ts): all of that holds.
//
// One difference: croner skips an elapsed-time rule's local times that fall in a gap, so
// `0 */2 * * *` in Berlin loses 30 March's 02:00 and `*/15 2 * * *` that whole day. fermata
// fires them as it fires a fixed-time rule's: once, at the first instant after the gap (the
// instant of the change). gapOccurrences finds those instants; mergeOccurrences adds them to
// the library's runs, once each (`*/15 * * * *` already has one there: 03:00 itself).
import { type ZoneTransition, transitionsIn } from './dst-transitions.ts';

/** Whether the rule matches a local wall time in [startLocalMs, endLocalMs) (local times as if UTC). */
export type LocalMatch = (startLocalMs: number, endLocalMs: number) => boolean;

/** The instants an elapsed-time rule gains in (fromMs, toMs]: each gap's change instant, where the rule matches a local time the gap skips. */
export function gapOccurrences(zone: string, fromMs: number, toMs: number, matchesLocalIn: LocalMatch): number[] {
  const gained: number[] = [];
  for (const change of transitionsIn(zone, fromMs, toMs)) {
    if (isGap(change) && matchesLocalIn(change.atMs + change.offsetBeforeMs, change.atMs + change.offsetAfterMs)) gained.push(change.atMs);
  }
  return gained;
}

function isGap(change: ZoneTransition): boolean {
  return change.offsetAfterMs > change.offsetBeforeMs;
}

/** The ascending union of two ascending lists of instants, each once, at most `limit` long. */
export function mergeOccurrences(runs: readonly number[], gained: readonly number[], limit: number): number[] {
  if (gained.length === 0) return runs.slice(0, limit);
  const out: number[] = [];
  let i = 0;
  let j = 0;
  while (out.length < limit && (i < runs.length || j < gained.length)) {
    const run = runs[i] ?? Number.POSITIVE_INFINITY;
    const gain = gained[j] ?? Number.POSITIVE_INFINITY;
    const t = Math.min(run, gain);
    if (run === t) i++;
    if (gain === t) j++;
    out.push(t);
  }
  return out;
}
