// docs/api.md "Schedule rules" stays true: every example in its tables is compiled and gives
// exactly the occurrences the table shows. The cron examples list the next occurrences after
// 2025-01-01T00:00:00Z; the daylight-saving examples list consecutive occurrences (words in
// parentheses are notes for the reader, not instants).
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { compileRule } from '../../engine/schedules/rule.ts';

const apiDoc = readFileSync(new URL('../../docs/api.md', import.meta.url), 'utf8');
const section = apiDoc.slice(apiDoc.indexOf('## Schedule rules'), apiDoc.indexOf('\n## ', apiDoc.indexOf('## Schedule rules') + 1));

interface Example {
  readonly cron: string;
  readonly zone: string;
  readonly instants: number[];
}

/** The rows of the table whose header starts with `header`: cells, backticks kept off. */
function tableRows(header: string): string[][] {
  const start = section.indexOf(header);
  assert.ok(start >= 0, `docs/api.md "Schedule rules" has a table headed ${header}`);
  const rows: string[][] = [];
  for (const line of section.slice(start).split('\n').slice(2)) {
    if (!line.startsWith('|')) break;
    rows.push(line.split('|').slice(1, -1).map((cell) => cell.trim().replaceAll('`', '')));
  }
  return rows;
}

function instantsIn(cell: string): number[] {
  const withoutNotes = cell.replace(/\([^)]*\)/g, '');
  return [...withoutNotes.matchAll(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ/g)].map((match) => Date.parse(match[0]));
}

function examples(header: string, cronColumn: number, zoneOf: (row: string[]) => string): Example[] {
  return tableRows(header).map((row) => ({ cron: row[cronColumn] ?? '', zone: zoneOf(row), instants: instantsIn(row.at(-1) ?? '') }));
}

const iso = (list: readonly number[]): string[] => list.map((ms) => new Date(ms).toISOString());

test('each cron example gives the occurrences the table shows after 2025-01-01T00:00:00Z', () => {
  const rows = examples('| cron | time_zone |', 0, (row) => row[1] ?? '');
  assert.ok(rows.length >= 14);
  for (const { cron, zone, instants } of rows) {
    const rule = compileRule({ name: 'doc', cron, timeZone: zone, anchorMs: 0, jitterMs: 0 });
    assert.deepEqual(iso(rule.after(Date.parse('2025-01-01T00:00:00Z'), instants.length)), iso(instants), `${cron} in ${zone}`);
  }
});

test('each daylight-saving example lists consecutive occurrences of its rule', () => {
  const rows = examples('| zone, 2025 change |', 1, (row) => (row[0] ?? '').split(',')[0] ?? '');
  assert.ok(rows.length >= 10);
  for (const { cron, zone, instants } of rows) {
    const first = instants[0];
    assert.ok(first !== undefined, `${cron} in ${zone} shows an instant`);
    const rule = compileRule({ name: 'doc', cron, timeZone: zone, anchorMs: 0, jitterMs: 0 });
    assert.deepEqual(iso(rule.after(first - 1, instants.length)), iso(instants), `${cron} in ${zone}`);
  }
});
