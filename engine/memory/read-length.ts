// How many bytes the next read into a buffer being made takes (prefaulted-buffers.ts reads
// /dev/zero into it a piece at a time). Main thread.
//
// From the view's byteLength, never its length: once this runs hot on small Buffers (the
// arena's 4 MiB slabs), Node 26's V8 (Maglev) computes a Buffer's `length - at` in 32 bits,
// so for a buffer past 2 GiB (the resident store's columns for 2^25 slots are 2,080 MiB) it gave
// a negative length, fs.read threw on it, and the admit that asked for the growth failed with a
// 500. Its own module: the miscompile shows where the function is small enough to be optimised
// alone, as it was in the service; test/unit/read-length.test.ts holds it there.

/** A buffer is read this much at a time, so that one dropped while it is being made stops after the read under way. */
export const readBytesMax = 16 * 1024 * 1024;

/** Bytes of the read into `buffer` from byte `at` on: the rest of it, up to readBytesMax. */
export function readLength(buffer: Uint8Array, at: number): number {
  return Math.min(readBytesMax, buffer.byteLength - at);
}
