// OUTCOME bodies (engine/records.ts) as docs/format/engine-records.md lays them out: 32 bytes an
// entry, little-endian: add-seq f64, row u32, kind u8, reason u8, status u16, attempts u32,
// more-rows u32, retry-at f64, an entry standing for rows row … row + more-rows of its ADD with
// one outcome. Written field by field through a DataView here, byte for byte what encodeOutcomes
// writes through typed arrays, and decoded back to the same outcomes, one per row.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { decodeOutcomes, emptyOutcomes, encodeOutcomes, outcomeEntryBytes } from '../../engine/records.ts';
import { propertyRuns } from '../helpers/property.ts';

interface Outcome {
  seq: number;
  row: number;
  kind: number;
  reason: number;
  status: number;
  attempts: number;
  retryAtMs: number;
}

const outcome = fc.record({
  seq: fc.integer({ min: 0, max: 2 ** 48 - 1 }),
  row: fc.nat({ max: 2 ** 24 - 1 }),
  kind: fc.integer({ min: 1, max: 3 }),
  reason: fc.nat({ max: 255 }),
  status: fc.nat({ max: 0xffff }),
  attempts: fc.nat({ max: 0xffffffff }),
  retryAtMs: fc.integer({ min: 0, max: 2 ** 50 }),
});

// Runs of rows that share an outcome (an Arrow batch's), cut short by the last row an id can
// name, next to single outcomes; a run may follow on from the one before or differ from it in
// one field only, which must end it.
const outcomes: fc.Arbitrary<Outcome[]> = fc
  .array(
    fc.record({
      first: outcome,
      length: fc.oneof(fc.constant(1), fc.integer({ min: 2, max: 30 })),
      nearRowEnd: fc.boolean(),
      change: fc.constantFrom('none', 'seq', 'row', 'kind', 'reason', 'status', 'attempts', 'retryAtMs'),
    }),
    { maxLength: 12 },
  )
  .map((runs) => {
    const list: Outcome[] = [];
    for (const { first, length, nearRowEnd, change } of runs) {
      const previous = list.at(-1);
      // Follow on from the last outcome, with one field changed (or none: the run goes on).
      const start = previous === undefined ? { ...first } : { ...previous, row: previous.row + 1 };
      if (previous !== undefined && change !== 'none') (start as unknown as Record<string, number>)[change] = (first as unknown as Record<string, number>)[change] as number;
      if (nearRowEnd) start.row = 2 ** 24 - 1 - (length >> 1);
      for (let i = 0; i < length; i++) list.push({ ...start, row: Math.min(start.row + i, 2 ** 32 - 1) });
    }
    return list;
  });

/** The documented encoding, written independently: an entry per run of same outcomes on consecutive rows (below 2^24) of one ADD. */
function expectedBody(list: Outcome[]): Uint8Array {
  const entries: Array<{ first: Outcome; more: number }> = [];
  for (const o of list) {
    const last = entries.at(-1);
    const same =
      last !== undefined &&
      o.seq === last.first.seq &&
      o.row === last.first.row + last.more + 1 &&
      o.row < 2 ** 24 &&
      o.kind === last.first.kind &&
      o.reason === last.first.reason &&
      o.status === last.first.status &&
      o.attempts === last.first.attempts &&
      o.retryAtMs === last.first.retryAtMs;
    if (same) last.more++;
    else entries.push({ first: o, more: 0 });
  }
  const bytes = new Uint8Array(entries.length * outcomeEntryBytes);
  const view = new DataView(bytes.buffer);
  entries.forEach(({ first: o, more }, e) => {
    const at = e * outcomeEntryBytes;
    view.setFloat64(at, o.seq, true);
    view.setUint32(at + 8, o.row, true);
    view.setUint8(at + 12, o.kind);
    view.setUint8(at + 13, o.reason);
    view.setUint16(at + 14, o.status, true);
    view.setUint32(at + 16, o.attempts, true);
    view.setUint32(at + 20, more, true);
    view.setFloat64(at + 24, o.retryAtMs, true);
  });
  return bytes;
}

function columns(list: Outcome[]) {
  const out = emptyOutcomes(list.length);
  list.forEach((o, i) => {
    out.seqs[i] = o.seq;
    out.rows[i] = o.row;
    out.kinds[i] = o.kind;
    out.reasons[i] = o.reason;
    out.statuses[i] = o.status;
    out.attempts[i] = o.attempts;
    out.retryAtMs[i] = o.retryAtMs;
  });
  out.count = list.length;
  return out;
}

test('encodeOutcomes writes the documented layout, runs sharing an entry, and decodeOutcomes reads back every row', () => {
  fc.assert(
    fc.property(fc.oneof(outcomes, fc.array(outcome, { maxLength: 40 })), (list) => {
      const body = encodeOutcomes(columns(list));
      assert.deepEqual(Buffer.from(body), Buffer.from(expectedBody(list)));
      const decoded = decodeOutcomes(body);
      assert.ok(decoded !== undefined);
      assert.equal(decoded.count, list.length);
      assert.deepEqual([...decoded.seqs], list.map((o) => o.seq));
      assert.deepEqual([...decoded.rows], list.map((o) => o.row));
      assert.deepEqual([...decoded.kinds], list.map((o) => o.kind));
      assert.deepEqual([...decoded.reasons], list.map((o) => o.reason));
      assert.deepEqual([...decoded.statuses], list.map((o) => o.status));
      assert.deepEqual([...decoded.attempts], list.map((o) => o.attempts));
      assert.deepEqual([...decoded.retryAtMs], list.map((o) => o.retryAtMs));
    }),
    propertyRuns(200),
  );
});

test('a delivered batch of 10,000 rows is one 32-byte entry', () => {
  const list = Array.from({ length: 10_000 }, (_, row) => ({ seq: 42, row, kind: 1, reason: 0, status: 200, attempts: 1, retryAtMs: 1.7e12 }));
  assert.equal(encodeOutcomes(columns(list)).length, outcomeEntryBytes);
});

test('entries whose rows run past the last row an id can name, or stand for too many outcomes, are malformed', () => {
  const entry = (row: number, more: number): Uint8Array => {
    const bytes = new Uint8Array(outcomeEntryBytes);
    const view = new DataView(bytes.buffer);
    view.setFloat64(0, 7, true);
    view.setUint32(8, row, true);
    view.setUint8(12, 1);
    view.setUint32(20, more, true);
    return bytes;
  };
  assert.equal(decodeOutcomes(entry(2 ** 24 - 3, 2))?.count, 3);
  assert.equal(decodeOutcomes(entry(2 ** 24 - 3, 3)), undefined);
  assert.equal(decodeOutcomes(entry(0, 0xffffffff)), undefined);
  // Two full runs: twice the outcomes a record may stand for.
  assert.equal(decodeOutcomes(Buffer.concat([entry(0, 2 ** 24 - 1), entry(0, 2 ** 24 - 1)])), undefined);
  // A single outcome keeps any row, as before runs.
  assert.equal(decodeOutcomes(entry(0xffffffff, 0))?.rows[0], 0xffffffff);
});
