// Checkpoints in cluster mode (cluster/node.ts runs a memory loader per owned partition), on a
// real PostgreSQL 15: a node with a small budget and a low checkpoint threshold spills and
// checkpoints its partition, which truncates the partition's log in PostgreSQL (log_start_seq
// rises, rows go); after it hands the partition over, a node with an empty cache directory opens
// it from the checkpoint files in PostgreSQL plus the log's tail, with every acknowledged timer,
// resident and spilled.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import pino from 'pino';
import type { Sql } from 'postgres';
import { ClusterNode, type ClusterNodeMemoryOptions } from '../../cluster/node.ts';
import { batchFromSpecs } from '../../engine/batch/timer-batch.ts';
import { systemClock } from '../../engine/engine.ts';
import { clusterTestbed, fastLeaseSettings, waitUntil } from '../helpers/cluster-testbed.ts';
import { skipUnlessTool } from '../helpers/tools.ts';

const hour = 3_600_000;
/** Never reached: every timer here is due long after the test ends. */
const target = 'http://127.0.0.1:9/never';

describe('cluster checkpoints', { skip: skipUnlessTool('initdb'), timeout: 60_000 }, () => {
  const { pool, newCluster, onEnd } = clusterTestbed('ckpt');
  const dirs: string[] = [];
  const running: ClusterNode[] = [];
  onEnd(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  async function startNode(sql: Sql, nodeId: string, memory?: ClusterNodeMemoryOptions): Promise<{ node: ClusterNode }> {
    const dataDir = mkdtempSync(join(tmpdir(), `fermata-ckpt-${nodeId}-`));
    dirs.push(dataDir);
    const node = await ClusterNode.start({
      sql,
      nodeId,
      advertise: `${nodeId}.test:7070`,
      dataDir,
      logger: pino({ level: process.env.FERMATA_TEST_LOG ?? 'silent' }),
      clock: systemClock,
      leaseSettings: fastLeaseSettings,
      dispatch: { threads: 1, allow: [], allowLoopback: true, signingSecrets: [], ca: undefined },
      ...(memory === undefined ? {} : { memory }),
    });
    running.push(node);
    return { node };
  }

  test('a checkpoint truncates the partition\'s log; a taker with an empty cache has every acknowledged timer', async () => {
    const url = await newCluster(1);
    const sql = pool(url);
    const logRows = async (): Promise<number> => (await sql<{ rows: number }[]>`SELECT count(*)::int AS rows FROM fermata_log WHERE partition = 0`)[0]?.rows ?? 0;
    const logStart = async (): Promise<number> => Number((await sql<{ start: string }[]>`SELECT log_start_seq AS start FROM fermata_partitions WHERE partition = 0`)[0]?.start);
    try {
      // 64 KiB for the node's timers, a checkpoint past 16 KiB of log, a look every 50 ms.
      const small = { budget: () => ({ bytes: 64 * 1024, source: 'configured' as const, limitBytes: 128 * 1024 }), limits: { loaderIntervalMs: 50, checkpointWalBytes: 16 * 1024 } };
      const { node: first } = await startNode(sql, 'node-a', small);
      await waitUntil('the node to open the partition', 10_000, () => first.owned().length === 1);
      const engine = first.engineOf(0);
      assert.ok(engine !== undefined);

      // Soon (within the loader's promote lead: they stay in memory) and in two days (they spill).
      const now = Date.now();
      const soon: string[] = [];
      const far: string[] = [];
      for (let round = 0; round < 4; round++) {
        const admitted = await engine.admit(batchFromSpecs(Array.from({ length: 500 }, (_, i) => ({ fireAtMs: now + (i % 2 === 0 ? hour / 12 : 48 * hour), target }))));
        for (let row = 0; row < admitted.rows; row++) (row % 2 === 0 ? soon : far).push(admitted.idOf(row));
      }
      // Every spill is a checkpoint; a checkpoint may also come first, between the adds.
      await waitUntil('the timers due in two days to spill', 15_000, () => engine.stats().spill.spilled > 0);
      await waitUntil('a checkpoint to truncate the partition\'s log', 15_000, async () => (await logStart()) > 1);
      // The raise of log_start_seq commits first (rows below it are dead from then on), the
      // delete of those rows in the statement after it: wait for that one too.
      const rowsBelowStart = async (): Promise<number> =>
        (await sql<{ rows: number }[]>`SELECT count(*)::int AS rows FROM fermata_log WHERE partition = 0 AND seq < (SELECT log_start_seq FROM fermata_partitions WHERE partition = 0)`)[0]?.rows ?? -1;
      await waitUntil('the log rows the checkpoint covers to be deleted', 5_000, async () => (await rowsBelowStart()) === 0);
      assert.ok((await logRows()) < engine.log.lastSeq, 'fewer log rows than records written');
      // A tail past the checkpoint, which the taker replays on top of it.
      const tail = await engine.admit(batchFromSpecs(Array.from({ length: 10 }, () => ({ fireAtMs: now + hour / 12, target }))));
      for (let row = 0; row < tail.rows; row++) soon.push(tail.idOf(row));
      const acknowledged = soon.length + far.length;
      assert.equal(engine.stats().pending, acknowledged);

      // A clean handover: the loader and engine stop, the lease is released.
      await first.stop();
      // Its data directory is new: nothing of the partition is on its disk but what it reads from PostgreSQL.
      const { node: second } = await startNode(sql, 'node-b');
      await waitUntil('the second node to open the partition', 10_000, () => second.owned().length === 1);
      const taken = second.engineOf(0);
      assert.ok(taken !== undefined);
      assert.ok(taken.log.lastSeq >= (await logStart()), 'the taker opened at the truncated log');
      assert.equal(taken.stats().pending, acknowledged, 'every acknowledged timer, from the checkpoint and the tail');
      for (const id of [soon[0], soon.at(-1), far[0], far.at(-1)]) {
        assert.ok(id !== undefined);
        const timer = await taken.lookup(id);
        assert.ok(timer !== undefined, `timer ${id} survived the handover`);
      }
      assert.ok(taken.stats().spill.spilled > 0, 'the spilled timers were read from the checkpoint, not put back in memory');
      assert.equal(taken.get(far[0] as string), undefined, 'a timer due in two days is still on disk');
      assert.ok(taken.get(soon[0] as string) !== undefined, 'a timer due soon is in memory');
      await second.stop();
    } finally {
      for (const node of running) await node.stop();
    }
  });
});
