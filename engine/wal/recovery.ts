// Opening a WAL directory: read every segment, check that the log is one unbroken sequence,
// and repair only what a crash can leave behind. Runs once, before the log takes appends.
//
// Decision table (docs/format/wal.md has the full one):
//   bad frame in a sealed (not last) segment             → refuse, naming file and offset
//   bad frame in the last segment, a later-group record  → refuse (synced data is corrupt)
//     after it
//   bad frame in the last segment, nothing valid after   → torn tail: keep a .broken copy,
//                                                          truncate to the last good record
//   bad header of the last segment, nothing valid after  → segment creation was torn:
//                                                          rename it to .broken
//   missing segment id, base sequence not continuing     → refuse
import { join } from 'node:path';
import { errorCodes, FermataError, systemErrorCode } from '../errors.ts';
import type { FileSystem } from '../fs/file-system.ts';
import { decodeFrame, decodeSegmentHeader, laterGroupRecordAfter } from './decoder.ts';
import { brokenSuffix, parseSegmentFileName, segmentFileName, segmentHeaderBytes } from './format.ts';

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

async function readSegment(fs: FileSystem, path: string): Promise<Uint8Array> {
  try {
    return await fs.readFile(path);
  } catch (err) {
    if (systemErrorCode(err) === 'ENOENT') throw corrupt(path, 0, 'segment vanished while recovering');
    throw err;
  }
}

/** Called with each valid record, in order, as recovery reads it (the one pass over the log at open). */
export type RecordVisitor = (seq: number, type: number, body: Uint8Array) => void;

export async function recoverSegments(fs: FileSystem, dir: string, visit?: RecordVisitor): Promise<RecoveryReport> {
  const ids = await listSegmentIds(fs, dir);
  const segments: SegmentInfo[] = [];
  let repair: TailRepair | undefined;
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i] as number;
    const name = segmentFileName(id);
    const path = join(dir, name);
    const isLast = i === ids.length - 1;
    const previous = segments.at(-1);
    if (previous !== undefined && id !== previous.id + 1) throw corrupt(join(dir, segmentFileName(previous.id + 1)), 0, 'segment missing from the sequence');
    const bytes = await readSegment(fs, path);
    const expectedBaseSeq = previous === undefined ? undefined : previous.lastSeq + 1;

    const header = decodeSegmentHeader(bytes);
    if (header.verdict !== 'ok') {
      const evidence = laterGroupRecordAfter(bytes, segmentHeaderBytes, id, (expectedBaseSeq ?? 1) - 1);
      if (!isLast || evidence !== undefined) throw corrupt(path, 0, evidence === 'too-costly' ? `${header.reason}; too costly to rule out valid records after it` : header.reason);
      repair = await setAsideTornSegment(fs, dir, name, header.reason);
      break;
    }
    if (header.header.segmentId !== id) throw corrupt(path, 0, `header names segment ${header.header.segmentId}`);
    // Until checkpoints record where the log starts, it starts at segment 1, sequence 1: a
    // missing first segment is lost data, not a shorter log.
    if (previous === undefined && (id !== 1 || header.header.baseSeq !== 1)) {
      throw corrupt(path, 0, `the log starts at segment ${id}, sequence ${header.header.baseSeq}: earlier segments are missing`);
    }
    if (expectedBaseSeq !== undefined && header.header.baseSeq !== expectedBaseSeq) {
      throw corrupt(path, 0, `segment starts at sequence ${header.header.baseSeq}, the previous one ended at ${expectedBaseSeq - 1}`);
    }

    const segment: SegmentInfo = { id, baseSeq: header.header.baseSeq, lastSeq: header.header.baseSeq - 1, bytes: segmentHeaderBytes };
    segments.push(segment);
    for (;;) {
      const frame = decodeFrame(bytes, segment.bytes, id, segment.lastSeq + 1);
      if (frame.verdict === 'end') break;
      if (frame.verdict === 'record') {
        if (frame.groupBaseSeq < segment.baseSeq) throw corrupt(path, segment.bytes, 'record claims a commit group that began in another segment');
        visit?.(frame.seq, frame.type, frame.body);
        segment.lastSeq = frame.seq;
        segment.bytes = frame.next;
        continue;
      }
      const badSeq = segment.lastSeq + 1;
      if (!isLast) throw corrupt(path, segment.bytes, `${frame.reason} in a sealed segment`);
      const evidence = laterGroupRecordAfter(bytes, segment.bytes + 1, id, badSeq);
      if (evidence === 'too-costly') throw corrupt(path, segment.bytes, `${frame.reason}; too costly to rule out valid records after it`);
      if (evidence !== undefined) throw corrupt(path, segment.bytes, `${frame.reason}, followed by a valid record at offset ${evidence}`);
      repair = await cutTornTail(fs, dir, name, bytes, segment.bytes, frame.reason);
      break;
    }
  }
  return { segments, repair };
}
