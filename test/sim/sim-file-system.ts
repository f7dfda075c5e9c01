// SimFileSystem: an in-memory FileSystem that can lose power, to prove where fermata fsyncs.
//
// Contract (beyond engine/fs/file-system.ts):
// - Every file and directory has a CURRENT view (what reads, list and readFile see) and a
//   DURABLE view (what survives a power loss for sure). Writes and truncates stay pending on
//   the file until its `datasync`; create, rename and unlink stay pending until `syncDir` of
//   every directory they touch. `mkdirp` is durable at once (the real one syncs each parent it
//   creates, so the sim syncs that parent too); directories are never renamed or unlinked.
// - A write through a write-through handle (O_DSYNC) lands pending, then a sync of that write
//   runs inside the `writev`, as its own `datasync` op: a power loss in between may find the
//   write pending, torn or lost, and a fault armed on `datasync` fails the `writev` with the
//   write landed. Like O_DSYNC the sync covers only the write's own bytes (and the file length
//   reaching them): another write still in flight on the file stays pending, so it can be lost
//   or torn after this one returned. When that would be unsound (another pending write overlaps
//   this one, which could land over it, or a truncate is pending) it syncs the whole file, which
//   O_DSYNC allows. A zero-length write syncs nothing.
// - `powerLoss()` kills this instance (every later call, and every call still in flight,
//   rejects with EIO and changes nothing) and returns a new one holding a possible post-crash
//   image: a random subset of the pending operations, with writes torn at sector boundaries
//   and their sectors applied in a random order (a truncate keeps its place among them).
// - All randomness (crash images, the microtask hops each call takes, `list` order) comes
//   from one seeded PRNG, so a seed and a sequence of calls reproduce a run exactly.
// - Single-threaded: every call mutates state in one synchronous step after its hops, so a
//   call is atomic with respect to every other.
//
//   Dir ──current──▶ name → Inode | Dir        Inode ── current bytes (durable + pending applied)
//       ──durable──▶ name → Inode | Dir              ── durable bytes
//   pendingDirOps: [edits…] in call order             ── pending: [write | truncate] in call order
import assert from 'node:assert/strict';
import { posix } from 'node:path';
import { errorCodes, FermataError } from '../../engine/errors.ts';
import type { DirLock, FileHandle, FileSystem, OpenMode, OpenOptions } from '../../engine/fs/file-system.ts';
import { Prng } from '../helpers/prng.ts';

export type SimOp =
  | 'open'
  | 'writev'
  | 'read'
  | 'datasync'
  | 'truncate'
  | 'size'
  | 'close'
  | 'rename'
  | 'unlink'
  | 'syncDir'
  | 'list'
  | 'readFile'
  | 'mkdirp'
  | 'lockDir'
  | 'release';

/**
 * Returns an errno code (`'EIO'`, `'ENOSPC'`, …) to make the call fail, or undefined to let it
 * run. `path` is the normalised path the call names: the handle's path for handle calls, the
 * source for `rename`.
 */
export type SimFaultFn = (op: SimOp, path: string) => string | undefined;

/**
 * What happens to pending operations at a power loss: `random` keeps, tears and reorders a
 * random subset; `keep-none` and `keep-all` are the two extremes, for exhaustive tests.
 */
export type PowerLossMode = 'random' | 'keep-none' | 'keep-all';

export interface SimFileSystemOptions {
  readonly seed: number;
  /** The unit a write can be torn into at a power loss; default 512. */
  readonly sectorBytes?: number;
  /** Each call takes 1 + up to this many microtask hops (from the PRNG); default 3. */
  readonly maxExtraHops?: number;
  /**
   * Whether `open` gives write-through handles when asked (default true), as Linux does; false
   * is a platform without O_DSYNC, whose callers must datasync (tests of that path).
   */
  readonly writeThrough?: boolean;
}

/** A file-system error shaped like Node's: an errno `code`, the `syscall` and the `path`. */
export class SimFsError extends Error {
  readonly code: string;
  readonly syscall: SimOp | 'powerLoss' | 'corrupt' | 'durableBytes';
  readonly path: string;

  constructor(code: string, syscall: SimFsError['syscall'], path: string, why: string) {
    super(`${code}: ${why}, ${syscall} '${path}'`);
    this.name = 'SimFsError';
    this.code = code;
    this.syscall = syscall;
    this.path = path;
  }
}

export class SimFileSystem implements FileSystem {
  readonly #gate: OpGate;
  readonly #sectorBytes: number;
  readonly #maxExtraHops: number;
  readonly #writeThrough: boolean;
  #root = new Dir();
  /** Directory operations not yet durable, in call order. */
  #pendingDirOps: DirOp[] = [];
  /** Directory path → the lock holding it. */
  readonly #locks = new Map<string, SimDirLock>();

  constructor(options: SimFileSystemOptions) {
    const sectorBytes = options.sectorBytes ?? 512;
    const maxExtraHops = options.maxExtraHops ?? 3;
    assert.ok(Number.isSafeInteger(sectorBytes) && sectorBytes > 0, 'sectorBytes must be a positive integer');
    assert.ok(Number.isSafeInteger(maxExtraHops) && maxExtraHops >= 0, 'maxExtraHops must be a non-negative integer');
    this.#sectorBytes = sectorBytes;
    this.#maxExtraHops = maxExtraHops;
    this.#writeThrough = options.writeThrough ?? true;
    this.#gate = new OpGate(new Prng(options.seed), maxExtraHops);
  }

  /** Calls started on this instance so far (including failed ones): a test picks a crash point from it. */
  get opCount(): number {
    return this.#gate.opCount;
  }

  /** Replaces the fault hook (undefined removes it); it is asked before every call. */
  setFault(fn: SimFaultFn | undefined): void {
    this.#gate.fault = fn;
  }

  /** Lets the next `count` calls of `op` run, then fails the one after with `code` (once). */
  failAfter(op: SimOp, count: number, code: string): void {
    assert.ok(Number.isSafeInteger(count) && count >= 0, 'count must be a non-negative integer');
    this.#gate.armed.push({ op, remaining: count, code });
  }

  async mkdirp(dir: string): Promise<void> {
    const path = normalize(dir);
    await this.#gate.begin('mkdirp', path);
    this.#gate.assertAlive('mkdirp', path);
    const names = components(path);
    let parent = this.#root;
    for (const [index, name] of names.entries()) {
      const entry = parent.current.get(name);
      if (entry instanceof Dir) {
        parent = entry;
        continue;
      }
      if (entry !== undefined) {
        const isLast = index === names.length - 1;
        throw new SimFsError(isLast ? 'EEXIST' : 'ENOTDIR', 'mkdirp', path, 'a file is in the way');
      }
      parent = this.#createDirDurably(parent, name);
    }
  }

  async list(dir: string): Promise<string[]> {
    const path = normalize(dir);
    await this.#gate.begin('list', path);
    const names = [...this.#dirAt(path, 'list').current.keys()];
    // The contract says unsorted; shuffling catches a caller that relies on creation order.
    this.#gate.prng.shuffle(names);
    return names;
  }

  async open(path: string, mode: OpenMode, options: OpenOptions = {}): Promise<FileHandle> {
    const file = normalize(path);
    const writeThrough = options.writeThrough === true && mode !== 'read' && this.#writeThrough;
    await this.#gate.begin('open', file);
    this.#gate.assertAlive('open', file);
    const { dir, name } = this.#parentOf(file, 'open');
    const entry = dir.current.get(name);
    if (mode === 'create') {
      if (entry !== undefined) throw new SimFsError('EEXIST', 'open', file, 'file already exists');
      const inode = new Inode(new GrowableBytes());
      this.#recordDirOp([{ dir, name, entry: inode }]);
      return new SimFileHandle(this.#gate, inode, file, true, writeThrough);
    }
    return new SimFileHandle(this.#gate, fileEntry(entry, 'open', file), file, mode === 'readwrite', writeThrough);
  }

  async readFile(path: string): Promise<Uint8Array> {
    const file = normalize(path);
    await this.#gate.begin('readFile', file);
    const { dir, name } = this.#parentOf(file, 'readFile');
    return fileEntry(dir.current.get(name), 'readFile', file).current.copy();
  }

  async rename(from: string, to: string): Promise<void> {
    const source = normalize(from);
    const target = normalize(to);
    await this.#gate.begin('rename', source);
    this.#gate.assertAlive('rename', source);
    const src = this.#parentOf(source, 'rename');
    const dst = this.#parentOf(target, 'rename');
    const inode = fileEntry(src.dir.current.get(src.name), 'rename', source);
    const replaced = dst.dir.current.get(dst.name);
    if (replaced instanceof Dir) throw new SimFsError('EISDIR', 'rename', target, 'target is a directory');
    // POSIX: renaming a file onto itself does nothing (there are no hard links here).
    if (replaced === inode) return;
    this.#recordDirOp([
      { dir: src.dir, name: src.name, entry: undefined },
      { dir: dst.dir, name: dst.name, entry: inode },
    ]);
  }

  async unlink(path: string): Promise<void> {
    const file = normalize(path);
    await this.#gate.begin('unlink', file);
    this.#gate.assertAlive('unlink', file);
    const { dir, name } = this.#parentOf(file, 'unlink');
    fileEntry(dir.current.get(name), 'unlink', file);
    this.#recordDirOp([{ dir, name, entry: undefined }]);
  }

  async syncDir(dir: string): Promise<void> {
    const path = normalize(dir);
    await this.#gate.begin('syncDir', path);
    this.#gate.assertAlive('syncDir', path);
    this.#commitDir(this.#dirAt(path, 'syncDir'), undefined);
  }

  /** In-process only: one holder per directory path within this instance (a new instance after a power loss holds none). */
  async lockDir(dir: string): Promise<DirLock> {
    const path = normalize(dir);
    await this.#gate.begin('lockDir', path);
    this.#dirAt(path, 'lockDir');
    if (this.#locks.has(path)) {
      throw new FermataError(errorCodes.dataDirLocked, `data directory ${path} is locked by another owner`, { file: path });
    }
    const lock = new SimDirLock(this.#gate, this.#locks, path);
    this.#locks.set(path, lock);
    return lock;
  }

  /**
   * Cuts the power: this instance and its handles are dead from now on, and the returned
   * instance holds a possible disk image (its current view equals its durable view).
   */
  powerLoss(options: { readonly mode?: PowerLossMode } = {}): SimFileSystem {
    const mode = options.mode ?? 'random';
    this.#gate.assertAlive('powerLoss', '/');
    this.#gate.kill();
    const prng = this.#gate.prng;
    const survivors = chooseSurvivingDirOps(this.#pendingDirOps, mode, prng);
    const next = new SimFileSystem({ seed: prng.uint32(), sectorBytes: this.#sectorBytes, maxExtraHops: this.#maxExtraHops });
    const images = new Map<Inode, Inode>();
    const imageOf = (inode: Inode): Inode => {
      let image = images.get(inode);
      if (image === undefined) {
        image = new Inode(crashImage(inode, mode, prng, this.#sectorBytes));
        images.set(inode, image);
      }
      return image;
    };
    next.#root = rebuildTree(this.#root, survivors, imageOf);
    return next;
  }

  /** Test helper (bit rot): overwrites bytes inside the file in both its current and durable views. */
  corrupt(path: string, offset: number, bytes: Uint8Array): void {
    const file = normalize(path);
    this.#gate.assertAlive('corrupt', file);
    const { dir, name } = this.#parentOf(file, 'corrupt');
    const inode = fileEntry(dir.current.get(name), 'corrupt', file);
    assert.ok(Number.isSafeInteger(offset) && offset >= 0, 'offset must be a non-negative integer');
    assert.ok(offset + bytes.length <= inode.current.length, 'bit rot cannot extend a file');
    inode.current.write(offset, bytes);
    // Rot only what is on disk: the durable view may be shorter than the current one.
    if (offset < inode.durable.length) inode.durable.write(offset, bytes.subarray(0, inode.durable.length - offset));
  }

  /** Test helper: the durable bytes of the file the durable directory entry names, or undefined. */
  durableBytes(path: string): Uint8Array | undefined {
    const file = normalize(path);
    this.#gate.assertAlive('durableBytes', file);
    let entry: Entry | undefined = this.#root;
    for (const name of components(file)) {
      entry = entry instanceof Dir ? entry.durable.get(name) : undefined;
    }
    return entry instanceof Inode ? entry.durable.copy() : undefined;
  }

  #createDirDurably(parent: Dir, name: string): Dir {
    // The real mkdirp syncs the parent; that also settles any pending operation on this name,
    // which must not land on top of the new directory at a later power loss.
    this.#commitDir(parent, name);
    const dir = new Dir();
    parent.current.set(name, dir);
    parent.durable.set(name, dir);
    return dir;
  }

  #recordDirOp(edits: readonly NameEdit[]): void {
    applyEdits(edits, (dir) => dir.current);
    this.#pendingDirOps.push({ edits, unsyncedDirs: new Set(edits.map((edit) => edit.dir)) });
  }

  /**
   * Makes durable every pending op whose directories have all been synced, or that touches
   * `alsoName` in `dir`, together with every earlier op on a name one of them touches (an op on
   * a name can only land after the ones before it on that name).
   */
  #commitDir(dir: Dir, alsoName: string | undefined): void {
    const forced = new NameSet();
    if (alsoName !== undefined) forced.add(dir, alsoName);
    const committing = new NameSet();
    const commit = new Set<DirOp>();
    for (let index = this.#pendingDirOps.length - 1; index >= 0; index--) {
      const op = this.#pendingDirOps[index];
      assert.ok(op !== undefined);
      op.unsyncedDirs.delete(dir);
      const touches = (names: NameSet): boolean => op.edits.some((edit) => names.has(edit.dir, edit.name));
      if (op.unsyncedDirs.size === 0 || touches(forced) || touches(committing)) {
        commit.add(op);
        for (const edit of op.edits) committing.add(edit.dir, edit.name);
      }
    }
    if (commit.size === 0) return;
    const stillPending: DirOp[] = [];
    for (const op of this.#pendingDirOps) {
      if (commit.has(op)) applyEdits(op.edits, (d) => d.durable);
      else stillPending.push(op);
    }
    this.#pendingDirOps = stillPending;
  }

  /** The directory at `path` in the current view. */
  #dirAt(path: string, op: SimOp): Dir {
    let dir = this.#root;
    for (const name of components(path)) {
      const entry = dir.current.get(name);
      if (entry === undefined) throw new SimFsError('ENOENT', op, path, 'no such directory');
      if (!(entry instanceof Dir)) throw new SimFsError('ENOTDIR', op, path, 'not a directory');
      dir = entry;
    }
    return dir;
  }

  /** The existing directory holding `path`, and the name `path` has in it. */
  #parentOf(path: string, op: SimFsError['syscall']): { dir: Dir; name: string } {
    const name = posix.basename(path);
    if (name === '') throw new SimFsError('EISDIR', op, path, 'is the root directory');
    let dir = this.#root;
    for (const part of components(posix.dirname(path))) {
      const entry = dir.current.get(part);
      if (entry === undefined) throw new SimFsError('ENOENT', op, path, 'no such directory');
      if (!(entry instanceof Dir)) throw new SimFsError('ENOTDIR', op, path, 'a path component is not a directory');
      dir = entry;
    }
    return { dir, name };
  }
}

// ---- the gate every call passes: liveness, fault injection, counting, asynchrony ----

interface ArmedFault {
  readonly op: SimOp;
  remaining: number;
  readonly code: string;
}

class OpGate {
  readonly prng: Prng;
  readonly #maxExtraHops: number;
  fault: SimFaultFn | undefined;
  readonly armed: ArmedFault[] = [];
  opCount = 0;
  #dead = false;

  constructor(prng: Prng, maxExtraHops: number) {
    this.prng = prng;
    this.#maxExtraHops = maxExtraHops;
  }

  /**
   * Resolves when the call may act. Its liveness check after the hops, and the caller's own
   * check right before it mutates anything (an await's continuation runs a microtask later, when
   * the power may already be out), keep a call in flight at a power loss from touching anything.
   */
  async begin(op: SimOp, path: string): Promise<void> {
    this.assertAlive(op, path);
    this.opCount++;
    const code = this.#faultFor(op, path);
    const hops = 1 + (this.#maxExtraHops === 0 ? 0 : this.prng.below(this.#maxExtraHops + 1));
    for (let hop = 0; hop < hops; hop++) await Promise.resolve();
    this.assertAlive(op, path);
    if (code !== undefined) throw new SimFsError(code, op, path, 'injected fault');
  }

  assertAlive(op: SimFsError['syscall'], path: string): void {
    if (this.#dead) throw new SimFsError('EIO', op, path, 'the simulated machine lost power');
  }

  kill(): void {
    this.#dead = true;
  }

  #faultFor(op: SimOp, path: string): string | undefined {
    let code: string | undefined;
    for (let index = 0; index < this.armed.length; index++) {
      const armed = this.armed[index];
      if (armed === undefined || armed.op !== op) continue;
      if (armed.remaining > 0) {
        armed.remaining--;
      } else if (code === undefined) {
        code = armed.code;
        this.armed.splice(index--, 1);
      }
    }
    return code ?? this.fault?.(op, path);
  }
}

// ---- files ----

class SimFileHandle implements FileHandle {
  readonly #gate: OpGate;
  readonly #inode: Inode;
  readonly #path: string;
  readonly #writable: boolean;
  readonly writeThrough: boolean;
  #closed = false;

  constructor(gate: OpGate, inode: Inode, path: string, writable: boolean, writeThrough: boolean) {
    this.#gate = gate;
    this.#inode = inode;
    this.#path = path;
    this.#writable = writable;
    this.writeThrough = writeThrough;
  }

  async writev(chunks: readonly Uint8Array[], position: number): Promise<void> {
    await this.#enter('writev', true);
    this.#gate.assertAlive('writev', this.#path);
    this.#checkOffset('writev', position);
    // Copied when the "syscall" runs, as the kernel would: a caller that changes its buffers
    // while the write is in flight gets what it deserves.
    const bytes = concat(chunks);
    const write: WriteOp | undefined = bytes.length > 0 ? { kind: 'write', position, bytes } : undefined;
    if (write !== undefined) this.#inode.record(write);
    if (!this.writeThrough) return;
    // Then its sync, as a 'datasync' call: hops (a power loss meanwhile finds the write pending,
    // and other calls may record writes after it), and a fault armed on 'datasync' fails it
    // here, the write landed (O_DSYNC's EIO).
    await this.#gate.begin('datasync', this.#path);
    this.#gate.assertAlive('datasync', this.#path);
    if (write !== undefined) this.#inode.syncWrite(write);
  }

  async read(into: Uint8Array, position: number): Promise<number> {
    await this.#enter('read', false);
    this.#checkOffset('read', position);
    return this.#inode.current.read(into, position);
  }

  async datasync(): Promise<void> {
    await this.#enter('datasync', false);
    this.#gate.assertAlive('datasync', this.#path);
    this.#inode.datasync();
  }

  async truncate(length: number): Promise<void> {
    await this.#enter('truncate', true);
    this.#gate.assertAlive('truncate', this.#path);
    this.#checkOffset('truncate', length);
    this.#inode.record({ kind: 'truncate', length });
  }

  async size(): Promise<number> {
    await this.#enter('size', false);
    return this.#inode.current.length;
  }

  async close(): Promise<void> {
    await this.#enter('close', false);
    this.#closed = true;
  }

  async #enter(op: SimOp, writes: boolean): Promise<void> {
    await this.#gate.begin(op, this.#path);
    if (this.#closed) throw new SimFsError('EBADF', op, this.#path, 'the handle is closed');
    if (writes && !this.#writable) throw new SimFsError('EBADF', op, this.#path, 'the handle is read-only');
  }

  #checkOffset(op: SimOp, value: number): void {
    if (!Number.isSafeInteger(value) || value < 0) {
      throw new SimFsError('EINVAL', op, this.#path, `${value} is not a valid offset or length`);
    }
  }
}

interface WriteOp {
  readonly kind: 'write';
  readonly position: number;
  readonly bytes: Uint8Array;
}

type DataOp = WriteOp | { readonly kind: 'truncate'; readonly length: number };

/** A file's data, shared by every name and handle that refers to it (names come and go; the inode stays). */
class Inode {
  readonly durable: GrowableBytes;
  readonly current: GrowableBytes;
  /** Writes and truncates since the last datasync, in call order. */
  pending: DataOp[] = [];

  constructor(durable: GrowableBytes) {
    this.durable = durable;
    this.current = durable.clone();
  }

  record(op: DataOp): void {
    applyDataOp(this.current, op);
    this.pending.push(op);
  }

  datasync(): void {
    // Replaying the pending ops costs what they wrote; copying `current` would cost the file.
    for (const op of this.pending) applyDataOp(this.durable, op);
    this.pending = [];
  }

  /**
   * Makes `write` (the very object `record` got) durable on its own, as O_DSYNC does, leaving
   * every other pending op pending. The whole file instead when another pending write overlaps
   * it (an older one could land over it at a power loss) or a truncate is pending (an older
   * one could cut it).
   */
  syncWrite(write: WriteOp): void {
    const index = this.pending.indexOf(write);
    // A datasync since it was recorded made it durable already.
    if (index === -1) return;
    const end = write.position + write.bytes.length;
    const alone = this.pending.every(
      (op, other) => other === index || (op.kind === 'write' && (op.position + op.bytes.length <= write.position || op.position >= end)),
    );
    if (!alone) {
      this.datasync();
      return;
    }
    applyDataOp(this.durable, write);
    this.pending.splice(index, 1);
  }
}

function applyDataOp(bytes: GrowableBytes, op: DataOp): void {
  if (op.kind === 'write') bytes.write(op.position, op.bytes);
  else bytes.setLength(op.length);
}

/** A byte array that grows by doubling. Invariant: every byte past `length` is zero, so holes read as zeros. */
class GrowableBytes {
  #buffer: Uint8Array;
  #length: number;

  constructor(initial: Uint8Array = new Uint8Array(0)) {
    this.#buffer = initial;
    this.#length = initial.length;
  }

  get length(): number {
    return this.#length;
  }

  write(position: number, bytes: Uint8Array): void {
    const end = position + bytes.length;
    this.#reserve(end);
    this.#buffer.set(bytes, position);
    if (end > this.#length) this.#length = end;
  }

  setLength(length: number): void {
    if (length < this.#length) this.#buffer.fill(0, length, this.#length);
    else this.#reserve(length);
    this.#length = length;
  }

  read(into: Uint8Array, position: number): number {
    if (position >= this.#length) return 0;
    const count = Math.min(into.length, this.#length - position);
    into.set(this.#buffer.subarray(position, position + count));
    return count;
  }

  copy(): Uint8Array {
    return this.#buffer.slice(0, this.#length);
  }

  clone(): GrowableBytes {
    return new GrowableBytes(this.copy());
  }

  #reserve(capacity: number): void {
    if (capacity <= this.#buffer.length) return;
    const grown = new Uint8Array(Math.max(capacity, this.#buffer.length * 2, 256));
    grown.set(this.#buffer.subarray(0, this.#length));
    this.#buffer = grown;
  }
}

// ---- directories ----

type Entry = Inode | Dir;

class Dir {
  readonly current = new Map<string, Entry>();
  readonly durable = new Map<string, Entry>();
}

/** One name changed: set to `entry`, or removed when `entry` is undefined. */
interface NameEdit {
  readonly dir: Dir;
  readonly name: string;
  readonly entry: Inode | undefined;
}

/** create = one edit, unlink = one edit, rename = two edits that land together or not at all. */
interface DirOp {
  readonly edits: readonly NameEdit[];
  /** Directories this op touches that have not been synced since it ran. */
  readonly unsyncedDirs: Set<Dir>;
}

function applyEdits(edits: readonly NameEdit[], namesOf: (dir: Dir) => Map<string, Entry>): void {
  for (const { dir, name, entry } of edits) {
    if (entry === undefined) namesOf(dir).delete(name);
    else namesOf(dir).set(name, entry);
  }
}

class NameSet {
  readonly #byDir = new Map<Dir, Set<string>>();

  add(dir: Dir, name: string): void {
    let names = this.#byDir.get(dir);
    if (names === undefined) {
      names = new Set();
      this.#byDir.set(dir, names);
    }
    names.add(name);
  }

  has(dir: Dir, name: string): boolean {
    return this.#byDir.get(dir)?.has(name) ?? false;
  }
}

class SimDirLock implements DirLock {
  readonly #gate: OpGate;
  readonly #locks: Map<string, SimDirLock>;
  readonly #path: string;

  constructor(gate: OpGate, locks: Map<string, SimDirLock>, path: string) {
    this.#gate = gate;
    this.#locks = locks;
    this.#path = path;
  }

  async release(): Promise<void> {
    await this.#gate.begin('release', this.#path);
    // Only the holder frees the lock, so a second release cannot free a later owner's lock.
    if (this.#locks.get(this.#path) === this) this.#locks.delete(this.#path);
  }
}

// ---- power loss ----

/**
 * The pending directory ops that reach the disk. An op lands only if every earlier pending op
 * on a name it touches landed, so ops on one name keep their order.
 */
function chooseSurvivingDirOps(pending: readonly DirOp[], mode: PowerLossMode, prng: Prng): DirOp[] {
  if (mode === 'keep-all') return [...pending];
  if (mode === 'keep-none') return [];
  const lost = new NameSet();
  const survivors: DirOp[] = [];
  for (const op of pending) {
    const blocked = op.edits.some((edit) => lost.has(edit.dir, edit.name));
    if (!blocked && prng.coin()) {
      survivors.push(op);
    } else {
      for (const edit of op.edits) lost.add(edit.dir, edit.name);
    }
  }
  return survivors;
}

/** A new tree holding the durable names with the surviving ops applied, each inode replaced by its image. */
function rebuildTree(root: Dir, survivors: readonly DirOp[], imageOf: (inode: Inode) => Inode): Dir {
  const names = new Map<Dir, Map<string, Entry>>();
  const namesOf = (dir: Dir): Map<string, Entry> => {
    let map = names.get(dir);
    if (map === undefined) {
      map = new Map(dir.durable);
      names.set(dir, map);
    }
    return map;
  };
  for (const op of survivors) applyEdits(op.edits, namesOf);
  const copy = (dir: Dir): Dir => {
    const result = new Dir();
    for (const [name, entry] of names.get(dir) ?? dir.durable) {
      const image = entry instanceof Dir ? copy(entry) : imageOf(entry);
      result.current.set(name, image);
      result.durable.set(name, image);
    }
    return result;
  };
  return copy(root);
}

/**
 * The file's bytes after a power loss. In `random` mode each pending op is kept or lost; a
 * kept write may be torn into a subset of its sector pieces; the kept pieces land in a random
 * order, so a later write can land while an earlier one does not, even within one sector.
 * A kept truncate stays where it was among the writes: a real page cache drops the data a
 * truncate cut, so an earlier write can never land after it.
 */
function crashImage(inode: Inode, mode: PowerLossMode, prng: Prng, sectorBytes: number): GrowableBytes {
  const image = inode.durable.clone();
  if (mode === 'keep-none') return image;
  if (mode === 'keep-all') {
    for (const op of inode.pending) applyDataOp(image, op);
    return image;
  }
  let landing: DataOp[] = [];
  const land = (): void => {
    prng.shuffle(landing);
    for (const piece of landing) applyDataOp(image, piece);
    landing = [];
  };
  for (const op of inode.pending) {
    if (!prng.coin()) continue;
    if (op.kind === 'truncate') {
      land();
      applyDataOp(image, op);
      continue;
    }
    const torn = prng.coin();
    for (const piece of sectorPieces(op.position, op.bytes, sectorBytes)) {
      if (!torn || prng.coin()) landing.push(piece);
    }
  }
  land();
  return image;
}

/** The write cut at every multiple of `sectorBytes` of file offset (views, not copies). */
function sectorPieces(position: number, bytes: Uint8Array, sectorBytes: number): DataOp[] {
  const pieces: DataOp[] = [];
  const end = position + bytes.length;
  let start = position;
  while (start < end) {
    const stop = Math.min(end, (Math.floor(start / sectorBytes) + 1) * sectorBytes);
    pieces.push({ kind: 'write', position: start, bytes: bytes.subarray(start - position, stop - position) });
    start = stop;
  }
  return pieces;
}

// ---- small helpers ----


function normalize(path: string): string {
  return posix.resolve('/', path);
}

/** The names along an absolute normalised path; none for the root. */
function components(path: string): string[] {
  return path === '/' ? [] : path.slice(1).split('/');
}

function fileEntry(entry: Entry | undefined, op: SimFsError['syscall'], path: string): Inode {
  if (entry === undefined) throw new SimFsError('ENOENT', op, path, 'no such file');
  if (entry instanceof Dir) throw new SimFsError('EISDIR', op, path, 'is a directory');
  return entry;
}

function concat(chunks: readonly Uint8Array[]): Uint8Array {
  let length = 0;
  for (const chunk of chunks) length += chunk.length;
  const bytes = new Uint8Array(length);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.length;
  }
  return bytes;
}
