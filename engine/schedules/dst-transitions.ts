// A time zone's offset changes, read from the platform's time zone data (Intl) and never from a
// table of our own: the offset at an instant is what Intl.DateTimeFormat shows there, and a
// year's changes are found by sampling the offset once a week and bisecting each change to the
// millisecond. That assumes a zone does not change its offset and change it back within one
// week (such a pair would be missed); daylight-saving periods last months. Main thread; the
// tables are cached per (zone, year).
//
//   offset ──────┐            ┌──────────  a gap:     offsetAfter > offsetBefore (local times skipped)
//                └────────────┘            an overlap: offsetAfter < offsetBefore (local times repeated)
//              atMs         atMs
import assert from 'node:assert/strict';
import { scheduleRuleLimits } from '../limits.ts';

/** One change of a zone's offset from UTC: local time = instant + offset. */
export interface ZoneTransition {
  /** The first instant of the new offset. */
  readonly atMs: number;
  readonly offsetBeforeMs: number;
  readonly offsetAfterMs: number;
}

const weekMs = 7 * 24 * 3600 * 1000;

const formatters = new Map<string, Intl.DateTimeFormat>();
const yearTables = new Map<string, readonly ZoneTransition[]>();

function formatterOf(zone: string): Intl.DateTimeFormat {
  let formatter = formatters.get(zone);
  if (formatter === undefined) {
    formatter = new Intl.DateTimeFormat('en-US', {
      timeZone: zone,
      hourCycle: 'h23',
      era: 'short',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    formatters.set(zone, formatter);
  }
  return formatter;
}

/** The zone's offset from UTC at `ms` (whole seconds: what Intl shows), in ms. */
export function offsetAt(zone: string, ms: number): number {
  const fields = { era: 'AD', year: 0, month: 0, day: 0, hour: 0, minute: 0, second: 0 };
  for (const part of formatterOf(zone).formatToParts(ms)) {
    if (part.type === 'era') fields.era = part.value;
    else if (part.type in fields) (fields as Record<string, number | string>)[part.type] = Number(part.value);
  }
  const year = fields.era === 'BC' ? 1 - fields.year : fields.year;
  const local = Date.UTC(year, fields.month - 1, fields.day, fields.hour, fields.minute, fields.second);
  // Date.UTC reads years 0–99 as 1900–1999; the instants a schedule meets lie far from them.
  return local - Math.floor(ms / 1000) * 1000;
}

/** The zone's changes in the UTC year `year`, ascending. */
function transitionsOfYear(zone: string, year: number): readonly ZoneTransition[] {
  const cacheKey = `${zone} ${year}`;
  const cached = yearTables.get(cacheKey);
  if (cached !== undefined) return cached;
  const yearStart = Date.UTC(year, 0, 1);
  const yearEnd = Date.UTC(year + 1, 0, 1);
  const found: ZoneTransition[] = [];
  // Samples from just before the year to its last ms: a change at the year's first instant is this year's.
  let previousMs = yearStart - 1;
  let previousOffset = offsetAt(zone, previousMs);
  while (previousMs < yearEnd - 1) {
    const sampleMs = Math.min(previousMs + weekMs, yearEnd - 1);
    const sampleOffset = offsetAt(zone, sampleMs);
    if (sampleOffset !== previousOffset) found.push(bisect(zone, previousMs, previousOffset, sampleMs, sampleOffset));
    previousMs = sampleMs;
    previousOffset = sampleOffset;
  }
  if (yearTables.size >= scheduleRuleLimits.zoneYearsCachedMax) yearTables.clear();
  yearTables.set(cacheKey, found);
  return found;
}

/** The first instant in (loMs, hiMs] whose offset is no longer `loOffset`. */
function bisect(zone: string, loMs: number, loOffset: number, hiMs: number, hiOffset: number): ZoneTransition {
  let lo = loMs;
  let hi = hiMs;
  let hiOff = hiOffset;
  while (hi - lo > 1) {
    const mid = lo + Math.floor((hi - lo) / 2);
    const midOffset = offsetAt(zone, mid);
    if (midOffset === loOffset) lo = mid;
    else {
      hi = mid;
      hiOff = midOffset;
    }
  }
  assert.notEqual(hiOff, loOffset, 'a bisected change has a new offset');
  return { atMs: hi, offsetBeforeMs: loOffset, offsetAfterMs: hiOff };
}

/** The zone's changes with fromMs < atMs ≤ toMs, ascending. UTC has none and costs nothing. */
export function transitionsIn(zone: string, fromMs: number, toMs: number): ZoneTransition[] {
  if (zone === 'UTC' || toMs <= fromMs) return [];
  const out: ZoneTransition[] = [];
  const lastYear = new Date(toMs).getUTCFullYear();
  for (let year = new Date(fromMs).getUTCFullYear(); year <= lastYear; year++) {
    for (const transition of transitionsOfYear(zone, year)) {
      if (transition.atMs > fromMs && transition.atMs <= toMs) out.push(transition);
    }
  }
  return out;
}
