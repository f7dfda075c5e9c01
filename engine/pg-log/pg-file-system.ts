// The file system of one partition's engine in cluster mode (engine/fs/file-system.ts), its
// files kept in PostgreSQL (fermata_checkpoint_files, docs/format/cluster-schema.md "How files
// are stored"), so that whichever node takes the partition over reads the checkpoint its last
// owner wrote, with no other node's disk. The engine is opened with `dataDir: cacheDir`; its log
// is PgLog, so what goes through here is the spill directory: run files, key sidecars,
// MANIFEST.tmp and MANIFEST. Driven from the main thread's event loop; the pool is the node's.
//
// Contract, on top of FileSystem's:
// - A file is its rows (partition, name = its path relative to cacheDir, chunk 0, 1, …), each
//   chunk chunkBytes but the last; chunk 0 is always there, so an empty file has its name.
//   Directories are not stored: a directory is there while a file under it is.
// - cacheDir holds a copy of each file this instance created or read; reads and writes go to
//   it. It is emptied at open: a copy left by an earlier tenure may be stale (another owner may
//   have written the same name since), so every local file is what this instance made of it.
//   A name missing locally is fetched from the database at its first open or readFile.
// - Durable at once, each in one transaction: create (the empty file's row), rename (the
//   target's rows gone and the source's renamed: the manifest's rename over MANIFEST is the
//   commit point of a checkpoint), unlink. datasync stores again the chunks from the first one
//   written since the last datasync to the file's end (by binary COPY), and drops those past
//   it. syncDir has nothing left to do; mkdirp is local.
// - Every transaction that writes is fenced by the partition's epoch as PgLog's appends are:
//   SELECT epoch … FOR SHARE after its writes, before COMMIT (fence.ts: a takeover's UPDATE
//   waits for it; one committed before it is seen, and the transaction rolls back). Last, so
//   the row is held for the COMMIT only, not while megabytes upload: a lease renewal, which
//   updates the row, is not held up behind an upload. Another epoch → LOG_FENCED, and the file
//   system refuses every later write with it, so a deposed owner can never overwrite the new
//   owner's manifest. lockDir is that check, not a file lock.
// - The database failing or out of reach: EIO (the cause attached), nothing of the
//   transaction landed; a datasync can be tried again.
// Transactions (and fetches) run one at a time, so an upload, a rename and a fetch of the same
// name never interleave.
import { constants, promises as fsp } from 'node:fs';
import { dirname, isAbsolute, join, posix, relative, resolve, sep } from 'node:path';
import postgres, { type Sql, type TransactionSql } from 'postgres';
import { errorCodes, FermataError, systemErrorCode } from '../errors.ts';
import type { DirLock, FileHandle, FileSystem, OpenMode } from '../fs/file-system.ts';
import { nodeFileSystem } from '../fs/node-file-system.ts';
import { fenceIdleMsDefault, readFence } from './fence.ts';
import { chunkRowHead, copyHead, copyTrailer } from './pg-file-copy.ts';

export interface PartitionFileSystemOptions {
  /** The node's pool on the cluster database. */
  readonly sql: Sql;
  readonly partition: number;
  /** The epoch this node owns the partition at: every write is fenced by it. */
  readonly epoch: number;
  /** The local cache, the engine's dataDir; emptied at open (it must be absent, empty, or a cache this function made). */
  readonly cacheDir: string;
  /** How long a transaction's session may sit idle holding the partition's row (fence.ts): the lease TTL; fenceIdleMsDefault if not given. */
  readonly fenceIdleMsMax?: number | undefined;
}

/** Bytes of one chunk row: a run of tens of MiB is tens of rows, each within PostgreSQL's comfortable bytea size. */
export const chunkBytes = 1024 * 1024;

/** The file that marks cacheDir as this file system's to empty. */
export const cacheMarkerName = '.fermata-partition-cache';

/** An errno-style error, worded as node:fs words its own: "CODE: what, op 'path'". */
export class PgFileSystemError extends Error {
  readonly code: string;

  constructor(code: string, what: string, op: string, path: string, cause?: unknown) {
    super(`${code}: ${what}, ${op} '${path}'`, cause === undefined ? undefined : { cause });
    this.code = code;
  }
}

function reasonOf(err: unknown): string {
  if (err instanceof postgres.PostgresError) return `${err.code} ${err.message}`;
  if (err instanceof Error) return 'code' in err && typeof err.code === 'string' ? `${err.code} ${err.message}` : err.message;
  return String(err);
}

/** One file as this instance knows it, shared by its handles (an inode): its current name and what was written since its last upload. */
class CachedFile {
  name: string;
  /** The first byte written and not yet uploaded; Infinity when nothing is. */
  dirtyFrom = Number.POSITIVE_INFINITY;
  /** Its name was unlinked or renamed over: its handles still work, and nothing of it is uploaded. */
  unlinked = false;

  constructor(name: string) {
    this.name = name;
  }

  markDirty(from: number, to: number): void {
    if (to > from) this.dirtyFrom = Math.min(this.dirtyFrom, from);
  }
}

/** The database's answer that the epoch moved on. */
class Fenced extends Error {}

class PgFileHandle implements FileHandle {
  readonly writeThrough = false;
  readonly #fs: PgFileSystem;
  readonly #local: FileHandle;
  readonly #file: CachedFile;

  constructor(fs: PgFileSystem, local: FileHandle, file: CachedFile) {
    this.#fs = fs;
    this.#local = local;
    this.#file = file;
  }

  async writev(chunks: readonly Uint8Array[], position: number): Promise<void> {
    this.#fs.refuseIfFenced();
    let bytes = 0;
    for (const chunk of chunks) bytes += chunk.length;
    await this.#local.writev(chunks, position);
    this.#file.markDirty(position, position + bytes);
  }

  read(into: Uint8Array, position: number): Promise<number> {
    return this.#local.read(into, position);
  }

  async datasync(): Promise<void> {
    // The local size first: a closed handle answers EBADF here, as a disk's would.
    await this.#local.size();
    await this.#fs.upload(this.#file, this.#local);
  }

  async truncate(length: number): Promise<void> {
    this.#fs.refuseIfFenced();
    const before = await this.#local.size();
    await this.#local.truncate(length);
    this.#file.markDirty(Math.min(before, length), Math.max(before, length));
  }

  size(): Promise<number> {
    return this.#local.size();
  }

  close(): Promise<void> {
    return this.#local.close();
  }
}

class PgFileSystem implements FileSystem {
  readonly #sql: Sql;
  readonly #partition: number;
  readonly #epoch: number;
  readonly #cacheDir: string;
  readonly #fenceIdleMs: number;
  /** Files present in the cache, by name. A name absent here is absent locally (the cache starts empty). */
  readonly #cached = new Map<string, CachedFile>();
  #fencedBy: FermataError | undefined;
  /** The transaction or fetch under way: the next waits for it. */
  #chain: Promise<unknown> = Promise.resolve();

  constructor(options: PartitionFileSystemOptions, cacheDir: string) {
    this.#sql = options.sql;
    this.#partition = options.partition;
    this.#epoch = options.epoch;
    this.#cacheDir = cacheDir;
    this.#fenceIdleMs = options.fenceIdleMsMax ?? fenceIdleMsDefault;
  }

  refuseIfFenced(): void {
    if (this.#fencedBy !== undefined) throw this.#fencedBy;
  }

  async mkdirp(dir: string): Promise<void> {
    this.#within('mkdir', dir);
    await fsp.mkdir(dir, { recursive: true });
  }

  async list(dir: string): Promise<string[]> {
    const relativeDir = this.#within('scandir', dir);
    // Every stored file's directory is made locally at open and by mkdirp or a fetch after, so
    // the local directory answers ENOENT and ENOTDIR; the database adds names not fetched yet.
    const names = new Set(await fsp.readdir(dir));
    if (relativeDir === '') names.delete(cacheMarkerName);
    const prefix = relativeDir === '' ? '' : `${relativeDir}/`;
    const rows = await this.#sql<{ name: string }[]>`
      SELECT name FROM fermata_checkpoint_files
      WHERE partition = ${this.#partition} AND chunk = 0 AND starts_with(name, ${prefix}) AND strpos(substr(name, ${prefix.length + 1}), '/') = 0`.catch((err: unknown) => {
      throw this.#ioError('scandir', dir, err);
    });
    for (const row of rows) names.add(row.name.slice(prefix.length));
    return [...names];
  }

  async open(path: string, mode: OpenMode): Promise<FileHandle> {
    const name = this.#fileName('open', path);
    if (mode === 'create') return this.#create(name, path);
    await this.#fetchIfMissing(name, path);
    const local = await nodeFileSystem.open(path, mode);
    const file = this.#cached.get(name);
    if (file === undefined) {
      await local.close();
      throw new PgFileSystemError('EISDIR', 'not a file', 'open', path);
    }
    return new PgFileHandle(this, local, file);
  }

  async readFile(path: string): Promise<Uint8Array> {
    await this.#fetchIfMissing(this.#fileName('open', path), path);
    return nodeFileSystem.readFile(path);
  }

  async rename(from: string, to: string): Promise<void> {
    const fromName = this.#fileName('rename', from);
    const toName = this.#fileName('rename', to);
    this.refuseIfFenced();
    return this.#serially(async () => {
      const target = await fsp.stat(to).catch(() => undefined);
      if (target?.isDirectory() === true) throw new PgFileSystemError('EISDIR', 'illegal operation on a directory', 'rename', `${from}' -> '${to}`);
      await this.#fencedTransaction('rename', from, async (tx) => {
        // The target's rows go first (a rename over itself keeps them); none moved: no such source, and the rollback keeps the target.
        if (fromName !== toName) await tx`DELETE FROM fermata_checkpoint_files WHERE partition = ${this.#partition} AND name = ${toName}`;
        const moved = await tx`UPDATE fermata_checkpoint_files SET name = ${toName} WHERE partition = ${this.#partition} AND name = ${fromName} RETURNING chunk`;
        if (moved.length === 0) throw new PgFileSystemError('ENOENT', 'no such file or directory', 'rename', `${from}' -> '${to}`);
      });
      if (fromName === toName) return;
      const moving = this.#cached.get(fromName);
      const replaced = this.#cached.get(toName);
      if (replaced !== undefined) {
        replaced.unlinked = true;
        this.#cached.delete(toName);
      }
      if (moving !== undefined) {
        await fsp.mkdir(dirname(to), { recursive: true });
        await fsp.rename(from, to);
        this.#cached.delete(fromName);
        moving.name = toName;
        this.#cached.set(toName, moving);
      } else if (replaced !== undefined) {
        await fsp.rm(to, { force: true });
      }
    });
  }

  async unlink(path: string): Promise<void> {
    const name = this.#fileName('unlink', path);
    this.refuseIfFenced();
    return this.#serially(async () => {
      const deleted = await this.#fencedTransaction('unlink', path, (tx) => tx`DELETE FROM fermata_checkpoint_files WHERE partition = ${this.#partition} AND name = ${name} RETURNING chunk`);
      // Not stored: the local file system says why (ENOENT, or a directory's EISDIR).
      if (deleted.length === 0) return fsp.unlink(path);
      const file = this.#cached.get(name);
      if (file !== undefined) {
        file.unlinked = true;
        this.#cached.delete(name);
        await fsp.rm(path, { force: true });
      }
    });
  }

  async syncDir(dir: string): Promise<void> {
    this.#within('fsync', dir);
    this.refuseIfFenced();
    // Every name change was committed when it was made; the directory must still be there.
    if (!(await fsp.stat(dir)).isDirectory()) throw new PgFileSystemError('ENOTDIR', 'not a directory', 'fsync', dir);
  }

  async lockDir(dir: string): Promise<DirLock> {
    this.#within('lock', dir);
    this.refuseIfFenced();
    await this.#serially(() => this.#fencedTransaction('lock', dir, async () => undefined));
    return { release: async () => undefined };
  }

  /** A datasync: the chunks of `file` written since its last upload, its rows past the end dropped. */
  async upload(file: CachedFile, local: FileHandle): Promise<void> {
    this.refuseIfFenced();
    return this.#serially(async () => {
      if (file.unlinked || file.dirtyFrom === Number.POSITIVE_INFINITY) return;
      const { dirtyFrom, name } = file;
      file.dirtyFrom = Number.POSITIVE_INFINITY;
      try {
        const size = await local.size();
        // Chunks from the first one written to the file's end are stored again (the engine
        // appends, so that is what was written); those past the end go. Chunk 0 always stays.
        const end = Math.max(1, Math.ceil(size / chunkBytes));
        const first = Math.min(Math.floor(dirtyFrom / chunkBytes), end - 1);
        await this.#fencedTransaction('fdatasync', name, async (tx) => {
          await tx`DELETE FROM fermata_checkpoint_files WHERE partition = ${this.#partition} AND name = ${name} AND chunk >= ${first}`;
          await this.#copyChunks(tx, name, local, first, end, size);
        });
      } catch (err) {
        file.dirtyFrom = Math.min(file.dirtyFrom, dirtyFrom);
        throw err;
      }
    });
  }

  /**
   * Chunks first … end − 1 of the local file, by binary COPY (pg-file-copy.ts), read one at a
   * time as the stream drains. Whether the server took them, the statement after the COPY in
   * the same transaction tells (the fence): it answers nothing to a refused COPY's stream.
   */
  async #copyChunks(tx: TransactionSql, name: string, local: FileHandle, first: number, end: number, size: number): Promise<void> {
    const copy = await tx`COPY fermata_checkpoint_files (partition, name, chunk, body) FROM STDIN WITH (FORMAT binary)`.writable();
    // A stream error is the connection's, and the next statement meets it.
    copy.on('error', () => undefined);
    const nameBytes = Buffer.from(name);
    // Waits while the stream holds more than its high-water mark; a lost connection ends the wait too (its close).
    const write = (bytes: Uint8Array): Promise<void> | undefined => {
      if (copy.destroyed) throw new Error('the COPY stream was closed');
      if (copy.write(bytes)) return undefined;
      return new Promise((resolve) => {
        const done = (): void => {
          copy.off('drain', done);
          copy.off('close', done);
          resolve();
        };
        copy.on('drain', done);
        copy.on('close', done);
      });
    };
    await write(copyHead);
    for (let chunk = first; chunk < end; chunk++) {
      const body = await readChunk(local, chunk, size);
      await write(chunkRowHead(this.#partition, nameBytes, chunk, body.length));
      await write(body);
    }
    await write(copyTrailer);
    // The client takes the next statement once the stream's end is handed to it, a tick after end().
    copy.end();
    await new Promise((resolve) => setImmediate(resolve));
  }

  async #create(name: string, path: string): Promise<FileHandle> {
    this.refuseIfFenced();
    // The local create first: it answers ENOENT for a missing directory; the database answers EEXIST for a stored name.
    const local = await nodeFileSystem.open(path, 'create');
    try {
      await this.#serially(() =>
        this.#fencedTransaction('open', path, async (tx) => {
          const inserted = await tx`
            INSERT INTO fermata_checkpoint_files (partition, name, chunk, body) VALUES (${this.#partition}, ${name}, 0, ${emptyBody})
            ON CONFLICT DO NOTHING RETURNING chunk`;
          if (inserted.length === 0) throw new PgFileSystemError('EEXIST', 'file already exists', 'open', path);
        }),
      );
    } catch (err) {
      await local.close();
      await fsp.rm(path, { force: true });
      throw err;
    }
    const file = new CachedFile(name);
    this.#cached.set(name, file);
    return new PgFileHandle(this, local, file);
  }

  /** Copies a stored file missing from the cache into it; a name not stored is left to the local file system to refuse. */
  async #fetchIfMissing(name: string, path: string): Promise<void> {
    if (this.#cached.has(name)) return;
    await this.#serially(async () => {
      if (this.#cached.has(name)) return;
      try {
        if (await this.#fetch(name, path)) this.#cached.set(name, new CachedFile(name));
      } catch (err) {
        await fsp.rm(path, { force: true }).catch(() => undefined);
        throw err instanceof PgFileSystemError ? err : this.#ioError('open', path, err);
      }
    });
  }

  /** Writes the stored chunks of `name` to `path`, checking they run 0, 1, 2, … each full but the last. False: not stored. */
  async #fetch(name: string, path: string): Promise<boolean> {
    let handle: fsp.FileHandle | undefined;
    let expected = 0;
    let lastShort = false;
    try {
      const cursor = this.#sql<{ chunk: number; body: Buffer }[]>`
        SELECT chunk, body FROM fermata_checkpoint_files WHERE partition = ${this.#partition} AND name = ${name} ORDER BY chunk`.cursor(4);
      for await (const rows of cursor) {
        for (const { chunk, body } of rows) {
          if (chunk !== expected || lastShort) throw new PgFileSystemError('EIO', `stored chunk ${chunk} where ${lastShort ? 'the file had ended' : `${expected} was due`}`, 'open', path);
          if (handle === undefined) {
            await fsp.mkdir(dirname(path), { recursive: true });
            handle = await fsp.open(path, constants.O_WRONLY | constants.O_CREAT | constants.O_TRUNC, 0o644);
          }
          await handle.write(body, 0, body.length, chunk * chunkBytes);
          lastShort = body.length < chunkBytes;
          expected++;
        }
      }
    } finally {
      await handle?.close();
    }
    return expected > 0;
  }

  /** Runs `work` after the transaction or fetch before it has ended. */
  #serially<T>(work: () => Promise<T>): Promise<T> {
    const run = this.#chain.then(work, work);
    this.#chain = run.catch(() => undefined);
    return run;
  }

  async #fencedTransaction<T>(op: string, path: string, work: (tx: TransactionSql) => Promise<T>): Promise<T> {
    this.refuseIfFenced();
    try {
      return (await this.#sql.begin(async (tx) => {
        const result = await work(tx);
        const epoch = await readFence(tx, this.#partition, this.#fenceIdleMs);
        if (epoch !== this.#epoch) throw new Fenced(epoch === undefined ? 'no such partition' : `epoch ${epoch}`);
        return result;
      })) as T;
    } catch (err) {
      if (err instanceof Fenced) {
        this.#fencedBy ??= new FermataError(
          errorCodes.logFenced,
          `partition ${this.#partition} was taken over (${err.message}): its files are no longer this owner's (epoch ${this.#epoch})`,
          { partition: this.#partition, epoch: this.#epoch },
        );
        throw this.#fencedBy;
      }
      if (err instanceof PgFileSystemError) throw err;
      throw this.#ioError(op, path, err);
    }
  }

  #ioError(op: string, path: string, err: unknown): PgFileSystemError {
    return new PgFileSystemError('EIO', `the cluster database failed (${reasonOf(err)}); nothing was changed`, op, path, err);
  }

  /** `path` relative to the cache directory, '/'-separated ('' for the directory itself); EINVAL outside it. */
  #within(op: string, path: string): string {
    const inside = relative(this.#cacheDir, resolve(path));
    if (inside.startsWith('..') || isAbsolute(inside)) throw new PgFileSystemError('EINVAL', `outside the partition's cache directory ${this.#cacheDir}`, op, path);
    return inside.split(sep).join(posix.sep);
  }

  /** A file's name in the database: its path relative to the cache directory. */
  #fileName(op: string, path: string): string {
    const name = this.#within(op, path);
    if (name === '' || name === cacheMarkerName) throw new PgFileSystemError('EISDIR', 'illegal operation on a directory', op, path);
    return name;
  }
}

const emptyBody = new Uint8Array(0);

/** Bytes [chunk × chunkBytes, …) of the local file, at most chunkBytes, ending at `size`. */
async function readChunk(local: FileHandle, chunk: number, size: number): Promise<Buffer> {
  const start = chunk * chunkBytes;
  const body = Buffer.allocUnsafe(Math.max(0, Math.min(chunkBytes, size - start)));
  let done = 0;
  while (done < body.length) {
    const read = await local.read(body.subarray(done), start + done);
    if (read === 0) return body.subarray(0, done);
    done += read;
  }
  return body;
}

/** Empties `dir` for a new tenure, refusing a non-empty directory this file system did not make. */
async function emptyCache(dir: string): Promise<void> {
  let entries: string[];
  try {
    entries = await fsp.readdir(dir);
  } catch (err) {
    if (systemErrorCode(err) !== 'ENOENT') throw err;
    entries = [];
  }
  if (entries.length > 0 && !entries.includes(cacheMarkerName)) {
    throw new PgFileSystemError('ENOTEMPTY', `holds files and no ${cacheMarkerName}: not a partition cache, refusing to empty it`, 'open', dir);
  }
  for (const entry of entries) if (entry !== cacheMarkerName) await fsp.rm(join(dir, entry), { recursive: true, force: true });
  await fsp.mkdir(dir, { recursive: true });
  await fsp.writeFile(join(dir, cacheMarkerName), '');
}

/**
 * The file system of partition `partition`'s engine as its owner at `epoch`: checks the
 * partition is at that epoch (LOG_FENCED otherwise), empties the cache directory, and makes in
 * it the directories of the stored files.
 */
export async function openPartitionFileSystem(options: PartitionFileSystemOptions): Promise<FileSystem> {
  const { sql, partition, epoch } = options;
  const cacheDir = resolve(options.cacheDir);
  const [row] = await sql<{ epoch: string }[]>`SELECT epoch FROM fermata_partitions WHERE partition = ${partition}`;
  if (row === undefined) throw new FermataError(errorCodes.walCorrupt, `the cluster has no partition ${partition}`, { partition });
  if (Number(row.epoch) !== epoch) throw new FermataError(errorCodes.logFenced, `partition ${partition} is at epoch ${row.epoch}, not this owner's ${epoch}`, { partition, epoch });
  await emptyCache(cacheDir);
  const names = await sql<{ name: string }[]>`SELECT name FROM fermata_checkpoint_files WHERE partition = ${partition} AND chunk = 0`;
  const dirs = new Set(names.map((stored) => posix.dirname(stored.name)));
  for (const dir of dirs) await fsp.mkdir(join(cacheDir, ...dir.split(posix.sep)), { recursive: true });
  return new PgFileSystem(options, cacheDir);
}
