// Bulk cancel (engine/bulk-cancel.ts) and its record, CANCEL_BULK (9): the worked example of
// docs/format/engine-records.md byte for byte; a filter's set over resident and spilled timers
// cancelled by one record and replayed to exactly the same set after a restart; ids; timers
// being delivered counted apart and left alone; a refused append puts everything back.
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { test } from 'node:test';
import { batchFromSpecs, type TimerSpec } from '../../engine/batch/timer-batch.ts';
import { type Admitted, type Clock, Engine, type TimerFilter } from '../../engine/engine.ts';
import type { DurableLog } from '../../engine/log.ts';
import { decodeCancelBulk, encodeCancelBulk, recordType } from '../../engine/records.ts';
import { localLog } from '../../engine/wal/local-log.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';

const dataDir = '/data';
const hour = 3600_000;
const t0 = 1_796_220_000_000 - (1_796_220_000_000 % hour);
const target = 'https://a.example/hook';

const golden = Buffer.from(
  [
    '00 00 c0 2a d8 31 7a 42  02 00 00 00 01 00 00 00',
    '00 00 00 00 00 00 1c 40  00 00 00 00 00 00 00 00',
    '00 00 00 00 00 00 1c 40  02 00 00 00 00 00 00 00',
    '00 00 00 00 00 00 22 40  01 00 00 00 00 00 00 00',
    '00 00 e8 33 89 31 7a 42',
  ]
    .join(' ')
    .replaceAll(/\s+/g, ''),
  'hex',
);

test('CANCEL_BULK: the worked example of engine-records.md, byte for byte, and malformed bodies refused', () => {
  const cancel = {
    expiresAtMs: 1_800_086_400_000,
    seqs: Float64Array.of(7, 7),
    rows: Uint32Array.of(0, 2),
    spilledSeqs: Float64Array.of(9),
    spilledRows: Uint32Array.of(1),
    spilledFireAtMs: Float64Array.of(1_800_003_600_000),
  };
  assert.equal(recordType.cancelBulk, 9);
  assert.deepEqual(Buffer.from(encodeCancelBulk(cancel)), golden);
  assert.deepEqual(decodeCancelBulk(golden), cancel);
  assert.equal(decodeCancelBulk(golden.subarray(0, golden.length - 1)), undefined, 'a body cut short');
  assert.equal(decodeCancelBulk(Buffer.concat([golden, Buffer.alloc(16)])), undefined, 'bytes past the refs');
  const reservedSet = Buffer.from(golden);
  reservedSet[16 + 12] = 1;
  assert.equal(decodeCancelBulk(reservedSet), undefined, 'a reserved word that is not 0');
  assert.equal(decodeCancelBulk(golden.subarray(0, 8)), undefined, 'no counts');
});

interface Harness {
  readonly fs: SimFileSystem;
  readonly clock: Clock;
  /** While true, the log refuses CANCEL_BULK appends. */
  refuseBulk: boolean;
  open(): Promise<Engine>;
}

function harness(seed: number): Harness {
  const fs = new SimFileSystem({ seed });
  const clock = { now: () => t0 };
  const h: Harness = {
    fs,
    clock,
    refuseBulk: false,
    open: () =>
      Engine.open({
        dataDir,
        fs,
        clock,
        openLog: async (options) => refusing(await localLog({ dir: join(dataDir, 'wal'), fs })(options), h),
      }),
  };
  return h;
}

/** The log, but an append of CANCEL_BULK fails while the harness says so. */
function refusing(log: DurableLog, h: Harness): DurableLog {
  return new Proxy(log, {
    get(target, name) {
      if (name === 'append') {
        return (type: number, body: Uint8Array, options?: unknown) =>
          h.refuseBulk && type === recordType.cancelBulk ? Promise.reject(new Error('refused by the test')) : (target.append as (t: number, b: Uint8Array, o?: unknown) => Promise<number>)(type, body, options);
      }
      const value: unknown = Reflect.get(target, name, target);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

function specs(count: number, fromMs: number, stepMs: number, tag: string): TimerSpec[] {
  return Array.from({ length: count }, (_, i) => ({ fireAtMs: fromMs + i * stepMs, target, payload: `${tag} ${i}`, queue: i % 3 === 0 ? 'billing' : 'default', key: `${tag}-${i}` }));
}

const idsOf = (admitted: Admitted): string[] => Array.from({ length: admitted.rows }, (_, row) => admitted.idOf(row));

/** 30 resident timers (due within the hour) and 60 spilled ones. */
async function filled(engine: Engine): Promise<{ near: string[]; far: string[] }> {
  const near = idsOf(await engine.admit(batchFromSpecs(specs(30, t0 + 1000, 60_000, 'near'))));
  const far = idsOf(await engine.admit(batchFromSpecs(specs(60, t0 + 10 * hour, hour / 4, 'far'))));
  await engine.checkpoint(t0 + 3 * hour);
  assert.equal(engine.stats().spill.spilled, 60);
  return { near, far };
}

async function idsWhere(engine: Engine, filter: TimerFilter): Promise<string[]> {
  return (await engine.listTimers(filter, 1000)).timers.map((timer) => timer.id);
}

test('a filter cancels resident and spilled timers with one record, and a restart replays exactly that set', async () => {
  const h = harness(51);
  let engine = await h.open();
  const { near, far } = await filled(engine);
  const billing = [...near, ...far].filter((_, i) => (i < 30 ? i : i - 30) % 3 === 0);
  const seqBefore = engine.log.lastSeq;
  assert.deepEqual(await engine.bulkCancel({ filter: { queue: 'billing' } }), { cancelled: billing.length, inFlight: 0 });
  assert.equal(engine.log.lastSeq, seqBefore + 1, 'one record');
  const cancelled = await idsWhere(engine, { state: 'cancelled' });
  assert.deepEqual([...cancelled].sort(), [...billing].sort());
  assert.deepEqual(await idsWhere(engine, { queue: 'billing', state: 'pending' }), []);
  assert.equal(engine.stats().pending, 90 - billing.length);
  assert.equal(engine.stats().spill.spilled, 40);
  assert.equal((await engine.lookup(far[3] as string))?.state, 'cancelled');
  assert.deepEqual({ bulk: engine.stats().bulkCancels, timers: engine.stats().timersCancelledInBulk }, { bulk: 1, timers: billing.length });
  assert.deepEqual(await engine.bulkCancel({ filter: { queue: 'billing' } }), { cancelled: 0, inFlight: 0 }, 'nothing left to cancel: no record');
  assert.equal(engine.log.lastSeq, seqBefore + 1);
  // Time-bounded and by key prefix: only pending timers count.
  assert.deepEqual(await engine.bulkCancel({ filter: { keyPrefix: new TextEncoder().encode('far-1'), dueBeforeMs: t0 + 13 * hour } }), { cancelled: 3, inFlight: 0 }, 'far-1, far-10 and far-11: due before 13 h and not cancelled already');
  const after = (await idsWhere(engine, { state: 'cancelled' })).sort();
  await engine.close();

  engine = await h.open();
  assert.deepEqual((await idsWhere(engine, { state: 'cancelled' })).sort(), after, 'replay cancels the same set');
  assert.equal(engine.stats().pending, 90 - after.length);
  assert.equal((await engine.lookup(far[6] as string))?.state, 'cancelled');
  assert.equal((await engine.lookup(far[11] as string))?.state, 'cancelled');
  assert.equal((await engine.lookup(far[2] as string))?.state, 'pending');
  await engine.close();
});

test('ids: resident and spilled, named twice or unknown; delivering timers are counted apart and left alone', async () => {
  const h = harness(52);
  const engine = await h.open();
  const { near, far } = await filled(engine);
  const unknown = '0000000000000000000000zz';
  assert.deepEqual(await engine.bulkCancel({ ids: [near[1] as string, far[2] as string, far[2] as string, unknown, 'not an id'] }), { cancelled: 2, inFlight: 0 });
  assert.equal((await engine.lookup(far[2] as string))?.state, 'cancelled');
  assert.equal(engine.get(near[1] as string)?.state, 'cancelled');
  // The first five near timers go out for delivery: a purge of everything due within the hour leaves them.
  const slice = engine.takeDue(t0 + 4 * 60_000 + 1000, 100);
  assert.equal(slice.count, 4, 'near 0, 2, 3, 4 (near 1 is cancelled)');
  assert.deepEqual(await engine.bulkCancel({ filter: { dueBeforeMs: t0 + hour } }), { cancelled: 25, inFlight: 4 });
  assert.equal(engine.get(near[0] as string)?.state, 'delivering');
  await engine.close();
});

test('a set larger than one bulk cancel takes is refused whole, and so is one the store has no room for', async () => {
  const fs = new SimFileSystem({ seed: 54 });
  const engine = await Engine.open({ dataDir, fs, clock: { now: () => t0 }, limits: { bulkCancelTimersMax: 25 }, store: { capacityMax: 90 } });
  const { far } = await filled(engine);
  const seqBefore = engine.log.lastSeq;
  await assert.rejects(engine.bulkCancel({ filter: { queue: 'default' } }), (err: Error & { code?: string }) => err.code === 'WAL_RECORD_TOO_LARGE' && /more than 25 timers/.test(err.message));
  await assert.rejects(engine.bulkCancel({ filter: { dueAfterMs: t0 + 10 * hour } }), (err: Error & { code?: string }) => err.code === 'WAL_RECORD_TOO_LARGE', 'spilled ones count too');
  assert.equal(engine.log.lastSeq, seqBefore, 'nothing logged');
  assert.equal(engine.stats().pending, 90);
  // 45 resident timers in a store of 90: 25 cancelled timers from disk fit beside them, 25 more do not.
  await engine.admit(batchFromSpecs(specs(15, t0 + 2000, 60_000, 'extra')));
  assert.deepEqual(await engine.bulkCancel({ ids: far.slice(0, 25) }), { cancelled: 25, inFlight: 0 });
  await assert.rejects(engine.bulkCancel({ ids: far.slice(25, 50) }), (err: Error & { code?: string }) => err.code === 'CAPACITY_FULL');
  assert.equal((await engine.lookup(far[30] as string))?.state, 'pending', 'refused whole: still pending');
  assert.equal(engine.log.lastSeq, seqBefore + 2);
  await engine.close();
});

test('an append that fails puts every timer back: resident ones due again, spilled ones not tombstoned', async () => {
  const h = harness(53);
  const engine = await h.open();
  const { near, far } = await filled(engine);
  h.refuseBulk = true;
  await assert.rejects(engine.bulkCancel({ filter: { queue: 'default' } }), /refused by the test/);
  h.refuseBulk = false;
  assert.equal(engine.stats().pending, 90);
  assert.equal(engine.stats().spill.spilled, 60);
  assert.equal((await engine.lookup(far[1] as string))?.state, 'pending');
  assert.equal((await idsWhere(engine, { state: 'pending' })).length, 90);
  assert.equal(engine.takeDue(t0 + hour, 100).count, 30, 'every resident timer is in the due heap again');
  assert.equal(engine.get(near[1] as string)?.state, 'delivering');
  await engine.close();
});

test('a bulk cancel while a PATCH of a timer it names is synced decides on what the PATCH left: the timer, in its new slot, is cancelled', async () => {
  const h = harness(54);
  const engine = await h.open();
  const { near } = await filled(engine);
  const id = near[3] as string;
  // A payload change moves the timer to a new slot once its RESCHEDULE is durable, which is logged ahead of the cancel.
  const patching = engine.reschedule(id, { payload: 'moved' }, undefined);
  const cancelling = engine.bulkCancel({ ids: [id, near[4] as string] });
  assert.equal((await patching).outcome, 'rescheduled');
  assert.deepEqual(await cancelling, { cancelled: 2, inFlight: 0 });
  assert.equal(engine.get(id)?.state, 'cancelled');
  assert.equal(engine.get(id)?.revision, 2);
  await engine.close();
  const reopened = await h.open();
  assert.equal(reopened.get(id)?.state, 'cancelled', 'replay gives the same');
  await reopened.close();
});
