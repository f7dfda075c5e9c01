// The FileSystem contract (engine/fs/file-system.ts) as seen by one process while it runs:
// what every implementation must answer the same way, whatever it keeps durable and where.
// Registered once per implementation: the simulated and the real disk in
// test/unit/file-system-contract.test.ts, PostgreSQL's in test/integration/pg-file-system.test.ts.
// Durability (what survives a power cut or a new owner) differs by design and is tested beside
// each implementation.
import assert from 'node:assert/strict';
import { posix } from 'node:path';
import { it } from 'node:test';
import type { FileSystem } from '../../engine/fs/file-system.ts';

export interface ContractSubject {
  readonly fs: FileSystem;
  /** An existing, empty directory the tests may fill (absolute, '/'-separated). */
  readonly root: string;
}

function filled(length: number, value: number): Uint8Array {
  return new Uint8Array(length).fill(value);
}

/** Registers the contract's tests in the describe it is called from; `subject` gives each test a fresh one. */
export function fileSystemContract(subject: () => Promise<ContractSubject>): void {
  async function emptyFile(): Promise<ContractSubject & { dir: string; path: string }> {
    const { fs, root } = await subject();
    const dir = posix.join(root, 'd');
    await fs.mkdirp(dir);
    const path = posix.join(dir, 'f');
    const handle = await fs.open(path, 'create');
    await handle.close();
    return { fs, root, dir, path };
  }

  it('reads see writes in order, with holes as zeros; size follows the writes', async () => {
    const { fs, path } = await emptyFile();
    const handle = await fs.open(path, 'readwrite');
    await handle.writev([filled(4, 1), filled(2, 2)], 0);
    await handle.writev([filled(2, 3)], 2);
    await handle.writev([filled(1, 9)], 10);
    assert.deepEqual([...(await fs.readFile(path))], [1, 1, 3, 3, 2, 2, 0, 0, 0, 0, 9]);
    assert.equal(await handle.size(), 11);
    const into = new Uint8Array(8);
    assert.equal(await handle.read(into, 6), 5);
    assert.deepEqual([...into], [0, 0, 0, 0, 9, 0, 0, 0]);
    assert.equal(await handle.read(into, 11), 0);
    await handle.datasync();
    await handle.close();
  });

  it('truncate shrinks and grows, with zeros', async () => {
    const { fs, path } = await emptyFile();
    const handle = await fs.open(path, 'readwrite');
    await handle.writev([filled(8, 7)], 0);
    await handle.datasync();
    await handle.truncate(3);
    await handle.truncate(5);
    await handle.datasync();
    assert.deepEqual([...(await fs.readFile(path))], [7, 7, 7, 0, 0]);
    assert.equal(await handle.size(), 5);
    await handle.close();
  });

  it('rejects with errno-coded Errors that name the path', async () => {
    const { fs, root, dir, path } = await emptyFile();
    const missing = posix.join(root, 'nope', 'f');
    await assert.rejects(fs.open(missing, 'create'), (err: unknown) => {
      assert.ok(err instanceof Error);
      assert.equal((err as { code?: unknown }).code, 'ENOENT');
      assert.ok(err.message.includes(missing), err.message);
      return true;
    });
    await assert.rejects(fs.open(posix.join(dir, 'g'), 'read'), { code: 'ENOENT' });
    await assert.rejects(fs.open(posix.join(dir, 'g'), 'readwrite'), { code: 'ENOENT' });
    await assert.rejects(fs.readFile(posix.join(dir, 'g')), { code: 'ENOENT' });
    await assert.rejects(fs.open(path, 'create'), { code: 'EEXIST' });
    await assert.rejects(fs.readFile(dir), { code: 'EISDIR' });
    await assert.rejects(fs.open(posix.join(path, 'g'), 'create'), { code: 'ENOTDIR' });
    await assert.rejects(fs.list(path), { code: 'ENOTDIR' });
    await assert.rejects(fs.list(posix.join(root, 'nope')), { code: 'ENOENT' });
    await assert.rejects(fs.mkdirp(path), { code: 'EEXIST' });
    await assert.rejects(fs.unlink(posix.join(dir, 'g')), { code: 'ENOENT' });
    await assert.rejects(fs.rename(posix.join(dir, 'g'), posix.join(dir, 'h')), { code: 'ENOENT' });
    assert.deepEqual(await fs.list(dir), ['f']);
  });

  it('rejects writes through read-only or closed handles with EBADF', async () => {
    const { fs, path } = await emptyFile();
    const reader = await fs.open(path, 'read');
    await assert.rejects(reader.writev([filled(1, 1)], 0), { code: 'EBADF' });
    await reader.close();
    const writer = await fs.open(path, 'readwrite');
    await writer.close();
    await assert.rejects(writer.writev([filled(1, 1)], 0), { code: 'EBADF' });
    await assert.rejects(writer.size(), { code: 'EBADF' });
    await assert.rejects(writer.datasync(), { code: 'EBADF' });
    assert.equal((await fs.readFile(path)).length, 0);
  });

  it('keeps a handle working on an unlinked file, like a POSIX inode', async () => {
    const { fs, dir, path } = await emptyFile();
    const handle = await fs.open(path, 'readwrite');
    await fs.unlink(path);
    await handle.writev([filled(3, 5)], 0);
    await handle.datasync();
    assert.equal(await handle.size(), 3);
    assert.deepEqual(await fs.list(dir), []);
    await assert.rejects(fs.readFile(path), { code: 'ENOENT' });
    await handle.close();
  });

  it('renames atomically, replacing the target; a handle follows its file', async () => {
    const { fs, root } = await subject();
    const a = posix.join(root, 'a');
    await fs.mkdirp(posix.join(a, 'b'));
    const x = await fs.open(posix.join(a, 'x'), 'create');
    await x.writev([filled(1, 1)], 0);
    await x.datasync();
    const y = await fs.open(posix.join(a, 'b', 'y'), 'create');
    await y.writev([filled(1, 2)], 0);
    await y.datasync();
    await y.close();
    await fs.rename(posix.join(a, 'x'), posix.join(a, 'b', 'y'));
    assert.deepEqual((await fs.list(a)).sort(), ['b']);
    assert.deepEqual(await fs.list(posix.join(a, 'b')), ['y']);
    assert.deepEqual([...(await fs.readFile(posix.join(a, 'b', 'y')))], [1]);
    await x.writev([filled(1, 3)], 1);
    await x.datasync();
    await x.close();
    assert.deepEqual([...(await fs.readFile(posix.join(a, 'b', 'y')))], [1, 3]);
    await fs.rename(posix.join(a, 'b', 'y'), posix.join(a, 'b', 'y'));
    assert.deepEqual([...(await fs.readFile(posix.join(a, 'b', 'y')))], [1, 3]);
    await fs.mkdirp(posix.join(a, 'c'));
    await assert.rejects(fs.rename(posix.join(a, 'b', 'y'), posix.join(a, 'c')), { code: 'EISDIR' });
    assert.deepEqual([...(await fs.readFile(posix.join(a, 'b', 'y')))], [1, 3]);
  });

  it('lists files and directories; mkdirp of an existing directory is a no-op; syncDir and lockDir answer', async () => {
    const { fs, root } = await subject();
    await fs.mkdirp(posix.join(root, 'a', 'b', 'c'));
    await fs.mkdirp(posix.join(root, 'a', 'b', 'c'));
    await (await fs.open(posix.join(root, 'a', 'b', 'f'), 'create')).close();
    assert.deepEqual((await fs.list(posix.join(root, 'a', 'b'))).sort(), ['c', 'f']);
    await fs.syncDir(posix.join(root, 'a', 'b'));
    const lock = await fs.lockDir(posix.join(root, 'a'));
    await lock.release();
  });
}
