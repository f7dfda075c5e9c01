// Daylight saving in a schedule's cron rule (engine/schedules/rule.ts, dst-corrections.ts),
// across both changes of 2025 (a past year: time zone data updates cannot move it) in
// Europe/Berlin, America/New_York, Australia/Lord_Howe (a 30-minute shift) and Asia/Tokyo (no
// DST). Every expectation is a literal UTC instant worked out by hand from the zone's rules:
//
//   Europe/Berlin      CET +1 / CEST +2   2025-03-30 02:00→03:00 at 01:00Z;  2025-10-26 03:00→02:00 at 01:00Z
//   America/New_York   EST −5 / EDT −4    2025-03-09 02:00→03:00 at 07:00Z;  2025-11-02 02:00→01:00 at 06:00Z
//   Australia/Lord_Howe  +10:30 / +11     2025-04-06 02:00→01:30 at 04-05T15:00Z;  2025-10-05 02:00→02:30 at 10-04T15:30Z
//   Asia/Tokyo         JST +9 all year
//
// The rules under test (docs/api.md, "Schedule rules"): a local time that occurs twice fires once,
// at its first occurrence, for a fixed-time rule (no `*` and no step in seconds, minute, hour); a
// local time that does not exist fires at the first instant after the gap, and several such
// times in one gap fire once; a rule with `*` or a step in those fields (`*/15 * * * *`) fires at
// every instant whose local time matches, so through both changes it keeps real elapsed time.
// Also: 2025 of `0 9 * * MON-FRI` in Berlin, against instants found with Intl alone; and, for
// random rules near the changes, after() resumed from any of its answers gives the rest (what a
// schedule's high-water mark relies on) and latestIn agrees with it.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { transitionsIn } from '../../engine/schedules/dst-transitions.ts';
import { compileRule } from '../../engine/schedules/rule.ts';

const at = (iso: string): number => Date.parse(iso);
const isos = (list: readonly number[]): string[] => list.map((ms) => new Date(ms).toISOString().replace(':00.000Z', 'Z'));

function next(cron: string, timeZone: string, afterIso: string, count: number): string[] {
  return isos(compileRule({ name: 'dst', cron, timeZone, anchorMs: 0, jitterMs: 0 }).after(at(afterIso), count));
}

test('Europe/Berlin, spring: 02:30 does not exist on 30 March and fires at 03:00 CEST', () => {
  assert.deepEqual(next('30 2 * * *', 'Europe/Berlin', '2025-03-28T12:00Z', 4), ['2025-03-29T01:30Z', '2025-03-30T01:00Z', '2025-03-31T00:30Z', '2025-04-01T00:30Z']);
});

test('Europe/Berlin, spring: several times in the gap fire once, and once with 03:00 itself', () => {
  assert.deepEqual(next('0,30 2 * * *', 'Europe/Berlin', '2025-03-29T12:00Z', 3), ['2025-03-30T01:00Z', '2025-03-31T00:00Z', '2025-03-31T00:30Z']);
  assert.deepEqual(next('0 2,3 * * *', 'Europe/Berlin', '2025-03-29T12:00Z', 3), ['2025-03-30T01:00Z', '2025-03-31T00:00Z', '2025-03-31T01:00Z']);
  // A step in the minute field makes it an elapsed-time rule, but its times in the gap still fire once, after it.
  assert.deepEqual(next('*/15 2 * * *', 'Europe/Berlin', '2025-03-29T12:00Z', 2), ['2025-03-30T01:00Z', '2025-03-31T00:00Z']);
});

test('Europe/Berlin, spring: */15 keeps real elapsed time across the gap', () => {
  assert.deepEqual(next('*/15 * * * *', 'Europe/Berlin', '2025-03-30T00:30Z', 4), ['2025-03-30T00:45Z', '2025-03-30T01:00Z', '2025-03-30T01:15Z', '2025-03-30T01:30Z']);
});

test('Europe/Berlin, spring: every two hours, the 02:00 that does not exist fires at 03:00', () => {
  assert.deepEqual(next('0 */2 * * *', 'Europe/Berlin', '2025-03-29T22:30Z', 3), ['2025-03-29T23:00Z', '2025-03-30T01:00Z', '2025-03-30T02:00Z']);
});

test('Europe/Berlin, autumn: 02:30 occurs twice on 26 October and fires once, in summer time', () => {
  assert.deepEqual(next('30 2 * * *', 'Europe/Berlin', '2025-10-24T12:00Z', 4), ['2025-10-25T00:30Z', '2025-10-26T00:30Z', '2025-10-27T01:30Z', '2025-10-28T01:30Z']);
  assert.deepEqual(next('0,30 2 * * *', 'Europe/Berlin', '2025-10-25T12:00Z', 3), ['2025-10-26T00:00Z', '2025-10-26T00:30Z', '2025-10-27T01:00Z']);
});

test('Europe/Berlin, autumn: */15 keeps real elapsed time through the repeated hour', () => {
  assert.deepEqual(next('*/15 * * * *', 'Europe/Berlin', '2025-10-26T00:30Z', 7), [
    '2025-10-26T00:45Z',
    '2025-10-26T01:00Z',
    '2025-10-26T01:15Z',
    '2025-10-26T01:30Z',
    '2025-10-26T01:45Z',
    '2025-10-26T02:00Z',
    '2025-10-26T02:15Z',
  ]);
  assert.deepEqual(next('0 * * * *', 'Europe/Berlin', '2025-10-25T23:30Z', 3), ['2025-10-26T00:00Z', '2025-10-26T01:00Z', '2025-10-26T02:00Z']);
});

test('America/New_York: 02:30 in the March gap fires at 03:00 EDT; 01:30 in November fires once, in EDT', () => {
  assert.deepEqual(next('30 2 * * *', 'America/New_York', '2025-03-07T12:00Z', 3), ['2025-03-08T07:30Z', '2025-03-09T07:00Z', '2025-03-10T06:30Z']);
  assert.deepEqual(next('30 1 * * *', 'America/New_York', '2025-11-01T00:00Z', 3), ['2025-11-01T05:30Z', '2025-11-02T05:30Z', '2025-11-03T06:30Z']);
  assert.deepEqual(next('0 9 * * *', 'America/New_York', '2025-03-08T00:00Z', 2), ['2025-03-08T14:00Z', '2025-03-09T13:00Z']);
  assert.deepEqual(next('0 9 * * *', 'America/New_York', '2025-11-01T00:00Z', 2), ['2025-11-01T13:00Z', '2025-11-02T14:00Z']);
});

test('America/New_York: */15 keeps real elapsed time through both changes', () => {
  assert.deepEqual(next('*/15 * * * *', 'America/New_York', '2025-03-09T06:30Z', 3), ['2025-03-09T06:45Z', '2025-03-09T07:00Z', '2025-03-09T07:15Z']);
  assert.deepEqual(next('*/15 * * * *', 'America/New_York', '2025-11-02T05:30Z', 6), [
    '2025-11-02T05:45Z',
    '2025-11-02T06:00Z',
    '2025-11-02T06:15Z',
    '2025-11-02T06:30Z',
    '2025-11-02T06:45Z',
    '2025-11-02T07:00Z',
  ]);
});

test('Australia/Lord_Howe, October: 02:15 in the half-hour gap fires at 02:30 daylight time', () => {
  assert.deepEqual(next('15 2 * * *', 'Australia/Lord_Howe', '2025-10-03T00:00Z', 3), ['2025-10-03T15:45Z', '2025-10-04T15:30Z', '2025-10-05T15:15Z']);
  // 02:00, 02:10 and 02:20 fall in the gap and fire once, together with 02:30 itself.
  assert.deepEqual(next('*/10 2 * * *', 'Australia/Lord_Howe', '2025-10-04T12:00Z', 4), ['2025-10-04T15:30Z', '2025-10-04T15:40Z', '2025-10-04T15:50Z', '2025-10-05T15:00Z']);
});

test('Australia/Lord_Howe, October: */15 keeps real elapsed time across the half-hour gap', () => {
  assert.deepEqual(next('*/15 * * * *', 'Australia/Lord_Howe', '2025-10-04T15:00Z', 3), ['2025-10-04T15:15Z', '2025-10-04T15:30Z', '2025-10-04T15:45Z']);
});

test('Australia/Lord_Howe, April: 01:45 occurs twice on 6 April and fires once, in daylight time', () => {
  assert.deepEqual(next('45 1 * * *', 'Australia/Lord_Howe', '2025-04-04T00:00Z', 3), ['2025-04-04T14:45Z', '2025-04-05T14:45Z', '2025-04-06T15:15Z']);
});

test('Australia/Lord_Howe, April: */15 keeps real elapsed time through the repeated half hour', () => {
  assert.deepEqual(next('*/15 * * * *', 'Australia/Lord_Howe', '2025-04-05T14:20Z', 5), ['2025-04-05T14:30Z', '2025-04-05T14:45Z', '2025-04-05T15:00Z', '2025-04-05T15:15Z', '2025-04-05T15:30Z']);
});

test('Asia/Tokyo has no daylight saving: the same UTC time all year, every 15 minutes evenly', () => {
  assert.deepEqual(next('30 2 * * *', 'Asia/Tokyo', '2025-03-29T00:00Z', 2), ['2025-03-29T17:30Z', '2025-03-30T17:30Z']);
  assert.deepEqual(next('30 2 * * *', 'Asia/Tokyo', '2025-10-25T00:00Z', 2), ['2025-10-25T17:30Z', '2025-10-26T17:30Z']);
  assert.deepEqual(next('*/15 * * * *', 'Asia/Tokyo', '2025-10-26T00:50Z', 3), ['2025-10-26T01:00Z', '2025-10-26T01:15Z', '2025-10-26T01:30Z']);
});

test('latestIn across the changes agrees with after(): the catch-up occurrence is one the rule has', () => {
  const fixed = compileRule({ name: 'dst', cron: '30 2 * * *', timeZone: 'Europe/Berlin', anchorMs: 0, jitterMs: 0 });
  // In the repeated hour, after the second 02:30 (01:30Z): the latest is the first 02:30, not the second.
  assert.equal(fixed.latestIn(at('2025-10-25T12:00Z'), at('2025-10-26T01:45Z')), at('2025-10-26T00:30Z'));
  // Just after the gap: the 02:30 that fired at 03:00.
  assert.equal(fixed.latestIn(at('2025-03-29T12:00Z'), at('2025-03-30T01:10Z')), at('2025-03-30T01:00Z'));
  const every = compileRule({ name: 'dst', cron: '*/15 2 * * *', timeZone: 'Europe/Berlin', anchorMs: 0, jitterMs: 0 });
  assert.equal(every.latestIn(at('2025-03-29T12:00Z'), at('2025-03-30T01:10Z')), at('2025-03-30T01:00Z'));
  assert.equal(every.latestIn(at('2025-03-30T01:00Z'), at('2025-03-30T12:00Z')), undefined);
});

/** The instant of 09:00 in Berlin on a date, found by trying both of Berlin's offsets and asking Intl which one reads 09:00. */
function nineInBerlin(year: number, monthIndex: number, day: number): number {
  const reads = new Intl.DateTimeFormat('en-GB', { timeZone: 'Europe/Berlin', hourCycle: 'h23', year: 'numeric', month: '2-digit', day: '2-digit', hour: '2-digit', minute: '2-digit' });
  const wanted = `${String(day).padStart(2, '0')}/${String(monthIndex + 1).padStart(2, '0')}/${year}, 09:00`;
  for (const offsetHours of [1, 2]) {
    const instant = Date.UTC(year, monthIndex, day, 9 - offsetHours);
    if (reads.format(instant) === wanted) return instant;
  }
  throw new Error(`no instant reads ${wanted} in Berlin`);
}

test('2025 of 0 9 * * MON-FRI in Europe/Berlin: exactly the 261 weekday mornings Intl finds', () => {
  const expected: number[] = [];
  for (let day = new Date(Date.UTC(2025, 0, 1)); day.getUTCFullYear() === 2025; day = new Date(day.getTime() + 86_400_000)) {
    const weekday = day.getUTCDay();
    if (weekday >= 1 && weekday <= 5) expected.push(nineInBerlin(2025, day.getUTCMonth(), day.getUTCDate()));
  }
  assert.equal(expected.length, 261);
  const r = compileRule({ name: 'weekdays', cron: '0 9 * * MON-FRI', timeZone: 'Europe/Berlin', anchorMs: 0, jitterMs: 0 });
  const got = r.after(at('2025-01-01T00:00Z'), 300).filter((ms) => ms < at('2026-01-01T00:00Z'));
  assert.deepEqual(isos(got), isos(expected));
  // Winter at 08:00Z, summer at 07:00Z: the offsets really changed.
  assert.equal(got[0], at('2025-01-01T08:00Z'));
  assert.ok(got.includes(at('2025-03-31T07:00Z')) && got.includes(at('2025-10-27T08:00Z')));
});

test('the offset changes read from Intl: two in Berlin and New York, two of 30 minutes at Lord Howe, none in Tokyo', () => {
  const hour = 3_600_000;
  const year = [at('2025-01-01T00:00Z') - 1, at('2026-01-01T00:00Z') - 1] as const;
  assert.deepEqual(transitionsIn('Europe/Berlin', ...year), [
    { atMs: at('2025-03-30T01:00Z'), offsetBeforeMs: hour, offsetAfterMs: 2 * hour },
    { atMs: at('2025-10-26T01:00Z'), offsetBeforeMs: 2 * hour, offsetAfterMs: hour },
  ]);
  assert.deepEqual(transitionsIn('America/New_York', ...year), [
    { atMs: at('2025-03-09T07:00Z'), offsetBeforeMs: -5 * hour, offsetAfterMs: -4 * hour },
    { atMs: at('2025-11-02T06:00Z'), offsetBeforeMs: -4 * hour, offsetAfterMs: -5 * hour },
  ]);
  assert.deepEqual(transitionsIn('Australia/Lord_Howe', ...year), [
    { atMs: at('2025-04-05T15:00Z'), offsetBeforeMs: 11 * hour, offsetAfterMs: 10.5 * hour },
    { atMs: at('2025-10-04T15:30Z'), offsetBeforeMs: 10.5 * hour, offsetAfterMs: 11 * hour },
  ]);
  assert.deepEqual(transitionsIn('Asia/Tokyo', ...year), []);
});

test('near the changes, after() resumes from any of its answers with the rest, and latestIn agrees with it', () => {
  const changes = ['2025-03-09T07:00Z', '2025-03-30T01:00Z', '2025-04-05T15:00Z', '2025-10-04T15:30Z', '2025-10-26T01:00Z', '2025-11-02T06:00Z'].map(at);
  const rules = ['30 2 * * *', '0,30 2 * * *', '*/15 * * * *', '0 */2 * * *', '*/10 2 * * *', '45 1 * * *', '0 * * * *', '15 2 * * 0', '*/20 1-3 * * *', '0 30 1,2 * * *', '*/7 * * * *'];
  const zones = ['Europe/Berlin', 'America/New_York', 'Australia/Lord_Howe', 'Asia/Tokyo', 'UTC'];
  fc.assert(
    fc.property(
      fc.constantFrom(...rules),
      fc.constantFrom(...zones),
      fc.constantFrom(...changes),
      fc.integer({ min: -2 * 86_400_000, max: 2 * 86_400_000 }),
      fc.integer({ min: 1, max: 12 }),
      fc.nat(),
      (cron, timeZone, change, shiftMs, count, pick) => {
        const rule = compileRule({ name: 'prop', cron, timeZone, anchorMs: 0, jitterMs: 0 });
        const from = change + shiftMs;
        const list = rule.after(from, count);
        assert.equal(list.length, count);
        for (let i = 0; i < list.length; i++) {
          const t = list[i] as number;
          assert.ok(t > (i === 0 ? from : (list[i - 1] as number)), `${cron} ${timeZone}: ascending, strictly after`);
          assert.deepEqual(rule.after(t, count - 1 - i), list.slice(i + 1), `${cron} ${timeZone}: resumed after ${new Date(t).toISOString()}`);
          assert.equal(rule.after(t - 1, 1)[0], t);
        }
        const k = pick % list.length;
        const upTo = list[k] as number;
        assert.equal(rule.latestIn(from, upTo), upTo, `${cron} ${timeZone}: latestIn up to an occurrence is that occurrence`);
        assert.equal(rule.latestIn(from, (list[k + 1] ?? upTo + 1) - 1), upTo, `${cron} ${timeZone}: and up to just before the next`);
        assert.equal(rule.latestIn(from, (list[0] as number) - 1), undefined);
      },
    ),
    { numRuns: 150, seed: 43 },
  );
});

/**
 * A brute-force oracle for the daylight-saving rules, independent of the cron library: every
 * minute of a span, its local time read with Intl, and the rule given as a predicate on local
 * hour and minute. A matching minute fires (for a fixed-time rule only if its local time has not
 * been seen yet in the span); where the local clock jumps forward, the skipped minutes are
 * checked, and if one matches, the first instant after the jump fires (once).
 */
function oracle(zone: string, matches: (hour: number, minute: number) => boolean, fixedTime: boolean, fromMs: number, toMs: number): number[] {
  const reads = new Intl.DateTimeFormat('en-US', { timeZone: zone, hourCycle: 'h23', year: 'numeric', month: 'numeric', day: 'numeric', hour: 'numeric', minute: 'numeric' });
  const localMinute = (ms: number): number => {
    const p = Object.fromEntries(reads.formatToParts(ms).map((part) => [part.type, part.value]));
    return Date.UTC(Number(p.year), Number(p.month) - 1, Number(p.day), Number(p.hour), Number(p.minute)) / 60_000;
  };
  const wallMatches = (local: number): boolean => matches(Math.floor(local / 60) % 24, local % 60);
  const fired: number[] = [];
  const seen = new Set<number>();
  let previousLocal: number | undefined;
  for (let t = fromMs; t < toMs; t += 60_000) {
    const local = localMinute(t);
    let fires = wallMatches(local) && !(fixedTime && seen.has(local));
    if (previousLocal !== undefined && local > previousLocal + 1) {
      for (let skipped = previousLocal + 1; skipped < local; skipped++) if (wallMatches(skipped)) fires = true;
    }
    if (fires) fired.push(t);
    seen.add(local);
    previousLocal = local;
  }
  return fired;
}

test('twelve hours either side of each 2025 change, the rule fires exactly where a minute-by-minute Intl oracle says', () => {
  const cases: ReadonlyArray<readonly [string, (h: number, m: number) => boolean, boolean]> = [
    ['30 2 * * *', (h, m) => h === 2 && m === 30, true],
    ['0,30 2 * * *', (h, m) => h === 2 && (m === 0 || m === 30), true],
    ['15,45 1,2 * * *', (h, m) => (h === 1 || h === 2) && (m === 15 || m === 45), true],
    ['45 1 * * *', (h, m) => h === 1 && m === 45, true],
    ['*/15 * * * *', (_h, m) => m % 15 === 0, false],
    ['0 */2 * * *', (h, m) => m === 0 && h % 2 === 0, false],
    ['*/10 2 * * *', (h, m) => h === 2 && m % 10 === 0, false],
    ['0 * * * *', (_h, m) => m === 0, false],
    ['*/20 1-3 * * *', (h, m) => h >= 1 && h <= 3 && m % 20 === 0, false],
  ];
  const changes: ReadonlyArray<readonly [string, string]> = [
    ['Europe/Berlin', '2025-03-30T01:00Z'],
    ['Europe/Berlin', '2025-10-26T01:00Z'],
    ['America/New_York', '2025-03-09T07:00Z'],
    ['America/New_York', '2025-11-02T06:00Z'],
    ['Australia/Lord_Howe', '2025-04-05T15:00Z'],
    ['Australia/Lord_Howe', '2025-10-04T15:30Z'],
    ['Asia/Tokyo', '2025-10-26T01:00Z'],
  ];
  for (const [zone, changeIso] of changes) {
    const from = at(changeIso) - 43_200_000;
    const to = at(changeIso) + 43_200_000;
    for (const [cron, matches, fixedTime] of cases) {
      const rule = compileRule({ name: 'oracle', cron, timeZone: zone, anchorMs: 0, jitterMs: 0 });
      const got = rule.after(from - 1, 1000).filter((t) => t < to);
      assert.deepEqual(isos(got), isos(oracle(zone, matches, fixedTime, from, to)), `${cron} in ${zone} around ${changeIso}`);
    }
  }
});
