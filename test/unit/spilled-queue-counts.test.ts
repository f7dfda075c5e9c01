// A queue's counts include its spilled timers (engine/spill/spilled-queue-counts.ts): under random
// sequences of adds to several queues, cancels, purges, PATCHes (moving timers between queues),
// deliveries, clock moves, checkpoints that spill the far future, promotions, restarts and
// restarts from a manifest without the counts (as an earlier release wrote it), each queue's
// waiting count equals its pending and retrying timers found by looking every timer up, and the
// queues' spilled counts add up to the spill tier's. A queue delete counts the spilled timers
// too. Plus the manifest field: written with the
// counts as of the checkpoint, refused when malformed, and a field this build does not know is
// ignored (how an earlier build reads a manifest that has the counts).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import fc from 'fast-check';
import { batchFromSpecs } from '../../engine/batch/timer-batch.ts';
import { type Clock, Engine } from '../../engine/engine.ts';
import { crc32 } from '../../engine/checksum.ts';
import { emptyOutcomes, outcomeKind } from '../../engine/records.ts';
import { decodeManifest, encodeManifest, readManifest, writeManifest } from '../../engine/spill/manifest.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';
import { propertyRuns } from '../helpers/property.ts';

const hour = 3_600_000;
const day = 24 * hour;
const t0 = 1_796_220_000_000 - (1_796_220_000_000 % hour) + 1234;
const spillDir = '/data/spill';
const target = 'https://a.example/';
const queues = ['default', 'a', 'b'] as const;

type Command =
  | { kind: 'admit'; queue: number; offsets: number[] }
  | { kind: 'cancel'; pick: number }
  | { kind: 'purge'; queue: number }
  | { kind: 'reschedule'; pick: number; offset: number; queue: number | undefined }
  | { kind: 'advance'; ms: number }
  | { kind: 'take'; max: number }
  | { kind: 'settle'; choices: number[] }
  | { kind: 'checkpoint'; hours: number }
  | { kind: 'promote'; hours: number }
  | { kind: 'restart'; withoutCounts: boolean };

const offset = fc.oneof(fc.integer({ min: -60_000, max: 2 * hour }), fc.integer({ min: 0, max: 2 * day }), fc.integer({ min: 0, max: 40 * day }));
const queue = fc.integer({ min: 0, max: queues.length - 1 });

const command: fc.Arbitrary<Command> = fc.oneof(
  { weight: 4, arbitrary: fc.record({ kind: fc.constant('admit' as const), queue, offsets: fc.array(offset, { minLength: 1, maxLength: 6 }) }) },
  fc.record({ kind: fc.constant('cancel' as const), pick: fc.nat() }),
  fc.record({ kind: fc.constant('purge' as const), queue }),
  fc.record({ kind: fc.constant('reschedule' as const), pick: fc.nat(), offset, queue: fc.option(queue, { nil: undefined }) }),
  fc.record({ kind: fc.constant('advance' as const), ms: fc.oneof(fc.integer({ min: 0, max: 90_000 }), fc.integer({ min: 0, max: 3 * day })) }),
  fc.record({ kind: fc.constant('take' as const), max: fc.integer({ min: 1, max: 5 }) }),
  fc.record({ kind: fc.constant('settle' as const), choices: fc.array(fc.integer({ min: 0, max: 2 }), { maxLength: 5 }) }),
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('checkpoint' as const), hours: fc.integer({ min: 1, max: 24 * 35 }) }) },
  fc.record({ kind: fc.constant('promote' as const), hours: fc.integer({ min: 0, max: 24 * 35 }) }),
  fc.record({ kind: fc.constant('restart' as const), withoutCounts: fc.boolean() }),
);

/** The manifest as a release from before the counts wrote it (no spilledQueues); false when there is none. */
async function dropCounts(fs: SimFileSystem): Promise<boolean> {
  const manifest = await readManifest(fs, spillDir);
  if (manifest === undefined) return false;
  const { spilledQueues: _dropped, ...before } = manifest;
  await writeManifest(fs, spillDir, decodeManifest(encodeManifest(before)));
  return true;
}

test('each queue\'s waiting count, resident and spilled, equals its timers looked up, through spills, promotions, cancels, purges, PATCHes and restarts', { timeout: 300_000 }, async () => {
  await fc.assert(
    fc.asyncProperty(fc.array(command, { maxLength: 40, size: 'max' }), fc.integer({ min: 1, max: 2 ** 30 }), async (commands, seed) => {
      let now = t0;
      const clock: Clock = { now: () => now };
      const fs = new SimFileSystem({ seed, maxExtraHops: 0 });
      const options = { dataDir: '/data', fs, clock, retention: { finishedMs: hour, deadMs: 2 * hour } };
      let engine = await Engine.open(options);
      const ids: string[] = [];
      const pick = (n: number): string => ids[n % Math.max(1, ids.length)] ?? 'zzzzzzzzzzzzzzzzzzzzzzzz';
      let delivering: Array<{ seq: number; row: number; attempt: number }> = [];
      const hourAfter = (hours: number): number => (Math.floor(now / hour) + hours) * hour;
      try {
        for (const step of commands) {
          if (step.kind === 'admit') {
            const admitted = await engine.admit(batchFromSpecs(step.offsets.map((ms) => ({ fireAtMs: now + ms, target, queue: queues[step.queue] as string }))));
            for (let row = 0; row < admitted.rows; row++) ids.push(admitted.idOf(row));
          } else if (step.kind === 'cancel') {
            await engine.cancel(pick(step.pick));
          } else if (step.kind === 'purge') {
            await engine.bulkCancel({ filter: { queue: queues[step.queue] as string } });
          } else if (step.kind === 'reschedule') {
            await engine.reschedule(pick(step.pick), { fireAtMs: now + step.offset, ...(step.queue === undefined ? {} : { queue: queues[step.queue] as string }) });
          } else if (step.kind === 'advance') {
            now += step.ms;
          } else if (step.kind === 'take') {
            const slice = engine.takeDue(now, step.max);
            for (let i = 0; i < slice.count; i++) delivering.push({ seq: slice.seqs[i] as number, row: slice.rows[i] as number, attempt: slice.attempts[i] as number });
          } else if (step.kind === 'settle') {
            const settled = delivering.slice(0, step.choices.length);
            delivering = delivering.slice(settled.length);
            const outcomes = emptyOutcomes(settled.length);
            settled.forEach((timer, i) => {
              outcomes.seqs[i] = timer.seq;
              outcomes.rows[i] = timer.row;
              outcomes.kinds[i] = [outcomeKind.delivered, outcomeKind.retry, outcomeKind.dead][step.choices[i] as number] as number;
              outcomes.statuses[i] = 500;
              outcomes.attempts[i] = timer.attempt;
              outcomes.retryAtMs[i] = now + 60_000;
            });
            outcomes.count = settled.length;
            await engine.settle(outcomes);
          } else if (step.kind === 'checkpoint') {
            await engine.checkpoint(hourAfter(step.hours));
          } else if (step.kind === 'promote') {
            const watermark = engine.stats().spill.watermarkMs;
            if (Number.isFinite(watermark)) await engine.promote(Math.max(watermark, hourAfter(step.hours)));
          } else {
            await engine.close();
            if (step.withoutCounts) await dropCounts(fs);
            engine = await Engine.open(options);
            delivering = [];
          }
          const expected = new Map<string, { waiting: number; inFlight: number }>(queues.map((name) => [name, { waiting: 0, inFlight: 0 }]));
          for (const id of ids) {
            const view = await engine.lookup(id);
            if (view === undefined) continue;
            const counts = expected.get(view.queue) as { waiting: number; inFlight: number };
            if (view.state === 'pending' || view.state === 'retrying') counts.waiting++;
            else if (view.state === 'delivering') counts.inFlight++;
          }
          let spilled = 0;
          for (const name of queues) {
            const counts = engine.queueCounts(name);
            assert.deepEqual({ waiting: counts.waiting, inFlight: counts.inFlight }, expected.get(name), `queue ${name} after ${step.kind}`);
            spilled += counts.spilled;
          }
          assert.equal(spilled, engine.dueHistogram().spilled, `the queues' spilled timers are the spill tier's, after ${step.kind}`);
        }
      } finally {
        await engine.close();
      }
    }),
    propertyRuns(30),
  );
});

test('a checkpoint writes each queue\'s spilled timers into the manifest; without them, they are counted from the runs at open', async () => {
  let now = t0;
  const fs = new SimFileSystem({ seed: 11, maxExtraHops: 0 });
  const options = { dataDir: '/data', fs, clock: { now: () => now } };
  let engine = await Engine.open(options);
  const far = (n: number, queueName: string) => batchFromSpecs(Array.from({ length: n }, (_, i) => ({ fireAtMs: t0 + 3 * day + i * 60_000, target, queue: queueName })));
  await engine.admit(far(5, 'a'));
  const b = await engine.admit(far(3, 'b'));
  await engine.admit(batchFromSpecs([{ fireAtMs: t0 + 60_000, target, queue: 'b' }]));
  assert.equal((await readManifest(fs, spillDir)) ?? 'none', 'none');
  await engine.checkpoint((Math.floor(t0 / hour) + 2) * hour);
  assert.deepEqual((await readManifest(fs, spillDir))?.spilledQueues, [['a', 5], ['b', 3]]);
  assert.deepEqual(engine.queueCounts('b'), { waiting: 4, inFlight: 0, spilled: 3 });
  // A cancel of a spilled timer leaves the count once durable; a checkpoint keeps what is left.
  assert.equal(await engine.cancel(b.idOf(0)), 'cancelled');
  assert.deepEqual(engine.queueCounts('b'), { waiting: 3, inFlight: 0, spilled: 2 });
  await engine.checkpoint();
  assert.deepEqual((await readManifest(fs, spillDir))?.spilledQueues, [['a', 5], ['b', 2]]);
  await engine.close();

  assert.ok(await dropCounts(fs));
  engine = await Engine.open(options);
  assert.deepEqual([engine.queueCounts('a'), engine.queueCounts('b')], [{ waiting: 5, inFlight: 0, spilled: 5 }, { waiting: 3, inFlight: 0, spilled: 2 }], 'counted from the runs, the tombstoned one left out');
  // A queue whose timers are all on disk is not empty: a delete is refused, counting them.
  await assert.rejects(engine.deleteQueue('a'), (err: Error & { code?: string; details?: { pending?: number } }) => err.code === 'QUEUE_NOT_EMPTY' && err.details?.pending === 5);
  // Every queue's timers promoted: nothing spilled, and the manifest says none.
  now = t0 + 4 * day;
  await engine.promote((Math.floor(now / hour) + 1) * hour);
  assert.deepEqual([engine.queueCounts('a').spilled, engine.queueCounts('b').spilled], [0, 0]);
  await engine.checkpoint();
  assert.deepEqual((await readManifest(fs, spillDir))?.spilledQueues, []);
  await engine.close();
});

/** A manifest's bytes with `extra` fields merged into its JSON document (header, pad and checksum made again). */
function withDocumentFields(bytes: Uint8Array, extra: Record<string, unknown>): Uint8Array {
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const jsonBytes = view.getUint32(16, true);
  const tombstones = view.getUint32(20, true);
  const document = { ...JSON.parse(new TextDecoder().decode(bytes.subarray(24, 24 + jsonBytes))), ...extra };
  const json = new TextEncoder().encode(JSON.stringify(document));
  const columns = bytes.subarray(bytes.length - 20 * tombstones);
  const columnsAt = Math.ceil((24 + json.length) / 8) * 8;
  const out = new Uint8Array(columnsAt + columns.length);
  out.set(bytes.subarray(0, 24));
  out.set(json, 24);
  out.set(columns, columnsAt);
  const outView = new DataView(out.buffer);
  outView.setUint32(16, json.length, true);
  outView.setUint32(8, crc32(out.subarray(12)), true);
  return out;
}

test('the manifest\'s spilledQueues: malformed lists are refused; a field a build does not know is read as absent', async () => {
  const fs = new SimFileSystem({ seed: 12, maxExtraHops: 0 });
  const engine = await Engine.open({ dataDir: '/data', fs, clock: { now: () => t0 } });
  await engine.admit(batchFromSpecs([{ fireAtMs: t0 + 3 * day, target, queue: 'a' }]));
  await engine.checkpoint((Math.floor(t0 / hour) + 2) * hour);
  await engine.close();
  const bytes = await fs.readFile(`${spillDir}/MANIFEST`);
  assert.deepEqual(decodeManifest(bytes).spilledQueues, [['a', 1]]);
  for (const bad of [{ spilledQueues: {} }, { spilledQueues: [['a', 0]] }, { spilledQueues: [['b', 1], ['a', 1]] }, { spilledQueues: [['a', 1.5]] }, { spilledQueues: [[1, 1]] }]) {
    assert.throws(() => decodeManifest(withDocumentFields(bytes, bad)), (err: Error & { code?: string }) => err.code === 'SPILL_CORRUPT' && /spilledQueues/.test(err.message), JSON.stringify(bad));
  }
  // A later release's field is ignored, as this release's spilledQueues is by one from before it.
  const later = decodeManifest(withDocumentFields(bytes, { laterField: [1, 2, 3] }));
  assert.deepEqual(later, decodeManifest(bytes));
});
