// Shrinking the resident store's columns (engine/store/shrink.ts): the capacity worth shrinking
// to, the plan that moves the live timers to the lowest slots in their order, and the columns
// moved by it (values by slot, and slot numbers renamed).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { movedColumns, movedSlotNumbers, planShrink, shrinkCapacity } from '../../engine/store/shrink.ts';
import { timerState } from '../../engine/store/timer-state.ts';

test('shrinkCapacity: only columns `share` times larger than the timers need, to the growth step holding twice them', () => {
  assert.equal(shrinkCapacity(1024, 10, 4, 1024), undefined, 'not above the initial capacity');
  assert.equal(shrinkCapacity(16_384, 5000, 4, 1024), undefined, 'not share times too large');
  assert.equal(shrinkCapacity(16_384, 3000, 4, 1024), 8192);
  assert.equal(shrinkCapacity(16_384, 10, 4, 1024), 1024);
  assert.equal(shrinkCapacity(16_384, 0, 4, 1024), 1024);
});

test('the plan moves each live timer to the lowest slots in slot order, and names the highest generation used', () => {
  const { free, pending, delivering, dead } = timerState;
  const state = Uint8Array.of(pending, free, free, delivering, free, dead, free, free);
  const generation = Uint32Array.of(1, 4, 2, 1, 9, 3, 1, 0);
  const plan = planShrink(state, generation, 7, 3);
  assert.deepEqual([...plan.moves], [0, -1, -1, 1, -1, 2, -1]);
  assert.deepEqual([...plan.livesAt], [0, 3, 5]);
  assert.equal(plan.generationTop, 9);
  assert.throws(() => planShrink(state, generation, 7, 2), /every live timer is moved once/);

  const moved = movedColumns(plan, 4);
  assert.deepEqual([...moved(Float64Array, Float64Array.of(10, 11, 12, 13, 14, 15, 16, 17))], [10, 13, 15, 0]);
  assert.deepEqual([...moved(Uint8Array, state)], [pending, delivering, dead, free]);
  // A heap's entries: slot numbers in the first entries, renamed to where their timers went.
  assert.deepEqual([...movedSlotNumbers(Int32Array.of(5, 0, 3, 99), plan, 4)], [2, 0, 1, 0]);
});
