// Reads runs (docs/format/spill.md) by random access: one batch at a time, found by the
// manifest's offsets, its checksum checked before a byte of it is decoded. verifyRun checks a
// whole file piece by piece (head, every batch, tail, footer, schema stamp) and its keys
// sidecar, holding one batch in memory at a time. Main thread.
import { posix } from 'node:path';
import { crc32 } from '../checksum.ts';
import type { FileHandle, FileSystem } from '../fs/file-system.ts';
import { FooterError, type FooterSummary, readFooter } from './arrow-footer.ts';
import { arrowEos, arrowMagic, arrowTrailerBytes, footerBytesMax, metadataKeys, runFileName, spillCorrupt } from './format.ts';
import { hex, readRunKeys } from './keys-file.ts';
import { BatchShapeError, batchDecodeBuffer, decodeRunBatch } from './run-arrow.ts';
import type { RunMeta } from './run-meta.ts';
import type { RunRows } from './run-rows.ts';

/** An open run file; read its batches, then close it. */
export class RunReader {
  readonly #handle: FileHandle;
  readonly #meta: RunMeta;
  readonly #name: string;

  private constructor(handle: FileHandle, meta: RunMeta) {
    this.#handle = handle;
    this.#meta = meta;
    this.#name = runFileName(meta.runId);
  }

  static async open(fs: FileSystem, dir: string, meta: RunMeta): Promise<RunReader> {
    return new RunReader(await fs.open(posix.join(dir, runFileName(meta.runId)), 'read'), meta);
  }

  get meta(): RunMeta {
    return this.#meta;
  }

  /**
   * Batch `index` of the run, checked against its crc and decoded (its columns view one buffer:
   * the start of `memory` when given, at least batchDecodeBytes long, else a new one).
   */
  async readBucket(index: number, memory?: Uint8Array): Promise<RunRows> {
    const bucket = this.#meta.buckets[index];
    if (bucket === undefined) throw new RangeError(`run ${this.#meta.runId} has no batch ${index}`);
    // The manifest says the run's version: a batch is decoded without a look at the footer.
    const { whole, batch } = batchDecodeBuffer(bucket.byteLength, this.#meta.version, memory);
    await this.#readExactly(batch, bucket.fileOffset, `batch ${index}`);
    const actual = crc32(batch);
    if (actual !== bucket.crc32) {
      throw this.#corrupt(bucket.fileOffset, `batch ${index} (${bucket.byteLength} bytes) fails its checksum: stored ${hex(bucket.crc32)}, computed ${hex(actual)}`, index);
    }
    try {
      return decodeRunBatch(whole, bucket.rows, this.#meta.version);
    } catch (err) {
      if (err instanceof BatchShapeError) throw this.#corrupt(bucket.fileOffset, `batch ${index}: ${err.message}`, index);
      throw err;
    }
  }

  close(): Promise<void> {
    return this.#handle.close();
  }

  /** Reads `into.length` bytes at `position`; a file that ends first is corrupt (truncated). */
  async #readExactly(into: Uint8Array, position: number, what: string): Promise<void> {
    let done = 0;
    while (done < into.length) {
      const read = await this.#handle.read(into.subarray(done), position + done);
      if (read === 0) throw this.#corrupt(position + done, `the file ends at byte ${position + done}, inside ${what} [${position}, ${position + into.length})`);
      done += read;
    }
  }

  #corrupt(offset: number, what: string, bucket?: number): Error {
    return spillCorrupt(this.#name, offset, what, bucket === undefined ? { runId: this.#meta.runId } : { runId: this.#meta.runId, bucket });
  }

  /** Every check of verifyRun but the sidecar's. */
  async verify(): Promise<void> {
    const meta = this.#meta;
    // The footer first, found from the file's own end: a file of another run or stamp is
    // named as such, not just as a size or checksum mismatch.
    const size = await this.#handle.size();
    this.#checkFooter(await this.#readFooter(size));
    if (size !== meta.bytes) throw this.#corrupt(Math.min(size, meta.bytes), `the file is ${size} bytes, the manifest expects ${meta.bytes}`);
    const tail = new Uint8Array(meta.bytes - meta.tailOffset);
    await this.#readExactly(tail, meta.tailOffset, 'the tail');
    for (let i = 0; i < arrowEos.length; i++) if (tail[i] !== arrowEos[i]) throw this.#corrupt(meta.tailOffset, 'no end-of-stream marker after the last batch');
    const tailCrc = crc32(tail);
    if (tailCrc !== meta.tailCrc32) throw this.#corrupt(meta.tailOffset, `the tail fails its checksum: stored ${hex(meta.tailCrc32)}, computed ${hex(tailCrc)}`);
    const head = new Uint8Array(meta.headBytes);
    await this.#readExactly(head, 0, 'the head');
    for (let i = 0; i < arrowMagic.length; i++) if (head[i] !== arrowMagic[i]) throw this.#corrupt(0, 'bad magic: not an Arrow file');
    const headCrc = crc32(head);
    if (headCrc !== meta.headCrc32) throw this.#corrupt(0, `the head fails its checksum: stored ${hex(meta.headCrc32)}, computed ${hex(headCrc)}`);
    for (let index = 0; index < meta.buckets.length; index++) await this.readBucket(index);
  }

  /** The footer of a file of `size` bytes, located by its trailer; bounded and checked before it is decoded. */
  async #readFooter(size: number): Promise<{ footer: FooterSummary; offset: number }> {
    const smallest = 8 + arrowEos.length + arrowTrailerBytes;
    if (size < smallest) throw this.#corrupt(0, `the file is ${size} bytes, shorter than any Arrow file (${smallest})`);
    const trailer = new Uint8Array(arrowTrailerBytes);
    await this.#readExactly(trailer, size - arrowTrailerBytes, 'the trailer');
    for (let i = 0; i < arrowMagic.length; i++) if (trailer[4 + i] !== arrowMagic[i]) throw this.#corrupt(size - arrowMagic.length, 'bad trailing magic: not an Arrow file');
    const length = new DataView(trailer.buffer).getInt32(0, true);
    const offset = size - arrowTrailerBytes - length;
    if (length <= 0 || length > footerBytesMax || offset < 8 + arrowEos.length) throw this.#corrupt(size - arrowTrailerBytes, `footer length ${length} does not fit the file`);
    const bytes = new Uint8Array(length);
    await this.#readExactly(bytes, offset, 'the footer');
    try {
      return { footer: readFooter(bytes), offset };
    } catch (err) {
      if (err instanceof FooterError) throw this.#corrupt(offset, `the footer does not decode: ${err.message}`);
      throw err;
    }
  }

  /** The footer's format version, stamp, run id and blocks against the manifest's. */
  #checkFooter({ footer, offset }: { footer: FooterSummary; offset: number }): void {
    const meta = this.#meta;
    const version = footer.metadata.get(metadataKeys.version);
    if (version !== String(meta.version)) throw this.#corrupt(offset, `spill format version ${version ?? 'missing'}, the manifest expects ${meta.version}`);
    const stamp = footer.metadata.get(metadataKeys.stamp);
    if (stamp !== String(meta.stamp)) throw this.#corrupt(offset, `stamped ${stamp ?? 'nothing'}, the manifest expects ${meta.stamp}`);
    const runId = footer.metadata.get(metadataKeys.run);
    if (runId !== String(meta.runId)) throw this.#corrupt(offset, `holds run ${runId ?? 'nothing'}, the manifest expects ${meta.runId}`);
    if (footer.dictionaryCount !== 0) throw this.#corrupt(offset, 'the footer names dictionary batches; runs have none');
    if (footer.recordBatches.length !== meta.buckets.length) {
      throw this.#corrupt(offset, `the footer names ${footer.recordBatches.length} batches, the manifest ${meta.buckets.length}`);
    }
    for (const [index, block] of footer.recordBatches.entries()) {
      const bucket = meta.buckets[index];
      if (bucket === undefined || block.offset !== bucket.fileOffset || block.metaDataLength + block.bodyLength !== bucket.byteLength) {
        throw this.#corrupt(offset, `the footer's batch ${index} is at [${block.offset}, +${block.metaDataLength + block.bodyLength}), the manifest's at [${bucket?.fileOffset}, +${bucket?.byteLength})`);
      }
    }
  }
}

/** Batch `index` of the run `meta` describes: reads only its bytes, checks its crc, decodes it. */
export async function readRunBucket(fs: FileSystem, dir: string, meta: RunMeta, index: number): Promise<RunRows> {
  const reader = await RunReader.open(fs, dir, meta);
  try {
    return await reader.readBucket(index);
  } finally {
    await reader.close();
  }
}

/**
 * Checks a run against its manifest entry: size, head, every batch (crc and decode), tail,
 * footer (stamp, run id, blocks) and the keys sidecar. SPILL_CORRUPT names the first fault.
 */
export async function verifyRun(fs: FileSystem, dir: string, meta: RunMeta): Promise<void> {
  const reader = await RunReader.open(fs, dir, meta);
  try {
    await reader.verify();
  } finally {
    await reader.close();
  }
  await readRunKeys(fs, dir, meta);
}
