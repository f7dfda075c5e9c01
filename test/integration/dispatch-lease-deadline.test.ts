// Delivery in cluster mode, without a database: two partitions' engines whose dispatchers share
// one delivery pool, and the partitions' local lease deadlines (cluster/lease-deadline.ts) that
// the workers ask before each send. A partition whose deadline has passed sends nothing (each
// refusal counted), its timers come back as retries with no attempt counted, and go out once
// the deadline is ahead again; the dispatcher of a partition whose lease lapsed takes no timer;
// closing one dispatcher leaves the shared workers to the other.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import pino from 'pino';
import { batchFromSpecs } from '../../engine/batch/timer-batch.ts';
import { Engine, systemClock } from '../../engine/engine.ts';
import { dispatchLimits } from '../../engine/limits.ts';
import { LeaseDeadlines, monotonicNs } from '../../cluster/lease-deadline.ts';
import { DeliveryPool } from '../../dispatch/delivery-pool.ts';
import { Dispatcher, newBufferPool, type SharedDelivery } from '../../dispatch/dispatcher.ts';
import { startH2Sink } from '../helpers/sinks.ts';

const hourNs = 3_600_000_000_000n;

async function until(what: string, ms: number, done: () => boolean): Promise<void> {
  const deadline = Date.now() + ms;
  while (!done()) {
    assert.ok(Date.now() < deadline, `timed out after ${ms} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

test('two partitions share one delivery pool; a partition past its lease deadline sends nothing until it is renewed', { timeout: 60_000 }, async () => {
  const sink = await startH2Sink();
  const deadlines = new LeaseDeadlines(2);
  const buffers = newBufferPool(dispatchLimits);
  const shared: SharedDelivery = {
    workers: new DeliveryPool({ threads: 1, allow: [], allowLoopback: true, signingSecrets: [], ca: undefined, limits: dispatchLimits, spareBuffers: buffers, leaseDeadlines: deadlines.shared }),
    buffers,
  };
  const dirs = [0, 1].map((p) => mkdtempSync(join(tmpdir(), `fermata-lease-dispatch-${p}-`)));
  const engines = await Promise.all(dirs.map((dataDir) => Engine.open({ dataDir })));
  let leaseOfOneHeld = true;
  const dispatchers = engines.map(
    (engine, partition) =>
      new Dispatcher({
        engine,
        clock: systemClock,
        logger: pino({ level: 'silent' }),
        shared,
        partition,
        // Partition 1's dispatcher believes its lease held while its workers' deadline has passed: the window a worker's check closes.
        leaseHeld: () => leaseOfOneHeld,
      }),
  );
  try {
    deadlines.extend(0, monotonicNs() + hourNs);
    const count = 50;
    const add = (engine: Engine, partition: number) =>
      engine.admit(batchFromSpecs(Array.from({ length: count }, (_, i) => ({ fireAtMs: Date.now(), target: `${sink.url}/p${partition}/${i}` }))));
    const admitted = await Promise.all(engines.map((engine, partition) => add(engine, partition)));
    for (const dispatcher of dispatchers) dispatcher.start();
    await until('partition 0 to deliver every timer', 20_000, () => engines[0]!.stats().counts.delivered === count);
    await until('partition 1 to be refused every send', 20_000, () => deadlines.refusedSends() >= count);
    assert.equal(sink.requests.filter((request) => request.path.startsWith('/p1/')).length, 0, 'no send for the partition past its deadline');
    // Refused sends are retries without an attempt counted: the next owner (here: the renewed one) sends them as first attempts.
    await until('the refused timers to be back as retries', 5_000, () => engines[1]!.stats().counts.delivering === 0);
    const refused = engines[1]!.get(admitted[1]!.idOf(0));
    assert.equal(refused?.state, 'pending');
    assert.equal(refused?.attempts, 0);

    // The lease lapses as far as the dispatcher knows, then the deadline is renewed: nothing is taken while lapsed.
    leaseOfOneHeld = false;
    deadlines.extend(1, monotonicNs() + hourNs);
    const refusedBefore = deadlines.refusedSends();
    await new Promise((resolve) => setTimeout(resolve, 1_500)); // past the retries' min_backoff_ms
    assert.equal(engines[1]!.stats().counts.delivering, 0, 'a lapsed lease takes no timer');
    assert.equal(deadlines.refusedSends(), refusedBefore);
    leaseOfOneHeld = true;
    await until('partition 1 to deliver every timer once renewed', 20_000, () => engines[1]!.stats().counts.delivered === count);
    assert.equal(sink.requests.filter((request) => request.path.startsWith('/p1/')).length, count, 'each refused timer sent once');
    for (const request of sink.requests.filter((r) => r.path.startsWith('/p1/'))) assert.equal(request.headers['fermata-attempt'], '1');

    // One dispatcher closed leaves the shared workers running for the other.
    await dispatchers[0]!.close();
    const more = await add(engines[1]!, 1);
    await until('partition 1 to deliver after partition 0 closed', 20_000, () => engines[1]!.stats().counts.delivered === 2 * count);
    assert.ok(more.idOf(0).length > 0);
  } finally {
    for (const dispatcher of dispatchers) await dispatcher.close();
    await shared.workers.destroy();
    for (const engine of engines) await engine.close();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
    await sink.close();
  }
});
