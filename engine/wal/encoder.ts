// Builds the bytes of segment headers and record headers. Owned by the WAL's committer (the
// only writer of the log); bodies are never copied or re-encoded, only checksummed.
import assert from 'node:assert/strict';
import { crc32 } from '../checksum.ts';
import {
  formatVersion,
  recordBodyBytesFormatMax,
  recordCrcStart,
  recordFlagOverlapped,
  recordHeaderBytes,
  recordTypeMax,
  recordTypeReserved,
  segmentHeaderBytes,
  segmentHeaderCrcOffset,
  segmentMagic,
  sequenceMax,
} from './format.ts';

const twoTo32 = 2 ** 32;

export function writeU64(view: DataView, offset: number, value: number): void {
  view.setUint32(offset, value % twoTo32, true);
  view.setUint32(offset + 4, Math.floor(value / twoTo32), true);
}

export function encodeSegmentHeader(segmentId: number, baseSeq: number): Uint8Array {
  const bytes = new Uint8Array(segmentHeaderBytes);
  const view = new DataView(bytes.buffer);
  bytes.set(segmentMagic, 0);
  view.setUint16(8, formatVersion, true);
  view.setUint16(10, segmentHeaderBytes, true);
  view.setUint32(12, segmentId, true);
  writeU64(view, 16, baseSeq);
  view.setUint32(segmentHeaderCrcOffset, crc32(bytes.subarray(0, segmentHeaderCrcOffset)), true);
  return bytes;
}

/**
 * Writes the header of one record into `into` at `at` (32 bytes). The checksum covers the
 * header fields after it (so a record moved to another segment or sequence cannot pass) and
 * then the body, the concatenation of `parts`. When `bodyFollows`, the body has already been
 * copied right behind the header in `into` and is checksummed there in one pass; otherwise
 * each part is checksummed where it lies. `overlapped` sets the flag of a record whose group is
 * written while the group before it is not yet durable (absent: not overlapped).
 */
export function encodeRecordHeader(
  into: Uint8Array,
  view: DataView,
  at: number,
  fields: { readonly type: number; readonly seq: number; readonly segmentId: number; readonly indexInGroup: number; readonly overlapped?: boolean },
  parts: readonly Uint8Array[],
  bodyLength: number,
  bodyFollows: boolean,
): void {
  const { type, seq, segmentId, indexInGroup, overlapped } = fields;
  assert.ok(type > recordTypeReserved && type <= recordTypeMax, `record type ${type} out of range`);
  assert.ok(bodyLength <= recordBodyBytesFormatMax, 'record body beyond the format maximum');
  assert.ok(seq >= 1 && seq <= sequenceMax, `sequence ${seq} out of range`);
  view.setUint32(at + 4, bodyLength, true);
  writeU64(view, at + 8, seq);
  view.setUint32(at + 16, segmentId, true);
  view.setUint8(at + 20, type);
  view.setUint8(at + 21, overlapped === true ? recordFlagOverlapped : 0);
  view.setUint16(at + 22, 0, true);
  view.setUint32(at + 24, indexInGroup, true);
  view.setUint32(at + 28, 0, true);
  let checksum: number;
  if (bodyFollows) {
    checksum = crc32(into.subarray(at + recordCrcStart, at + recordHeaderBytes + bodyLength));
  } else {
    checksum = crc32(into.subarray(at + recordCrcStart, at + recordHeaderBytes));
    for (const part of parts) checksum = crc32(part, checksum);
  }
  view.setUint32(at, checksum, true);
}
