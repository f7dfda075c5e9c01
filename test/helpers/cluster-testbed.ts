// What the cluster ownership tests share: one real PostgreSQL per test file (startPostgres),
// a fresh database holding a cluster per test, connection pools ended when the file's tests end,
// short leases (failovers in about a second) and a bounded wait. Call clusterTestbed in a
// describe's body, so its hooks belong to that describe.
import assert from 'node:assert/strict';
import { after, before } from 'node:test';
import postgres, { type Sql } from 'postgres';
import { initCluster } from '../../cluster/cluster-init.ts';
import type { LeaseSettings } from '../../cluster/leases.ts';
import { type PostgresServer, startPostgres } from './postgres.ts';

/** TTL 1 s, renewal every 200 ms: a dead owner's partitions move within about 1.2 s. */
export const fastLeaseSettings: LeaseSettings = { leaseTtlMs: 1_000, renewIntervalMs: 200, safetyMarginMs: 300, graceMs: 400 };

export interface ClusterTestbed {
  /** A pool of its own (as a node has), ended after the file's tests. */
  pool(url: string): Sql;
  /** A new database holding a cluster of `partitions`; its URL. */
  newCluster(partitions: number): Promise<string>;
  /** Runs `stop` first when the file's tests end (loops to halt, children to kill). */
  onEnd(stop: () => void): void;
}

export function clusterTestbed(label: string): ClusterTestbed {
  let server: PostgresServer | undefined;
  let databases = 0;
  const pools: Sql[] = [];
  const stops: (() => void)[] = [];
  before(async () => {
    server = await startPostgres();
  });
  after(async () => {
    for (const stop of stops) stop();
    await Promise.all(pools.map((sql) => sql.end({ timeout: 1 })));
    await server?.stop();
  });
  const pool = (url: string): Sql => {
    const sql = postgres(url, { max: 3, onnotice: () => {} });
    pools.push(sql);
    return sql;
  };
  return {
    pool,
    async newCluster(partitions) {
      assert.ok(server !== undefined, 'the testbed\'s PostgreSQL is started by the before hook');
      databases += 1;
      const url = await server.createDatabase(`${label}_${databases}`);
      const sql = postgres(url, { max: 1, onnotice: () => {} });
      try {
        await initCluster(sql, partitions);
      } finally {
        await sql.end();
      }
      return url;
    },
    onEnd(stop) {
      stops.push(stop);
    },
  };
}

/** Polls `condition` every 20 ms until it holds (resolving to the ms it took) or fails the test after `timeoutMs`. */
export async function waitUntil(what: string, timeoutMs: number, condition: () => boolean | Promise<boolean>): Promise<number> {
  const started = performance.now();
  for (;;) {
    if (await condition()) return performance.now() - started;
    if (performance.now() - started > timeoutMs) assert.fail(`not within ${timeoutMs} ms: ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
