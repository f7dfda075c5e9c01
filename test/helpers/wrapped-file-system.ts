// A disk (the real one, or a simulated one) with some of each file handle's calls replaced: a
// slower disk, one that records what it is asked and when, or one that holds a call at a gate.
import type { FileHandle, FileSystem } from '../../engine/fs/file-system.ts';
import { nodeFileSystem } from '../../engine/fs/node-file-system.ts';

/** `base` with its own directory and file calls, and `open` in place of its own. */
export function withOpen(base: FileSystem, open: FileSystem['open']): FileSystem {
  return {
    mkdirp: (dir) => base.mkdirp(dir),
    list: (dir) => base.list(dir),
    readFile: (path) => base.readFile(path),
    rename: (from, to) => base.rename(from, to),
    unlink: (path) => base.unlink(path),
    syncDir: (dir) => base.syncDir(dir),
    lockDir: (dir) => base.lockDir(dir),
    open,
  };
}

/** `base` (the real disk unless given) whose opened handles use `overrides(handle)` in place of their own calls. */
export function wrappedFileSystem(overrides: (handle: FileHandle) => Partial<FileHandle>, base: FileSystem = nodeFileSystem): FileSystem {
  return withOpen(base, async (path, mode, options) => {
    const handle = await base.open(path, mode, options);
    return {
      writeThrough: handle.writeThrough,
      writev: (chunks, position) => handle.writev(chunks, position),
      read: (into, position) => handle.read(into, position),
      datasync: () => handle.datasync(),
      truncate: (length) => handle.truncate(length),
      size: () => handle.size(),
      close: () => handle.close(),
      ...overrides(handle),
    };
  });
}
