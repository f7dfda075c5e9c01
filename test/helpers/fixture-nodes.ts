// Two cluster nodes in this process, for the cluster front's tests without PostgreSQL: P = 4,
// node a owns partitions 0 and 1, node b 2 and 3 (FixtureDirectory engines on simulated file
// systems), each behind a real HTTP server on loopback that knows where the other's partitions
// are served. `fastify` counts the answers fastify sent: what a raw HTTP/2 path takes (the single
// add, PATCH) never passes there.
import assert from 'node:assert/strict';
import pino from 'pino';
import { partitionOfKey } from '../../cluster/partitioning.ts';
import { createHttpServer, type HttpServer } from '../../ingest/http/server.ts';
import { FixtureDirectory } from './partition-fixture.ts';

export const fixturePartitions = 4;
export const fixtureSecret = 'the-cluster-secret';

export interface FixtureNode {
  readonly directory: FixtureDirectory;
  readonly app: HttpServer;
  url: string;
  /** host:port, as a lease row would give it. */
  address: string;
  fastify: number;
}

/** Node a (partitions 0, 1) and node b (2, 3), listening; forwarded requests wait up to `forwardTimeoutMs`. */
export async function startFixtureNodes(forwardTimeoutMs = 2000): Promise<[FixtureNode, FixtureNode]> {
  const started: FixtureNode[] = [];
  for (const [name, owned] of [['a', [0, 1]], ['b', [2, 3]]] as const) {
    const directory = new FixtureDirectory(name, fixturePartitions);
    for (const partition of owned) await directory.take(partition, partition + 1);
    const engine = directory.engineOf(owned[0]);
    assert.ok(engine);
    const app = createHttpServer({ logger: pino({ level: 'silent' }), cluster: { directory, secret: fixtureSecret, forwardTimeoutMs, clock: engine.clock } });
    const node: FixtureNode = { directory, app, url: '', address: '', fastify: 0 };
    app.addHook('onSend', (_request, _reply, payload, done) => {
      node.fastify++;
      done(null, payload);
    });
    node.url = await app.listen({ host: '127.0.0.1', port: 0 });
    node.address = new URL(node.url).host;
    started.push(node);
  }
  const [a, b] = started as [FixtureNode, FixtureNode];
  for (const node of started) for (let p = 0; p < fixturePartitions; p++) node.directory.setAddress(p, fixtureOwnerOf(p, a, b).address);
  return [a, b];
}

/** The node that owns `partition` (a: 0 and 1, b: 2 and 3). */
export function fixtureOwnerOf<T>(partition: number, a: T, b: T): T {
  return partition < 2 ? a : b;
}

export async function closeFixtureNodes(nodes: readonly FixtureNode[]): Promise<void> {
  for (const node of nodes) {
    await node.app.close();
    await node.directory.close();
  }
}

/** The n-th key (`prefix`-0, `prefix`-1, …) whose partition among the fixture's 4 is `partition`. */
export function fixtureKeyIn(partition: number, n: number, prefix: string): string {
  for (let i = 0, found = 0; ; i++) {
    const key = `${prefix}-${i}`;
    if (partitionOfKey(key, fixturePartitions) === partition && found++ === n) return key;
  }
}
