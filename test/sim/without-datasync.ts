// The canaries' broken disk: the simulated file system wrapped so that fdatasync returns at
// once and makes nothing durable. A simulation that cannot catch the acknowledgements this
// loses at a power loss proves nothing about fsync placement.
import type { FileHandle, FileSystem } from '../../engine/fs/file-system.ts';
import type { SimFileSystem } from './sim-file-system.ts';

export function withoutDatasync(fs: SimFileSystem): FileSystem {
  const lying = (handle: FileHandle): FileHandle => ({
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
    open: async (path, mode) => lying(await fs.open(path, mode)),
    readFile: (path) => fs.readFile(path),
    rename: (from, to) => fs.rename(from, to),
    unlink: (path) => fs.unlink(path),
    syncDir: (path) => fs.syncDir(path),
    lockDir: (path) => fs.lockDir(path),
  };
}
