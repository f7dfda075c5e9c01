// Migration 1: the cluster, its partitions' fencing rows, the partitions' logs and checkpoint
// storage. docs/format/cluster-schema.md explains each table and column.
import type { Migration } from './migration.ts';

export const migration0001: Migration = {
  version: 1,
  name: 'log',
  sql: `
CREATE TABLE fermata_cluster (
  singleton boolean PRIMARY KEY DEFAULT true CHECK (singleton),
  partitions integer NOT NULL CHECK (partitions BETWEEN 1 AND 4096),
  created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE fermata_partitions (
  partition integer PRIMARY KEY CHECK (partition >= 0),
  epoch bigint NOT NULL DEFAULT 0,
  owner text,
  owner_address text,
  lease_until timestamptz,
  log_start_seq bigint NOT NULL DEFAULT 1 CHECK (log_start_seq >= 1)
);

CREATE TABLE fermata_log (
  partition integer NOT NULL,
  seq bigint NOT NULL CHECK (seq >= 1),
  type smallint NOT NULL CHECK (type BETWEEN 1 AND 255),
  epoch bigint NOT NULL,
  body bytea NOT NULL,
  PRIMARY KEY (partition, seq)
);
ALTER TABLE fermata_log ALTER COLUMN body SET STORAGE EXTERNAL;

CREATE TABLE fermata_checkpoints (
  partition integer NOT NULL,
  checkpoint bigint NOT NULL CHECK (checkpoint >= 1),
  covered_seq bigint NOT NULL CHECK (covered_seq >= 0),
  epoch bigint NOT NULL,
  manifest bytea NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (partition, checkpoint)
);

CREATE TABLE fermata_checkpoint_files (
  partition integer NOT NULL,
  name text NOT NULL,
  chunk integer NOT NULL CHECK (chunk >= 0),
  body bytea NOT NULL,
  PRIMARY KEY (partition, name, chunk)
);
ALTER TABLE fermata_checkpoint_files ALTER COLUMN body SET STORAGE EXTERNAL;
`,
};
