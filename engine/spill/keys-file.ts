// The keys sidecar of a run (docs/format/spill.md, "Keys sidecar"): per batch of the run, the
// ascending Murmur3 hashes of its rows' idempotency keys. Recovery reads these and not the
// runs, so the engine can answer "is this key held by a spilled timer?" with 4 bytes of RAM per
// keyed spilled timer and a bucket read only on a hash match. Main thread.
//
//   header (32 B) | count u32 × B | hashes u32 × count₀ | … | hashes u32 × count₍B₋₁₎
import { posix } from 'node:path';
import { crc32 } from '../checksum.ts';
import type { FileSystem } from '../fs/file-system.ts';
import { crcCoveredFrom, headerCrcOffset, keysFileName, keysHeaderBytes, keysMagic, spillCorrupt, spillFormatVersion } from './format.ts';
import type { RunMeta } from './run-meta.ts';

/** The sidecar's bytes for run `runId` at `stamp`, one section per batch, each already sorted. */
export function encodeKeys(runId: number, stamp: number, sections: readonly Uint32Array[]): Uint8Array {
  let hashes = 0;
  for (const section of sections) hashes += section.length;
  const bytes = new Uint8Array(keysHeaderBytes + 4 * sections.length + 4 * hashes);
  const view = new DataView(bytes.buffer);
  bytes.set(keysMagic, 0);
  view.setUint16(12, spillFormatVersion, true);
  view.setUint16(14, keysHeaderBytes, true);
  view.setUint32(16, runId, true);
  view.setUint32(20, sections.length, true);
  view.setBigUint64(24, BigInt(stamp), true);
  let at = keysHeaderBytes;
  for (const section of sections) {
    view.setUint32(at, section.length, true);
    at += 4;
  }
  // The counts end on a 4-byte boundary, so each section is copied as a whole u32 array.
  const words = new Uint32Array(bytes.buffer, at);
  let word = 0;
  for (const section of sections) {
    words.set(section, word);
    word += section.length;
  }
  view.setUint32(headerCrcOffset, crc32(bytes.subarray(crcCoveredFrom)), true);
  return bytes;
}

/** The run's key hashes, one ascending array per batch of `meta`; SPILL_CORRUPT on any mismatch. */
export async function readRunKeys(fs: FileSystem, dir: string, meta: RunMeta): Promise<Uint32Array[]> {
  const name = keysFileName(meta.runId);
  const bytes = await fs.readFile(posix.join(dir, name));
  return decodeKeys(bytes, name, meta);
}

export function decodeKeys(bytes: Uint8Array, name: string, meta: RunMeta): Uint32Array[] {
  const bad = (offset: number, what: string): Error => spillCorrupt(name, offset, what, { runId: meta.runId });
  if (bytes.length !== meta.keysBytes) throw bad(Math.min(bytes.length, meta.keysBytes), `the file is ${bytes.length} bytes, the manifest expects ${meta.keysBytes}`);
  if (bytes.length < keysHeaderBytes) throw bad(0, 'shorter than its header');
  for (let i = 0; i < keysMagic.length; i++) if (bytes[i] !== keysMagic[i]) throw bad(0, 'bad magic: not a keys file');
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const crc = view.getUint32(headerCrcOffset, true);
  const actual = crc32(bytes.subarray(crcCoveredFrom));
  if (crc !== actual) throw bad(headerCrcOffset, `checksum mismatch: stored ${hex(crc)}, computed ${hex(actual)}`);
  // A sidecar is written with its run, in its run's version.
  if (view.getUint16(12, true) !== meta.version) throw bad(12, `version ${view.getUint16(12, true)} is not its run's (${meta.version})`);
  if (view.getUint16(14, true) !== keysHeaderBytes) throw bad(14, `header size ${view.getUint16(14, true)} is not ${keysHeaderBytes}`);
  const runId = view.getUint32(16, true);
  if (runId !== meta.runId) throw bad(16, `holds run ${runId}, the manifest expects ${meta.runId}`);
  const stamp = Number(view.getBigUint64(24, true));
  if (stamp !== meta.stamp) throw bad(24, `stamped ${stamp}, the manifest expects ${meta.stamp}`);
  const count = view.getUint32(20, true);
  if (count !== meta.buckets.length) throw bad(20, `has ${count} sections, the run has ${meta.buckets.length} batches`);
  let at = keysHeaderBytes + 4 * count;
  // Aligned views when the buffer allows (it always does for a whole-file read); else one copy.
  const words = bytes.byteOffset % 4 === 0 ? new Uint32Array(bytes.buffer, bytes.byteOffset, bytes.length >>> 2) : new Uint32Array(bytes.slice().buffer, 0, bytes.length >>> 2);
  const sections: Uint32Array[] = [];
  for (let b = 0; b < count; b++) {
    const keyed = view.getUint32(keysHeaderBytes + 4 * b, true);
    const expected = (meta.buckets[b] as RunMeta['buckets'][number]).keyed;
    if (keyed !== expected) throw bad(keysHeaderBytes + 4 * b, `section ${b} has ${keyed} hashes, the manifest expects ${expected}`);
    const section = words.subarray(at >>> 2, (at >>> 2) + keyed);
    for (let i = 1; i < section.length; i++) {
      if ((section[i] as number) < (section[i - 1] as number)) throw bad(at + 4 * i, `section ${b} is not sorted`);
    }
    sections.push(section);
    at += 4 * keyed;
  }
  if (at !== bytes.length) throw bad(at, `the sections end at byte ${at} of ${bytes.length}`);
  return sections;
}

export function hex(value: number): string {
  return `0x${value.toString(16).padStart(8, '0')}`;
}
