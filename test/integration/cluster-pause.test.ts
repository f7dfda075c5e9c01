// An owner process paused past its lease (SIGSTOP, then SIGCONT), on a real PostgreSQL 15: while
// it is stopped another node takes its partitions with epoch + 1; once it resumes, every lease
// check it makes refuses to send (its local deadline passed while it was stopped: the monotonic
// clock runs on), and its next renewal reports the partitions lost. No send is allowed between
// the resume and the loss; the taker never saw the paused node as able to send.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { describe, test } from 'node:test';
import { Ownership } from '../../cluster/ownership.ts';
import { clusterTestbed, fastLeaseSettings as settings, waitUntil } from '../helpers/cluster-testbed.ts';
import { testScratch } from '../helpers/scratch.ts';
import { skipUnlessTool } from '../helpers/tools.ts';

const childFile = new URL('../helpers/cluster-owner-child.ts', import.meta.url).pathname;

interface Line {
  readonly event: 'acquired' | 'lost' | 'release' | 'error' | 'check';
  readonly partition?: number;
  readonly epoch?: string;
  readonly maySend?: Record<string, boolean>;
  readonly message?: string;
}

describe('an owner paused past its lease', { skip: skipUnlessTool('initdb'), timeout: 60_000 }, () => {
  const scratch = testScratch('cluster-pause');
  const { pool, newCluster, onEnd } = clusterTestbed('pause');
  onEnd(() => {
    for (const child of scratch.children) child.kill('SIGKILL');
  });

  function startChild(url: string, nodeId: string): { child: ChildProcess; lines: Line[]; stamps: number[] } {
    const child = spawn(process.execPath, [childFile], {
      env: { ...process.env, FERMATA_TEST_CLUSTER_URL: url, FERMATA_TEST_NODE_ID: nodeId, FERMATA_TEST_LEASE_SETTINGS: JSON.stringify(settings) },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    scratch.children.add(child);
    const lines: Line[] = [];
    const stamps: number[] = [];
    createInterface({ input: child.stdout as NodeJS.ReadableStream }).on('line', (text) => {
      lines.push(JSON.parse(text) as Line);
      stamps.push(performance.now());
    });
    return { child, lines, stamps };
  }

  test('SIGSTOP past the lease, another node takes over, SIGCONT: no send allowed, partitions reported lost', async () => {
    const url = await newCluster(2);

    const paused = startChild(url, 'paused');
    await waitUntil('the child to own both partitions', 10_000, () => paused.lines.filter((line) => line.event === 'acquired').length === 2);
    await waitUntil('a check allowing sends', 2_000, () => paused.lines.some((line) => line.event === 'check' && line.maySend?.['0'] === true && line.maySend['1'] === true));

    paused.child.kill('SIGSTOP');
    const acquiredByTaker: [number, bigint][] = [];
    const taker = await Ownership.start({
      sql: pool(url),
      nodeId: 'taker',
      advertise: 'taker.test:8080',
      settings,
      callbacks: {
        async onAcquire(partition, epoch) {
          acquiredByTaker.push([partition, epoch]);
        },
        onLose() {},
        async beforeRelease() {},
        onError(error) {
          throw error;
        },
      },
    });
    try {
      await waitUntil('the taker to own both partitions', 5_000, () => taker.owned().size === 2);
      assert.deepEqual(acquiredByTaker.sort(), [[0, 2n], [1, 2n]]);

      const resumedAt = performance.now();
      const firstLineAfter = paused.lines.length;
      paused.child.kill('SIGCONT');
      await waitUntil('the resumed child to report both partitions lost', 5_000, () => paused.lines.slice(firstLineAfter).filter((line) => line.event === 'lost').length === 2);

      const afterResume = paused.lines.slice(firstLineAfter);
      const reacquired = afterResume.findIndex((line) => line.event === 'acquired');
      const beforeReacquire = reacquired === -1 ? afterResume : afterResume.slice(0, reacquired);
      const checks = beforeReacquire.filter((line) => line.event === 'check');
      assert.ok(checks.length > 0, 'the child checked its leases after resuming');
      for (const check of checks) assert.deepEqual(check.maySend, { 0: false, 1: false }, 'no send allowed after the resume');
      assert.ok(paused.stamps[firstLineAfter] !== undefined && paused.stamps[firstLineAfter] >= resumedAt);
      assert.deepEqual(afterResume.filter((line) => line.event === 'error'), []);
    } finally {
      taker.halt();
    }
  });
});
