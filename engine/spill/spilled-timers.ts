// What the engine keeps in memory about the timers on disk (the spill tier): the watermark,
// the spilled runs' metadata, their keys' hashes, the tombstones of cancelled spilled timers and
// a few decoded buckets. Owned by the engine on the main thread; the files themselves are
// engine/spill/'s (docs/format/spill.md).
//
//   watermark W ─┐  resident: every pending timer due before W (and every non-pending timer)
//                ▼  spilled:  pending, never attempted, due at or after W, in runs on disk
//   ──────────────|──────────────────────────────────────────────────────────► due time
//      store      |  run 1: [bucket][bucket]   [bucket]       …
//                 |  run 2:   [bucket]   [bucket][bucket]     …
//
// A spilled timer is found by its id's fire time, or by the one a PATCH gave it (the engine's
// redirect, engine/rescheduled-timers.ts); a spilled timer has never been retried, so its due
// time is that fire time: the bucket floor(dueAt / width) of each run. Memory per
// spilled timer: 4 bytes for a keyed one (its key's hash, so an admit finds a duplicate key
// without reading runs), plus a bit of the key filter; bucket metadata is per bucket.
import assert from 'node:assert/strict';
import type { FileSystem } from '../fs/file-system.ts';
import { spillLimits } from '../limits.ts';
import { readRunKeys } from './keys-file.ts';
import type { RunBucket, RunMeta } from './run-meta.ts';
import { readRunBucket } from './run-reader.ts';
import { type TombstoneColumns, Tombstones } from './tombstones.ts';
import { SpilledQueueCounts } from './spilled-queue-counts.ts';
import { bytesOf, type RunRows } from './run-rows.ts';

/** A row of a decoded spilled bucket. */
export interface SpilledRow {
  readonly rows: RunRows;
  readonly index: number;
}

/** A spilled timer holding a key, as plain numbers (so that an answer kept keeps no decoded bucket alive). */
export interface SpilledKeyHolder {
  readonly seq: number;
  readonly row: number;
  readonly fireAtMs: number;
}

/** What a keyed admit learns of the spill tier: no holder, a holder, or the answer once its buckets are read. */
export type SpilledKeyAnswer = SpilledKeyHolder | null | Promise<SpilledKeyHolder | null>;

/**
 * A run and what of it still counts: its buckets starting at or after validFromMs. Promotion
 * raises validFromMs (those rows are resident now, the copies on disk are stale); a checkpoint
 * that lowers the watermark writes a new run and leaves the old runs' validFromMs alone.
 */
export interface SpilledRun {
  readonly meta: RunMeta;
  validFromMs: number;
  /** Per bucket of the run: the sorted key hashes of its keyed rows. */
  readonly keyHashes: readonly Uint32Array[];
}

export class SpilledTimers {
  readonly #fs: FileSystem;
  readonly #dir: string;
  readonly #bucketWidthMs: number;
  #watermarkMs: number;
  #runs: SpilledRun[] = [];
  /** Counts reset()s: which set of runs a read began on. */
  #runSet = 0;
  /** Reads of run files under way (lookups, promotions, bucket reads), with the run set each began on. */
  readonly #readers = new Set<{ readonly runSet: number; readonly done: Promise<unknown> }>();
  /** One bit per key-hash value modulo its size: a clear bit means no spilled timer has such a key. */
  #keyFilter: Uint8Array;
  /** Cancelled spilled timers (seq, row, fire time): never promoted. */
  #tombstones = new Tombstones();
  #count = 0;
  /** Spilled timers by queue, kept by the engine (spilled-queue-counts.ts says where). */
  readonly queueCounts = new SpilledQueueCounts();
  /** Decoded buckets, by "run:bucket", least recently used first. */
  readonly #cache = new Map<string, RunRows>();
  readonly #reading = new Map<string, Promise<RunRows>>();

  constructor(fs: FileSystem, dir: string, bucketWidthMs: number = spillLimits.bucketWidthMs) {
    assert.ok(bucketWidthMs >= 1, 'bucketWidthMs must be at least 1 ms');
    this.#fs = fs;
    this.#dir = dir;
    this.#bucketWidthMs = bucketWidthMs;
    this.#watermarkMs = Infinity;
    this.#keyFilter = new Uint8Array(spillLimits.keyFilterBytesMin);
  }

  /** Pending timers due before this are resident; Infinity while nothing was ever spilled. */
  get watermarkMs(): number {
    return this.#watermarkMs;
  }

  /** Spilled timers (not promoted, not cancelled). */
  get count(): number {
    return this.#count;
  }

  get runs(): readonly SpilledRun[] {
    return this.#runs;
  }

  get bucketWidthMs(): number {
    return this.#bucketWidthMs;
  }

  /** Bytes of memory the spill tier's metadata holds (key hashes, filter, bucket entries). */
  get bytesUsed(): number {
    let bytes = this.#keyFilter.byteLength;
    for (const run of this.#runs) {
      bytes += run.meta.buckets.length * 64;
      for (const hashes of run.keyHashes) bytes += hashes.byteLength;
    }
    return bytes + this.#tombstones.bytesUsed;
  }

  /** The start of the bucket holding due time `ms`. */
  bucketStartOf(ms: number): number {
    return Math.floor(ms / this.#bucketWidthMs) * this.#bucketWidthMs;
  }

  /** Tombstones as columns (for the manifest). */
  tombstoneColumns(): TombstoneColumns {
    return this.#tombstones.columns();
  }

  get tombstoneCount(): number {
    return this.#tombstones.size;
  }

  isTombstoned(seq: number, row: number): boolean {
    return this.#tombstones.has(seq, row);
  }

  /** Marks a spilled timer cancelled: it stays in its run until compaction, and promotion skips it. */
  tombstone(seq: number, row: number, fireAtMs: number): void {
    if (this.#tombstones.add(seq, row, fireAtMs) && fireAtMs >= this.#watermarkMs) this.#count--;
  }

  /** Takes back a tombstone whose CANCEL_SPILLED record failed to be logged. */
  untombstone(seq: number, row: number): void {
    const fireAtMs = this.#tombstones.fireAtOf(seq, row);
    if (fireAtMs !== undefined && this.#tombstones.delete(seq, row) && fireAtMs >= this.#watermarkMs) this.#count++;
  }

  /**
   * Sets the whole state: at open from the manifest, and after a checkpoint (its runs, the
   * watermark, the tombstones that still matter).
   */
  reset(runs: readonly SpilledRun[], watermarkMs: number, tombstones?: TombstoneColumns): void {
    this.#runs = [...runs];
    this.#runSet++;
    this.#watermarkMs = watermarkMs;
    if (tombstones !== undefined) this.#tombstones = Tombstones.fromColumns(tombstones);
    for (const name of [...this.#cache.keys()]) if (!this.#runs.some((run) => name.startsWith(`${run.meta.runId}:`))) this.#cache.delete(name);
    this.#rebuildKeyFilter();
    this.#recount();
  }

  /** Lowers the fence before a checkpoint spills resident timers due at or past `watermarkMs`. */
  lowerWatermark(watermarkMs: number): void {
    assert.ok(watermarkMs <= this.#watermarkMs, 'lowerWatermark only lowers');
    this.#watermarkMs = watermarkMs;
    this.#recount();
  }

  /** The spilled timer (seq, row) fired at `fireAtMs`, read from its bucket, unless promoted or cancelled. */
  find(seq: number, row: number, fireAtMs: number): Promise<SpilledRow | undefined> {
    return this.#reader(this.#find(seq, row, fireAtMs));
  }

  /**
   * Resolves once every read that began on the runs before the last reset() has settled: the
   * run files that reset() dropped can then be deleted without pulling them from under a
   * lookup still reading them (reads begun since only see the new runs).
   */
  async earlierReadsSettled(): Promise<void> {
    const earlier: Array<Promise<unknown>> = [];
    for (const read of this.#readers) if (read.runSet < this.#runSet) earlier.push(read.done);
    await Promise.allSettled(earlier);
  }

  #reader<T>(work: Promise<T>): Promise<T> {
    const read = { runSet: this.#runSet, done: work };
    this.#readers.add(read);
    const settled = (): void => void this.#readers.delete(read);
    work.then(settled, settled);
    return work;
  }

  async #find(seq: number, row: number, fireAtMs: number): Promise<SpilledRow | undefined> {
    if (fireAtMs < this.#watermarkMs || this.isTombstoned(seq, row)) return undefined;
    const startMs = this.bucketStartOf(fireAtMs);
    for (const run of [...this.#runs]) {
      if (startMs < run.validFromMs) continue;
      // A large bucket is several consecutive batches of one start.
      for (let bucket = 0; bucket < run.meta.buckets.length; bucket++) {
        if ((run.meta.buckets[bucket] as RunBucket).startMs !== startMs) continue;
        const rows = await this.#bucket(run.meta, bucket);
        const index = findRow(rows, seq, row, fireAtMs);
        // Read while the watermark may have moved or a cancel landed: check again.
        if (index >= 0) return startMs < run.validFromMs || fireAtMs < this.#watermarkMs || this.isTombstoned(seq, row) ? undefined : { rows, index };
      }
    }
    return undefined;
  }

  /**
   * The spilled timer holding `key` (hash `hash`), if any, tombstoned or not: answered at once
   * when no spilled key has that hash or the buckets that might hold it are decoded; otherwise a
   * promise of the answer, looked up in those buckets as they arrive. The caller keeps that
   * answer rather than asking again: the bucket cache holds only bucketCacheMax buckets, so a
   * batch whose keys span more buckets would read them again each time it asked, for ever.
   */
  keyHolder(key: Uint8Array, hash: number): SpilledKeyAnswer {
    // Not the count: a tombstoned holder (its cancel being logged) must still be found.
    if (this.#runs.length === 0 || !this.#filterHas(hash)) return null;
    const decoded: RunRows[] = [];
    const reads: Array<Promise<RunRows>> = [];
    for (const run of this.#runs) {
      for (let b = 0; b < run.meta.buckets.length; b++) {
        const startMs = (run.meta.buckets[b] as RunBucket).startMs;
        if (startMs < run.validFromMs || startMs < this.#watermarkMs || !sortedHas(run.keyHashes[b] as Uint32Array, hash)) continue;
        const cached = this.#cached(run.meta, b);
        if (cached === undefined) reads.push(this.#bucket(run.meta, b));
        else decoded.push(cached);
      }
    }
    if (reads.length === 0) return this.#holderIn(decoded, key);
    return Promise.all(reads).then((read) => this.#holderIn([...decoded, ...read], key));
  }

  /**
   * The holder of `key` among decoded buckets: a live one, else a tombstoned one (an old
   * cancelled copy may sit in one run while a later timer with the key sits in another).
   */
  #holderIn(buckets: readonly RunRows[], key: Uint8Array): SpilledKeyHolder | null {
    let cancelled: SpilledKeyHolder | null = null;
    for (const rows of buckets) {
      const index = findKey(rows, key);
      if (index < 0) continue;
      const holder = { seq: rows.seq[index] as number, row: rows.row[index] as number, fireAtMs: rows.fireAtMs[index] as number };
      if (!this.isTombstoned(holder.seq, holder.row)) return holder;
      cancelled = holder;
    }
    return cancelled;
  }

  /** One batch of a run, decoded (through the bucket cache), for a scan in due order (engine/timer-query.ts). */
  readBucket(run: RunMeta, bucket: number): Promise<RunRows> {
    return this.#reader(this.#bucket(run, bucket));
  }

  /**
   * A read of run files another module makes (the export's, spill/scan-reads.ts), counted among
   * the reads under way, so a checkpoint deletes no file it began on before it settles.
   */
  tracked<T>(work: Promise<T>): Promise<T> {
    return this.#reader(work);
  }

  /** The decoded buckets of every run that are spilled and start before `toMs`, for promotion. */
  bucketsBefore(toMs: number): Promise<RunRows[]> {
    return this.#reader(this.#bucketsBefore(toMs));
  }

  async #bucketsBefore(toMs: number): Promise<RunRows[]> {
    const out: RunRows[] = [];
    for (const run of [...this.#runs]) {
      for (let b = 0; b < run.meta.buckets.length; b++) {
        const startMs = (run.meta.buckets[b] as RunBucket).startMs;
        if (startMs >= run.validFromMs && startMs >= this.#watermarkMs && startMs < toMs) out.push(await this.#bucket(run.meta, b));
      }
    }
    return out;
  }

  /** Raises the watermark once every spilled bucket below `toMs` is resident. */
  promoted(toMs: number): void {
    assert.ok(toMs >= this.#watermarkMs, 'promotion raises the watermark');
    this.#watermarkMs = toMs;
    for (const run of this.#runs) run.validFromMs = Math.max(run.validFromMs, toMs);
    // A tombstone below the watermark guards a row no run counts any more.
    this.#tombstones.retain((_seq, _row, fireAtMs) => fireAtMs >= toMs);
    for (const [name, rows] of this.#cache) if (rows.rows === 0 || (rows.dueAtMs[0] as number) < toMs) this.#cache.delete(name);
    this.#recount();
  }

  #recount(): void {
    let count = 0;
    for (const run of this.#runs) {
      const fromMs = Math.max(run.validFromMs, this.#watermarkMs);
      for (const bucket of run.meta.buckets) if (bucket.startMs >= fromMs) count += bucket.rows;
    }
    let ahead = 0;
    const { fireAtMs } = this.#tombstones.columns();
    for (const at of fireAtMs) if (at >= this.#watermarkMs) ahead++;
    this.#count = count - ahead;
  }

  #rebuildKeyFilter(): void {
    let keyed = 0;
    for (const run of this.#runs) for (const hashes of run.keyHashes) keyed += hashes.length;
    let bytes = spillLimits.keyFilterBytesMin;
    while (bytes * 8 < keyed * spillLimits.keyFilterBitsPerKey && bytes < 2 ** 29) bytes *= 2;
    this.#keyFilter = new Uint8Array(bytes);
    const mask = bytes * 8 - 1;
    for (const run of this.#runs) {
      for (const hashes of run.keyHashes) {
        for (const hash of hashes) {
          const bit = hash & mask;
          this.#keyFilter[bit >>> 3] = (this.#keyFilter[bit >>> 3] as number) | (1 << (bit & 7));
        }
      }
    }
  }

  #filterHas(hash: number): boolean {
    const bit = hash & (this.#keyFilter.length * 8 - 1);
    return (((this.#keyFilter[bit >>> 3] as number) >>> (bit & 7)) & 1) === 1;
  }

  #cached(run: RunMeta, bucket: number): RunRows | undefined {
    const name = `${run.runId}:${bucket}`;
    const rows = this.#cache.get(name);
    if (rows !== undefined) {
      this.#cache.delete(name);
      this.#cache.set(name, rows);
    }
    return rows;
  }

  #bucket(run: RunMeta, bucket: number): Promise<RunRows> {
    const cached = this.#cached(run, bucket);
    if (cached !== undefined) return Promise.resolve(cached);
    const name = `${run.runId}:${bucket}`;
    let reading = this.#reading.get(name);
    if (reading === undefined) {
      reading = this.#reader(readRunBucket(this.#fs, this.#dir, run, bucket)).then(
        (rows) => {
          this.#reading.delete(name);
          this.#cache.set(name, rows);
          while (this.#cache.size > spillLimits.bucketCacheMax) this.#cache.delete(this.#cache.keys().next().value as string);
          return rows;
        },
        (err: unknown) => {
          this.#reading.delete(name);
          throw err;
        },
      );
      this.#reading.set(name, reading);
    }
    return reading;
  }
}

/** Loads the key hashes of runs (the sidecars). */
export async function loadKeyHashes(fs: FileSystem, dir: string, runs: readonly RunMeta[]): Promise<Uint32Array[][]> {
  const out: Uint32Array[][] = [];
  for (const run of runs) out.push(await readRunKeys(fs, dir, run));
  return out;
}

function sortedHas(sorted: Uint32Array, value: number): boolean {
  let low = 0;
  let high = sorted.length;
  while (low < high) {
    const mid = (low + high) >>> 1;
    if ((sorted[mid] as number) < value) low = mid + 1;
    else high = mid;
  }
  return low < sorted.length && sorted[low] === value;
}

/** The index of (seq, row) in a bucket sorted by (dueAt, seq, row), or -1. */
function findRow(rows: RunRows, seq: number, row: number, dueAtMs: number): number {
  let low = 0;
  let high = rows.rows;
  while (low < high) {
    const mid = (low + high) >>> 1;
    const at = rows.dueAtMs[mid] as number;
    const before = at < dueAtMs || (at === dueAtMs && ((rows.seq[mid] as number) < seq || (rows.seq[mid] === seq && (rows.row[mid] as number) < row)));
    if (before) low = mid + 1;
    else high = mid;
  }
  return low < rows.rows && rows.dueAtMs[low] === dueAtMs && rows.seq[low] === seq && rows.row[low] === row ? low : -1;
}

function findKey(rows: RunRows, key: Uint8Array): number {
  for (let i = 0; i < rows.rows; i++) {
    const candidate = bytesOf(rows.keys, i);
    if (candidate.length === key.length && candidate.length > 0 && Buffer.compare(candidate, key) === 0) return i;
  }
  return -1;
}
