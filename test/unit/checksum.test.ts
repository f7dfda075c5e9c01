// The log's CRC-32 (engine/checksum.ts) is zlib's function whichever implementation computes
// it: records written before the SIMD one came, and files written where it cannot load, must
// check out the same.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { crc32 as zlibCrc32 } from 'node:zlib';
import { crc32, crc32Simd } from '../../engine/checksum.ts';

const bytes = Uint8Array.from({ length: 70_000 }, (_, i) => (i * 131 + (i >> 8)) & 0xff);

test('crc32 answers what zlib does, for every length around the switch to SIMD and long inputs', () => {
  for (let length = 0; length <= 600; length++) assert.equal(crc32(bytes.subarray(0, length)), zlibCrc32(bytes.subarray(0, length)), `${length} bytes`);
  for (const length of [4096, 65_537, 70_000]) assert.equal(crc32(bytes.subarray(0, length)), zlibCrc32(bytes.subarray(0, length)), `${length} bytes`);
  // An unaligned view into a larger buffer.
  assert.equal(crc32(bytes.subarray(3, 3 + 5000)), zlibCrc32(bytes.subarray(3, 3 + 5000)));
});

test('crc32 continues from an earlier value, short and long parts mixed', () => {
  const whole = zlibCrc32(bytes);
  for (const cut of [0, 1, 31, 127, 128, 129, 4096, 69_999]) {
    assert.equal(crc32(bytes.subarray(cut), crc32(bytes.subarray(0, cut))), whole, `cut at ${cut}`);
  }
  assert.equal(crc32(new Uint8Array(0), 12345), 12345, 'nothing more: the value as it was');
});

test('the SIMD implementation loads where fermata runs (Linux x64)', { skip: process.platform !== 'linux' || process.arch !== 'x64' ? 'only Linux x64 is promised a prebuilt binary' : false }, () => {
  assert.equal(crc32Simd, true);
});
