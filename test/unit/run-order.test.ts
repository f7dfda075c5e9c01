// runOrder (engine/spill/run-order.ts) against a comparator sort by (dueAt, seq, row): the same
// order for timers spread over one bucket or many, with ties in dueAt (whole ms and fractions),
// buckets spread too far apart for its typed-array tally, and bucket widths too wide for its
// packed numeric keys; and it pauses between slices of the sorting.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { runOrder, type RunOrderColumns } from '../../engine/spill/run-order.ts';
import { propertyRuns } from '../helpers/property.ts';

const hour = 3_600_000;
const t0 = 1_796_220_000_000;

function columnsOf(timers: ReadonlyArray<{ dueAt: number; seq: number; row: number }>): RunOrderColumns {
  return {
    dueAt: Float64Array.from(timers, (timer) => timer.dueAt),
    logSeq: Float64Array.from(timers, (timer) => timer.seq),
    row: Uint32Array.from(timers, (timer) => timer.row),
  };
}

function modelOrder(columns: RunOrderColumns): number[] {
  const { dueAt, logSeq, row } = columns;
  return Array.from({ length: dueAt.length }, (_, i) => i).sort(
    (a, b) => (dueAt[a] as number) - (dueAt[b] as number) || (logSeq[a] as number) - (logSeq[b] as number) || (row[a] as number) - (row[b] as number),
  );
}

const noPause = (): Promise<void> => Promise.resolve();

// Few distinct values, so that ties on dueAt, then on seq, are common; offsets reach into
// neighbouring buckets, a few lie years away (past the typed-array tally's span of buckets),
// and some sit so deep in a very wide bucket that only the comparator sort orders them exactly.
const timer = fc.record({
  dueAt: fc.oneof(
    fc.integer({ min: 0, max: 40 }).map((ms) => t0 + ms),
    fc.integer({ min: 0, max: 3 * hour }).map((ms) => t0 + ms),
    fc.constantFrom(t0 + 0.25, t0 + 0.75, t0 + hour - 1, t0 + hour, t0 + 2 ** 21 * hour, 0),
    // Offsets so far into a bucket 2^50 ms wide that packing them with a position would lose bits.
    fc.integer({ min: 0, max: 3 }).map((ms) => 2 ** 49 + ms),
  ),
  seq: fc.integer({ min: 1, max: 4 }),
  row: fc.integer({ min: 0, max: 50 }),
});

test('runOrder puts timers in (dueAt, seq, row) order, as a comparator sort does', async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(timer, { maxLength: 400 }), fc.constantFrom(1000, hour, 2 ** 50), async (timers, widthMs) => {
      // (seq, row) pairs are unique in a store: one timer per logged row.
      const seen = new Set<string>();
      const unique = timers.filter((one) => !seen.has(`${one.seq}:${one.row}`) && seen.add(`${one.seq}:${one.row}`) !== undefined);
      const columns = columnsOf(unique);
      assert.deepEqual([...(await runOrder(columns, widthMs, 64, noPause))], modelOrder(columns));
    }),
    propertyRuns(200),
  );
});

test('runOrder of 100,000 timers over a month: the model order, pausing once a slice of rows is sorted', async () => {
  let seed = 7;
  const random = (): number => ((seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31);
  const timers = Array.from({ length: 100_000 }, (_, i) => ({ dueAt: t0 + Math.floor(random() * 30 * 24 * hour), seq: 1 + Math.floor(i / 10_000), row: i % 10_000 }));
  const columns = columnsOf(timers);
  let pauses = 0;
  const order = await runOrder(columns, hour, 16_384, async () => void pauses++);
  assert.deepEqual([...order], modelOrder(columns));
  assert.ok(pauses >= Math.floor(100_000 / 16_384), `paused ${pauses} times while sorting 100,000 rows in slices of 16,384`);
});

test('runOrder of nothing is empty', async () => {
  assert.equal((await runOrder(columnsOf([]), hour, 16, noPause)).length, 0);
});
