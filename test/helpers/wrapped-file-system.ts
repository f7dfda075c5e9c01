// The real disk with some of each file handle's calls replaced, for tests that need real files:
// a slower disk, or one that records what it is asked and when.
import type { FileHandle, FileSystem } from '../../engine/fs/file-system.ts';
import { nodeFileSystem } from '../../engine/fs/node-file-system.ts';

/** nodeFileSystem whose opened handles use `overrides(handle)` in place of their own calls. */
export function wrappedFileSystem(overrides: (handle: FileHandle) => Partial<FileHandle>): FileSystem {
  return {
    ...nodeFileSystem,
    async open(path, mode, options) {
      const handle = await nodeFileSystem.open(path, mode, options);
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
    },
  };
}
