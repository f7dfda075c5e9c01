// The real file system behind the FileSystem seam: node:fs/promises, one libuv request per
// call. Directory fsync opens the directory read-only and fsyncs it, which is how Linux makes
// a create, rename or unlink durable. A write-through handle is opened O_DSYNC: each write
// returns once its data (and the size that reaches it) is on stable storage.
import { constants, promises as fsp } from 'node:fs';
import { dirname } from 'node:path';
import type { DirLock, FileHandle, FileSystem, OpenMode, OpenOptions } from './file-system.ts';
import { acquirePidLock } from './pid-lock.ts';

const openFlags: Record<OpenMode, number> = {
  create: constants.O_RDWR | constants.O_CREAT | constants.O_EXCL,
  readwrite: constants.O_RDWR,
  read: constants.O_RDONLY,
};

/**
 * O_DSYNC, on Linux only: there a write returns once durable, as write + fdatasync would (both
 * flush the device's cache). On macOS libuv's fdatasync is F_FULLFSYNC, which O_DSYNC does not
 * match, and Windows has no O_DSYNC: elsewhere handles are never write-through.
 */
const writeThroughFlag: number | undefined = process.platform === 'linux' ? constants.O_DSYNC : undefined;

class NodeFileHandle implements FileHandle {
  readonly #handle: fsp.FileHandle;
  readonly writeThrough: boolean;

  constructor(handle: fsp.FileHandle, writeThrough: boolean) {
    this.#handle = handle;
    this.writeThrough = writeThrough;
  }

  async writev(chunks: readonly Uint8Array[], position: number): Promise<void> {
    let expected = 0;
    for (const chunk of chunks) expected += chunk.length;
    // libuv loops over short writes and IOV_MAX itself; a short count here means it stopped,
    // and the kernel tells why only to the next write: write the rest, so that a full disk
    // fails with its own ENOSPC (a 507 for the client) rather than a bare short count.
    const { bytesWritten } = await this.#handle.writev(chunks as Uint8Array[], position);
    if (bytesWritten === expected) return;
    const rest = Buffer.concat(chunks).subarray(bytesWritten);
    let done = 0;
    while (done < rest.length) {
      const { bytesWritten: more } = await this.#handle.write(rest, done, rest.length - done, position + bytesWritten + done);
      if (more === 0) throw Object.assign(new Error(`short write: ${bytesWritten + done} of ${expected} bytes`), { code: 'EIO' });
      done += more;
    }
  }

  async read(into: Uint8Array, position: number): Promise<number> {
    const { bytesRead } = await this.#handle.read(into, 0, into.length, position);
    return bytesRead;
  }

  datasync(): Promise<void> {
    return this.#handle.datasync();
  }

  truncate(length: number): Promise<void> {
    return this.#handle.truncate(length);
  }

  async size(): Promise<number> {
    return (await this.#handle.stat()).size;
  }

  close(): Promise<void> {
    return this.#handle.close();
  }
}

async function syncDir(dir: string): Promise<void> {
  const handle = await fsp.open(dir, constants.O_RDONLY | constants.O_DIRECTORY);
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

async function mkdirp(dir: string): Promise<void> {
  const first = await fsp.mkdir(dir, { recursive: true });
  if (first === undefined) return;
  // Every directory from the first one created upwards needs its parent synced.
  for (let created = dir; ; created = dirname(created)) {
    await syncDir(dirname(created));
    if (created === first) break;
  }
}

export const nodeFileSystem: FileSystem = {
  mkdirp,
  list: (dir) => fsp.readdir(dir),
  open: async (path: string, mode: OpenMode, options: OpenOptions = {}) => {
    const writeThrough = options.writeThrough === true && mode !== 'read' && writeThroughFlag !== undefined;
    const flags = writeThrough ? openFlags[mode] | (writeThroughFlag as number) : openFlags[mode];
    return new NodeFileHandle(await fsp.open(path, flags, 0o644), writeThrough);
  },
  readFile: async (path) => {
    const buffer = await fsp.readFile(path);
    return new Uint8Array(buffer.buffer, buffer.byteOffset, buffer.byteLength);
  },
  rename: (from, to) => fsp.rename(from, to),
  unlink: (path) => fsp.unlink(path),
  syncDir,
  lockDir: (dir): Promise<DirLock> => acquirePidLock(dir, syncDir),
};
