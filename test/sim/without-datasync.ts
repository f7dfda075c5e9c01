// The canaries' broken disk: the simulated file system wrapped so that fdatasync returns at
// once and makes nothing durable, and a handle asked for write-through says it is while its
// writes are not. A simulation that cannot catch the acknowledgements this loses at a power
// loss proves nothing about fsync placement.
import type { FileHandle, FileSystem } from '../../engine/fs/file-system.ts';
import type { SimFileSystem } from './sim-file-system.ts';

export function withoutDatasync(fs: SimFileSystem): FileSystem {
  const lying = (handle: FileHandle, writeThrough: boolean): FileHandle => ({
    writeThrough,
    writev: (chunks, position) => handle.writev(chunks, position),
    read: (into, position) => handle.read(into, position),
    datasync: async () => undefined,
    truncate: (length) => handle.truncate(length),
    size: () => handle.size(),
    close: () => handle.close(),
  });
  return {
    mkdirp: (path) => fs.mkdirp(path),
    list: (path) => fs.list(path),
    open: async (path, mode, options) => lying(await fs.open(path, mode), options?.writeThrough === true && mode !== 'read'),
    readFile: (path) => fs.readFile(path),
    rename: (from, to) => fs.rename(from, to),
    unlink: (path) => fs.unlink(path),
    syncDir: (path) => fs.syncDir(path),
    lockDir: (path) => fs.lockDir(path),
  };
}
