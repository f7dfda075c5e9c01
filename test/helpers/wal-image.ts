// Builds WAL images for recovery tests: a log written by the real Wal code onto the simulated
// file system, and fresh file systems holding given bytes as durable files.
import { SimFileSystem } from '../sim/sim-file-system.ts';
import { Wal } from '../../engine/wal/wal.ts';
import { decodeFrame, decodeSegmentHeader } from '../../engine/wal/decoder.ts';
import { segmentHeaderBytes } from '../../engine/wal/format.ts';

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
  if (header.verdict !== 'ok') throw new Error(header.reason);
  const ends: number[] = [];
  let offset = segmentHeaderBytes;
  for (let seq = header.header.baseSeq; ; seq++) {
    const frame = decodeFrame(bytes, offset, header.header.segmentId, seq);
    if (frame.verdict !== 'record') return ends;
    offset = frame.next;
    ends.push(offset);
  }
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
