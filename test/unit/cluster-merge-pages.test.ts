import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { byFieldThenId, mergePages } from '../../ingest/http/cluster/merge-pages.ts';
import { propertyRuns } from '../helpers/property.ts';

const byValue = (a: number, b: number): boolean => a < b;

test('pages merge in order, the first `limit` items, with how many each page gave', () => {
  const pages = new Map([
    [0, [1, 4, 9]],
    [2, [2, 3, 10]],
    [3, []],
  ]);
  const merged = mergePages(pages, 4, byValue);
  assert.deepEqual(merged.items, [1, 2, 3, 4]);
  assert.deepEqual([...merged.taken], [
    [0, 2],
    [2, 2],
    [3, 0],
  ]);
  assert.deepEqual(mergePages(pages, 100, byValue).items, [1, 2, 3, 4, 9, 10]);
});

test('merging sorted pages a page at a time gives every item once, in order, whatever the pages and limit', () => {
  fc.assert(
    fc.property(fc.array(fc.array(fc.integer({ min: 0, max: 50 }), { maxLength: 12 }), { minLength: 1, maxLength: 5 }), fc.integer({ min: 1, max: 7 }), (lists, limit) => {
      const sorted = lists.map((list) => [...list].sort((a, b) => a - b));
      const at = sorted.map(() => 0);
      const out: number[] = [];
      for (let rounds = 0; rounds < 100; rounds++) {
        const pages = new Map(sorted.map((list, partition) => [partition, list.slice(at[partition], (at[partition] as number) + limit)]));
        const merged = mergePages(pages, limit, byValue);
        if (merged.items.length === 0) break;
        out.push(...merged.items);
        for (const [partition, count] of merged.taken) at[partition] = (at[partition] as number) + count;
      }
      assert.deepEqual(out, sorted.flat().sort((a, b) => a - b));
    }),
    propertyRuns(500),
  );
});

test('timer views order by the field, then by id', () => {
  const before = byFieldThenId('fire_at');
  const a = { id: '000aaaa', fire_at: '2026-12-07T10:00:00.000Z' };
  const b = { id: '001aaaa', fire_at: '2026-12-07T10:00:00.000Z' };
  const c = { id: '000zzzz', fire_at: '2026-12-07T09:59:59.999Z' };
  assert.ok(before(a, b) && !before(b, a));
  assert.ok(before(c, a) && before(c, b));
});
