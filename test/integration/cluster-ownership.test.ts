// Partition ownership loops (cluster/ownership.ts) on a real PostgreSQL 15, with short leases
// (TTL 1 s, renewal every 200 ms) so failovers take about a second. Nodes are Ownership
// instances in this process, each with its own connection pool; a "dead" node is one whose loop
// was halted (no renewal, no heartbeat, engines gone), a leaving one calls stop(). The leases
// alone are in cluster-leases.test.ts, the SIGSTOP of a whole owner process in
// cluster-pause.test.ts.
//
// What holds throughout: every epoch has exactly one owner; an engine is open for a partition
// on one node at a time while nodes hand over cleanly; when a taker opens a partition after a
// lapse, the deposed owner's local deadline has already passed.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import postgres from 'postgres';
import { Membership } from '../../cluster/membership.ts';
import { Ownership } from '../../cluster/ownership.ts';
import { clusterTestbed, fastLeaseSettings as fast, waitUntil } from '../helpers/cluster-testbed.ts';
import { skipUnlessTool } from '../helpers/tools.ts';

describe('cluster ownership', { skip: skipUnlessTool('initdb'), timeout: 120_000 }, () => {
  const { pool, newCluster, onEnd } = clusterTestbed('ownership');
  const nodes: TestNode[] = [];
  onEnd(() => {
    for (const node of nodes) node.ownership.halt();
  });

  /** Which node has each partition's engine open, over all the test's nodes: never two at once while handovers are clean. */
  interface World {
    readonly openBy: Map<number, string>;
    readonly violations: string[];
    /** partition → the deposed owner's maySend at the moment a taker opened it after a lapse. */
    readonly deposedMaySend: boolean[];
    /** Every acquisition: which node opened the partition at which epoch. */
    readonly acquisitions: { readonly nodeId: string; readonly partition: number; readonly epoch: bigint }[];
  }

  interface TestNode {
    readonly nodeId: string;
    readonly ownership: Ownership;
    readonly errors: unknown[];
    dead: boolean;
  }

  function newWorld(): World {
    return { openBy: new Map(), violations: [], deposedMaySend: [], acquisitions: [] };
  }

  async function startNode(world: World, url: string, nodeId: string): Promise<TestNode> {
    const errors: unknown[] = [];
    const ownership = await Ownership.start({
      sql: pool(url),
      nodeId,
      advertise: `${nodeId}.test:8080`,
      settings: fast,
      callbacks: {
        async onAcquire(partition, epoch) {
          world.acquisitions.push({ nodeId, partition, epoch });
          const other = world.openBy.get(partition);
          if (other !== undefined) {
            const deposed = nodes.find((candidate) => candidate.nodeId === other);
            if (deposed?.dead === true) world.deposedMaySend.push(deposed.ownership.deadlines.maySend(partition));
            else world.violations.push(`${nodeId} opened partition ${partition} while ${other} had it open`);
          }
          world.openBy.set(partition, nodeId);
          await new Promise((resolve) => setTimeout(resolve, 5)); // a replay
        },
        onLose(partition) {
          if (world.openBy.get(partition) === nodeId) world.openBy.delete(partition);
        },
        async beforeRelease(partition) {
          await new Promise((resolve) => setTimeout(resolve, 5)); // an engine closing
          if (world.openBy.get(partition) === nodeId) world.openBy.delete(partition);
          else world.violations.push(`${nodeId} released partition ${partition} that it did not have open`);
        },
        onError(error) {
          errors.push(error);
        },
      },
    });
    const node: TestNode = { nodeId, ownership, errors, dead: false };
    nodes.push(node);
    return node;
  }

  /** Stops renewing and heartbeating at once, as a node killed -9 would; its engines are gone with it. */
  function kill(node: TestNode): void {
    node.ownership.halt();
    node.dead = true;
  }

  /** The database's owner of each partition (null: none). */
  async function owners(url: string): Promise<(string | null)[]> {
    const sql = postgres(url, { max: 1, onnotice: () => {} });
    try {
      const rows = await sql<{ owner: string | null }[]>`SELECT owner FROM fermata_partitions ORDER BY partition`;
      return rows.map((row) => row.owner);
    } finally {
      await sql.end();
    }
  }

  /** Every partition owned, each by the node that holds it, every live node's share within one of P/N. */
  async function balancedOver(url: string, live: readonly TestNode[], partitions: number): Promise<boolean> {
    const rows = await owners(url);
    for (const node of live) {
      const held = node.ownership.owned();
      const inDatabase = rows.flatMap((owner, partition) => (owner === node.nodeId ? [partition] : []));
      if (held.size !== inDatabase.length || !inDatabase.every((partition) => held.has(partition))) return false;
      if (Math.abs(held.size - partitions / live.length) >= 1) return false;
    }
    return rows.every((owner) => live.some((node) => node.nodeId === owner));
  }

  test('two ownership loops started at once, again and again: each epoch has one owner, and one engine is open at a time', async () => {
    const url = await newCluster(1);
    const world = newWorld();
    for (let round = 0; round < 8; round += 1) {
      const pair = await Promise.all(['race-1', 'race-2'].map((nodeId) => startNode(world, url, nodeId)));
      await waitUntil('one of the two to own the partition', 5_000, () => balancedOver(url, pair, 1));
      await Promise.all(pair.map((node) => node.ownership.stop()));
      assert.deepEqual(pair.flatMap((node) => node.errors), []);
    }
    const epochs = world.acquisitions.map((acquisition) => acquisition.epoch);
    assert.deepEqual(epochs, epochs.map((_, index) => BigInt(index + 1)), 'one acquisition per epoch, none skipped');
    assert.deepEqual(world.violations, []);
  });

  test('a lapsed lease (its owner stopped renewing) is taken with epoch + 1 within ttl + one renewal interval', async () => {
    const url = await newCluster(4);
    const world = newWorld();
    const a = await startNode(world, url, 'lapse-a');
    const b = await startNode(world, url, 'lapse-b');
    await waitUntil('two nodes sharing 4 partitions', 5_000, () => balancedOver(url, [a, b], 4));
    const epochsOfA = new Map(a.ownership.owned());
    kill(a);
    const tookMs = await waitUntil('b to own every partition', 5_000, async () => b.ownership.owned().size === 4);
    assert.ok(tookMs <= fast.leaseTtlMs + fast.renewIntervalMs + 300, `takeover after ${tookMs.toFixed(0)} ms`);
    for (const [partition, epoch] of epochsOfA) assert.equal(b.ownership.owned().get(partition), epoch + 1n, `partition ${partition}'s epoch`);
    assert.deepEqual(world.deposedMaySend, [false, false], 'the deposed owner could no longer send when the taker opened each partition');
    assert.deepEqual(world.violations, []);
    assert.deepEqual(b.errors, []);
  });

  test('a clean release (SIGTERM\'s handover) is taken at once, not after the lease would lapse', async () => {
    const url = await newCluster(4);
    const world = newWorld();
    const a = await startNode(world, url, 'clean-a');
    const b = await startNode(world, url, 'clean-b');
    await waitUntil('two nodes sharing 4 partitions', 5_000, () => balancedOver(url, [a, b], 4));
    const started = performance.now();
    await b.ownership.stop();
    const tookMs = await waitUntil('a to own every partition', 5_000, async () => a.ownership.owned().size === 4);
    const totalMs = performance.now() - started;
    assert.ok(totalMs < fast.leaseTtlMs, `handover took ${totalMs.toFixed(0)} ms (${tookMs.toFixed(0)} after stop() resolved)`);
    assert.deepEqual(world.violations, []);
    assert.deepEqual([...a.errors, ...b.errors], []);
    const [row] = await pool(url)<{ state: string }[]>`SELECT state FROM fermata_nodes WHERE node_id = 'clean-b'`;
    assert.equal(row?.state, 'left');
  });

  test('three nodes converge to a balanced assignment, and rebalance when one joins, one leaves and one dies', async () => {
    const partitions = 32;
    const url = await newCluster(partitions);
    const world = newWorld();
    const three = await Promise.all(['bal-1', 'bal-2', 'bal-3'].map((nodeId) => startNode(world, url, nodeId)));
    await waitUntil('three nodes balanced', 15_000, () => balancedOver(url, three, partitions));

    const fourth = await startNode(world, url, 'bal-4');
    const four = [...three, fourth];
    await waitUntil('a fourth node joined: 8 partitions each', 15_000, () => balancedOver(url, four, partitions));
    assert.equal(fourth.ownership.owned().size, 8);

    const [first, second, third] = three as [TestNode, TestNode, TestNode];
    await first.ownership.stop();
    await waitUntil('one node left: balanced over three', 15_000, () => balancedOver(url, [second, third, fourth], partitions));

    kill(second);
    await waitUntil('one node died: balanced over two', 15_000, () => balancedOver(url, [third, fourth], partitions));
    assert.deepEqual(world.violations, []);
    assert.ok(world.deposedMaySend.length > 0 && world.deposedMaySend.every((maySend) => !maySend), 'the dead node could not send when its partitions were taken');
    assert.deepEqual([first, third, fourth].flatMap((node) => node.errors), []);
  });

  test('a second process registering the same node id takes the node over: the first gives its partitions up', async () => {
    const url = await newCluster(2);
    const world = newWorld();
    const first = await startNode(world, url, 'twin');
    await waitUntil('the node owns both partitions', 3_000, async () => first.ownership.owned().size === 2);
    const restarted = new Membership({ sql: pool(url), nodeId: 'twin', advertise: 'twin:2', liveForMs: fast.leaseTtlMs });
    await restarted.register();
    await waitUntil('the first process to give up', 2_000, async () => first.ownership.owned().size === 0);
    assert.equal(first.ownership.deadlines.maySend(0) || first.ownership.deadlines.maySend(1), false);
    assert.match(String(first.errors[0]), /registered by another process/);
    assert.equal(world.openBy.size, 0, 'its engines were told the partitions are lost');
    assert.equal(await restarted.heartbeat(), true);
    assert.deepEqual((await restarted.liveNodes()).map((node) => node.nodeId), ['twin']);
  });
});
