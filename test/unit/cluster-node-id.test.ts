// A node's id (cluster/membership.ts resolveNodeId): the configured one when given, else one
// generated at the first start and kept in the data directory, so a restarted node is the same
// node (and takes its partitions back at once); an id that is not one is refused by name.
import assert from 'node:assert/strict';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { NodeIdError, nodeIdFileName, resolveNodeId } from '../../cluster/membership.ts';
import { nodeFileSystem } from '../../engine/fs/node-file-system.ts';

const dir = mkdtempSync(join(tmpdir(), 'cluster-node-id-'));
after(() => rmSync(dir, { recursive: true, force: true }));

test('a generated id is kept in the data directory and read back at the next start', async () => {
  const dataDir = join(dir, 'generated');
  const first = await resolveNodeId(nodeFileSystem, dataDir);
  assert.match(first, /^[A-Za-z0-9][A-Za-z0-9._-]*-[0-9a-f]{12}$/);
  assert.equal(readFileSync(join(dataDir, nodeIdFileName), 'utf8'), `${first}\n`);
  assert.equal(await resolveNodeId(nodeFileSystem, dataDir), first);
});

test('a configured id wins and is not written down', async () => {
  const dataDir = join(dir, 'configured');
  assert.equal(await resolveNodeId(nodeFileSystem, dataDir, 'node-a.eu-1'), 'node-a.eu-1');
  assert.throws(() => readFileSync(join(dataDir, nodeIdFileName)), { code: 'ENOENT' });
});

test('an id that is not one is refused, configured or stored', async () => {
  await assert.rejects(resolveNodeId(nodeFileSystem, dir, 'has space'), NodeIdError);
  await assert.rejects(resolveNodeId(nodeFileSystem, dir, ''), NodeIdError);
  const dataDir = join(dir, 'garbled');
  await nodeFileSystem.mkdirp(dataDir);
  writeFileSync(join(dataDir, nodeIdFileName), '../../etc\n');
  await assert.rejects(resolveNodeId(nodeFileSystem, dataDir), /not a node id/);
});
