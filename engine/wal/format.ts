// The WAL's on-disk format, as constants. docs/format/wal.md is the specification these
// numbers come from; change both together. Relations are asserted at load.
//
//   segment file = segment header (32 B) , { record }
//   record       = record header (32 B) , body (length B)
//
//   segment header                    record header
//   off len field                     off len field
//    0   8 magic "FRMTWAL\n"            0   4 crc32 of bytes [4, 32 + length)
//    8   2 format version (1)           4   4 body length
//   10   2 header bytes (32)            8   8 sequence
//   12   4 segment id                  16   4 segment id
//   16   8 base sequence               20   1 type (1..255; 0 reserved)
//   24   4 reserved, zero              21   1 flags (bit 0: overlapped; others reserved)
//   28   4 crc32 of bytes [0, 28)      22   2 reserved, zero
//                                      24   4 index in commit group (0 = first)
//                                      28   4 reserved, zero
//
// The index in the commit group lets recovery tell a torn tail (records of the last,
// possibly unsynced group, written in any order) from corruption (a bad record followed by a
// record of a later group, which was only written after the bad one's group was synced).
// The overlapped flag marks the one exception: a group whose write started while the group
// ahead of it was not yet durable, so it may lie intact behind that group's torn records.
//
// All integers little-endian. The checksum is CRC-32 (ISO-HDLC, zlib's crc32, built into
// Node as zlib.crc32): see docs/decisions/0002-wal-checksum.md.
import assert from 'node:assert/strict';

export const segmentMagic = Uint8Array.from([0x46, 0x52, 0x4d, 0x54, 0x57, 0x41, 0x4c, 0x0a]); // "FRMTWAL\n"
export const formatVersion = 1;
export const segmentHeaderBytes = 32;
export const segmentHeaderCrcOffset = 28;

export const recordHeaderBytes = 32;
/** The checksum covers the header from this offset on, then the body. */
export const recordCrcStart = 4;
/** Type 0 is reserved so that zeroed sectors can never decode as a record. */
export const recordTypeReserved = 0;
export const recordTypeMax = 255;
/** Flags byte, bit 0: the record's group was written while the group before it was not yet durable. */
export const recordFlagOverlapped = 1;
/** Every flag a reader knows; a record with any other bit of the flags byte set is corrupt. */
export const recordFlagsKnown = recordFlagOverlapped;
/** Lengths above this are reserved: a reader rejects them before looking further. */
export const recordBodyBytesFormatMax = 2 ** 30;
/** Sequences are u64 on disk but stay below 2^53 so they are exact JavaScript numbers. */
export const sequenceMax = Number.MAX_SAFE_INTEGER;
export const segmentIdMax = 2 ** 32 - 1;

/** Segment files are named by their id, zero-padded so that names sort in replay order. */
export const segmentFileSuffix = '.wal';
const segmentIdDigits = 10;
export const brokenSuffix = '.broken';

export function segmentFileName(segmentId: number): string {
  assert.ok(Number.isInteger(segmentId) && segmentId >= 1 && segmentId <= segmentIdMax, `bad segment id ${segmentId}`);
  return String(segmentId).padStart(segmentIdDigits, '0') + segmentFileSuffix;
}

const segmentFileNamePattern = /^(\d{10})\.wal$/;

/** The segment id a file name carries, or undefined for any other file. */
export function parseSegmentFileName(name: string): number | undefined {
  const match = segmentFileNamePattern.exec(name);
  if (match === null) return undefined;
  const id = Number(match[1]);
  return id >= 1 && id <= segmentIdMax ? id : undefined;
}

assert.equal(segmentMagic.length, 8);
assert.equal(segmentHeaderCrcOffset + 4, segmentHeaderBytes);
assert.equal(recordHeaderBytes % 8, 0, 'record headers keep 8-byte alignment of the u64 fields');
assert.ok(recordFlagsKnown > 0 && recordFlagsKnown <= 0xff, 'the flags fit their one byte');
assert.ok(recordBodyBytesFormatMax < 2 ** 32, 'the format max must fit the u32 length field');
assert.equal(segmentIdMax.toString().length, segmentIdDigits, 'every segment id must fit the padded name');
