// Compaction (engine/spill/compaction.ts) against the simplest oracle: concatenate every
// input's rows, filter with `drop`, sort by (dueAt, seq, row). Property-tested with fast-check
// over random inputs (split into many small batches so the merge crosses batch boundaries),
// random tombstones, watermarks and per-input cut-offs. Also: the Tombstones set against a Map.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { keyHash } from '../../engine/store/key-index.ts';
import { timerState } from '../../engine/store/resident-store.ts';
import { compactRuns } from '../../engine/spill/compaction.ts';
import { readRunBucket, readRunKeys, type RunMeta, verifyRun, writeRun } from '../../engine/spill/run-file.ts';
import { bytesOf, type RunRows, RunRowsBuilder, sortRunRows } from '../../engine/spill/run-rows.ts';
import { Tombstones } from '../../engine/spill/tombstones.ts';
import { propertyRuns } from '../helpers/property.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';

const dir = '/data/spill';
const widthMs = 1000;
const encoder = new TextEncoder();

interface Timer {
  readonly seq: number;
  readonly row: number;
  readonly dueAtMs: number;
  readonly input: number;
  readonly key: string;
  readonly payload: string;
}

const timerArb = (inputs: number): fc.Arbitrary<Timer> =>
  fc.record({
    seq: fc.integer({ min: 1, max: 400 }),
    row: fc.integer({ min: 0, max: 3 }),
    dueAtMs: fc.integer({ min: 0, max: 6 * widthMs - 1 }),
    input: fc.integer({ min: 0, max: inputs - 1 }),
    key: fc.oneof(fc.constant(''), fc.string({ maxLength: 6 })),
    payload: fc.string({ maxLength: 40 }),
  });

function rowsOf(timers: readonly Timer[]): RunRows {
  const builder = new RunRowsBuilder(1);
  for (const t of timers) {
    builder.append(
      { seq: t.seq, row: t.row, fireAtMs: t.dueAtMs, dueAtMs: t.dueAtMs, state: timerState.pending, attempts: 0, lastStatus: 0, deadReason: 0 },
      `q${t.seq % 3}`,
      `https://t${t.seq % 2}.example/`,
      encoder.encode(t.key),
      encoder.encode(t.payload),
      new Uint8Array(0),
    );
  }
  return sortRunRows(builder.finish());
}

/** (seq, row, dueAt, key, payload, queue, target) of every row of every batch, in file order. */
async function readRun(fs: SimFileSystem, meta: RunMeta): Promise<string[]> {
  const out: string[] = [];
  for (let b = 0; b < meta.buckets.length; b++) {
    const rows = await readRunBucket(fs, dir, meta, b);
    const bucket = meta.buckets[b] as RunMeta['buckets'][number];
    for (let i = 0; i < rows.rows; i++) {
      assert.equal(Math.floor((rows.dueAtMs[i] as number) / widthMs) * widthMs, bucket.startMs, 'a row sits in its bucket');
      const text = (column: RunRows['keys']): string => new TextDecoder().decode(bytesOf(column, i));
      out.push(JSON.stringify([rows.seq[i], rows.row[i], rows.dueAtMs[i], text(rows.keys), text(rows.payload), rows.queues[rows.queueIndex[i] as number], rows.targets[rows.targetIndex[i] as number]]));
    }
  }
  return out;
}

const naive = (timers: readonly Timer[]): string[] =>
  [...timers]
    .sort((a, b) => a.dueAtMs - b.dueAtMs || a.seq - b.seq || a.row - b.row)
    .map((t) => JSON.stringify([t.seq, t.row, t.dueAtMs, t.key, t.payload, `q${t.seq % 3}`, `https://t${t.seq % 2}.example/`]));

test('compaction equals a naive merge: drops what drop says, keeps (dueAt, seq, row) order, buckets and keys right', async () => {
  const inputs = 3;
  await fc.assert(
    fc.asyncProperty(
      fc.uniqueArray(timerArb(inputs), { maxLength: 120, selector: (t) => `${t.seq}:${t.row}` }),
      fc.integer({ min: 0, max: 6 * widthMs }),
      fc.array(fc.integer({ min: 0, max: 6 * widthMs }), { minLength: inputs, maxLength: inputs }),
      fc.integer({ min: 0, max: 3 }),
      fc.integer({ min: 1, max: 2 ** 30 }),
      async (timers, watermarkMs, validFromMs, tombstoneEvery, seed) => {
        const fs = new SimFileSystem({ seed, maxExtraHops: 1 });
        await fs.mkdirp(dir);
        const metas: RunMeta[] = [];
        for (let input = 0; input < inputs; input++) {
          // Small batches: the merge crosses batch boundaries within buckets.
          metas.push(await writeRun(fs, dir, input + 1, 10, rowsOf(timers.filter((t) => t.input === input)), { bucketWidthMs: widthMs, batchRowsMax: 1 + (seed % 7) }));
        }
        const tombstones = new Tombstones(2);
        for (const [i, t] of timers.entries()) if (tombstoneEvery > 0 && i % (tombstoneEvery + 1) === 0) tombstones.add(t.seq, t.row, t.dueAtMs);
        const drop = (seq: number, row: number, dueAtMs: number, input: number): boolean => dueAtMs < watermarkMs || dueAtMs < (validFromMs[input] as number) || tombstones.has(seq, row);
        const meta = await compactRuns(fs, dir, metas, 9, 11, drop, { bucketWidthMs: widthMs, batchRowsMax: 5 });
        const kept = timers.filter((t) => !drop(t.seq, t.row, t.dueAtMs, t.input));
        assert.deepEqual(await readRun(fs, meta), naive(kept));
        assert.equal(meta.rows, kept.length);
        assert.ok(meta.buckets.every((bucket) => bucket.rows <= 5), 'batches respect batchRowsMax');
        const keys = (await readRunKeys(fs, dir, meta)).flatMap((section) => [...section]).sort((a, b) => a - b);
        assert.deepEqual(keys, kept.filter((t) => t.key !== '').map((t) => keyHash(encoder.encode(t.key))).sort((a, b) => a - b));
        await verifyRun(fs, dir, meta);
      },
    ),
    propertyRuns(60),
  );
});

test('compaction of a timer present in two inputs that drop keeps twice is a bug: it asserts, naming compaction', async () => {
  const fs = new SimFileSystem({ seed: 2 });
  await fs.mkdirp(dir);
  const timer: Timer = { seq: 5, row: 0, dueAtMs: 100, input: 0, key: '', payload: 'p' };
  const a = await writeRun(fs, dir, 1, 1, rowsOf([timer]), { bucketWidthMs: widthMs });
  const b = await writeRun(fs, dir, 2, 1, rowsOf([timer]), { bucketWidthMs: widthMs });
  await assert.rejects(compactRuns(fs, dir, [a, b], 3, 1, () => false, { bucketWidthMs: widthMs }), /a timer is in two inputs/);
  // Dropping the stale copy (by input) is how the caller resolves it.
  const meta = await compactRuns(fs, dir, [a, b], 4, 1, (_seq, _row, _due, input) => input === 0, { bucketWidthMs: widthMs });
  assert.equal(meta.rows, 1);
});

test('Tombstones behaves like a Map of (seq, row) → fire time, through merges of its recent list', () => {
  type Op = { kind: 'add' | 'delete' | 'has'; seq: number; row: number } | { kind: 'retain'; below: number } | { kind: 'columns' };
  const opArb: fc.Arbitrary<Op> = fc.oneof(
    fc.record({ kind: fc.constantFrom('add' as const, 'delete' as const, 'has' as const), seq: fc.integer({ min: 1, max: 30 }), row: fc.integer({ min: 0, max: 3 }) }),
    fc.record({ kind: fc.constant('retain' as const), below: fc.integer({ min: 0, max: 30 }) }),
    fc.record({ kind: fc.constant('columns' as const) }),
  );
  fc.assert(
    fc.property(fc.array(opArb, { maxLength: 200 }), fc.integer({ min: 1, max: 5 }), (ops, recentMax) => {
      const set = new Tombstones(recentMax);
      const model = new Map<string, number>();
      for (const op of ops) {
        if (op.kind === 'add') {
          const name = `${op.seq}:${op.row}`;
          assert.equal(set.add(op.seq, op.row, op.seq * 10 + op.row), !model.has(name));
          if (!model.has(name)) model.set(name, op.seq * 10 + op.row);
        } else if (op.kind === 'delete') {
          assert.equal(set.delete(op.seq, op.row), model.delete(`${op.seq}:${op.row}`));
        } else if (op.kind === 'has') {
          assert.equal(set.has(op.seq, op.row), model.has(`${op.seq}:${op.row}`));
          assert.equal(set.fireAtOf(op.seq, op.row), model.get(`${op.seq}:${op.row}`));
        } else if (op.kind === 'retain') {
          let removed = 0;
          for (const [name, fireAt] of model) if (fireAt < op.below * 10) (model.delete(name), removed++);
          assert.equal(set.retain((_seq, _row, fireAtMs) => fireAtMs >= op.below * 10), removed);
        } else {
          const columns = set.columns();
          const expected = [...model.entries()].map(([name, fireAt]) => [...name.split(':').map(Number), fireAt] as [number, number, number]).sort((a, b) => a[0] - b[0] || a[1] - b[1]);
          assert.deepEqual(Array.from(columns.seqs, (seq, i) => [seq, columns.rows[i], columns.fireAtMs[i]]), expected);
          assert.deepEqual(Tombstones.fromColumns(columns).columns(), columns);
        }
        assert.equal(set.size, model.size);
      }
    }),
    propertyRuns(300),
  );
});
