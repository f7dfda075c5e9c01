import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { decodeTimerId, encodeTimerId, idFireAtMax, idLength, idRowMax, idSequenceMax } from '../../engine/ids.ts';
import { propertyRuns } from '../helpers/property.ts';

const parts = fc.record({
  seq: fc.integer({ min: 0, max: idSequenceMax }),
  row: fc.integer({ min: 0, max: idRowMax }),
  fireAtMs: fc.integer({ min: 0, max: idFireAtMax }),
});

test('ids round-trip every field over their whole ranges', () => {
  fc.assert(
    fc.property(parts, ({ seq, row, fireAtMs }) => {
      const id = encodeTimerId(seq, row, fireAtMs);
      assert.equal(id.length, idLength);
      assert.match(id, /^[0-9a-hjkmnp-tv-z]+$/);
      assert.deepEqual(decodeTimerId(id), { seq, row, fireAtMs });
    }),
    propertyRuns(20_000),
  );
  assert.deepEqual(decodeTimerId(encodeTimerId(idSequenceMax, idRowMax, idFireAtMax)), { seq: idSequenceMax, row: idRowMax, fireAtMs: idFireAtMax });
  assert.equal(encodeTimerId(0, 0, 0), '0'.repeat(24));
});

test('ids sort by creation: sequence first, then row', () => {
  fc.assert(
    fc.property(parts, parts, (x, y) => {
      const byParts = x.seq - y.seq || x.row - y.row || x.fireAtMs - y.fireAtMs;
      const a = encodeTimerId(x.seq, x.row, x.fireAtMs);
      const b = encodeTimerId(y.seq, y.row, y.fireAtMs);
      assert.equal(Math.sign(byParts), a < b ? -1 : a > b ? 1 : 0);
    }),
    propertyRuns(20_000),
  );
});

test('malformed ids decode to undefined', () => {
  for (const bad of ['', 'x', '0'.repeat(23), '0'.repeat(25), 'i'.repeat(24), 'O'.repeat(24), '0'.repeat(23) + 'é', '0'.repeat(23) + 'U']) {
    assert.equal(decodeTimerId(bad), undefined, JSON.stringify(bad));
  }
});
