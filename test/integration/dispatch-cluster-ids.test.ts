// Deliveries in cluster mode carry the cluster id, without a database: two partitions' engines
// (their dispatchers sharing one delivery pool, as cluster/node.ts runs them) give their timers
// the same 24-character engine ids, and each delivery carries the 27-character id the API
// answers for its timer (clusterIdOf, as ingest/http/cluster/front.ts answers it) in
// fermata-timer-id, webhook-id and, for a timer without a key, idempotency-key; an "arrow"
// batch's id column holds the same ids.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { tableFromIPC } from 'apache-arrow';
import pino from 'pino';
import { LeaseDeadlines, monotonicNs } from '../../cluster/lease-deadline.ts';
import { clusterIdLength, clusterIdOf } from '../../cluster/partitioning.ts';
import { DeliveryPool } from '../../dispatch/delivery-pool.ts';
import { Dispatcher, newBufferPool, type SharedDelivery } from '../../dispatch/dispatcher.ts';
import { batchFromSpecs } from '../../engine/batch/timer-batch.ts';
import { Engine, systemClock } from '../../engine/engine.ts';
import { dispatchLimits } from '../../engine/limits.ts';
import { startH2Sink } from '../helpers/sinks.ts';

const hourNs = 3_600_000_000_000n;
const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';

async function until(what: string, ms: number, done: () => boolean): Promise<void> {
  const deadline = Date.now() + ms;
  while (!done()) {
    assert.ok(Date.now() < deadline, `timed out after ${ms} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

test('two partitions whose timers share engine ids deliver them under distinct cluster ids, the ones the API answered', { timeout: 60_000 }, async () => {
  const sink = await startH2Sink();
  // Partitions 0 and 9: partition 0's cluster ids are 27 characters too ("000" first), as the API answers them.
  const partitions = [0, 9];
  const deadlines = new LeaseDeadlines(10);
  for (const partition of partitions) deadlines.extend(partition, monotonicNs() + hourNs);
  const buffers = newBufferPool(dispatchLimits);
  const shared: SharedDelivery = {
    workers: new DeliveryPool({ threads: 1, allow: [], allowLoopback: true, signingSecrets: [secret], ca: undefined, limits: dispatchLimits, spareBuffers: buffers, leaseDeadlines: deadlines.shared }),
    buffers,
  };
  const dirs = partitions.map((p) => mkdtempSync(join(tmpdir(), `fermata-cluster-ids-${p}-`)));
  const engines = await Promise.all(dirs.map((dataDir) => Engine.open({ dataDir })));
  const dispatchers = engines.map((engine, i) => new Dispatcher({ engine, clock: systemClock, logger: pino({ level: 'silent' }), shared, partition: partitions[i] as number, leaseHeld: () => true }));
  try {
    const count = 3;
    const fireAtMs = Date.now();
    for (const engine of engines) await engine.setQueue('pipe', { delivery: 'arrow', sink: `${sink.url}/ingest`, batch_rows_max: count, linger_ms: 1 });
    // The same batch at the same fire time in each fresh engine: the same engine ids, row by row.
    const singles = await Promise.all(
      engines.map((engine, i) =>
        engine.admit(batchFromSpecs(Array.from({ length: count }, (_, row) => ({ fireAtMs, target: `${sink.url}/p${partitions[i]}/${row}`, ...(row === 0 ? { key: `k${partitions[i]}` } : {}) })))),
      ),
    );
    const arrows = await Promise.all(engines.map((engine) => engine.admit(batchFromSpecs(Array.from({ length: count }, () => ({ fireAtMs, target: `${sink.url}/unused`, queue: 'pipe' }))))));
    for (let row = 0; row < count; row++) {
      assert.equal(singles[0]!.idOf(row), singles[1]!.idOf(row), 'the engines gave the same id');
      assert.equal(arrows[0]!.idOf(row), arrows[1]!.idOf(row), 'the engines gave the same id');
    }
    for (const dispatcher of dispatchers) dispatcher.start();
    await until('every timer delivered', 20_000, () => engines.every((engine) => engine.stats().counts.delivered === 2 * count));

    const answered = new Set<string>();
    for (const [i, partition] of partitions.entries()) {
      for (let row = 0; row < count; row++) {
        const id = clusterIdOf(partition, singles[i]!.idOf(row));
        answered.add(id);
        const request = sink.requests.find((r) => r.path === `/p${partition}/${row}`);
        assert.ok(request !== undefined, `timer ${id} delivered`);
        assert.equal(request.headers['fermata-timer-id'], id);
        assert.equal(request.headers['webhook-id'], id);
        assert.equal(request.headers['idempotency-key'], row === 0 ? `k${partition}` : id, 'a timer without a key is idempotent on its id');
      }
    }
    assert.equal(answered.size, partitions.length * count, 'no two deliveries share an id');

    const batches = sink.requests.filter((r) => r.path === '/ingest');
    assert.equal(batches.length, partitions.length);
    const batchIds = batches.flatMap((r) => [...(tableFromIPC(r.body).getChild('id') ?? [])] as string[]).sort();
    const arrowAnswered = partitions.flatMap((partition, i) => Array.from({ length: count }, (_, row) => clusterIdOf(partition, arrows[i]!.idOf(row)))).sort();
    assert.deepEqual(batchIds, arrowAnswered);
    assert.ok(batchIds.every((id) => id.length === clusterIdLength));
    assert.notEqual(batches[0]!.headers['idempotency-key'], batches[1]!.headers['idempotency-key'], 'the batches of the same engine ids have distinct keys');
  } finally {
    for (const dispatcher of dispatchers) await dispatcher.close();
    await shared.workers.destroy();
    for (const engine of engines) await engine.close();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
    await sink.close();
  }
});
