// ByteArena.addRows (the batch insert path) against addRow called row by row on a second arena:
// the same refs (slab id and offset, written into the caller's columns) and the same bytes, for
// batches whose rows cross slab ends, exceed a slab, are empty, come in a picked order (`rows`)
// or have nothing in the second and third columns (the one-copy path), or are all multiples of
// 4 bytes long (the word copy), from columns whose values start anywhere in their buffers.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import type { BytesColumn } from '../../engine/batch/timer-batch.ts';
import { arenaOffsetSpan, ByteArena } from '../../engine/store/byte-arena.ts';
import { propertyRuns } from '../helpers/property.ts';

/** The parts as a column whose values start `shift` bytes into their buffer (a replayed record's lie anywhere). */
function column(parts: readonly Uint8Array[], shift = 0): BytesColumn {
  const offsets = new Int32Array(parts.length + 1);
  parts.forEach((part, i) => (offsets[i + 1] = (offsets[i] as number) + part.length));
  const values = new Uint8Array(shift + (offsets[parts.length] as number)).subarray(shift);
  parts.forEach((part, i) => values.set(part, offsets[i] as number));
  return { values, offsets };
}

const part = (lengthMax: number): fc.Arbitrary<Uint8Array> => fc.uint8Array({ maxLength: lengthMax });

const batch = fc.record({
  slabBytes: fc.integer({ min: 1, max: 64 }),
  // Earlier strings leave the current slab partly filled.
  before: fc.array(part(40), { maxLength: 4 }),
  firsts: fc.array(part(80), { minLength: 1, maxLength: 30 }),
  withRest: fc.boolean(),
  picked: fc.boolean(),
  // Every string a multiple of 4 bytes long, so that rows land 4-byte aligned (the word copy).
  wordSized: fc.boolean(),
  shift: fc.integer({ min: 0, max: 7 }),
  seed: fc.nat(),
});

const trimmedToWords = (bytes: Uint8Array): Uint8Array => bytes.subarray(0, bytes.length & ~3);

test('addRows lays out and refers to every row as addRow would, row by row', () => {
  fc.assert(
    fc.property(batch, fc.array(part(20), { maxLength: 30 }), ({ slabBytes, before: beforeAny, firsts: firstsAny, withRest, picked, wordSized, shift, seed }, restsAny) => {
      const [before, firsts, rests] = [beforeAny, firstsAny, restsAny].map((parts) => (wordSized ? parts.map(trimmedToWords) : parts)) as [Uint8Array[], Uint8Array[], Uint8Array[]];
      const rowCount = firsts.length;
      const first = column(firsts, shift);
      const second = column(firsts.map((_, i) => (withRest ? (rests[i] ?? new Uint8Array(0)) : new Uint8Array(0))));
      const third = column(
        firsts.map((_, i) => (withRest ? (rests[(i + 7) % Math.max(1, rests.length)] ?? new Uint8Array(0)) : new Uint8Array(0))),
        7 - shift,
      );
      // `rows`: a permutation of some rows (the engine passes one when a batch is admitted in part).
      const order = Array.from({ length: rowCount }, (_, i) => i).sort((a, b) => ((a * 7919 + seed) % 97) - ((b * 7919 + seed) % 97));
      const rows = picked ? Int32Array.from(order.slice(0, Math.max(1, rowCount - (seed % 3)))) : undefined;
      const count = rows === undefined ? rowCount : rows.length;
      // Distinct slots, not in row order (the store hands out freed slots first).
      const slots = Int32Array.from({ length: count + 3 }, (_, i) => count + 2 - i);

      const bulk = new ByteArena({ slabBytes });
      const oneByOne = new ByteArena({ slabBytes });
      for (const bytes of before) assert.equal(bulk.add(bytes), oneByOne.add(bytes));
      const slabOut = new Uint16Array(count + 3).fill(0xffff);
      const offsetOut = new Uint32Array(count + 3).fill(0xffffffff);
      bulk.addRows(first, second, third, rows, count, slots, slabOut, offsetOut);
      for (let i = 0; i < count; i++) {
        const row = rows === undefined ? i : (rows[i] as number);
        const ref = oneByOne.addRow(first, second, third, row);
        const slot = slots[i] as number;
        const bulkRef = (slabOut[slot] as number) * arenaOffsetSpan + (offsetOut[slot] as number);
        assert.equal(bulkRef, ref, `row ${row} (i ${i}) refers where addRow put it`);
        const length = (first.offsets[row + 1] as number) - (first.offsets[row] as number) + (second.offsets[row + 1] as number) - (second.offsets[row] as number) + (third.offsets[row + 1] as number) - (third.offsets[row] as number);
        assert.deepEqual(bulk.view(bulkRef, length), oneByOne.view(ref, length), `row ${row}'s bytes`);
      }
      assert.equal(bulk.bytesLive, oneByOne.bytesLive);
      assert.equal(bulk.bytesReserved, oneByOne.bytesReserved);
      assert.equal(bulk.slabCount, oneByOne.slabCount);
    }),
    propertyRuns(400),
  );
});
