// The node runner (cluster/node.ts) on a real PostgreSQL 15, nodes in this process with short
// leases: a node alone opens an engine for every partition and delivers their timers; a second
// node joining takes its share by clean handover; the first stopping hands the rest over; every
// timer added through either node's engines is delivered exactly once, by whichever node owns
// its partition when it falls due, and the directory (owned, engineOf, ownerAddress, onChange)
// follows every move.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import pino from 'pino';
import { ClusterNode } from '../../cluster/node.ts';
import { batchFromSpecs } from '../../engine/batch/timer-batch.ts';
import { systemClock } from '../../engine/engine.ts';
import { clusterTestbed, fastLeaseSettings, waitUntil } from '../helpers/cluster-testbed.ts';
import { startH2Sink } from '../helpers/sinks.ts';
import { skipUnlessTool } from '../helpers/tools.ts';

describe('cluster node runner', { skip: skipUnlessTool('initdb'), timeout: 120_000 }, () => {
  const { pool, newCluster, onEnd } = clusterTestbed('node');
  const dirs: string[] = [];
  const running: ClusterNode[] = [];
  onEnd(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  async function startNode(url: string, nodeId: string): Promise<ClusterNode> {
    const dataDir = mkdtempSync(join(tmpdir(), `fermata-node-${nodeId}-`));
    dirs.push(dataDir);
    const node = await ClusterNode.start({
      sql: pool(url),
      nodeId,
      advertise: `${nodeId}.test:7070`,
      dataDir,
      logger: pino({ level: process.env.FERMATA_TEST_LOG ?? 'silent' }),
      clock: systemClock,
      leaseSettings: fastLeaseSettings,
      dispatch: { threads: 1, allow: [], allowLoopback: true, signingSecrets: [], ca: undefined },
    });
    running.push(node);
    return node;
  }

  test('a node alone owns every partition; a second joins by clean handover, the first leaves; each timer delivered once', async () => {
    const partitions = 4;
    const url = await newCluster(partitions);
    const sink = await startH2Sink();
    try {
      const first = await startNode(url, 'node-a');
      await waitUntil('the node to open every partition', 10_000, () => first.owned().length === partitions);
      assert.deepEqual(first.owned(), [0, 1, 2, 3]);
      assert.equal(first.ownerAddress(2), 'node-a.test:7070');
      let changes = 0;
      // A node that hands a partition over never names itself its owner after (a request would be forwarded back to it).
      const namedItself: number[] = [];
      first.onChange(() => {
        changes++;
        for (let partition = 0; partition < partitions; partition++) {
          if (first.engineOf(partition) === undefined && first.ownerAddress(partition) === 'node-a.test:7070') namedItself.push(partition);
        }
      });

      // Timers in every partition: some due now, most after the handovers below. Each has a path
      // of its own (ids name no partition yet: the cluster id format is the router's).
      const ids: string[] = [];
      const addEverywhere = async (node: ClusterNode, label: string, fireAtMs: number): Promise<void> => {
        for (const partition of node.owned()) {
          const engine = node.engineOf(partition);
          assert.ok(engine !== undefined);
          await engine.admit(batchFromSpecs(Array.from({ length: 20 }, (_, i) => ({ fireAtMs, target: `${sink.url}/${label}/${partition}/${i}` }))));
          for (let i = 0; i < 20; i++) ids.push(`/${label}/${partition}/${i}`);
        }
      };
      await addEverywhere(first, 'now', Date.now());
      await addEverywhere(first, 'later', Date.now() + 6_000);
      await waitUntil('the timers due now to be delivered', 10_000, () => sink.requests.length >= 80);

      const second = await startNode(url, 'node-b');
      await waitUntil('the second node to take its share', 10_000, () => first.owned().length === 2 && second.owned().length === 2);
      assert.ok(changes >= 2, 'the first node told of each partition it handed over');
      assert.deepEqual(namedItself, [], 'the partitions the first node named itself the owner of after handing them over');
      for (const partition of second.owned()) {
        assert.equal(first.engineOf(partition), undefined);
        await waitUntil(`node-a to see node-b as partition ${partition}'s owner`, 5_000, () => first.ownerAddress(partition) === 'node-b.test:7070');
      }
      await first.stop();
      await waitUntil('the second node to own every partition', 10_000, () => second.owned().length === partitions);
      await waitUntil('every timer to be delivered', 20_000, () => sink.requests.length >= ids.length);
      await new Promise((resolve) => setTimeout(resolve, 500)); // room for a duplicate to show
      const seen = sink.requests.map((request) => request.path);
      assert.equal(new Set(seen).size, seen.length, 'clean handovers deliver no timer twice');
      assert.deepEqual([...seen].sort(), [...ids].sort(), 'every timer added was delivered');
      await second.stop();
      assert.deepEqual(second.owned(), []);
    } finally {
      for (const node of running) await node.stop();
      await sink.close();
    }
  });
});
