// Opening a WAL directory: read every segment, check that the log is one unbroken sequence,
// and repair only what a crash can leave behind. Runs once, before the log takes appends.
//
// Decision table (docs/format/wal.md has the full one):
//   bad frame in a sealed (not last) segment             → refuse, naming file and offset
//   bad frame in the last segment, a later-group record  → refuse (synced data is corrupt)
//     after it (other than one overlapped group)
//   bad frame in the last segment, nothing valid after,  → torn tail: keep a .broken copy,
//     or only records of one overlapped later group        truncate to the last good record
//   bad header of the last segment, nothing valid after  → segment creation was torn:
//                                                          rename it to .broken
//   missing segment id, base sequence not continuing     → refuse
//   a whole header of a later version, or a whole record  → refuse, FORMAT_TOO_NEW (a newer
//     of a type the caller does not know                     build wrote it; never set aside)
import { join } from 'node:path';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { errorCodes, FermataError, systemErrorCode } from '../errors.ts';
import { formatTooNew } from '../format-version.ts';
import type { FileHandle, FileSystem } from '../fs/file-system.ts';
import { decodeFrame, decodeSegmentHeader, searchLaterGroups } from './decoder.ts';
import { brokenSuffix, formatVersion, parseSegmentFileName, segmentFileName, segmentHeaderBytes } from './format.ts';

export interface SegmentInfo {
  readonly id: number;
  readonly baseSeq: number;
  /** Sequence of the segment's last record; baseSeq − 1 when it holds none. */
  lastSeq: number;
  /** Bytes of the segment that hold valid data (header and complete records). */
  bytes: number;
}

export interface TailRepair {
  readonly file: string;
  readonly offset: number;
  readonly reason: string;
  readonly brokenCopy: string;
}

export interface RecoveryReport {
  readonly segments: SegmentInfo[];
  readonly repair: TailRepair | undefined;
}

function corrupt(file: string, offset: number, reason: string): FermataError {
  return new FermataError(errorCodes.walCorrupt, `WAL corrupt: ${file} at offset ${offset}: ${reason}; refusing to start`, { file, offset, reason });
}

async function listSegmentIds(fs: FileSystem, dir: string): Promise<number[]> {
  const ids: number[] = [];
  for (const name of await fs.list(dir)) {
    const id = parseSegmentFileName(name);
    if (id !== undefined) ids.push(id);
  }
  return ids.sort((a, b) => a - b);
}

/**
 * Bytes of every segment file in `dir` as they lie on disk (0 when there is none), before
 * recovery reads them: replay sizes the store from it instead of doubling its way up.
 */
export async function segmentBytesOnDisk(fs: FileSystem, dir: string): Promise<number> {
  let ids: number[];
  try {
    ids = await listSegmentIds(fs, dir);
  } catch (err) {
    if (systemErrorCode(err) === 'ENOENT') return 0;
    throw err;
  }
  let bytes = 0;
  for (const id of ids) {
    const handle = await fs.open(join(dir, segmentFileName(id)), 'read');
    try {
      bytes += await handle.size();
    } finally {
      await handle.close();
    }
  }
  return bytes;
}

async function freeBrokenName(fs: FileSystem, dir: string, name: string): Promise<string> {
  const names = new Set(await fs.list(dir));
  let candidate = name + brokenSuffix;
  for (let n = 1; names.has(candidate); n++) candidate = `${name}${brokenSuffix}.${n}`;
  return join(dir, candidate);
}

/** Keeps a durable copy of the whole segment, then cuts it at `offset` and syncs the cut. */
async function cutTornTail(fs: FileSystem, dir: string, name: string, bytes: Uint8Array, offset: number, reason: string): Promise<TailRepair> {
  const path = join(dir, name);
  const brokenCopy = await freeBrokenName(fs, dir, name);
  const copy = await fs.open(brokenCopy, 'create');
  try {
    await copy.writev([bytes], 0);
    await copy.datasync();
  } finally {
    await copy.close();
  }
  await fs.syncDir(dir);
  const segment = await fs.open(path, 'readwrite');
  try {
    await segment.truncate(offset);
    await segment.datasync();
  } finally {
    await segment.close();
  }
  return { file: path, offset, reason, brokenCopy };
}

async function setAsideTornSegment(fs: FileSystem, dir: string, name: string, reason: string): Promise<TailRepair> {
  const path = join(dir, name);
  const brokenCopy = await freeBrokenName(fs, dir, name);
  await fs.rename(path, brokenCopy);
  await fs.syncDir(dir);
  return { file: path, offset: 0, reason, brokenCopy };
}

/** A segment is read in chunks of this size, all requested at once. */
const readChunkBytes = 4 * 1024 * 1024;
/** Replay gives the event loop a turn between chunks once this long has passed without one. */
const turnEveryMs = 2;
/** When replay last gave the event loop a turn (performance.now()). */
let lastTurnAt = 0;

/**
 * One segment file arriving in chunks. Every chunk's read is requested up front, so the
 * threadpool reads the file (on another core) while the main thread checks and replays the
 * records whose bytes have landed; only a record not yet whole waits for more.
 */
class SegmentRead {
  /** The file's bytes as far as they have landed: [0, available). */
  readonly #buffer: Uint8Array;
  readonly #chunks: Array<Promise<number>>;
  readonly #settled: Promise<void>;
  #available = 0;
  #landed = 0;
  #ended = false;

  constructor(handle: FileHandle, buffer: Uint8Array, size: number) {
    this.#buffer = buffer;
    this.#chunks = [];
    for (let from = 0; from < size; from += readChunkBytes) this.#chunks.push(readFully(handle, buffer, from, Math.min(from + readChunkBytes, size)));
    // A failed read is reported by more(); closing a read-only handle cannot lose data, so a
    // failure to close is not one recovery has to act on.
    this.#settled = Promise.allSettled(this.#chunks).then(
      () => handle.close().catch(() => undefined),
      () => undefined,
    );
  }

  /** The bytes that have landed so far (a view). */
  get arrived(): Uint8Array {
    return this.#buffer.subarray(0, this.#available);
  }

  /** Waits for the next chunk; false once every byte has landed (or the file ended early). */
  async more(): Promise<boolean> {
    if (this.#ended || this.#landed === this.#chunks.length) return false;
    const expected = Math.min(readChunkBytes, this.#buffer.length - this.#landed * readChunkBytes);
    const got = await (this.#chunks[this.#landed] as Promise<number>);
    // A turn of the event loop between chunks when replay has gone on for a while without one,
    // even if the chunk landed long ago (the threadpool reads faster than replay goes): the
    // callbacks of other I/O run, among them the reads that make the arena's next slabs ahead
    // (engine/store/prefaulted-buffers.ts). Not on every chunk: opening thousands of small
    // logs would pay a turn each for nothing.
    if (performance.now() - lastTurnAt > turnEveryMs) {
      await nextTurn();
      lastTurnAt = performance.now();
    }
    this.#landed++;
    this.#available += got;
    // A short chunk means the file ended there: what has landed is all there is.
    if (got < expected) this.#ended = true;
    return true;
  }

  /** Every byte of the file (a view). */
  async whole(): Promise<Uint8Array> {
    while (await this.more());
    return this.arrived;
  }

  /** Resolves once no read is in flight and the file is closed (whatever failed). */
  settled(): Promise<void> {
    return this.#settled;
  }
}

/** Reads [from, to) of the file into the same range of `into`; returns how many bytes came (fewer at the end of the file). */
async function readFully(handle: FileHandle, into: Uint8Array, from: number, to: number): Promise<number> {
  let at = from;
  while (at < to) {
    const read = await handle.read(into.subarray(at, to), at);
    if (read === 0) break;
    at += read;
  }
  return at - from;
}

/**
 * Reads segments, one after another, into one buffer: a segment is read (in chunks, while its
 * records are checked and replayed) only once the one before it has been replayed, so the
 * log's bytes are not freshly allocated, and page-faulted in, segment after segment. A second
 * buffer to read the next segment ahead was tried: Engine.open of 1,000,000 timers (4 segments
 * of up to 64 MiB) took longer with it (0.87–1.57 s against 0.63–0.97 s, 7 runs each,
 * alternated) and 30–65 MB more peak memory: on this VM a fresh 64 MiB buffer costs about as
 * much to fault in as the read-ahead saved.
 */
class SegmentReader {
  readonly #fs: FileSystem;
  #buffer = new Uint8Array(0);
  #user: SegmentRead | undefined;

  constructor(fs: FileSystem) {
    this.#fs = fs;
  }

  /** Resolves once every read started has settled and closed its file. */
  async settled(): Promise<void> {
    await this.#user?.settled();
  }

  /** Starts reading `path` into the buffer: the caller is done with the segment read before it. */
  async start(path: string): Promise<SegmentRead> {
    // That segment is done with, but a read of it may still be landing.
    await this.#user?.settled();
    let handle: FileHandle;
    try {
      handle = await this.#fs.open(path, 'read');
    } catch (err) {
      if (systemErrorCode(err) === 'ENOENT') throw corrupt(path, 0, 'segment vanished while recovering');
      throw err;
    }
    let size: number;
    try {
      size = await handle.size();
    } catch (err) {
      await handle.close().catch(() => undefined);
      throw err;
    }
    if (this.#buffer.length < size) {
      // Uninitialised: only bytes that were read are ever handed out. A plain Uint8Array,
      // because a Buffer's slice() is a view, not the copy decoders expect.
      const memory = Buffer.allocUnsafeSlow(size);
      this.#buffer = new Uint8Array(memory.buffer, memory.byteOffset, size);
    }
    const read = new SegmentRead(handle, this.#buffer.subarray(0, size), size);
    this.#user = read;
    return read;
  }
}

/**
 * Called with each valid record, in order, as recovery reads it (the one pass over the log at
 * open). `body` is a view into a read buffer that is reused for a later segment: copy what
 * must outlive the call.
 */
export type RecordVisitor = (seq: number, type: number, body: Uint8Array) => void | Promise<void>;

/** Whether a record type is one the reader knows; a complete record of another type is FORMAT_TOO_NEW. */
export interface RecordTypes {
  readonly known: (type: number) => boolean;
  /** What the reader knows, for the refusal: e.g. "record types 1–13, WAL format version 1". */
  readonly describe: string;
}

/**
 * Reads the log's segments in order, checking every frame and handing each valid record to
 * `visit` (awaited when it returns a promise). `coveredSeq` is the sequence a checkpoint
 * covers (0: none): segments holding only records up to it may have been deleted, so the log
 * may start later than segment 1, but never after coveredSeq + 1.
 */
export async function recoverSegments(fs: FileSystem, dir: string, visit?: RecordVisitor, coveredSeq = 0, recordTypes?: RecordTypes): Promise<RecoveryReport> {
  const ids = await listSegmentIds(fs, dir);
  const segments: SegmentInfo[] = [];
  let repair: TailRepair | undefined;
  const reader = new SegmentReader(fs);
  // A read started ahead may fail before it is awaited: mark it handled now, it is awaited (and
  // its failure thrown) in turn.
  const startRead = (id: number): Promise<SegmentRead> => {
    const read = reader.start(join(dir, segmentFileName(id)));
    read.catch(() => undefined);
    return read;
  };
  let reading = ids.length === 0 ? undefined : startRead(ids[0] as number);
  try {
    for (let i = 0; i < ids.length; i++) {
      const id = ids[i] as number;
      const name = segmentFileName(id);
      const path = join(dir, name);
      const isLast = i === ids.length - 1;
      const previous = segments.at(-1);
      if (previous !== undefined && id !== previous.id + 1) throw corrupt(join(dir, segmentFileName(previous.id + 1)), 0, 'segment missing from the sequence');
      const current = await (reading as Promise<SegmentRead>);
      reading = undefined;
      const expectedBaseSeq = previous === undefined ? undefined : previous.lastSeq + 1;

      // The first chunk holds the header (or the whole file, if that is shorter).
      await current.more();
      let bytes = current.arrived;
      const header = decodeSegmentHeader(bytes);
      // A newer build's segment is refused before anything else, the last one too: it is whole,
      // never a torn creation to set aside.
      if (header.verdict === 'too-new') throw formatTooNew(path, 'WAL segment format version', header.version, `version ${formatVersion}`, { offset: 8 });
      if (header.verdict !== 'ok') {
        bytes = await current.whole();
        // A segment header is durable before any record goes in: no overlap excuses a valid
        // record after a bad one.
        const later = searchLaterGroups(bytes, segmentHeaderBytes, id, (expectedBaseSeq ?? 1) - 1, { excuseOverlapped: false });
        if (!isLast || later.verdict !== 'none') throw corrupt(path, 0, later.verdict === 'too-costly' ? `${header.reason}; too costly to rule out valid records after it` : header.reason);
        repair = await setAsideTornSegment(fs, dir, name, header.reason);
        break;
      }
      if (header.header.segmentId !== id) throw corrupt(path, 0, `header names segment ${header.header.segmentId}`);
      // The log starts at segment 1, sequence 1, or where a checkpoint let earlier segments
      // go: a first segment starting after the checkpoint's sequence + 1 is lost data.
      if (previous === undefined && (coveredSeq === 0 ? id !== 1 || header.header.baseSeq !== 1 : header.header.baseSeq > coveredSeq + 1)) {
        throw corrupt(path, 0, `the log starts at segment ${id}, sequence ${header.header.baseSeq}${coveredSeq === 0 ? '' : ` (the checkpoint covers up to ${coveredSeq})`}: earlier segments are missing`);
      }
      if (expectedBaseSeq !== undefined && header.header.baseSeq !== expectedBaseSeq) {
        throw corrupt(path, 0, `segment starts at sequence ${header.header.baseSeq}, the previous one ended at ${expectedBaseSeq - 1}`);
      }

      const segment: SegmentInfo = { id, baseSeq: header.header.baseSeq, lastSeq: header.header.baseSeq - 1, bytes: segmentHeaderBytes };
      segments.push(segment);
      for (;;) {
        const frame = decodeFrame(bytes, segment.bytes, id, segment.lastSeq + 1);
        // Only a verdict on bytes that have all landed counts: until then, wait for more.
        if (frame.verdict !== 'record' && (await current.more())) {
          bytes = current.arrived;
          continue;
        }
        if (frame.verdict === 'end') break;
        if (frame.verdict === 'record') {
          if (frame.groupBaseSeq < segment.baseSeq) throw corrupt(path, segment.bytes, 'record claims a commit group that began in another segment');
          // Complete and checksummed: only a newer build writes a type this one does not know.
          if (recordTypes !== undefined && !recordTypes.known(frame.type)) {
            throw formatTooNew(path, `record type (sequence ${frame.seq}, offset ${segment.bytes})`, frame.type, recordTypes.describe, { offset: segment.bytes, seq: frame.seq });
          }
          const visited = visit?.(frame.seq, frame.type, frame.body);
          if (visited !== undefined) await visited;
          segment.lastSeq = frame.seq;
          segment.bytes = frame.next;
          continue;
        }
        const badSeq = segment.lastSeq + 1;
        if (!isLast) throw corrupt(path, segment.bytes, `${frame.reason} in a sealed segment`);
        const later = searchLaterGroups(bytes, segment.bytes + 1, id, badSeq, { excuseOverlapped: true });
        if (later.verdict === 'too-costly') throw corrupt(path, segment.bytes, `${frame.reason}; too costly to rule out valid records after it`);
        if (later.verdict === 'evidence') throw corrupt(path, segment.bytes, `${frame.reason}, followed by ${later.reason}`);
        // An overlapped group behind the torn one was never acknowledged (acknowledgements go in
        // order): it is cut with the torn group.
        const reason = later.verdict === 'overlapped' ? `${frame.reason}; the overlapped group from sequence ${later.groupBaseSeq} at offset ${later.offset} is cut with it` : frame.reason;
        repair = await cutTornTail(fs, dir, name, bytes, segment.bytes, reason);
        break;
      }
      // The next segment goes into the same buffer, once this one is replayed (a torn tail is
      // only ever cut from the last segment, so nothing follows a repair).
      if (!isLast) reading = startRead(ids[i + 1] as number);
    }
  } finally {
    // A segment refused mid-log leaves reads in flight: let them finish (and close the files).
    await reading?.then(
      (read) => read.settled(),
      () => undefined,
    );
    await reader.settled();
  }
  return { segments, repair };
}
