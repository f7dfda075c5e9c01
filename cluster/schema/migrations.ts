// The cluster schema's migrations, oldest first: entry i brings the database to version i + 1.
// This list is the schema a node of this build knows; cluster/schema/migrate.ts applies it and
// refuses to run on any other version.
import assert from 'node:assert/strict';
import { migration0001 } from './0001-log.ts';
import { migration0002 } from './0002-nodes.ts';
import { migration0003 } from './0003-queues.ts';
import type { Migration } from './migration.ts';

export const migrations: readonly Migration[] = [migration0001, migration0002, migration0003];

/** The version this build's nodes run on. */
export const schemaVersion = migrations.length;

for (const [index, migration] of migrations.entries()) {
  assert.equal(migration.version, index + 1, `migration "${migration.name}" is listed at position ${index + 1} with version ${migration.version}`);
}
