// The counts the store's setters keep (engine/store/due-slot-counts.ts, queue-state-counts.ts),
// alone: slot counts equal a brute-force count of the times added and not yet removed, whatever
// order the adds and removals come in and however close to a slot or group boundary the times
// fall (the last group's bounds and a lookup must agree on every time); a batch's addRows counts
// what an add per row counts, for the due counts and the queue counts.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { DueSlotCounts } from '../../engine/store/due-slot-counts.ts';
import { QueueStateCounts } from '../../engine/store/queue-state-counts.ts';
import { timerState } from '../../engine/store/timer-state.ts';
import { propertyRuns } from '../helpers/property.ts';

const hour = 3_600_000;
const t0 = 1_796_220_000_000 - (1_796_220_000_000 % hour);

/** Times on, just before and just after the boundaries of slots and groups, and whole ms between. */
const time = fc.oneof(
  fc.integer({ min: -3, max: 3 }).map((k) => t0 + k * hour),
  fc.integer({ min: -3, max: 3 }).map((k) => t0 + k * hour - 0.0001),
  fc.integer({ min: -3, max: 3 }).map((k) => t0 + k * hour - 2 ** -12),
  fc.integer({ min: -3, max: 3 }).map((k) => t0 + k * hour + 0.5),
  fc.integer({ min: -180, max: 180 }).map((k) => t0 + k * 60_000 - 0.25),
  fc.integer({ min: -3 * hour, max: 3 * hour }).map((ms) => t0 + ms),
);

/** The counts the slots say, bucketed by `edges`, against the times counted by brute force. */
function assertCounts(counts: DueSlotCounts, times: readonly number[], edges: readonly number[]): void {
  const into = edges.map(() => 0).concat(0);
  counts.countInto(edges, into);
  const expected = edges.map(() => 0).concat(0);
  for (const t of times) {
    // A time counts in the bucket of its slot's start: slots are whole, and edges are on slot boundaries.
    const slotStart = Math.floor(t / counts.slotWidthMs) * counts.slotWidthMs;
    let k = 0;
    while (k < edges.length && (edges[k] as number) <= (slotStart > t ? slotStart - counts.slotWidthMs : slotStart)) k++;
    expected[k] = (expected[k] as number) + 1;
  }
  assert.deepEqual(into, expected);
  assert.equal(counts.total, times.length);
}

test('slot counts equal a brute-force count under adds and removals in any order, times at boundaries included', () => {
  fc.assert(
    fc.property(fc.array(time, { minLength: 1, maxLength: 60 }), fc.array(fc.nat(), { maxLength: 60 }), fc.array(fc.integer({ min: -4 * 60, max: 4 * 60 }), { maxLength: 4 }), (times, removals, edgeMinutes) => {
      const counts = new DueSlotCounts(hour);
      for (const t of times) counts.add(t, 1);
      const live = [...times];
      const edges = [...new Set(edgeMinutes)].sort((a, b) => a - b).map((m) => t0 + m * 60_000);
      assertCounts(counts, live, edges);
      for (const pick of removals) {
        if (live.length === 0) break;
        const [t] = live.splice(pick % live.length, 1);
        counts.add(t as number, -1);
        assertCounts(counts, live, edges);
      }
      for (const t of live) counts.add(t, -1);
      assertCounts(counts, [], edges);
    }),
    propertyRuns(200),
  );
});

test('addRows counts each row of a batch as an add would, with or without a row list', () => {
  fc.assert(
    fc.property(fc.array(time, { minLength: 1, maxLength: 40 }), fc.array(fc.boolean(), { minLength: 40, maxLength: 40 }), (times, keep) => {
      const fireAt = Float64Array.from(times);
      const rows = Int32Array.from(times.map((_, row) => row).filter((row) => keep[row]));
      const edges = [-120, -60, 0, 30, 60, 120].map((m) => t0 + m * 60_000);
      const whole = new DueSlotCounts(hour);
      whole.addRows(fireAt, undefined, times.length);
      assertCounts(whole, times, edges);
      const some = new DueSlotCounts(hour);
      some.add(t0, 1);
      some.addRows(fireAt, rows, rows.length);
      assertCounts(some, [t0, ...Array.from(rows, (row) => times[row] as number)], edges);
    }),
    propertyRuns(100),
  );
});

test('queue counts: addRows is an add per row, only the rows listed, a batch of one queue or several', () => {
  const counts = new QueueStateCounts();
  counts.addRows([3], Int32Array.from([0, 0, 0]), undefined, 3, timerState.pending);
  counts.addRows([3], Int32Array.from([0, 0, 0]), Int32Array.from([2]), 1, timerState.retrying);
  assert.deepEqual([counts.of(3, timerState.pending), counts.of(3, timerState.retrying), counts.waiting(3)], [3, 1, 4]);
  // Several queues in a batch, one past the counts' length: each row counted in its own, only the rows listed.
  counts.addRows([5, 40], Int32Array.from([0, 1, 1, 0, 1]), Int32Array.from([1, 2, 3]), 3, timerState.pending);
  assert.deepEqual([counts.of(5, timerState.pending), counts.of(40, timerState.pending)], [1, 2]);
  counts.addRows([5, 40], Int32Array.from([0, 1, 1, 0, 1]), undefined, 5, timerState.pending);
  assert.deepEqual([counts.of(5, timerState.pending), counts.of(40, timerState.pending)], [3, 5]);
});
