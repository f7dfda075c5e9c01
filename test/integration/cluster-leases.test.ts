// Partition leases (cluster/leases.ts) on a real PostgreSQL 15, one Leases object per
// contender, each with its own pool: acquisitions race and exactly one wins each epoch, a
// restarted node takes its partitions back at once and fences its old process, and the local
// deadline (cluster/lease-deadline.ts) always passes before the lease does in PostgreSQL, even
// when the renewal's answer is held up or no renewal comes at all; a row held by a write in flight
// is skipped, not waited for.
import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import postgres from 'postgres';
import { LeaseDeadlines, monotonicNs } from '../../cluster/lease-deadline.ts';
import { Leases } from '../../cluster/leases.ts';
import { readFence } from '../../engine/pg-log/fence.ts';
import { clusterTestbed, fastLeaseSettings as fast, waitUntil } from '../helpers/cluster-testbed.ts';
import { withTimeout } from '../helpers/timeout.ts';
import { skipUnlessTool } from '../helpers/tools.ts';

describe('cluster leases', { skip: skipUnlessTool('initdb'), timeout: 120_000 }, () => {
  const { pool, newCluster } = clusterTestbed('leases');

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
      let locked: () => void = () => {};
      const lockHeld = new Promise<void>((resolve) => (locked = resolve));
      const blocked = blocker.begin(async (tx) => {
        await tx`SELECT epoch FROM fermata_partitions WHERE partition = 0 FOR SHARE`;
        locked();
        await new Promise<void>((resolve) => (unblock = resolve));
      });
      await lockHeld;
      const sentNs = monotonicNs();
      let answeredNs = 0n;
      const renewal = leases.renew().then((lost) => {
        answeredNs = monotonicNs();
        return lost;
      });
      await new Promise((resolve) => setTimeout(resolve, 600));
      assert.equal(answeredNs, 0n, 'the renewal waits for the row');
      unblock();
      await blocked;
      assert.deepEqual(await renewal, []);
      assert.ok(answeredNs - sentNs >= 550_000_000n, 'the renewal was held up');
      const [row] = await sql<{ left_ms: number }[]>`SELECT (extract(epoch FROM lease_until - now()) * 1000)::float8 AS left_ms FROM fermata_partitions WHERE partition = 0`;
      const checkedNs = monotonicNs();
      const localLeftMs = Number(deadlines.deadlineNs(0) - checkedNs) / 1e6;
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

  test('a row held by a stopped owner\'s write is skipped, not waited for: the rest are taken at once, it once the lock is gone', async () => {
    const url = await newCluster(3);
    const old = new Leases({ sql: pool(url), nodeId: 'n', advertise: 'n:1', settings: fast, deadlines: new LeaseDeadlines(3) });
    assert.equal((await old.acquire([0, 1, 2])).size, 3);
    // The old process's write on partition 1 read the fence and then stopped before its COMMIT.
    const fenced = Promise.withResolvers<void>();
    const resume = Promise.withResolvers<void>();
    const writer = pool(url);
    const writing = writer.begin(async (tx) => {
      await readFence(tx, 1, 60_000);
      fenced.resolve();
      await resume.promise;
    });
    await fenced.promise;
    try {
      // This node's next process: it may take its own partitions at once.
      const fresh = new Leases({ sql: pool(url), nodeId: 'n', advertise: 'n:2', settings: fast, deadlines: new LeaseDeadlines(3) });
      const taken = await withTimeout(fresh.acquire([0, 1, 2]), 5_000, 'an acquisition beside a held row');
      assert.deepEqual([...taken.keys()].sort(), [0, 2]);
      resume.resolve();
      await writing;
      assert.deepEqual([...(await fresh.acquire([0, 1, 2])).keys()], [1]);
    } finally {
      resume.resolve();
      await writing.catch(() => undefined);
    }
  });
});
