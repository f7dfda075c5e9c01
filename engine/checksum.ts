// CRC-32 (IEEE 802.3, as zlib computes it) of the log's records, spill runs, manifests and key
// files. node:zlib's crc32 runs at 2 GB/s here, which made it 5% of Arrow ingest's main thread
// (every logged byte is checksummed once) and 11% of a replay (every byte again); the SIMD
// implementation of @node-rs/crc32 (crc32fast, PCLMULQDQ on x86) runs at 7.8 GB/s on long
// inputs. Its calls cost more below ~128 bytes (napi: 150 ns against zlib's 142 for 64
// bytes, 97 against 165 for 256), so short inputs (record headers, single-timer records)
// stay with zlib. Both compute the same function, and continue from any earlier value, so
// the two may be mixed over one record. Where the native module cannot load (a platform
// without a prebuilt binary), zlib does all of it.
import { createRequire } from 'node:module';
import { crc32 as zlibCrc32 } from 'node:zlib';

/** Inputs at least this long go to the SIMD implementation. */
const simdBytesMin = 128;

type Crc32 = (data: Uint8Array, value?: number) => number;

function loadSimd(): Crc32 | undefined {
  try {
    const native = createRequire(import.meta.url)('@node-rs/crc32') as { crc32(input: Uint8Array, initialState?: number): number };
    // Checked once against zlib: a binding that loads but answers otherwise is not used.
    const probe = Uint8Array.from({ length: 300 }, (_, i) => (i * 7) & 0xff);
    if (native.crc32(probe, 12345) !== zlibCrc32(probe, 12345)) return undefined;
    return (data, value) => native.crc32(data, value);
  } catch {
    return undefined;
  }
}

const simd = loadSimd();

/** Whether the SIMD implementation is in use (the tests check it loads where it should). */
export const crc32Simd = simd !== undefined;

/** CRC-32 of `data`, continuing from `value` (the CRC of what came before it; 0 for none). */
export const crc32: Crc32 =
  simd === undefined ? (data, value = 0) => zlibCrc32(data, value) : (data, value = 0) => (data.length < simdBytesMin ? zlibCrc32(data, value) : simd(data, value));
