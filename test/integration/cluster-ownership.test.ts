// Partition ownership (cluster/leases.ts, cluster/ownership.ts) on a real PostgreSQL 15, with
// short leases (TTL 1 s, renewal every 200 ms) so failovers take about a second. Nodes are
// Ownership instances in this process, each with its own connection pool; a "dead" node is one
// whose loop was halted (no renewal, no heartbeat, engines gone), a leaving one calls stop().
// The SIGSTOP of a whole owner process is in cluster-pause.test.ts.
//
// What holds throughout: every epoch has exactly one winner; an engine is open for a partition
// on one node at a time while nodes hand over cleanly; when a taker opens a partition after a
// lapse, the deposed owner's local deadline has already passed.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import postgres, { type Sql } from 'postgres';
import { initCluster } from '../../cluster/cluster-init.ts';
import { LeaseDeadlines, monotonicNs } from '../../cluster/lease-deadline.ts';
import { Leases, type LeaseSettings } from '../../cluster/leases.ts';
import { Membership } from '../../cluster/membership.ts';
import { Ownership } from '../../cluster/ownership.ts';
import { type PostgresServer, startPostgres } from '../helpers/postgres.ts';
import { skipUnlessTool } from '../helpers/tools.ts';

const fast: LeaseSettings = { leaseTtlMs: 1_000, renewIntervalMs: 200, safetyMarginMs: 300, graceMs: 400 };

describe('cluster ownership', { skip: skipUnlessTool('initdb'), timeout: 120_000 }, () => {
  let server: PostgresServer;
  let databases = 0;
  const pools: Sql[] = [];
  const nodes: TestNode[] = [];

  before(async () => {
    server = await startPostgres();
  });
  after(async () => {
    for (const node of nodes) node.ownership.halt();
    await Promise.all(pools.map((sql) => sql.end({ timeout: 1 })));
    await server.stop();
  });

  function pool(url: string): Sql {
    const sql = postgres(url, { max: 3, onnotice: () => {} });
    pools.push(sql);
    return sql;
  }

  /** A new database holding a cluster of `partitions`; its URL. */
  async function newCluster(partitions: number): Promise<string> {
    databases += 1;
    const url = await server.createDatabase(`ownership_${databases}`);
    const sql = postgres(url, { max: 1, onnotice: () => {} });
    try {
      await initCluster(sql, partitions);
    } finally {
      await sql.end();
    }
    return url;
  }

  /** Which node has each partition's engine open, over all the test's nodes: never two at once while handovers are clean. */
  interface World {
    readonly openBy: Map<number, string>;
    readonly violations: string[];
    /** partition → the deposed owner's maySend at the moment a taker opened it after a lapse. */
    readonly deposedMaySend: boolean[];
  }

  interface TestNode {
    readonly nodeId: string;
    readonly ownership: Ownership;
    readonly errors: unknown[];
    dead: boolean;
  }

  function newWorld(): World {
    return { openBy: new Map(), violations: [], deposedMaySend: [] };
  }

  async function startNode(world: World, url: string, nodeId: string): Promise<TestNode> {
    const errors: unknown[] = [];
    const holder: { node?: TestNode } = {};
    const ownership = await Ownership.start({
      sql: pool(url),
      nodeId,
      advertise: `${nodeId}.test:8080`,
      settings: fast,
      callbacks: {
        async onAcquire(partition) {
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
    holder.node = { nodeId, ownership, errors, dead: false };
    nodes.push(holder.node);
    return holder.node;
  }

  /** Stops renewing and heartbeating at once, as a node killed -9 would; its engines are gone with it. */
  function kill(node: TestNode): void {
    node.ownership.halt();
    node.dead = true;
  }

  async function waitUntil(what: string, timeoutMs: number, condition: () => Promise<boolean>): Promise<number> {
    const started = performance.now();
    for (;;) {
      if (await condition()) return performance.now() - started;
      if (performance.now() - started > timeoutMs) assert.fail(`not within ${timeoutMs} ms: ${what}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
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

  test('two nodes racing for one partition: exactly one wins each epoch, and the loser may not send', async () => {
    const url = await newCluster(1);
    const contenders = ['a', 'b'].map((nodeId) => {
      const deadlines = new LeaseDeadlines(1);
      return { deadlines, leases: new Leases({ sql: pool(url), nodeId, advertise: `${nodeId}:1`, settings: fast, deadlines }) };
    });
    let epoch = 0n;
    for (let round = 0; round < 40; round += 1) {
      // Alternate who asks first: the statement that reaches the row second must find it taken.
      const order = round % 2 === 0 ? contenders : [...contenders].reverse();
      const taken = await Promise.all(order.map((contender) => contender.leases.acquire([0])));
      const winners = order.filter((_, index) => taken[index]?.has(0));
      assert.equal(winners.length, 1, `round ${round}: ${winners.length} winners`);
      const winner = winners[0] as (typeof contenders)[number];
      const loser = contenders.find((contender) => contender !== winner) as (typeof contenders)[number];
      epoch += 1n;
      assert.equal(winner.leases.held().get(0), epoch, 'every acquisition is one epoch more');
      assert.equal(winner.deadlines.maySend(0), true);
      assert.equal(loser.deadlines.maySend(0), false);
      assert.equal(await winner.leases.release(0, async () => {}), true);
      assert.equal(winner.deadlines.maySend(0), false, 'no send once the handover began');
    }
  });

  test('a renewal that finds its partition taken reports it lost; one of an earlier process of the same node is taken at once', async () => {
    const url = await newCluster(2);
    const deadlines = new LeaseDeadlines(2);
    const first = new Leases({ sql: pool(url), nodeId: 'n1', advertise: 'n1:1', settings: fast, deadlines });
    assert.deepEqual([...(await first.acquire([0, 1]))], [[0, 1n], [1, 1n]]);
    // The node restarts: its new process takes its partitions back without waiting for the lapse, fencing the old one.
    const second = new Leases({ sql: pool(url), nodeId: 'n1', advertise: 'n1:1', settings: fast, deadlines: new LeaseDeadlines(2) });
    assert.deepEqual([...(await second.acquire([0]))], [[0, 2n]]);
    assert.deepEqual(await first.renew(), [0], 'the old process lost partition 0 and keeps 1');
    assert.equal(deadlines.maySend(0), false);
    assert.equal(deadlines.maySend(1), true);
    // Another node cannot take partition 1 while its lease holds.
    const other = new Leases({ sql: pool(url), nodeId: 'n2', advertise: 'n2:1', settings: fast, deadlines: new LeaseDeadlines(2) });
    assert.equal((await other.acquire([1])).size, 0);
  });

  test('the local deadline is judged from when the renewal was sent: a renewal held up in the database still ends before lease_until', async () => {
    const url = await newCluster(1);
    const sql = pool(url);
    const deadlines = new LeaseDeadlines(1);
    const leases = new Leases({ sql, nodeId: 'slow', advertise: 'slow:1', settings: fast, deadlines });
    await leases.acquire([0]);
    // Another transaction holds the row (as an append in flight does): the renewal waits for it.
    const blocker = postgres(url, { max: 1, onnotice: () => {} });
    try {
      let unblock: () => void = () => {};
      const blocked = blocker.begin(async (tx) => {
        await tx`SELECT epoch FROM fermata_partitions WHERE partition = 0 FOR SHARE`;
        await new Promise<void>((resolve) => (unblock = resolve));
      });
      await new Promise((resolve) => setTimeout(resolve, 50));
      const sentNs = monotonicNs();
      const renewal = leases.renew();
      await new Promise((resolve) => setTimeout(resolve, 600));
      unblock();
      await blocked;
      assert.deepEqual(await renewal, []);
      const answeredNs = monotonicNs();
      const [row] = await sql<{ left_ms: number }[]>`SELECT (extract(epoch FROM lease_until - now()) * 1000)::float8 AS left_ms FROM fermata_partitions WHERE partition = 0`;
      const checkedNs = monotonicNs();
      const localLeftMs = Number(deadlines.deadlineNs(0) - checkedNs) / 1e6;
      assert.ok(answeredNs - sentNs >= 550_000_000n, 'the renewal was held up');
      // PostgreSQL's lease runs from the statement's start (the block began before it): at least
      // margin more than what is left locally, which counts from the sending.
      assert.ok(row !== undefined && localLeftMs <= row.left_ms - fast.safetyMarginMs + 20, `local deadline ${localLeftMs.toFixed(0)} ms away, lease ${row?.left_ms.toFixed(0)} ms`);
      // Had the deadline counted from the answer, ttl − margin (700 ms) would be left; it is about 100.
      assert.ok(localLeftMs < 300, `the deadline counts from the sending: ${localLeftMs.toFixed(0)} ms left`);
    } finally {
      await blocker.end();
    }
  });

  test('a paused renewer: the local deadline passes before PostgreSQL\'s lease_until does', async () => {
    const url = await newCluster(1);
    const sql = pool(url);
    const deadlines = new LeaseDeadlines(1);
    const leases = new Leases({ sql, nodeId: 'paused', advertise: 'paused:1', settings: fast, deadlines });
    await leases.acquire([0]);
    await leases.renew();
    // No renewal from here on (the renewer is paused): wait for the local deadline, then ask the database.
    await waitUntil('the local deadline to pass', 2_000, async () => !deadlines.maySend(0));
    const [row] = await sql<{ left_ms: number }[]>`SELECT (extract(epoch FROM lease_until - now()) * 1000)::float8 AS left_ms FROM fermata_partitions WHERE partition = 0`;
    assert.ok(row !== undefined && row.left_ms > 0, `the lease still held in PostgreSQL (${row?.left_ms} ms left) when the node stopped sending`);
    const taker = new Leases({ sql, nodeId: 'taker', advertise: 'taker:1', settings: fast, deadlines: new LeaseDeadlines(1) });
    assert.equal((await taker.acquire([0])).size, 0, 'and nobody could take it yet');
    await new Promise((resolve) => setTimeout(resolve, row.left_ms + 50));
    assert.deepEqual([...(await taker.acquire([0]))], [[0, 2n]]);
    assert.deepEqual(await leases.renew(), [0]);
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
