// Callbacks in cluster mode (cluster/node.ts sets each partition engine's EngineOptions.idPrefix),
// on a real PostgreSQL 15 and an HTTP/2 sink on loopback: two partitions' timers that share a
// 24-character engine id are each reported by a callback naming the timer by its own cluster id
// (clusterIdOf, as the API answers it) in the body `id`, the `fermata-callback-for` header and
// the follow-up's `callback:{id}` key, which its delivery carries as `idempotency-key`.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import pino from 'pino';
import { ClusterNode } from '../../cluster/node.ts';
import { clusterIdOf } from '../../cluster/partitioning.ts';
import { batchFromSpecs } from '../../engine/batch/timer-batch.ts';
import { systemClock } from '../../engine/engine.ts';
import { clusterTestbed, fastLeaseSettings, waitUntil } from '../helpers/cluster-testbed.ts';
import { startH2Sink } from '../helpers/sinks.ts';
import { skipUnlessTool } from '../helpers/tools.ts';

describe('callbacks in cluster mode', { skip: skipUnlessTool('initdb'), timeout: 60_000 }, () => {
  const { pool, newCluster } = clusterTestbed('cbids');

  test('two partitions\' timers with the same engine id get callbacks naming their distinct cluster ids', async () => {
    const partitions = 2;
    const url = await newCluster(partitions);
    const sink = await startH2Sink();
    const dataDir = mkdtempSync(join(tmpdir(), 'fermata-cbids-'));
    let node: ClusterNode | undefined;
    try {
      node = await ClusterNode.start({
        sql: pool(url),
        nodeId: 'node-a',
        advertise: 'node-a.test:7070',
        dataDir,
        logger: pino({ level: process.env.FERMATA_TEST_LOG ?? 'silent' }),
        clock: systemClock,
        leaseSettings: fastLeaseSettings,
        dispatch: { threads: 1, allow: [], allowLoopback: true, signingSecrets: [], ca: undefined },
      });
      const started = node;
      await waitUntil('the node to open every partition', 10_000, () => started.owned().length === partitions);
      const fireAtMs = Date.now();
      const clusterIds: string[] = [];
      const engineIds: string[] = [];
      for (let partition = 0; partition < partitions; partition++) {
        const engine = started.engineOf(partition);
        assert.ok(engine !== undefined);
        const admitted = await engine.admit(batchFromSpecs([{ fireAtMs, target: `${sink.url}/timer/${partition}`, callback: `${sink.url}/callback/${partition}` }]));
        engineIds.push(admitted.idOf(0));
        clusterIds.push(clusterIdOf(partition, admitted.idOf(0)));
      }
      assert.equal(engineIds[0], engineIds[1], 'both partitions gave their timer the same engine id');
      assert.notEqual(clusterIds[0], clusterIds[1]);
      await waitUntil('both callbacks to be delivered', 15_000, () => sink.requests.filter((request) => request.path.startsWith('/callback/')).length >= partitions);
      for (let partition = 0; partition < partitions; partition++) {
        const [callback] = sink.to(`/callback/${partition}`);
        assert.ok(callback !== undefined);
        const clusterId = clusterIds[partition] as string;
        const body = JSON.parse(callback.body.toString('utf8')) as { id: string; state: string };
        assert.deepEqual(
          [body.id, body.state, callback.headers['fermata-callback-for'], callback.headers['idempotency-key']],
          [clusterId, 'delivered', clusterId, `callback:${clusterId}`],
          `partition ${partition}: the callback names the timer's cluster id`,
        );
        // The callback's own delivery id is a cluster id of the same partition.
        assert.equal(String(callback.headers['fermata-timer-id']).slice(0, 3), clusterIdOf(partition, ''));
      }
    } finally {
      await node?.stop();
      await sink.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  });
});
