// A schedule's rule (engine/schedules/rule.ts, cron-grammar.ts): every_ms from its anchor by
// arithmetic; the cron grammar docs/api.md names (names, ranges, steps, lists, seconds, L, #, ?)
// with expectations written as literal UTC instants; start_at/end_at bounds; latestIn; a jitter
// that is stable and within bounds; and each bad input refused as SCHEDULE_INVALID naming its
// field. Daylight saving has its own file (schedule-dst.test.ts).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { errorCodes, isFermataError } from '../../engine/errors.ts';
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
});
