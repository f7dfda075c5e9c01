// The cluster front over real nodes (cluster/node.ts) on a real PostgreSQL 15: two nodes in this
// process, each behind its own HTTP server, P = 4. Adds through either node land on their
// key's partition, any id is read from either node, a forwarded request without the cluster
// secret is refused, and a batch spanning partitions whose one owner is out of reach answers
// 503 listing the rows that landed; once that owner has left and the other node took its
// partitions over (replaying them from the PostgreSQL log), the same body sent again completes
// with the landed rows as duplicates.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, test } from 'node:test';
import pino from 'pino';
import { ClusterNode } from '../../cluster/node.ts';
import { clusterIdParts, partitionOfKey } from '../../cluster/partitioning.ts';
import { systemClock } from '../../engine/engine.ts';
import { createHttpServer, type HttpServer } from '../../ingest/http/server.ts';
import { clusterTestbed, fastLeaseSettings, waitUntil } from '../helpers/cluster-testbed.ts';
import { skipUnlessTool } from '../helpers/tools.ts';

const partitions = 4;
const secret = 'pg-cluster-secret';

function keyIn(partition: number, n: number, prefix: string): string {
  for (let i = 0, found = 0; ; i++) {
    const key = `${prefix}-${i}`;
    if (partitionOfKey(key, partitions) === partition && found++ === n) return key;
  }
}

/** A loopback port free a moment ago: the node advertises it before its server listens on it. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as { port: number };
  await new Promise<void>((resolve) => server.close(() => resolve()));
  return port;
}

async function call(url: string, method: string, path: string, body?: string, headers: Record<string, string> = {}): Promise<{ status: number; headers: Headers; json: Record<string, unknown> }> {
  const response = await fetch(url + path, { method, headers: { ...(body === undefined ? {} : { 'content-type': 'application/json' }), ...headers }, ...(body === undefined ? {} : { body }) });
  return { status: response.status, headers: response.headers, json: (await response.json()) as Record<string, unknown> };
}

describe('cluster front over real nodes', { skip: skipUnlessTool('initdb'), timeout: 120_000 }, () => {
  const { pool, newCluster, onEnd } = clusterTestbed('router');
  const dirs: string[] = [];
  onEnd(() => {
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  interface Member {
    readonly node: ClusterNode;
    readonly port: number;
    readonly url: string;
    app: HttpServer;
  }

  async function serve(node: ClusterNode, port: number): Promise<HttpServer> {
    const engine = node.engineOf(node.owned()[0] as number);
    assert.ok(engine !== undefined);
    const app = createHttpServer({ logger: pino({ level: 'silent' }), cluster: { directory: node, secret, forwardTimeoutMs: 2000, clock: engine.clock } });
    await app.listen({ host: '127.0.0.1', port });
    return app;
  }

  async function start(url: string, nodeId: string): Promise<Member> {
    const dataDir = mkdtempSync(join(tmpdir(), `fermata-router-${nodeId}-`));
    dirs.push(dataDir);
    const port = await freePort();
    const node = await ClusterNode.start({
      sql: pool(url),
      nodeId,
      advertise: `127.0.0.1:${port}`,
      dataDir,
      logger: pino({ level: 'silent' }),
      clock: systemClock,
      leaseSettings: fastLeaseSettings,
      dispatch: { threads: 1, allow: [], allowLoopback: true, signingSecrets: [], ca: undefined },
    });
    await waitUntil(`${nodeId} to own a partition`, 10_000, () => node.owned().length > 0);
    return { node, port, url: `http://127.0.0.1:${port}`, app: await serve(node, port) };
  }

  test('any node answers any request; a batch with an owner out of reach answers what landed, and its resend completes it after a takeover', async () => {
    const url = await newCluster(partitions);
    const members: Member[] = [];
    try {
      members.push(await start(url, 'node-a'));
      members.push(await start(url, 'node-b'));
      const [a, b] = members as [Member, Member];
      await waitUntil('the partitions to be shared two and two', 15_000, () => a.node.owned().length === 2 && b.node.owned().length === 2);
      for (let partition = 0; partition < partitions; partition++) {
        await waitUntil(`both nodes to know partition ${partition}'s owner`, 5_000, () => a.node.ownerAddress(partition) !== undefined && a.node.ownerAddress(partition) === b.node.ownerAddress(partition));
      }
      const later = new Date(Date.now() + 3_600_000).toISOString();

      // Keyed adds through either node land on the partition of their key; either node reads them.
      for (let partition = 0; partition < partitions; partition++) {
        const key = keyIn(partition, 0, 'pg');
        const added = await call(partition % 2 === 0 ? a.url : b.url, 'POST', '/v1/timers', JSON.stringify({ fire_at: later, target: 'https://example.com/hook', key }));
        assert.equal(added.status, 201, JSON.stringify(added.json));
        const id = added.json.id as string;
        assert.equal(clusterIdParts(id, partitions)?.partition, partition);
        for (const reader of [a, b]) {
          const got = await call(reader.url, 'GET', `/v1/timers/${id}`);
          assert.equal(got.status, 200, JSON.stringify(got.json));
          assert.equal(got.json.key, key);
        }
      }

      // Each node shows its partitions with their epochs, and the cluster's counts add both nodes'.
      const view = await call(a.url, 'GET', '/v1/cluster');
      for (const owned of view.json.owned as { partition: number; epoch: number }[]) assert.ok(owned.epoch >= 1, `partition ${owned.partition} has an epoch`);
      const stats = await call(b.url, 'GET', '/v1/stats');
      assert.equal((stats.json.cluster as { nodes: number }).nodes, 2);
      assert.equal((stats.json.cluster as { totals: { pending: number } }).totals.pending, partitions);

      // A forwarded request without the secret is refused.
      const refused = await call(a.url, 'GET', `/v1/timers/${'0'.repeat(27)}`, undefined, { 'fermata-forwarded': '1' });
      assert.equal(refused.status, 401);

      // Node b's HTTP server goes away while it still holds its leases: its parts cannot land.
      const lines = [0, 1, 2, 3].map((partition) => JSON.stringify({ fire_at: later, target: 'https://example.com/hook', key: keyIn(partition, 1, 'pg') }));
      lines.push(JSON.stringify({ fire_at: later, target: 'https://example.com/unkeyed' }));
      const body = lines.join('\n');
      await b.app.close();
      const first = await call(a.url, 'POST', '/v1/timers', body, { 'content-type': 'application/x-ndjson' });
      assert.equal(first.status, 503, JSON.stringify(first.json));
      assert.ok(first.headers.get('retry-after') !== null);
      const error = first.json.error as { code: string; accepted_rows: number[]; ids: (string | null)[] };
      assert.equal(error.code, 'PARTITION_MOVING');
      const landed = error.accepted_rows;
      for (const row of landed) assert.ok(a.node.owned().includes(clusterIdParts(error.ids[row] as string, partitions)?.partition ?? -1), `row ${row} landed on node a`);
      assert.ok(landed.length >= 2 && landed.length < lines.length, `some rows landed, not all: ${JSON.stringify(landed)}`);

      // Node b leaves: node a takes its partitions by clean handover, replaying their logs.
      await b.node.stop();
      await waitUntil('node a to own every partition', 15_000, () => a.node.owned().length === partitions);
      const resent = await call(a.url, 'POST', '/v1/timers', body, { 'content-type': 'application/x-ndjson' });
      assert.equal(resent.status, 201, JSON.stringify(resent.json));
      assert.equal(resent.json.duplicates, landed.length, 'the rows that landed before answer as duplicates');
      const ids = resent.json.ids as string[];
      for (const row of landed) assert.equal(ids[row], error.ids[row]);
      for (let row = 0; row < 4; row++) assert.equal(clusterIdParts(ids[row] as string, partitions)?.partition, row);
    } finally {
      for (const member of members) {
        await member.app.close();
        await member.node.stop();
      }
    }
  });
});
