// Builds WAL images for recovery tests: a log written by the real Wal code onto the simulated
// file system, a segment framed record by record (for images the Wal writes only by chance,
// such as overlapped groups), and fresh file systems holding given bytes as durable files.
import { SimFileSystem } from '../sim/sim-file-system.ts';
import { Wal } from '../../engine/wal/wal.ts';
import { decodeFrame, decodeSegmentHeader } from '../../engine/wal/decoder.ts';
import { encodeRecordHeader, encodeSegmentHeader } from '../../engine/wal/encoder.ts';
import { recordHeaderBytes, segmentHeaderBytes } from '../../engine/wal/format.ts';

export const walDir = '/data/wal';

export interface BuiltLog {
  /** Durable bytes of each segment file, by name. */
  readonly files: Map<string, Uint8Array>;
  /** For each segment name, the end offset of every record in it, in order. */
  readonly recordEnds: Map<string, number[]>;
  /** Body of every record, index seq − 1. */
  readonly bodies: Uint8Array[];
}

/**
 * Writes `groups` (each a list of body sizes, committed as one group) through the Wal, then
 * reads the durable segment bytes back.
 */
export async function buildLog(groups: readonly (readonly number[])[], segmentBytes: number, seed = 1): Promise<BuiltLog> {
  const fs = new SimFileSystem({ seed, maxExtraHops: 0 });
  const wal = await Wal.open({ dir: walDir, fs, limits: { segmentBytes } });
  const bodies: Uint8Array[] = [];
  for (const sizes of groups) {
    const group = sizes.map((size) => {
      const body = new Uint8Array(size);
      for (let i = 0; i < size; i++) body[i] = (bodies.length * 31 + i * 7 + size) & 0xff;
      bodies.push(body);
      return wal.append(1 + (bodies.length % 250), body);
    });
    await Promise.all(group);
  }
  await wal.close();
  const files = new Map<string, Uint8Array>();
  const recordEnds = new Map<string, number[]>();
  for (const name of (await fs.list(walDir)).filter((n) => n.endsWith('.wal')).sort()) {
    files.set(name, fs.durableBytes(`${walDir}/${name}`) as Uint8Array);
  }
  for (const [name, bytes] of files) recordEnds.set(name, recordEndsOf(bytes));
  return { files, recordEnds, bodies };
}

/** End offsets of the valid records of one segment's bytes, in order. */
export function recordEndsOf(bytes: Uint8Array): number[] {
  const header = decodeSegmentHeader(bytes);
  if (header.verdict !== 'ok') throw new Error(header.verdict === 'too-new' ? `WAL format version ${header.version}` : header.reason);
  const ends: number[] = [];
  let offset = segmentHeaderBytes;
  for (let seq = header.header.baseSeq; ; seq++) {
    const frame = decodeFrame(bytes, offset, header.header.segmentId, seq);
    if (frame.verdict !== 'record') return ends;
    offset = frame.next;
    ends.push(offset);
  }
}

/** One record of a framed segment: its body size, and whether it carries the overlapped flag. */
export interface FramedRecord {
  readonly bodyBytes: number;
  readonly overlapped?: boolean;
}

export interface FramedSegment {
  readonly bytes: Uint8Array;
  /** Offset of each record, index seq − baseSeq, then the end of the last one. */
  readonly starts: number[];
}

/**
 * The bytes of segment `segmentId` holding `groups` (each one commit group) in order from
 * sequence `baseSeq`, framed by the real encoder. Bodies are a pattern of their sequence.
 */
export function frameSegment(segmentId: number, baseSeq: number, groups: readonly (readonly FramedRecord[])[]): FramedSegment {
  const records = groups.flatMap((group) => group.map((record, indexInGroup) => ({ ...record, indexInGroup })));
  const total = records.reduce((bytes, record) => bytes + recordHeaderBytes + record.bodyBytes, segmentHeaderBytes);
  const bytes = new Uint8Array(total);
  const view = new DataView(bytes.buffer);
  bytes.set(encodeSegmentHeader(segmentId, baseSeq), 0);
  const starts: number[] = [];
  let at = segmentHeaderBytes;
  for (const [i, { bodyBytes, overlapped, indexInGroup }] of records.entries()) {
    const seq = baseSeq + i;
    const body = bytes.subarray(at + recordHeaderBytes, at + recordHeaderBytes + bodyBytes);
    for (let j = 0; j < bodyBytes; j++) body[j] = (seq * 31 + j * 7) & 0xff;
    encodeRecordHeader(bytes, view, at, { type: 1, seq, segmentId, indexInGroup, overlapped: overlapped === true }, [body], bodyBytes, true);
    starts.push(at);
    at += recordHeaderBytes + bodyBytes;
  }
  starts.push(at);
  return { bytes, starts };
}

/** A new simulated file system whose WAL directory durably holds exactly `files`. */
export async function imageWith(files: ReadonlyMap<string, Uint8Array>, seed = 1): Promise<SimFileSystem> {
  const fs = new SimFileSystem({ seed, maxExtraHops: 0 });
  await fs.mkdirp(walDir);
  for (const [name, bytes] of files) {
    const handle = await fs.open(`${walDir}/${name}`, 'create');
    await handle.writev([bytes], 0);
    await handle.datasync();
    await handle.close();
  }
  await fs.syncDir(walDir);
  return fs;
}
