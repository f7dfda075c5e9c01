// Builds the bytes of segment headers and record headers. Owned by the WAL's committer (the
// only writer of the log); bodies are never copied or re-encoded, only checksummed.
import assert from 'node:assert/strict';
import { crc32 } from 'node:zlib';
import {
  formatVersion,
  recordBodyBytesFormatMax,
  recordCrcStart,
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
 * then the body.
 */
export function encodeRecordHeader(
  into: Uint8Array,
  at: number,
  type: number,
  seq: number,
  segmentId: number,
  indexInGroup: number,
  body: Uint8Array,
): void {
  assert.ok(type > recordTypeReserved && type <= recordTypeMax, `record type ${type} out of range`);
  assert.ok(body.length <= recordBodyBytesFormatMax, 'record body beyond the format maximum');
  assert.ok(seq >= 1 && seq <= sequenceMax, `sequence ${seq} out of range`);
  const view = new DataView(into.buffer, into.byteOffset + at, recordHeaderBytes);
  view.setUint32(4, body.length, true);
  writeU64(view, 8, seq);
  view.setUint32(16, segmentId, true);
  view.setUint32(20, type, true); // type in byte 20, reserved bytes 21..23 zero (little-endian u32)
  view.setUint32(24, indexInGroup, true);
  view.setUint32(28, 0, true);
  const header = into.subarray(at + recordCrcStart, at + recordHeaderBytes);
  view.setUint32(0, crc32(body, crc32(header)), true);
}
