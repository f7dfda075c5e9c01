// A schedule's rule: when its occurrences are. compileRule checks a rule as the API gives it
// (a cron expression in a time zone, or a fixed interval; bounds; jitter) and answers an object
// that lists occurrences after an instant, finds the latest one in a span (catch-up after
// downtime) and says when an occurrence fires (its jitter). Pure computation on the main thread:
// no clock, no I/O; the same spec gives the same instants on every run and every machine with
// the same time zone data, which is what lets a restart recompute a schedule's occurrences.
//
//   every_ms:  anchor, anchor + every, anchor + 2·every, …     (arithmetic: O(1) per occurrence)
//   cron:      the cron library (croner) walks the expression in the zone; daylight saving
//              follows docs/api.md "Schedule rules" (dst-corrections.ts holds where we differ)
//   both:      clipped to [start_at, end_at]; fireAt = occurrence + jitter(name, occurrence)
//
// Occurrences are epoch ms, whole seconds for cron, anchor-aligned for every_ms.
import { errorCodes, FermataError } from '../errors.ts';
import { scheduleRuleLimits } from '../limits.ts';
import { compiledCron, cronMatchesSomeDate } from './cron-cache.ts';
import { checkCronGrammar } from './cron-grammar.ts';
import { gapOccurrences, type LocalMatch, mergeOccurrences } from './dst-corrections.ts';

export type CatchUp = 'latest' | 'all' | 'none';

export interface RuleSpec {
  /** The schedule's name: seeds the jitter. */
  readonly name: string;
  /** Cron expression (5 fields, or 6 with seconds first) in `timeZone`; exclusive with everyMs. */
  readonly cron?: string | undefined;
  /** IANA zone for cron ('UTC' when absent). Refused with everyMs. */
  readonly timeZone?: string | undefined;
  /** Fixed interval ≥ 1000 ms, counted from anchorMs. */
  readonly everyMs?: number | undefined;
  /** every_ms counts from here: start_at if given, else the time of the PUT. Ignored for cron. */
  readonly anchorMs: number;
  /** No occurrence before startAtMs / after endAtMs (inclusive bounds). */
  readonly startAtMs?: number | undefined;
  readonly endAtMs?: number | undefined;
  /** 0 = none. Each occurrence fires 0..jitterMs after it, the same amount every time. */
  readonly jitterMs: number;
}

export interface ScheduleRule {
  readonly spec: RuleSpec;
  /** Occurrences (epoch ms, before jitter) strictly after `afterMs`, ascending, at most `limit`; [] past endAt. */
  after(afterMs: number, limit: number): number[];
  /** The latest occurrence in (afterMs, atMs], or undefined (catch_up 'latest'). */
  latestIn(afterMs: number, atMs: number): number | undefined;
  /** When the occurrence fires: occurrenceMs + a jitter derived from (name, occurrenceMs) only. */
  fireAt(occurrenceMs: number): number;
}

type RuleField = 'cron' | 'time_zone' | 'every_ms' | 'start_at' | 'end_at' | 'jitter_ms';

function invalid(field: RuleField, message: string): FermataError {
  return new FermataError(errorCodes.scheduleInvalid, `${field} ${message}`, { field });
}

/**
 * Checks and compiles a rule. Throws FermataError SCHEDULE_INVALID with details.field naming
 * what is wrong: an invalid cron expression or time zone, every_ms < 1000, end_at before
 * start_at, both or neither of cron/every_ms, time_zone with every_ms, a jitter out of range.
 */
export function compileRule(spec: RuleSpec): ScheduleRule {
  if (!Number.isSafeInteger(spec.anchorMs)) throw new TypeError(`anchorMs must be an integer epoch ms, not ${spec.anchorMs}`);
  checkBounds(spec);
  if (!Number.isSafeInteger(spec.jitterMs) || spec.jitterMs < 0 || spec.jitterMs > scheduleRuleLimits.jitterMsMax) {
    throw invalid('jitter_ms', `must be a whole number of ms from 0 to ${scheduleRuleLimits.jitterMsMax}, not ${spec.jitterMs}`);
  }
  if (spec.cron !== undefined && spec.everyMs !== undefined) throw invalid('cron', 'and every_ms exclude each other: give one');
  if (spec.everyMs !== undefined) {
    if (spec.timeZone !== undefined) throw invalid('time_zone', 'applies to cron only; every_ms counts real elapsed time');
    const every = spec.everyMs;
    if (!Number.isSafeInteger(every) || every < scheduleRuleLimits.everyMsMin || every > scheduleRuleLimits.everyMsMax) {
      throw invalid('every_ms', `must be a whole number of ms from ${scheduleRuleLimits.everyMsMin} to ${scheduleRuleLimits.everyMsMax}, not ${every}`);
    }
    return new EveryRule(spec, every);
  }
  if (spec.cron === undefined) throw invalid('cron', 'or every_ms is required: a schedule needs one of them');
  return compileCron(spec, spec.cron);
}

function checkBounds(spec: RuleSpec): void {
  if (spec.startAtMs !== undefined && !Number.isSafeInteger(spec.startAtMs)) throw invalid('start_at', `must be an instant in epoch ms, not ${spec.startAtMs}`);
  if (spec.endAtMs !== undefined && !Number.isSafeInteger(spec.endAtMs)) throw invalid('end_at', `must be an instant in epoch ms, not ${spec.endAtMs}`);
  if (spec.startAtMs !== undefined && spec.endAtMs !== undefined && spec.endAtMs < spec.startAtMs) {
    throw invalid('end_at', `(${new Date(spec.endAtMs).toISOString()}) is before start_at (${new Date(spec.startAtMs).toISOString()})`);
  }
}

/** Zone names the platform knows, as the user wrote them, to the name Intl resolves them to. */
const knownZones = new Map<string, string>();

/** The IANA zone name, checked against the platform's time zone data; offsets such as +01:00 are refused (a zone keeps its rules, an offset has none). */
function checkTimeZone(zone: string): string {
  const known = knownZones.get(zone);
  if (known !== undefined) return known;
  if (!/^[A-Za-z][A-Za-z0-9_+\-/]*$/.test(zone)) throw invalid('time_zone', `${JSON.stringify(zone)} is not an IANA time zone name (such as Europe/Berlin or UTC)`);
  let resolved: string;
  try {
    resolved = new Intl.DateTimeFormat('en-US', { timeZone: zone }).resolvedOptions().timeZone;
  } catch {
    throw invalid('time_zone', `${JSON.stringify(zone)} is not a time zone this platform knows (IANA names such as Europe/Berlin or UTC)`);
  }
  // Only names Intl accepts get here: a few hundred, but in any mix of upper and lower case.
  if (knownZones.size >= scheduleRuleLimits.zoneNamesCachedMax) knownZones.clear();
  knownZones.set(zone, resolved);
  return resolved;
}

function compileCron(spec: RuleSpec, expression: string): ScheduleRule {
  const zone = checkTimeZone(spec.timeZone ?? 'UTC');
  const verdict = checkCronGrammar(expression, scheduleRuleLimits.cronCharsMax);
  if (!verdict.ok) throw invalid('cron', `${JSON.stringify(expression)} ${verdict.problem}`);
  let matches: boolean;
  try {
    matches = cronMatchesSomeDate(verdict.pattern, zone);
  } catch (err) {
    throw invalid('cron', `${JSON.stringify(expression)} is not valid: ${(err as Error).message.replace(/^CronPattern: /, '')}`);
  }
  // An expression no date matches would leave a schedule that never fires: refused here.
  if (!matches) throw invalid('cron', `${JSON.stringify(expression)} matches no date`);
  return new CronRule(spec, verdict.pattern, zone, verdict.fixedTime ? undefined : naiveLocalMatch(verdict.pattern));
}

/**
 * Whether the pattern matches a local wall time in a span, asked of the library in UTC, where
 * local times are read as if they were UTC instants and no time is skipped or repeated.
 */
function naiveLocalMatch(pattern: string): LocalMatch {
  return (startLocalMs, endLocalMs) => {
    const next = compiledCron(pattern, 'UTC').nextRun(new Date(startLocalMs - 1));
    return next !== null && next.getTime() < endLocalMs;
  };
}

/** Occurrences strictly after this instant are the first that may be answered: the later of `afterMs` and start_at − 1. */
function lowerBound(spec: RuleSpec, afterMs: number): number {
  return spec.startAtMs === undefined ? afterMs : Math.max(afterMs, spec.startAtMs - 1);
}

function checkLimit(limit: number): void {
  if (!Number.isSafeInteger(limit) || limit < 0 || limit > scheduleRuleLimits.occurrencesPerCallMax) {
    throw new RangeError(`limit must be a whole number from 0 to ${scheduleRuleLimits.occurrencesPerCallMax}, not ${limit}`);
  }
}

class EveryRule implements ScheduleRule {
  readonly spec: RuleSpec;
  readonly #every: number;
  readonly #nameHash: number;

  constructor(spec: RuleSpec, every: number) {
    this.spec = spec;
    this.#every = every;
    this.#nameHash = nameHashOf(spec.name);
  }

  after(afterMs: number, limit: number): number[] {
    checkLimit(limit);
    const { anchorMs, endAtMs } = this.spec;
    const from = lowerBound(this.spec, afterMs);
    // The first k with anchor + k·every > from, k ≥ 0.
    const k = from < anchorMs ? 0 : Math.floor((from - anchorMs) / this.#every) + 1;
    const out: number[] = [];
    for (let t = anchorMs + k * this.#every; out.length < limit && (endAtMs === undefined || t <= endAtMs); t += this.#every) out.push(t);
    return out;
  }

  latestIn(afterMs: number, atMs: number): number | undefined {
    const { anchorMs, endAtMs } = this.spec;
    const upTo = endAtMs === undefined ? atMs : Math.min(atMs, endAtMs);
    if (upTo < anchorMs) return undefined;
    const t = anchorMs + Math.floor((upTo - anchorMs) / this.#every) * this.#every;
    return t > lowerBound(this.spec, afterMs) ? t : undefined;
  }

  fireAt(occurrenceMs: number): number {
    return occurrenceMs + jitterOf(this.#nameHash, this.spec.jitterMs, occurrenceMs);
  }
}

/** Occurrences latestIn reads ahead per step while it walks forward to `atMs`. */
const latestWalkStep = 16;
/** croner's previous runs latestIn tries as a starting point before it walks from `afterMs`. */
const latestHintTries = 4;

class CronRule implements ScheduleRule {
  readonly spec: RuleSpec;
  /** The expression as cron-grammar.ts hands it to the library; compiled in cron-cache.ts when used. */
  readonly #pattern: string;
  readonly #zone: string;
  /** Set for an elapsed-time rule only: its times in a gap are added (dst-corrections.ts). */
  readonly #gapMatch: LocalMatch | undefined;
  readonly #nameHash: number;

  constructor(spec: RuleSpec, pattern: string, zone: string, gapMatch: LocalMatch | undefined) {
    this.spec = spec;
    this.#pattern = pattern;
    this.#zone = zone;
    this.#gapMatch = gapMatch;
    this.#nameHash = nameHashOf(spec.name);
  }

  after(afterMs: number, limit: number): number[] {
    checkLimit(limit);
    const from = lowerBound(this.spec, afterMs);
    const runs = this.#libraryRuns(from, limit);
    if (this.#gapMatch === undefined || limit === 0) return runs;
    // Gaps past the last run cannot change the answer when it is full; otherwise end_at bounds it.
    const to = runs.length === limit ? (runs[limit - 1] ?? from) : (this.spec.endAtMs ?? runs.at(-1) ?? from);
    return mergeOccurrences(runs, gapOccurrences(this.#zone, from, to, this.#gapMatch), limit);
  }

  #libraryRuns(from: number, limit: number): number[] {
    const { endAtMs } = this.spec;
    const cron = compiledCron(this.#pattern, this.#zone);
    const out: number[] = [];
    let cursor = from;
    while (out.length < limit) {
      const next = cron.nextRun(new Date(cursor));
      if (next === null) break;
      const t = next.getTime();
      if (endAtMs !== undefined && t > endAtMs) break;
      out.push(t);
      cursor = t;
    }
    return out;
  }

  /**
   * The last of after()'s own occurrences up to `atMs`, so the daylight-saving rules hold here as
   * there: croner's previous run is only where the walk forward starts, once after() confirms it
   * is an occurrence (croner may name the second pass of a repeated time, which is none).
   */
  latestIn(afterMs: number, atMs: number): number | undefined {
    const { endAtMs } = this.spec;
    const upTo = endAtMs === undefined ? atMs : Math.min(atMs, endAtMs);
    const floor = lowerBound(this.spec, afterMs);
    if (upTo <= floor) return undefined;
    const cron = compiledCron(this.#pattern, this.#zone);
    let cursor = floor;
    let hint = cron.previousRuns(1, new Date(upTo + 1))[0];
    for (let tries = 0; tries < latestHintTries && hint !== undefined && hint.getTime() > floor; tries++) {
      const h = hint.getTime();
      if (this.after(h - 1, 1)[0] === h) {
        cursor = h - 1;
        break;
      }
      hint = cron.previousRuns(1, hint)[0];
    }
    let latest: number | undefined;
    for (;;) {
      const step = this.after(cursor, latestWalkStep);
      for (const t of step) {
        if (t > upTo) return latest;
        latest = t;
      }
      const last = step.at(-1);
      if (step.length < latestWalkStep || last === undefined) return latest;
      cursor = last;
    }
  }

  fireAt(occurrenceMs: number): number {
    return occurrenceMs + jitterOf(this.#nameHash, this.spec.jitterMs, occurrenceMs);
  }
}

/**
 * The jitter of an occurrence: 0..jitterMs, from a hash of the schedule's name and the
 * occurrence's instant only, so every computation (a restart, another node) gives the same.
 * FNV-1a over the name's UTF-8 bytes (once, nameHashOf) and the instant's 8 bytes
 * (little-endian), finished with murmur3's fmix32 so that neighbouring instants spread over the
 * whole range the modulo reads. Two numbers a rule, no object.
 */
function nameHashOf(name: string): number {
  let h = 0x811c9dc5;
  for (const byte of new TextEncoder().encode(name)) h = fnvStep(h, byte);
  return h;
}

function jitterOf(nameHash: number, jitterMs: number, occurrenceMs: number): number {
  if (jitterMs === 0) return 0;
  const low = occurrenceMs >>> 0;
  const high = Math.floor(occurrenceMs / 0x1_0000_0000) >>> 0;
  let h = nameHash;
  for (let shift = 0; shift < 32; shift += 8) h = fnvStep(h, (low >>> shift) & 0xff);
  for (let shift = 0; shift < 32; shift += 8) h = fnvStep(h, (high >>> shift) & 0xff);
  return fmix32(h) % (jitterMs + 1);
}

function fnvStep(hash: number, byte: number): number {
  return Math.imul(hash ^ byte, 0x01000193) >>> 0;
}

function fmix32(hash: number): number {
  let h = hash;
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}
