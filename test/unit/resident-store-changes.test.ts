// ResidentStore.changes (engine/store/resident-store.ts): it grows with every change a pass over
// the slots would see (a timer put in a slot or released, its due time or state set, a shrink),
// and not with the others (attempts, last status), so a scan that finds it the same knows its
// last pass still holds (engine/timer-query.ts).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { batchFromSpecs } from '../../engine/batch/timer-batch.ts';
import { ResidentStore, timerState } from '../../engine/store/resident-store.ts';

test('the store counts the changes a pass over its slots would see', () => {
  const store = new ResidentStore({ capacityInitial: 8 });
  const grew = (what: string, change: () => void, by = true): void => {
    const before = store.changes;
    change();
    assert.equal(store.changes > before, by, what);
  };
  const payload = new Uint8Array(0);
  let slot = -1;
  grew('allocate', () => (slot = store.allocate({ fireAt: 1000, logSeq: 1, row: 0, queueIndex: 0, target: 'https://a.example/', payload, headers: payload })));
  grew('setDueAt', () => store.setDueAt(slot, 2000));
  grew('setState', () => store.setState(slot, timerState.retrying));
  grew('setAttempts', () => store.setAttempts(slot, 1), false);
  grew('setLastStatus', () => store.setLastStatus(slot, 503), false);
  const target = store.internTarget('https://a.example/');
  const batch = batchFromSpecs([{ fireAtMs: 3000, target: 'https://a.example/' }, { fireAtMs: 4000, target: 'https://a.example/' }]);
  grew('allocateRows', () => store.allocateRows(batch, 2, undefined, 2, [0], [target], new Int32Array(2)));
  store.releaseTarget(target);
  grew('release', () => store.release(slot));
  grew('shrink', () => store.shrink(Math.max(2, store.count)));
});
