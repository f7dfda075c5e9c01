// Reads segment bytes back and gives a verdict on each frame: `record`, `end`, `torn` or
// `corrupt`. The decoder judges one frame in isolation; what a bad frame means for the log
// (cut a torn tail, or refuse to start) is recovery's decision (recovery.ts).
//
// Assertions in pairs: every field the encoder wrote is checked here again, and nothing is
// allocated from a length field (a length past the bytes at hand is `torn`, never a read).
import { crc32 } from '../checksum.ts';
import {
  formatVersion,
  recordBodyBytesFormatMax,
  recordCrcStart,
  recordFlagOverlapped,
  recordFlagsKnown,
  recordHeaderBytes,
  recordTypeReserved,
  segmentHeaderBytes,
  segmentHeaderCrcOffset,
  segmentMagic,
  sequenceMax,
} from './format.ts';

const twoTo32 = 2 ** 32;
/** Bytes the torn-or-corrupt search may checksum for one bad frame (8 × a 64 MiB segment). */
export const scanChecksumBytesMax = 512 * 1024 * 1024;

export type Frame =
  | {
      readonly verdict: 'record';
      readonly seq: number;
      readonly type: number;
      /** Sequence of the first record of the commit group this record was written in. */
      readonly groupBaseSeq: number;
      /** The group was written while the group before it was not yet durable. */
      readonly overlapped: boolean;
      readonly body: Uint8Array;
      readonly next: number;
    }
  | { readonly verdict: 'end' }
  | { readonly verdict: 'torn'; readonly reason: string }
  | { readonly verdict: 'corrupt'; readonly reason: string };

export interface SegmentHeader {
  readonly segmentId: number;
  readonly baseSeq: number;
}

export type SegmentHeaderVerdict =
  | { readonly verdict: 'ok'; readonly header: SegmentHeader }
  /** A whole header of a later WAL format version: written by a newer build, not damaged. */
  | { readonly verdict: 'too-new'; readonly version: number }
  | { readonly verdict: 'torn' | 'corrupt'; readonly reason: string };

function readU64(view: DataView, offset: number): number | undefined {
  const high = view.getUint32(offset + 4, true);
  const value = high * twoTo32 + view.getUint32(offset, true);
  return value <= sequenceMax ? value : undefined;
}

function viewOf(bytes: Uint8Array): DataView {
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

export function decodeSegmentHeader(bytes: Uint8Array): SegmentHeaderVerdict {
  if (bytes.length < segmentHeaderBytes) return { verdict: 'torn', reason: `segment header has ${bytes.length} of ${segmentHeaderBytes} bytes` };
  const view = viewOf(bytes);
  const stored = view.getUint32(segmentHeaderCrcOffset, true);
  if (crc32(bytes.subarray(0, segmentHeaderCrcOffset)) !== stored) return { verdict: 'corrupt', reason: 'segment header checksum mismatch' };
  for (let i = 0; i < segmentMagic.length; i++) {
    if (bytes[i] !== segmentMagic[i]) return { verdict: 'corrupt', reason: 'not a fermata WAL segment (bad magic)' };
  }
  const version = view.getUint16(8, true);
  // Checked before the fields a later version may have changed (the header's size among them).
  if (version > formatVersion) return { verdict: 'too-new', version };
  if (version !== formatVersion) return { verdict: 'corrupt', reason: `unsupported WAL format version ${version}` };
  if (view.getUint16(10, true) !== segmentHeaderBytes || view.getUint32(24, true) !== 0) {
    return { verdict: 'corrupt', reason: 'segment header has unknown fields' };
  }
  const baseSeq = readU64(view, 16);
  if (baseSeq === undefined || baseSeq < 1) return { verdict: 'corrupt', reason: 'segment base sequence out of range' };
  return { verdict: 'ok', header: { segmentId: view.getUint32(12, true), baseSeq } };
}

/**
 * Judges the frame at `offset` of a segment's bytes, expecting record `expectedSeq` of
 * segment `segmentId`. A frame that checks out but carries another sequence or segment (a
 * stale or misdirected record) is `corrupt`, as is any bad checksum or reserved value.
 */
export function decodeFrame(bytes: Uint8Array, offset: number, segmentId: number, expectedSeq: number): Frame {
  const remaining = bytes.length - offset;
  if (remaining === 0) return { verdict: 'end' };
  if (remaining < recordHeaderBytes) return { verdict: 'torn', reason: `record header cut short (${remaining} of ${recordHeaderBytes} bytes)` };
  const view = new DataView(bytes.buffer, bytes.byteOffset + offset, recordHeaderBytes);
  const length = view.getUint32(4, true);
  if (length > recordBodyBytesFormatMax) return { verdict: 'corrupt', reason: `record length ${length} above the format maximum` };
  const end = offset + recordHeaderBytes + length;
  if (end > bytes.length) return { verdict: 'torn', reason: `record body cut short (${remaining - recordHeaderBytes} of ${length} bytes)` };
  const body = bytes.subarray(offset + recordHeaderBytes, end);
  const header = bytes.subarray(offset + recordCrcStart, offset + recordHeaderBytes);
  if (crc32(body, crc32(header)) !== view.getUint32(0, true)) return { verdict: 'corrupt', reason: 'record checksum mismatch' };
  const type = view.getUint8(20);
  if (type === recordTypeReserved) return { verdict: 'corrupt', reason: 'record type 0 is reserved' };
  const flags = view.getUint8(21);
  if ((flags & ~recordFlagsKnown) !== 0) return { verdict: 'corrupt', reason: `record flags 0x${flags.toString(16).padStart(2, '0')} set a reserved bit` };
  if (view.getUint16(22, true) !== 0 || view.getUint32(28, true) !== 0) return { verdict: 'corrupt', reason: 'record reserved bytes are not zero' };
  const recordSegment = view.getUint32(16, true);
  if (recordSegment !== segmentId) return { verdict: 'corrupt', reason: `record belongs to segment ${recordSegment}, found in segment ${segmentId}` };
  const seq = readU64(view, 8);
  if (seq !== expectedSeq) return { verdict: 'corrupt', reason: `record sequence ${seq ?? 'out of range'} where ${expectedSeq} was expected` };
  const indexInGroup = view.getUint32(24, true);
  if (indexInGroup >= seq) return { verdict: 'corrupt', reason: `record index in group ${indexInGroup} beyond its sequence ${seq}` };
  return { verdict: 'record', seq, type, groupBaseSeq: seq - indexInGroup, overlapped: (flags & recordFlagOverlapped) !== 0, body, next: end };
}

/**
 * What follows a bad frame, as far as later commit groups go:
 *   none        no valid record of a later group
 *   overlapped  valid records of exactly one later group, every one flagged overlapped:
 *               written while the bad frame's group was still in flight, never acknowledged
 *   evidence    a later group that was written only after the bad frame's group was durable
 *   too-costly  the search ran out of its checksum budget before it could tell
 */
export type LaterGroupSearch =
  | { readonly verdict: 'none' }
  | { readonly verdict: 'overlapped'; readonly offset: number; readonly groupBaseSeq: number }
  | { readonly verdict: 'evidence'; readonly offset: number; readonly reason: string }
  | { readonly verdict: 'too-costly' };

/**
 * Searches `bytes` from `from` on for valid records of `segmentId` written in a commit group
 * starting after sequence `badSeq`. Such a record proves that the group holding `badSeq` had
 * been durable before it was written, so a bad frame at `badSeq` is corruption in the middle
 * of the log, not a torn tail. The one exception, when `options.excuseOverlapped`: every such
 * record is flagged overlapped and of one group, which may have been written while the bad
 * frame's group was in flight (at most two writes are, so a second later group is evidence).
 *
 * Every byte offset is a candidate, bodies of valid records included: a record found inside
 * another can only add evidence, never hide it, so bytes in a body can turn a torn tail into a
 * refusal but never a refusal into a torn tail. Cheap checks come before the checksum.
 */
export function searchLaterGroups(bytes: Uint8Array, from: number, segmentId: number, badSeq: number, options: { readonly excuseOverlapped: boolean }): LaterGroupSearch {
  const view = viewOf(bytes);
  // Hostile bytes can hold a plausible header at every offset; each costs a checksum over the
  // rest of the file. Past this budget the search gives up and recovery refuses to start (safe).
  let checksumBytesLeft = scanChecksumBytesMax;
  const haystack = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const needle = Buffer.alloc(4);
  needle.writeUInt32LE(segmentId);
  let overlapped: { readonly offset: number; readonly groupBaseSeq: number } | undefined;
  // The segment id field sits 16 bytes into a header: let the native search find candidates.
  for (let found = haystack.indexOf(needle, from + 16); found !== -1; found = haystack.indexOf(needle, found + 1)) {
    const offset = found - 16;
    if (offset + recordHeaderBytes > bytes.length) break;
    const length = view.getUint32(offset + 4, true);
    if (length > bytes.length - offset - recordHeaderBytes) continue;
    const seq = readU64(view, offset + 8);
    if (seq === undefined || seq - view.getUint32(offset + 24, true) <= badSeq) continue;
    checksumBytesLeft -= recordHeaderBytes + length;
    if (checksumBytesLeft < 0) return { verdict: 'too-costly' };
    const frame = decodeFrame(bytes, offset, segmentId, seq);
    if (frame.verdict !== 'record') continue;
    if (!options.excuseOverlapped || !frame.overlapped) return { verdict: 'evidence', offset, reason: `a valid record of a later commit group at offset ${offset}` };
    if (overlapped === undefined) overlapped = { offset, groupBaseSeq: frame.groupBaseSeq };
    else if (frame.groupBaseSeq !== overlapped.groupBaseSeq) {
      return { verdict: 'evidence', offset, reason: `valid records of two later commit groups at offsets ${overlapped.offset} and ${offset}` };
    }
  }
  return overlapped === undefined ? { verdict: 'none' } : { verdict: 'overlapped', ...overlapped };
}
