// Writes a run (docs/format/spill.md): the Arrow IPC file batch by batch, each batch's bytes
// written with one writev as soon as they are encoded (so a run of any size is never held
// encoded in memory), and the keys sidecar at the end. Both files are fdatasynced; the
// directory is not (the checkpoint syncs it once for all its files). Main thread.
//
//   create ─► head ─► append(rows)… ─► finish: tail, fdatasync run, keys, fdatasync keys ─► RunMeta
//
// Rows arrive sorted by (dueAt, seq, row), across appends too; each append cuts its rows into
// batches at bucket boundaries and at the batch limits, so a bucket split between two appends
// (compaction flushing a full batch) is two consecutive batches with one start.
import assert from 'node:assert/strict';
import { posix } from 'node:path';
import { crc32 } from '../checksum.ts';
import type { FileHandle, FileSystem } from '../fs/file-system.ts';
import { systemErrorCode } from '../errors.ts';
import { spillLimits } from '../limits.ts';
import { keyHash } from '../store/key-index.ts';
import { timerState } from '../store/resident-store.ts';
import { batchFixedBytesPerRow, keysFileName, runFileName, spillFormatVersion } from './format.ts';
import { encodeKeys } from './keys-file.ts';
import type { Schema } from 'apache-arrow';
import { encodedEntries, encodeRunBatch, RunIpcWriter, runSchema } from './run-arrow.ts';
import type { RunBucket, RunMeta } from './run-meta.ts';
import { bytesOf, firstFailureFrom, type RunRows } from './run-rows.ts';

export interface RunWriteOptions {
  /** Default spillLimits.bucketWidthMs. */
  readonly bucketWidthMs?: number;
  /** Default spillLimits.batchBytesMax. */
  readonly batchBytesMax?: number;
  /** Default spillLimits.batchRowsMax. */
  readonly batchRowsMax?: number;
  /** Default spillLimits.runSyncBytes. */
  readonly syncBytes?: number;
}

const writableStates = new Set<number>([timerState.pending, timerState.retrying, timerState.delivered, timerState.dead, timerState.cancelled]);

/** Removes `path` if it exists (a leftover of a checkpoint that crashed before its manifest). */
async function unlinkIfPresent(fs: FileSystem, path: string): Promise<void> {
  try {
    await fs.unlink(path);
  } catch (err) {
    if (systemErrorCode(err) !== 'ENOENT') throw err;
  }
}

export class RunWriter {
  readonly #fs: FileSystem;
  readonly #dir: string;
  readonly #runId: number;
  readonly #stamp: number;
  readonly #bucketWidthMs: number;
  readonly #batchBytesMax: number;
  readonly #batchRowsMax: number;
  readonly #syncBytes: number;
  readonly #handle: FileHandle;
  readonly #schema: Schema;
  readonly #writer = new RunIpcWriter();
  readonly #encoded = new WeakMap<readonly string[], Uint8Array[]>();
  readonly #buckets: RunBucket[] = [];
  readonly #keySections: Uint32Array[] = [];
  #headBytes = 0;
  #headCrc32 = 0;
  /** Where the next batch goes: the end of the head and every batch so far. */
  #position = 0;
  /** Where the file ended when the last fdatasync was started. */
  #syncedTo = 0;
  /** That fdatasync, while it may still be in flight (awaited before the next one and at the end). */
  #syncing: Promise<void> = Promise.resolve();
  #rows = 0;
  // The last row appended, for the order check across appends.
  #lastDueAtMs = -Infinity;
  #lastSeq = 0;
  #lastRow = 0;
  #done = false;

  private constructor(fs: FileSystem, dir: string, runId: number, stamp: number, handle: FileHandle, options: RunWriteOptions) {
    this.#fs = fs;
    this.#dir = dir;
    this.#runId = runId;
    this.#stamp = stamp;
    this.#handle = handle;
    this.#bucketWidthMs = options.bucketWidthMs ?? spillLimits.bucketWidthMs;
    this.#batchBytesMax = options.batchBytesMax ?? spillLimits.batchBytesMax;
    this.#batchRowsMax = options.batchRowsMax ?? spillLimits.batchRowsMax;
    this.#syncBytes = options.syncBytes ?? spillLimits.runSyncBytes;
    assert.ok(Number.isSafeInteger(this.#bucketWidthMs) && this.#bucketWidthMs >= 1, 'bucketWidthMs must be a positive integer');
    assert.ok(this.#batchBytesMax >= 1 && this.#batchBytesMax <= 2 ** 30, 'batchBytesMax must be in [1, 2^30]');
    assert.ok(this.#batchRowsMax >= 1 && this.#batchRowsMax < 2 ** 31, 'batchRowsMax must be in [1, 2^31)');
    this.#schema = runSchema({ runId, stamp, bucketWidthMs: this.#bucketWidthMs });
  }

  /**
   * Creates `run-<id>.arrow` in `dir` and writes its head. A file of that name is replaced: it
   * can only be the leftover of a checkpoint that crashed before its manifest, because the
   * caller takes run ids from the manifest's nextRunId, above every run the manifest names.
   */
  static async create(fs: FileSystem, dir: string, runId: number, stamp: number, options: RunWriteOptions = {}): Promise<RunWriter> {
    assert.ok(Number.isSafeInteger(stamp) && stamp >= 0, 'a stamp is a WAL sequence');
    const path = posix.join(dir, runFileName(runId));
    await unlinkIfPresent(fs, path);
    const handle = await fs.open(path, 'create');
    const writer = new RunWriter(fs, dir, runId, stamp, handle, options);
    try {
      await writer.#writeHead();
    } catch (err) {
      await writer.abort();
      throw err;
    }
    return writer;
  }

  get rows(): number {
    return this.#rows;
  }

  /** Appends `rows` (sorted, and after every row appended before), as one or more batches. */
  async append(rows: RunRows): Promise<void> {
    assert.ok(!this.#done, 'the run is finished');
    this.#checkOrder(rows);
    const failures = rows.failures;
    let from = 0;
    while (from < rows.rows) {
      const startMs = this.#bucketStart(rows.dueAtMs[from] as number);
      const endMs = startMs + this.#bucketWidthMs;
      let to = from;
      let bytes = 0;
      // The next failure's row: its error text counts too (there are few, so a cursor, not a look-up a row).
      let failure = firstFailureFrom(failures, from);
      while (to < rows.rows && to - from < this.#batchRowsMax && (rows.dueAtMs[to] as number) < endMs) {
        let rowBytes = batchFixedBytesPerRow + this.#variableBytes(rows, to);
        if (failures.rows[failure] === to) rowBytes += (failures.errors[failure++] as string).length;
        if (to > from && bytes + rowBytes > this.#batchBytesMax) break;
        bytes += rowBytes;
        to++;
      }
      await this.#writeBatch(rows, from, to, startMs);
      from = to;
    }
  }

  /** Writes the tail and the keys sidecar, fdatasyncs both, closes them; the run's metadata. */
  async finish(): Promise<RunMeta> {
    assert.ok(!this.#done, 'the run is finished');
    this.#done = true;
    try {
      const tailOffset = this.#position;
      this.#writer.close(); // eos, footer, footer length, magic
      const tail = this.#writer.take();
      let tailBytes = 0;
      let tailCrc32 = 0;
      for (const chunk of tail) {
        tailCrc32 = crc32(chunk, tailCrc32);
        tailBytes += chunk.length;
      }
      await this.#handle.writev(tail, tailOffset);
      await this.#syncing;
      await this.#handle.datasync();
      const keys = encodeKeys(this.#runId, this.#stamp, this.#keySections);
      await writeSynced(this.#fs, posix.join(this.#dir, keysFileName(this.#runId)), keys);
      return {
        runId: this.#runId,
        version: spillFormatVersion,
        stamp: this.#stamp,
        bucketWidthMs: this.#bucketWidthMs,
        rows: this.#rows,
        bytes: tailOffset + tailBytes,
        headBytes: this.#headBytes,
        headCrc32: this.#headCrc32,
        tailOffset,
        tailCrc32,
        keysBytes: keys.length,
        buckets: this.#buckets,
      };
    } finally {
      await this.#handle.close();
    }
  }

  /** Closes the file after a failure; the partial file stays until removeUnreferenced. */
  async abort(): Promise<void> {
    if (this.#done) return;
    this.#done = true;
    await this.#syncing.catch(() => undefined);
    await this.#handle.close().catch(() => undefined);
  }

  async #writeHead(): Promise<void> {
    this.#writer.reset(undefined, this.#schema);
    const head = this.#writer.take();
    for (const chunk of head) {
      this.#headCrc32 = crc32(chunk, this.#headCrc32);
      this.#headBytes += chunk.length;
    }
    this.#position = this.#headBytes;
    await this.#handle.writev(head, 0);
  }

  async #writeBatch(rows: RunRows, from: number, to: number, startMs: number): Promise<void> {
    const fileOffset = this.#position;
    this.#writer.write(encodeRunBatch(this.#schema, rows, from, to, this.#encoded));
    const chunks = this.#writer.take();
    let byteLength = 0;
    let crc = 0;
    for (const chunk of chunks) {
      crc = crc32(chunk, crc);
      byteLength += chunk.length;
    }
    const hashes: number[] = [];
    for (let i = from; i < to; i++) {
      const key = bytesOf(rows.keys, i);
      if (key.length > 0) hashes.push(keyHash(key));
    }
    const section = Uint32Array.from(hashes).sort();
    this.#position += byteLength;
    await this.#handle.writev(chunks, fileOffset);
    this.#buckets.push({ startMs, rows: to - from, keyed: section.length, fileOffset, byteLength, crc32: crc });
    this.#keySections.push(section);
    this.#rows += to - from;
    // Synced as it goes, not only at the end: a run of gigabytes left dirty in the page cache
    // made the log's next fdatasync wait seconds behind its writeback, and was not written at
    // all until then (the kernel starts writing back only past a share of RAM). One sync in
    // flight while the writes go on: the writer waits only when the disk is a whole
    // runSyncBytes behind.
    if (this.#position - this.#syncedTo >= this.#syncBytes) {
      await this.#syncing;
      this.#syncedTo = this.#position;
      this.#syncing = this.#handle.datasync();
      // Awaited before the next sync, by finish() or by abort(): not an unhandled rejection meanwhile.
      this.#syncing.catch(() => undefined);
    }
  }

  #bucketStart(dueAtMs: number): number {
    return Math.floor(dueAtMs / this.#bucketWidthMs) * this.#bucketWidthMs;
  }

  #variableBytes(rows: RunRows, i: number): number {
    const queue = encodedEntries(rows.queues, this.#encoded)[rows.queueIndex[i] as number] as Uint8Array;
    const target = encodedEntries(rows.targets, this.#encoded)[rows.targetIndex[i] as number] as Uint8Array;
    const names = queue.length + target.length;
    const span = (column: RunRows['keys']): number => (column.offsets[i + 1] as number) - (column.offsets[i] as number);
    return names + span(rows.keys) + span(rows.payload) + span(rows.headers) + (rows.callbacks === undefined ? 0 : span(rows.callbacks));
  }

  /** A bug, not a condition: the caller hands rows in (dueAt, seq, row) order with valid fields. */
  #checkOrder(rows: RunRows): void {
    for (let i = 0; i < rows.rows; i++) {
      const dueAtMs = rows.dueAtMs[i] as number;
      const seq = rows.seq[i] as number;
      const row = rows.row[i] as number;
      assert.ok(Number.isSafeInteger(dueAtMs) && Number.isSafeInteger(rows.fireAtMs[i]), `row ${i}: times must be whole ms`);
      assert.ok(writableStates.has(rows.state[i] as number), `row ${i}: state ${rows.state[i]} is not written to a run`);
      const order = dueAtMs - this.#lastDueAtMs || seq - this.#lastSeq || row - this.#lastRow;
      assert.ok(order > 0, `row ${i} is out of (dueAt, seq, row) order`);
      this.#lastDueAtMs = dueAtMs;
      this.#lastSeq = seq;
      this.#lastRow = row;
    }
  }
}

/** Writes a whole sorted RunRows as run `runId` stamped `stamp`, and its keys sidecar. */
export async function writeRun(fs: FileSystem, dir: string, runId: number, stamp: number, rows: RunRows, options: RunWriteOptions = {}): Promise<RunMeta> {
  const writer = await RunWriter.create(fs, dir, runId, stamp, options);
  try {
    await writer.append(rows);
    return await writer.finish();
  } catch (err) {
    await writer.abort();
    throw err;
  }
}

/** Creates `path` (replacing a leftover), writes `bytes`, fdatasyncs and closes it. */
export async function writeSynced(fs: FileSystem, path: string, bytes: Uint8Array): Promise<void> {
  await unlinkIfPresent(fs, path);
  const handle = await fs.open(path, 'create');
  try {
    await handle.writev([bytes], 0);
    await handle.datasync();
  } finally {
    await handle.close();
  }
}
