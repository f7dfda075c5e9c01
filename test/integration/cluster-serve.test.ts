// Three real `fermata serve --cluster` processes on loopback over one PostgreSQL, P = 6, each node
// owning two partitions once they have settled, asked with curl:
//
//   - a keyed single add (JSON, HTTP/1.1) sent to node A, whose key's partition node B owns,
//     lands in B (its id names that partition, and B serves a forwarded GET of it itself, which a
//     node that did not own it would answer PARTITION_MOVING), and a GET of the id from node C
//     (over HTTP/2) answers the timer
//   - a request carrying `fermata-forwarded` without the cluster secret is 401, with a wrong one too
//   - a queue's config PUT through one node and its pause through another are what a third
//     answers, with the counts of every node's partitions
//   - each node's /readyz is waited for: 503 until the node has joined, then 200; with the
//     database stopped it is 503 again, naming the database
//
// Short leases (TTL 1 s, renewal 200 ms) keep the settling, and the whole test, to seconds.
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import postgres from 'postgres';
import { initCluster } from '../../cluster/cluster-init.ts';
import { clusterIdParts, partitionOfKey } from '../../cluster/partitioning.ts';
import { curl, curlRequest, json } from '../helpers/curl.ts';
import { type PostgresServer, startPostgres } from '../helpers/postgres.ts';
import { type Service, startService } from '../helpers/service.ts';
import { skipUnlessTool } from '../helpers/tools.ts';

const partitions = 6;
const secret = 'the-three-nodes-secret';
const settleTimeoutMs = 20_000;

interface ClusterView {
  readonly owned: { partition: number }[];
  readonly owners: { partition: number; here: boolean; address: string | null }[];
}

describe('fermata serve --cluster: any node answers through the router', { skip: skipUnlessTool('initdb') || skipUnlessTool('curl'), timeout: 60_000 }, () => {
  const children = new Set<ChildProcess>();
  const dirs: string[] = [];
  let server: PostgresServer | undefined;
  after(async () => {
    for (const child of children) child.kill('SIGKILL');
    await server?.stop();
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
  });

  async function startNode(name: string, url: string): Promise<Service> {
    const dataDir = mkdtempSync(join(tmpdir(), `fermata-serve-${name}-`));
    dirs.push(dataDir);
    const config = join(dataDir, 'config.json');
    writeFileSync(config, JSON.stringify({ cluster: { node_id: name, lease_ttl_ms: 1_000, renew_ms: 200 }, dispatch: { threads: 1 } }));
    return startService(dataDir, (child) => children.add(child), { args: ['--cluster', url, '--config', config], env: { FERMATA_CLUSTER_SECRET: secret } });
  }

  async function view(node: Service): Promise<ClusterView> {
    const answer = await curlRequest({ url: `${node.url}/v1/cluster`, timeoutMs: 2_000 });
    assert.equal(answer.status, 200);
    return json<ClusterView>(answer);
  }

  /** Resolves with every node's view once each owns two partitions and every node knows every owner's address. */
  async function settled(nodes: readonly Service[]): Promise<ClusterView[]> {
    const started = performance.now();
    for (;;) {
      const views = await Promise.all(nodes.map(view));
      if (views.every((one) => one.owned.length === partitions / nodes.length && one.owners.every((owner) => owner.address !== null))) return views;
      assert.ok(performance.now() - started < settleTimeoutMs, `not settled after ${settleTimeoutMs} ms: ${JSON.stringify(views.map((one) => one.owned))}`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }

  test('a keyed add to node A lands in node B, which owns its partition, and node C answers a GET of its id; a forwarded request without the secret is 401; /readyz follows the join and the database', async () => {
    server = await startPostgres();
    const url = await server.createDatabase('serve');
    const admin = postgres(url, { max: 1, onnotice: () => {} });
    await initCluster(admin, partitions);
    await admin.end();

    const a = await startNode('node-a', url);
    const b = await startNode('node-b', url);
    const c = await startNode('node-c', url);
    for (const node of [a, b, c]) {
      for (;;) {
        const readyz = await curlRequest({ url: `${node.url}/readyz` });
        if (readyz.status === 200) break;
        assert.equal(readyz.status, 503, 'not ready until joined');
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
    }
    const [, viewOfB] = await settled([a, b, c]);
    const ownedByB = new Set(viewOfB?.owned.map((entry) => entry.partition));
    let key = 'order-0';
    for (let i = 1; !ownedByB.has(partitionOfKey(key, partitions)); i++) key = `order-${i}`;
    const partition = partitionOfKey(key, partitions);

    const added = await curlRequest({ url: `${a.url}/v1/timers`, method: 'POST', body: JSON.stringify({ delay_ms: 3_600_000, target: 'http://127.0.0.1:9/hook', key, payload: 'p' }) });
    assert.equal(added.status, 201, added.body.toString());
    const { id } = json<{ id: string }>(added);
    assert.equal(clusterIdParts(id, partitions)?.partition, partition, "the id names the key's partition");

    // Served by B itself: a forwarded request is never forwarded again, so only the owner answers 200.
    const atOwner = await curlRequest({ url: `${b.url}/v1/timers/${id}`, headers: { 'fermata-forwarded': '1', 'fermata-cluster-secret': secret } });
    assert.equal(atOwner.status, 200, atOwner.body.toString());
    const atA = await curlRequest({ url: `${a.url}/v1/timers/${id}`, headers: { 'fermata-forwarded': '1', 'fermata-cluster-secret': secret } });
    assert.equal(atA.status, 503, 'node A does not hold it');
    assert.equal(json<{ error: { code: string } }>(atA).error.code, 'PARTITION_MOVING');

    const fromC = await curlRequest({ url: `${c.url}/v1/timers/${id}`, protocol: curl.http2 ? 'http2' : 'http1.1' });
    assert.equal(fromC.status, 200, fromC.body.toString());
    const timer = json<{ id: string; key: string; state: string }>(fromC);
    assert.deepEqual([timer.id, timer.key, timer.state], [id, key, 'pending']);

    for (const headers of [{ 'fermata-forwarded': '1' }, { 'fermata-forwarded': '1', 'fermata-cluster-secret': 'not-the-secret' }]) {
      const refused = await curlRequest({ url: `${c.url}/v1/timers/${id}`, headers });
      assert.equal(refused.status, 401);
      assert.equal(json<{ error: { code: string } }>(refused).error.code, 'UNAUTHORIZED');
    }

    // Queue configs are the cluster's: set through A, paused through C, read through B with the
    // counts of every node's partitions (the timer above waits in B's partition).
    const put = await curlRequest({ url: `${a.url}/v1/queues/mail`, method: 'PUT', body: JSON.stringify({ rate_per_s: 60, max_attempts: 4 }) });
    assert.equal(put.status, 200, put.body.toString());
    assert.equal((await curlRequest({ url: `${c.url}/v1/queues/mail/pause`, method: 'POST' })).status, 200);
    const mail = json<{ rate_per_s: number; max_attempts: number; paused: boolean }>(await curlRequest({ url: `${b.url}/v1/queues/mail` }));
    assert.deepEqual([mail.rate_per_s, mail.max_attempts, mail.paused], [60, 4, true]);
    const listed = json<{ queues: { name: string; pending: number; paused: boolean }[] }>(await curlRequest({ url: `${b.url}/v1/queues` })).queues;
    assert.deepEqual(listed.map((queue) => [queue.name, queue.pending, queue.paused]), [['default', 1, false], ['mail', 0, true]]);

    // The database gone, /readyz goes red and says why.
    await server.stop();
    server = undefined;
    const started = performance.now();
    for (;;) {
      const readyz = await curlRequest({ url: `${a.url}/readyz`, timeoutMs: 5_000 });
      if (readyz.status === 503) {
        assert.match(json<{ reason: string }>(readyz).reason, /cluster database/);
        break;
      }
      assert.ok(performance.now() - started < 10_000, '/readyz still green 10 s after the database stopped');
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  });
});
