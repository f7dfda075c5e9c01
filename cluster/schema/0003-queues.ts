// Migration 3: the cluster's queue configs and pauses, one row per queue, the truth every node
// applies to the engines of the partitions it owns (cluster/cluster-queues.ts). `revision` grows
// with each change (one sequence for the table), so a node knows from the highest one whether it
// has applied everything; a deleted queue keeps its row as a tombstone (deleted, no config, not
// paused) so the nodes that apply it later see the delete too.
import type { Migration } from './migration.ts';

export const migration0003: Migration = {
  version: 3,
  name: 'queues',
  sql: `
CREATE SEQUENCE fermata_queue_revision;
CREATE TABLE fermata_queues (
  name       text PRIMARY KEY,
  config     jsonb,
  paused     boolean NOT NULL DEFAULT false,
  deleted    boolean NOT NULL DEFAULT false,
  revision   bigint NOT NULL DEFAULT nextval('fermata_queue_revision'),
  updated_at timestamptz NOT NULL DEFAULT now(),
  CHECK (NOT (deleted AND (paused OR config IS NOT NULL)))
);
`,
};
