// The local lease deadlines (cluster/lease-deadline.ts) as a delivery worker sees them: a real
// worker thread, given only the SharedArrayBuffer, may send while the main thread's deadline is
// ahead, is refused the moment it passes or is revoked, and its refusals are counted where the
// main thread reads them. Deadlines move forward only.
import assert from 'node:assert/strict';
import { once } from 'node:events';
import { test } from 'node:test';
import { Worker } from 'node:worker_threads';
import { LeaseDeadlines, LeaseDeadlineView, monotonicNs } from '../../cluster/lease-deadline.ts';

const workerFile = new URL('../helpers/lease-deadline-worker.ts', import.meta.url);

async function ask(worker: Worker, partition: number): Promise<boolean> {
  worker.postMessage(partition);
  const [answer] = (await once(worker, 'message')) as [boolean];
  return answer;
}

test('a worker thread may send while the deadline is ahead, and is refused (and counted) once it passed or was revoked', async () => {
  const deadlines = new LeaseDeadlines(4);
  const worker = new Worker(workerFile, { workerData: { shared: deadlines.shared } });
  try {
    assert.equal(await ask(worker, 0), false, 'never acquired: no send');
    deadlines.extend(0, monotonicNs() + 60_000_000_000n);
    deadlines.extend(1, monotonicNs() + 150_000_000n);
    assert.equal(await ask(worker, 0), true);
    assert.equal(await ask(worker, 1), true);
    await new Promise((resolve) => setTimeout(resolve, 200));
    assert.equal(await ask(worker, 1), false, 'past its deadline');
    deadlines.revoke(0);
    assert.equal(await ask(worker, 0), false, 'revoked');
    assert.equal(deadlines.refusedSends(), 3);
  } finally {
    await worker.terminate();
  }
});

test('the view over the shared memory agrees with the owner, and a deadline never moves back', () => {
  const deadlines = new LeaseDeadlines(2);
  const view = new LeaseDeadlineView(deadlines.shared);
  const far = monotonicNs() + 10_000_000_000n;
  deadlines.extend(1, far);
  deadlines.extend(1, far - 5_000_000_000n);
  assert.equal(view.deadlineNs(1), far, 'a late answer to an older renewal does not pull the deadline back');
  assert.equal(view.maySend(1), true);
  assert.equal(view.maySend(0), false);
  assert.equal(deadlines.refusedSends(), 1);
  assert.equal(view.partitions, 2);
});
