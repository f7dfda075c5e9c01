// Data files as a later release would write them, made from this release's by changing a version
// (or a record's type) and fixing the checksum that covers it, so that a reader meets whole,
// checksummed bytes of a format it does not know (never corrupt ones). Used by
// test/unit/format-version.test.ts and test/fixtures/data-newer/write-fixture.ts. Pure.
import { crc32 } from '../../engine/checksum.ts';
import { crcCoveredFrom, headerCrcOffset } from '../../engine/spill/format.ts';
import { recordCrcStart, recordHeaderBytes, segmentHeaderBytes, segmentHeaderCrcOffset } from '../../engine/wal/format.ts';

/** A WAL segment whose header says WAL format `version`. */
export function withWalVersion(segment: Uint8Array, version: number): Uint8Array {
  const out = new Uint8Array(segment); // a copy, its own buffer from byte 0
  const view = new DataView(out.buffer);
  view.setUint16(8, version, true);
  view.setUint32(segmentHeaderCrcOffset, crc32(out.subarray(0, segmentHeaderCrcOffset)), true);
  return out;
}

/** A WAL segment whose first record has type `type`, its checksum made to match. */
export function withFirstRecordType(segment: Uint8Array, type: number): Uint8Array {
  const out = new Uint8Array(segment); // a copy, its own buffer from byte 0
  const view = new DataView(out.buffer);
  const at = segmentHeaderBytes;
  view.setUint8(at + 20, type);
  const length = view.getUint32(at + 4, true);
  view.setUint32(at, crc32(out.subarray(at + recordCrcStart, at + recordHeaderBytes + length)), true);
  return out;
}

/** A spill MANIFEST whose header says manifest format `version`. */
export function withManifestVersion(manifest: Uint8Array, version: number): Uint8Array {
  const out = new Uint8Array(manifest);
  const view = new DataView(out.buffer);
  view.setUint16(12, version, true);
  view.setUint32(headerCrcOffset, crc32(out.subarray(crcCoveredFrom)), true);
  return out;
}
