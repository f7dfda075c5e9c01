// The seam between fermata's storage code and the disk. The WAL (and later the spill files
// and checkpoints) reach the disk only through this interface, so tests can swap in the
// simulated file system (test/sim/sim-file-system.ts) that forgets unsynced writes and
// directory entries at a simulated power loss.
//
// Contract, shared by every implementation:
// - `writev` writes every byte of every chunk at `position` or throws; nothing is durable
//   until `datasync` resolves, except on a handle whose `writeThrough` is true (opened with
//   `{ writeThrough: true }` where the platform can: O_DSYNC on Linux), where each `writev`
//   that resolves is durable as if a `datasync` had followed it, and one that fails may have
//   reached the disk in part.
// - A created, renamed or unlinked name is durable only after `syncDir` of its directory.
// - Errors carry an errno-style `code` (ENOENT, EEXIST, ENOSPC, EIO, …).

export type OpenMode =
  /** Create a new file; fails with EEXIST if the name exists. Read and write. */
  | 'create'
  /** Open an existing file for reading and writing; fails with ENOENT if absent. */
  | 'readwrite'
  /** Open an existing file read-only. */
  | 'read';

export interface OpenOptions {
  /**
   * Ask for write-through: each write durable when it returns (O_DSYNC), one system call where
   * a write and an fdatasync take two. The handle's `writeThrough` says whether it was given.
   */
  readonly writeThrough?: boolean;
}

export interface FileHandle {
  /** Each `writev` that resolves is durable (see the contract above); false: only `datasync` makes writes durable. */
  readonly writeThrough: boolean;
  writev(chunks: readonly Uint8Array[], position: number): Promise<void>;
  /** Reads up to `into.length` bytes at `position`; returns how many were read (0 at the end). */
  read(into: Uint8Array, position: number): Promise<number>;
  datasync(): Promise<void>;
  truncate(length: number): Promise<void>;
  size(): Promise<number>;
  close(): Promise<void>;
}

/** Held while a process owns a directory; released by `release` or by the process's death. */
export interface DirLock {
  release(): Promise<void>;
}

export interface FileSystem {
  /** Creates the directory and its parents if missing (and syncs each parent it created). */
  mkdirp(dir: string): Promise<void>;
  /** Names in the directory, unsorted. */
  list(dir: string): Promise<string[]>;
  open(path: string, mode: OpenMode, options?: OpenOptions): Promise<FileHandle>;
  readFile(path: string): Promise<Uint8Array>;
  rename(from: string, to: string): Promise<void>;
  unlink(path: string): Promise<void>;
  syncDir(dir: string): Promise<void>;
  /** Exclusive ownership of `dir` across processes; rejects with DATA_DIR_LOCKED when held. */
  lockDir(dir: string): Promise<DirLock>;
}
