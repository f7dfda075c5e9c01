// The FileSystem contract (test/helpers/file-system-contract.ts) on the simulated disk and the
// real one; PostgreSQL's file system runs the same tests in test/integration/pg-file-system.test.ts.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe } from 'node:test';
import { nodeFileSystem } from '../../engine/fs/node-file-system.ts';
import { fileSystemContract } from '../helpers/file-system-contract.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';

describe('FileSystem contract: SimFileSystem', () => {
  let seed = 0;
  fileSystemContract(async () => {
    const fs = new SimFileSystem({ seed: ++seed });
    await fs.mkdirp('/root');
    return { fs, root: '/root' };
  });
});

describe('FileSystem contract: nodeFileSystem', () => {
  const top = mkdtempSync(join(tmpdir(), 'fermata-fs-contract-'));
  after(() => rmSync(top, { recursive: true, force: true }));
  let count = 0;
  fileSystemContract(async () => {
    const root = join(top, String(++count));
    await nodeFileSystem.mkdirp(root);
    return { fs: nodeFileSystem, root };
  });
});
