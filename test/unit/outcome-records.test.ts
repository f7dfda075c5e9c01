// OUTCOME bodies (engine/records.ts) as docs/format/engine-records.md lays them out: 32 bytes an
// outcome, little-endian: add-seq f64, row u32, kind u8, reason u8, status u16, attempts u32,
// reserved u32 = 0, retry-at f64; written field by field through a DataView here, byte for byte
// what encodeOutcomes writes through typed arrays, and decoded back to the same outcomes.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { decodeOutcomes, emptyOutcomes, encodeOutcomes, outcomeEntryBytes } from '../../engine/records.ts';
import { propertyRuns } from '../helpers/property.ts';

const outcome = fc.record({
  seq: fc.integer({ min: 0, max: 2 ** 48 - 1 }),
  row: fc.nat({ max: 2 ** 24 - 1 }),
  kind: fc.integer({ min: 1, max: 3 }),
  reason: fc.nat({ max: 255 }),
  status: fc.nat({ max: 0xffff }),
  attempts: fc.nat({ max: 0xffffffff }),
  retryAtMs: fc.integer({ min: 0, max: 2 ** 50 }),
});

test('encodeOutcomes writes the documented layout, and decodeOutcomes reads it back', () => {
  fc.assert(
    fc.property(fc.array(outcome, { maxLength: 40 }), (list) => {
      const outcomes = emptyOutcomes(list.length);
      list.forEach((o, i) => {
        outcomes.seqs[i] = o.seq;
        outcomes.rows[i] = o.row;
        outcomes.kinds[i] = o.kind;
        outcomes.reasons[i] = o.reason;
        outcomes.statuses[i] = o.status;
        outcomes.attempts[i] = o.attempts;
        outcomes.retryAtMs[i] = o.retryAtMs;
      });
      outcomes.count = list.length;
      const expected = new Uint8Array(list.length * outcomeEntryBytes);
      const view = new DataView(expected.buffer);
      list.forEach((o, i) => {
        const at = i * outcomeEntryBytes;
        view.setFloat64(at, o.seq, true);
        view.setUint32(at + 8, o.row, true);
        view.setUint8(at + 12, o.kind);
        view.setUint8(at + 13, o.reason);
        view.setUint16(at + 14, o.status, true);
        view.setUint32(at + 16, o.attempts, true);
        view.setFloat64(at + 24, o.retryAtMs, true);
      });
      const body = encodeOutcomes(outcomes);
      assert.deepEqual(Buffer.from(body), Buffer.from(expected));
      const decoded = decodeOutcomes(body);
      assert.ok(decoded !== undefined);
      assert.deepEqual([...decoded.seqs], list.map((o) => o.seq));
      assert.deepEqual([...decoded.attempts], list.map((o) => o.attempts));
      assert.deepEqual([...decoded.retryAtMs], list.map((o) => o.retryAtMs));
    }),
    propertyRuns(200),
  );
});
