// Migration 2: the nodes of a cluster, what partition ownership (cluster/ownership.ts) balances
// over. One row per node id, kept after the node leaves or dies (`fermata cluster status` shows
// it as such); a node is live while its state is 'live' and its heartbeat, on PostgreSQL's clock,
// is younger than the lease TTL.
//
// `incarnation` names the process that last registered the node id (a random id per start): a
// heartbeat counts only for it, so a second process started with the same node id takes the
// row over and the first one, finding its heartbeat refused, gives its partitions up.
//
// The partitions' lease columns (owner, owner_address, lease_until, epoch) come with migration
// 1; ownership adds the index its renewals and status read by (a node's partitions).
import type { Migration } from './migration.ts';

export const migration0002: Migration = {
  version: 2,
  name: 'nodes',
  sql: `
CREATE TABLE fermata_nodes (
  node_id      text PRIMARY KEY,
  incarnation  text NOT NULL,
  advertise    text NOT NULL,
  started_at   timestamptz NOT NULL DEFAULT now(),
  heartbeat_at timestamptz NOT NULL DEFAULT now(),
  state        text NOT NULL DEFAULT 'live' CHECK (state IN ('live', 'leaving', 'left'))
);
CREATE INDEX fermata_partitions_owner ON fermata_partitions (owner);
`,
};
