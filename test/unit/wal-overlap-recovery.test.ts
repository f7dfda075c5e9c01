// Overlapped groups (docs/format/wal.md, "Recovery decision table"): a group bad at offset X
// of the last segment, followed by exactly one later group whose records are all flagged
// overlapped, is a torn tail cut at X; an unflagged later record, a second later group, or any
// valid record after a torn segment header is refused. Plus the flags byte itself.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { crc32 } from '../../engine/checksum.ts';
import { errorCodes, isFermataError } from '../../engine/errors.ts';
import { decodeFrame } from '../../engine/wal/decoder.ts';
import { encodeRecordHeader } from '../../engine/wal/encoder.ts';
import { recordCrcStart, recordHeaderBytes, segmentFileName } from '../../engine/wal/format.ts';
import { Wal } from '../../engine/wal/wal.ts';
import { frameSegment, imageWith, walDir, type FramedRecord, type FramedSegment } from '../helpers/wal-image.ts';

const segment = segmentFileName(1);
const segmentPath = `${walDir}/${segment}`;

/** Acknowledged groups: sequences 1–3 and 4–5. */
const acknowledged: FramedRecord[][] = [
  [{ bodyBytes: 40 }, { bodyBytes: 7 }, { bodyBytes: 100 }],
  [{ bodyBytes: 64 }, { bodyBytes: 1 }],
];
/** Group A, sequences 6–8: the one damaged in every image. */
const groupA: FramedRecord[] = [{ bodyBytes: 50 }, { bodyBytes: 80 }, { bodyBytes: 20 }];
const aFirstSeq = 6;

function group(sizes: readonly number[], overlapped: boolean | readonly boolean[]): FramedRecord[] {
  return sizes.map((bodyBytes, i) => ({ bodyBytes, overlapped: typeof overlapped === 'boolean' ? overlapped : (overlapped[i] as boolean) }));
}

/** Offset of record `seq` (segment 1 starts at sequence 1). */
function startOf(framed: FramedSegment, seq: number): number {
  return framed.starts[seq - 1] as number;
}

const damages = {
  /** One bit flipped in the body of A's second record: X is that record. */
  'a bit flip in A': (framed: FramedSegment): { bytes: Uint8Array; x: number } => {
    const bytes = framed.bytes.slice();
    const x = startOf(framed, aFirstSeq + 1);
    bytes[x + recordHeaderBytes + 10] = (bytes[x + recordHeaderBytes + 10] as number) ^ 0x10;
    return { bytes, x };
  },
  /** A never reached the disk: its bytes are zeros. X is A's first record. */
  'A zeroed': (framed: FramedSegment): { bytes: Uint8Array; x: number } => {
    const bytes = framed.bytes.slice();
    const x = startOf(framed, aFirstSeq);
    bytes.fill(0, x, startOf(framed, aFirstSeq + groupA.length));
    return { bytes, x };
  },
};

type Outcome =
  | { readonly refused: true; readonly file: string; readonly offset: number; readonly reason: string }
  | { readonly refused: false; readonly lastSeq: number; readonly repairOffset: number | undefined; readonly onDisk: Uint8Array; readonly brokenCopy: Uint8Array | undefined };

async function openImage(bytes: Uint8Array): Promise<Outcome> {
  const fs = await imageWith(new Map([[segment, bytes]]));
  try {
    const wal = await Wal.open({ dir: walDir, fs });
    const lastSeq = wal.lastSeq;
    const repair = wal.recovery.repair;
    await wal.close();
    return {
      refused: false,
      lastSeq,
      repairOffset: repair?.offset,
      onDisk: fs.durableBytes(segmentPath) as Uint8Array,
      brokenCopy: repair === undefined ? undefined : fs.durableBytes(repair.brokenCopy),
    };
  } catch (err) {
    if (!isFermataError(err, errorCodes.walCorrupt)) throw err;
    return { refused: true, file: String(err.details.file), offset: Number(err.details.offset), reason: String(err.details.reason) };
  }
}

function assertRefusedAt(outcome: Outcome, x: number, context: string): void {
  assert.ok(outcome.refused, `${context}: must refuse to start`);
  assert.equal(outcome.file, segmentPath, context);
  assert.equal(outcome.offset, x, context);
}

for (const [damage, damaged] of Object.entries(damages)) {
  test(`${damage}, then one intact group flagged overlapped: a torn tail, cut at X with a .broken copy`, async () => {
    const framed = frameSegment(1, 1, [...acknowledged, groupA, group([30, 200], true)]);
    const { bytes, x } = damaged(framed);
    const outcome = await openImage(bytes);
    assert.ok(!outcome.refused, `refused: ${outcome.refused && outcome.reason}`);
    assert.equal(outcome.repairOffset, x);
    assert.deepEqual(outcome.onDisk, bytes.subarray(0, x), 'the segment ends at X: neither the rest of A nor B is kept');
    assert.equal(outcome.lastSeq, framed.starts.indexOf(x), 'every record before X, and none after it, is replayed');
    assert.deepEqual(outcome.brokenCopy, bytes, 'the whole damaged segment is kept aside');
  });

  test(`${damage}, then an intact group not flagged overlapped: refused, naming the file and X`, async () => {
    const { bytes, x } = damaged(frameSegment(1, 1, [...acknowledged, groupA, group([30, 200], false)]));
    assertRefusedAt(await openImage(bytes), x, damage);
  });

  test(`${damage}, then an overlapped group and a further intact group: refused`, async () => {
    for (const cOverlapped of [true, false]) {
      const { bytes, x } = damaged(frameSegment(1, 1, [...acknowledged, groupA, group([30, 200], true), group([12], cOverlapped)]));
      assertRefusedAt(await openImage(bytes), x, `${damage}, C ${cOverlapped ? '' : 'not '}flagged`);
    }
  });

  test(`${damage}, then a group with one record not flagged overlapped: refused`, async () => {
    for (const flags of [
      [true, false, true],
      [false, true, true],
      [true, true, false],
    ]) {
      const { bytes, x } = damaged(frameSegment(1, 1, [...acknowledged, groupA, group([30, 200, 9], flags)]));
      assertRefusedAt(await openImage(bytes), x, `${damage}, flags ${flags.join(',')}`);
    }
  });
}

test('a torn segment header followed by a valid record flagged overlapped: refused (no overlap excuses it)', async () => {
  const bytes = frameSegment(1, 1, [group([30, 200], true)]).bytes;
  bytes[3] = (bytes[3] as number) ^ 0x01; // the magic, under the header checksum
  const outcome = await openImage(bytes);
  assertRefusedAt(outcome, 0, 'torn segment header');
});

test('a valid record flagged overlapped whose body hides an unflagged later record: still refused', async () => {
  // A's first record is bad (X). Over A's second and third records lies a forged record of a
  // later group, flagged, whose checksummed body spans the genuine unflagged record C behind:
  // a search that skipped the bodies of the records it found would never see C.
  const framed = frameSegment(1, 1, [...acknowledged, groupA, group([30], false)]);
  const bytes = framed.bytes.slice();
  const x = startOf(framed, aFirstSeq);
  bytes[x + recordHeaderBytes + 3] = (bytes[x + recordHeaderBytes + 3] as number) ^ 0x01;
  const forged = startOf(framed, aFirstSeq + 1);
  const forgedBody = bytes.subarray(forged + recordHeaderBytes);
  encodeRecordHeader(bytes, new DataView(bytes.buffer), forged, { type: 1, seq: 10, segmentId: 1, indexInGroup: 0, overlapped: true }, [forgedBody], forgedBody.length, true);
  const frame = decodeFrame(bytes, forged, 1, 10);
  assert.ok(frame.verdict === 'record' && frame.overlapped && frame.next === bytes.length, 'the forged record is valid and reaches the end');
  assertRefusedAt(await openImage(bytes), x, 'forged overlapped record');
});

test('every bit flip in an image ending in an overlapped pair: refused before A, cut within A or B', { timeout: 120_000 }, async () => {
  const framed = frameSegment(1, 1, [...acknowledged, groupA, group([30, 200], true)]);
  const aStart = startOf(framed, aFirstSeq);
  const bStart = startOf(framed, aFirstSeq + groupA.length);
  for (let bit = 0; bit < framed.bytes.length * 8; bit++) {
    const bytes = framed.bytes.slice();
    const byte = bit >> 3;
    bytes[byte] = (bytes[byte] as number) ^ (1 << (bit & 7));
    const outcome = await openImage(bytes);
    if (byte < aStart) {
      assert.ok(outcome.refused, `flip at byte ${byte}, in an acknowledged group, must refuse to start`);
      continue;
    }
    assert.ok(!outcome.refused, `flip at byte ${byte}, in A or B, is a torn tail: ${outcome.refused && outcome.reason}`);
    const cutFrom = byte < bStart ? aFirstSeq - 1 : aFirstSeq + groupA.length - 1;
    assert.ok(outcome.lastSeq >= cutFrom && outcome.lastSeq < framed.starts.length - 1, `flip at byte ${byte}: kept up to ${outcome.lastSeq}`);
  }
});

/** Sets the flags byte of the record at `at` and checksums the record again. */
function withFlags(framed: FramedSegment, at: number, end: number, flags: number): Uint8Array {
  const bytes = framed.bytes.slice();
  bytes[at + 21] = flags;
  new DataView(bytes.buffer).setUint32(at, crc32(bytes.subarray(at + recordCrcStart, end)), true);
  return bytes;
}

test('the flags byte: 0 is not overlapped, 1 is overlapped, any other bit is corrupt', () => {
  const framed = frameSegment(1, 1, [group([5], false), group([5], true)]);
  const plain = decodeFrame(framed.bytes, startOf(framed, 1), 1, 1);
  const flagged = decodeFrame(framed.bytes, startOf(framed, 2), 1, 2);
  assert.equal(framed.bytes[startOf(framed, 1) + 21], 0, 'not overlapped: byte 21 is zero, as before flags');
  assert.equal(framed.bytes[startOf(framed, 2) + 21], 1);
  assert.ok(plain.verdict === 'record' && !plain.overlapped);
  assert.ok(flagged.verdict === 'record' && flagged.overlapped);
  for (const flags of [2, 3, 0x80, 0xff]) {
    const frame = decodeFrame(withFlags(framed, startOf(framed, 2), startOf(framed, 3), flags), startOf(framed, 2), 1, 2);
    assert.equal(frame.verdict, 'corrupt', `flags ${flags}`);
    assert.match(frame.verdict === 'corrupt' ? frame.reason : '', /record flags 0x[0-9a-f]{2} set a reserved bit/);
  }
  const cleared = decodeFrame(withFlags(framed, startOf(framed, 2), startOf(framed, 3), 0), startOf(framed, 2), 1, 2);
  assert.ok(cleared.verdict === 'record' && !cleared.overlapped);
});
