// A schedule's rule (engine/schedules/rule.ts, cron-grammar.ts): every_ms from its anchor by
// arithmetic; the cron grammar docs/api.md names (names, ranges, steps, lists, seconds, L, #, ?)
// with expectations written as literal UTC instants; start_at/end_at bounds; latestIn; a jitter
// that is stable and within bounds; and each bad input refused as SCHEDULE_INVALID naming its
// field. Daylight saving has its own file (schedule-dst.test.ts).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { errorCodes, isFermataError } from '../../engine/errors.ts';
import { scheduleRuleLimits } from '../../engine/limits.ts';
import { compileRule, type RuleSpec } from '../../engine/schedules/rule.ts';

const at = (iso: string): number => Date.parse(iso);
const iso = (ms: number): string => new Date(ms).toISOString();
const isos = (list: readonly number[]): string[] => list.map(iso);

function rule(cron: string, extra: Partial<RuleSpec> = {}) {
  return compileRule({ name: 's', cron, anchorMs: 0, jitterMs: 0, ...extra });
}

function refused(spec: Partial<RuleSpec>, field: string, words: RegExp): void {
  assert.throws(
    () => compileRule({ name: 's', anchorMs: 0, jitterMs: 0, ...spec }),
    (err: unknown) => {
      assert.ok(isFermataError(err, errorCodes.scheduleInvalid), `SCHEDULE_INVALID, not ${String(err)}`);
      assert.equal(err.details.field, field);
      assert.match(err.message, words);
      return true;
    },
  );
}

test('every_ms counts from its anchor: the anchor is the first occurrence, then one each interval', () => {
  const r = compileRule({ name: 'e', everyMs: 60_000, anchorMs: at('2025-01-01T00:00:30Z'), jitterMs: 0 });
  assert.deepEqual(isos(r.after(at('2024-12-31T00:00:00Z'), 3)), ['2025-01-01T00:00:30.000Z', '2025-01-01T00:01:30.000Z', '2025-01-01T00:02:30.000Z']);
  // Strictly after: an occurrence itself is not answered again.
  assert.deepEqual(isos(r.after(at('2025-01-01T00:01:30Z'), 1)), ['2025-01-01T00:02:30.000Z']);
  assert.deepEqual(isos(r.after(at('2025-01-01T00:01:29.999Z'), 1)), ['2025-01-01T00:01:30.000Z']);
  assert.deepEqual(r.after(0, 0), []);
});

test('every_ms far from its anchor is arithmetic: a year of seconds away answers at once', () => {
  const r = compileRule({ name: 'e', everyMs: 1000, anchorMs: 7, jitterMs: 0 });
  const started = process.hrtime.bigint();
  for (let i = 0; i < 10_000; i++) r.after(at('2025-06-01T00:00:00Z') + i, 1);
  assert.ok(process.hrtime.bigint() - started < 1_000_000_000n, 'ten thousand calls far from the anchor take well under a second');
  assert.deepEqual(r.after(at('2025-06-01T00:00:00Z'), 2), [at('2025-06-01T00:00:00.007Z'), at('2025-06-01T00:00:01.007Z')]);
});

test('a plain cron expression in UTC: every Monday to Friday at 09:00', () => {
  const r = rule('0 9 * * MON-FRI');
  assert.deepEqual(isos(r.after(at('2025-01-02T09:00:00Z'), 4)), [
    '2025-01-03T09:00:00.000Z',
    '2025-01-06T09:00:00.000Z',
    '2025-01-07T09:00:00.000Z',
    '2025-01-08T09:00:00.000Z',
  ]);
});

// 2025-01-01 is a Wednesday; every expectation below is in UTC and counted on a calendar by hand.
const newYear = at('2025-01-01T00:00:00Z');

test('names of months and days, in any case, and 7 for Sunday', () => {
  assert.deepEqual(isos(rule('0 9 * jan,Mar sat').after(newYear, 5)), [
    '2025-01-04T09:00:00.000Z',
    '2025-01-11T09:00:00.000Z',
    '2025-01-18T09:00:00.000Z',
    '2025-01-25T09:00:00.000Z',
    '2025-03-01T09:00:00.000Z',
  ]);
  assert.deepEqual(isos(rule('0 0 * * 7').after(newYear, 1)), ['2025-01-05T00:00:00.000Z']);
  assert.deepEqual(isos(rule('0 0 * * 0').after(newYear, 1)), ['2025-01-05T00:00:00.000Z']);
});

test('ranges, steps over * and over a range, and lists', () => {
  // Strictly after: 1 January 00:00, itself a Wednesday, is not answered.
  assert.deepEqual(isos(rule('0 0 * * MON-WED').after(newYear, 3)), ['2025-01-06T00:00:00.000Z', '2025-01-07T00:00:00.000Z', '2025-01-08T00:00:00.000Z']);
  assert.deepEqual(isos(rule('0 0 1-10/3 * *').after(newYear, 4)), ['2025-01-04T00:00:00.000Z', '2025-01-07T00:00:00.000Z', '2025-01-10T00:00:00.000Z', '2025-02-01T00:00:00.000Z']);
  assert.deepEqual(isos(rule('0 0 * * MON-FRI/2').after(newYear, 3)), ['2025-01-03T00:00:00.000Z', '2025-01-06T00:00:00.000Z', '2025-01-08T00:00:00.000Z']);
  assert.deepEqual(isos(rule('*/20 8 * * *').after(newYear, 4)), ['2025-01-01T08:00:00.000Z', '2025-01-01T08:20:00.000Z', '2025-01-01T08:40:00.000Z', '2025-01-02T08:00:00.000Z']);
  assert.deepEqual(isos(rule('15,45 8,20 * * *').after(newYear, 5)), [
    '2025-01-01T08:15:00.000Z',
    '2025-01-01T08:45:00.000Z',
    '2025-01-01T20:15:00.000Z',
    '2025-01-01T20:45:00.000Z',
    '2025-01-02T08:15:00.000Z',
  ]);
});

test('six fields put seconds first', () => {
  assert.deepEqual(isos(rule('*/20 * * * * *').after(newYear, 3)), ['2025-01-01T00:00:20.000Z', '2025-01-01T00:00:40.000Z', '2025-01-01T00:01:00.000Z']);
  assert.deepEqual(isos(rule('30 0 12 * * *').after(newYear, 1)), ['2025-01-01T12:00:30.000Z']);
});

test('day-of-month and day-of-week both restricted: either one matches (as cron has it)', () => {
  assert.deepEqual(isos(rule('0 0 13 * FRI').after(newYear, 4)), ['2025-01-03T00:00:00.000Z', '2025-01-10T00:00:00.000Z', '2025-01-13T00:00:00.000Z', '2025-01-17T00:00:00.000Z']);
});

test('L, nL, n#k and ?: the last day, the last Friday, the second Monday, no particular day', () => {
  assert.deepEqual(isos(rule('0 0 L * *').after(newYear, 3)), ['2025-01-31T00:00:00.000Z', '2025-02-28T00:00:00.000Z', '2025-03-31T00:00:00.000Z']);
  assert.deepEqual(isos(rule('0 0 L 2 *').after(at('2027-03-01T00:00:00Z'), 1)), ['2028-02-29T00:00:00.000Z']);
  assert.deepEqual(isos(rule('0 0 * * 5L').after(newYear, 3)), ['2025-01-31T00:00:00.000Z', '2025-02-28T00:00:00.000Z', '2025-03-28T00:00:00.000Z']);
  assert.deepEqual(isos(rule('0 0 * * MON#2').after(newYear, 3)), ['2025-01-13T00:00:00.000Z', '2025-02-10T00:00:00.000Z', '2025-03-10T00:00:00.000Z']);
  assert.deepEqual(isos(rule('0 0 * * SUN#1').after(newYear, 2)), ['2025-01-05T00:00:00.000Z', '2025-02-02T00:00:00.000Z']);
  assert.deepEqual(isos(rule('0 12 ? * MON').after(newYear, 2)), ['2025-01-06T12:00:00.000Z', '2025-01-13T12:00:00.000Z']);
});

test('start_at and end_at bound the occurrences, both inclusive', () => {
  const bounds = { startAtMs: at('2025-01-01T05:00:00Z'), endAtMs: at('2025-01-01T07:00:00Z') };
  const hourly = rule('0 * * * *', bounds);
  assert.deepEqual(isos(hourly.after(0, 10)), ['2025-01-01T05:00:00.000Z', '2025-01-01T06:00:00.000Z', '2025-01-01T07:00:00.000Z']);
  assert.deepEqual(hourly.after(at('2025-01-01T07:00:00Z'), 10), []);
  assert.equal(hourly.latestIn(0, at('2025-01-01T10:00:00Z')), at('2025-01-01T07:00:00Z'));
  assert.equal(hourly.latestIn(0, at('2025-01-01T04:59:59Z')), undefined);
  assert.equal(hourly.latestIn(at('2025-01-01T06:00:00Z'), at('2025-01-01T06:59:59Z')), undefined);

  const every = compileRule({ name: 'e', everyMs: 3_600_000, anchorMs: bounds.startAtMs, jitterMs: 0, ...bounds });
  assert.deepEqual(isos(every.after(0, 10)), ['2025-01-01T05:00:00.000Z', '2025-01-01T06:00:00.000Z', '2025-01-01T07:00:00.000Z']);
  assert.equal(every.latestIn(0, at('2025-01-01T06:30:00Z')), at('2025-01-01T06:00:00Z'));
  assert.equal(every.latestIn(at('2025-01-01T06:00:00Z'), at('2025-01-01T06:30:00Z')), undefined);
  assert.equal(every.latestIn(0, at('2025-01-02T00:00:00Z')), at('2025-01-01T07:00:00Z'));
  // every_ms anchored before start_at: its grid stays, start_at only cuts.
  const late = compileRule({ name: 'e', everyMs: 3_600_000, anchorMs: at('2025-01-01T00:30:00Z'), startAtMs: at('2025-01-01T05:00:00Z'), jitterMs: 0 });
  assert.deepEqual(isos(late.after(0, 2)), ['2025-01-01T05:30:00.000Z', '2025-01-01T06:30:00.000Z']);
});

test('latestIn is the last occurrence in (after, at]: the one catch_up latest fires', () => {
  const r = rule('0 9 * * MON-FRI');
  assert.equal(r.latestIn(at('2025-01-02T09:00:00Z'), at('2025-01-06T08:59:59Z')), at('2025-01-03T09:00:00Z'));
  assert.equal(r.latestIn(at('2025-01-02T09:00:00Z'), at('2025-01-06T09:00:00Z')), at('2025-01-06T09:00:00Z'));
  assert.equal(r.latestIn(at('2025-01-03T09:00:00Z'), at('2025-01-06T08:00:00Z')), undefined);
  const seconds = rule('* * * * * *');
  assert.equal(seconds.latestIn(0, at('2025-01-01T00:00:00.500Z')), at('2025-01-01T00:00:00Z'));
});

/** The jitter of 'daily-report' (0..30000) at 2025-01-01T09:00Z, FNV-1a over the name's UTF-8 and the instant's 8 bytes little-endian, then fmix32, mod 30001: the same figure a separate Python script gives. */
const PINNED_JITTER = 1688;

test('the jitter is the same on every compile, within 0..jitter_ms, spread over it, and different per name', () => {
  const spec = { name: 'daily-report', cron: '0 * * * *', anchorMs: 0, jitterMs: 30_000 };
  const first = compileRule(spec);
  const again = compileRule(spec);
  const other = compileRule({ ...spec, name: 'nightly-report' });
  const occurrences = first.after(newYear, 1000);
  let sum = 0;
  let differs = 0;
  const seen = new Set<number>();
  for (const t of occurrences) {
    const jitter = first.fireAt(t) - t;
    assert.ok(Number.isInteger(jitter) && jitter >= 0 && jitter <= 30_000, `jitter ${jitter} within 0..30000`);
    assert.equal(again.fireAt(t), first.fireAt(t));
    if (other.fireAt(t) !== first.fireAt(t)) differs++;
    sum += jitter;
    seen.add(jitter);
  }
  assert.ok(Math.abs(sum / occurrences.length - 15_000) < 1500, `mean jitter ${sum / occurrences.length} near the middle`);
  assert.ok(seen.size > 950, 'neighbouring occurrences get different jitters');
  assert.ok(differs > 990, 'another name gets other jitters');
  // Pinned: a new version that changed the hash would move every schedule's fire times.
  assert.equal(first.fireAt(at('2025-01-01T09:00:00Z')) - at('2025-01-01T09:00:00Z'), PINNED_JITTER);
  assert.equal(compileRule({ ...spec, jitterMs: 0 }).fireAt(at('2025-01-01T09:00:00Z')), at('2025-01-01T09:00:00Z'));
  const every = compileRule({ name: 'daily-report', everyMs: 60_000, anchorMs: 0, jitterMs: 30_000 });
  assert.equal(every.fireAt(at('2025-01-01T09:00:00Z')), first.fireAt(at('2025-01-01T09:00:00Z')), 'the jitter depends on the name and the instant only');
});

test('an expression that never matches is refused at once, not searched for ever', () => {
  const started = Date.now();
  refused({ cron: '0 0 30 2 *' }, 'cron', /matches no date/);
  refused({ cron: '0 0 31 4,6,9,11 *' }, 'cron', /matches no date/);
  assert.ok(Date.now() - started < 2000);
});

test('bad input is SCHEDULE_INVALID naming the field', () => {
  refused({ cron: '0 9 * *' }, 'cron', /4 fields/);
  refused({ cron: '61 * * * *' }, 'cron', /minute/);
  refused({ cron: '0 0 30 2 *' }, 'cron', /matches no date/);
  refused({ cron: '0 9 * * *', timeZone: 'Mars/Olympus_Mons' }, 'time_zone', /Mars\/Olympus_Mons/);
  refused({ everyMs: 999 }, 'every_ms', /1000/);
  refused({ everyMs: 60_000, timeZone: 'UTC' }, 'time_zone', /cron only/);
  refused({ cron: '0 9 * * *', everyMs: 60_000 }, 'cron', /every_ms/);
  refused({}, 'cron', /every_ms/);
  refused({ cron: '0 9 * * *', startAtMs: 2000, endAtMs: 1000 }, 'end_at', /before start_at/);
  refused({ everyMs: 60_000, jitterMs: -1 }, 'jitter_ms', /-1/);
  refused({ everyMs: 60_000, jitterMs: 86_400_001 }, 'jitter_ms', /86400000/);
  refused({ everyMs: 1500.5 }, 'every_ms', /whole number/);
  refused({ cron: '0 9 * * *', timeZone: '+01:00' }, 'time_zone', /IANA/);
  refused({ cron: '0 9 * * *', startAtMs: Number.NaN }, 'start_at', /instant/);
});

test('only the grammar docs/api.md names: what the library would take beyond it is refused', () => {
  refused({ cron: '0 0 1 1 * * 2026' }, 'cron', /7 fields/);
  refused({ cron: '@daily' }, 'cron', /1 fields/);
  refused({ cron: '0 0 15W * *' }, 'cron', /day-of-month/);
  refused({ cron: '0 0 L-2 * *' }, 'cron', /day-of-month/);
  refused({ cron: '5/15 * * * *' }, 'cron', /minute/);
  refused({ cron: '? * * * *' }, 'cron', /minute/);
  refused({ cron: '0 0 * * FRIL' }, 'cron', /day-of-week/);
  refused({ cron: '0 0 * * +MON' }, 'cron', /day-of-week/);
  refused({ cron: '0 0 * JANFEB *' }, 'cron', /month/);
  refused({ cron: `0 0 ${'1,'.repeat(200)}1 * *` }, 'cron', /longer than 256/);
});

test('values out of their field\'s range are refused naming the field and the value', () => {
  refused({ cron: '60 * * * *' }, 'cron', /field 1 \(minute\).*60 is outside 0-59/);
  refused({ cron: '0 24 * * *' }, 'cron', /field 2 \(hour\).*24 is outside 0-23/);
  refused({ cron: '0 0 32 * *' }, 'cron', /field 3 \(day-of-month\).*32 is outside 1-31/);
  refused({ cron: '0 0 0 * *' }, 'cron', /0 is outside 1-31/);
  refused({ cron: '0 0 * 13 *' }, 'cron', /field 4 \(month\).*13 is outside 1-12/);
  refused({ cron: '0 0 * * 8' }, 'cron', /field 5 \(day-of-week\).*8 is outside 0-7/);
  refused({ cron: '0 0 * * 5#6' }, 'cron', /#6/);
  refused({ cron: '0 0 */0 * *' }, 'cron', /step 0/);
  refused({ cron: '0 0 * * 6-1' }, 'cron', /6-1 runs backwards/);
  refused({ cron: '60 0 0 * * *' }, 'cron', /field 1 \(seconds\)/);
});

test('rules keep answering the same once their compiled patterns left the bounded cache', () => {
  const first = rule('7 3 * * *', { timeZone: 'Europe/Berlin' });
  const before = first.after(newYear, 3);
  // More distinct expressions than compiledCronsCachedMax: the first one's compiled pattern is evicted.
  for (let i = 0; i < scheduleRuleLimits.compiledCronsCachedMax + 10; i++) rule(`${i % 60} ${Math.floor(i / 60) % 24} * * *`, { timeZone: 'Europe/Berlin' }).after(newYear, 1);
  assert.deepEqual(first.after(newYear, 3), before);
  assert.deepEqual(isos(before), ['2025-01-01T02:07:00.000Z', '2025-01-02T02:07:00.000Z', '2025-01-03T02:07:00.000Z']);
});
