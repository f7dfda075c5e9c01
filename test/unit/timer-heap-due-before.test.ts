// TimerHeap.visitDueBefore against a model: the slots it visits are exactly those due before
// the bound (heads of runs and their followers alike, after pushes, batches and removals), none
// twice, and no more than its maximum, all of them due before the bound.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { ResidentStore } from '../../engine/store/resident-store.ts';
import { TimerHeap } from '../../engine/store/timer-heap.ts';
import { propertyRuns } from '../helpers/property.ts';

const empty = new Uint8Array(0);

test('visitDueBefore visits every slot due before the bound once, and no other, up to its maximum', () => {
  fc.assert(
    fc.property(
      fc.array(fc.array(fc.integer({ min: 0, max: 20 }), { minLength: 1, maxLength: 40 }), { maxLength: 12 }),
      fc.array(fc.nat(), { maxLength: 30 }),
      fc.integer({ min: -1, max: 22 }),
      fc.integer({ min: 0, max: 60 }),
      (batches, removals, untilMs, max) => {
        const store = new ResidentStore({ capacityInitial: 1 });
        const heap = new TimerHeap(store);
        const target = store.internTarget('https://example.test/');
        const dueAt = new Map<number, number>();
        batches.forEach((fireTimes, batch) => {
          // Sorted batches make runs (consecutive slots in order), unsorted ones single entries.
          const times = batch % 2 === 0 ? [...fireTimes].sort((a, b) => a - b) : fireTimes;
          const slots = Int32Array.from(times, (fireAt, row) => store.allocateRaw(fireAt, batch + 1, row, 0, target, empty, empty));
          slots.forEach((slot, row) => dueAt.set(slot, times[row] as number));
          heap.pushMany(slots, slots.length);
        });
        const present = [...dueAt.keys()];
        for (const pick of removals) {
          if (present.length === 0) break;
          const slot = present.splice(pick % present.length, 1)[0] as number;
          heap.remove(slot);
          dueAt.delete(slot);
        }
        const expected = new Set([...dueAt].filter(([, fireAt]) => fireAt < untilMs).map(([slot]) => slot));
        const seen = new Set<number>();
        const visited = heap.visitDueBefore(untilMs, max, (slot) => {
          assert.ok(!seen.has(slot), `slot ${slot} visited twice`);
          assert.ok(expected.has(slot), `slot ${slot} is not due before ${untilMs}`);
          seen.add(slot);
        });
        assert.equal(visited, seen.size);
        assert.equal(visited, Math.min(max, expected.size));
      },
    ),
    propertyRuns(300),
  );
});
