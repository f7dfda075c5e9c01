// The engine over the simulated file system: admit, get, cancel, validation, capacity, and
// the same state after reopening; power loss in the middle of admits and cancels.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { Int32, makeData, makeVector, type Table, tableFromArrays, tableToIPC, Utf8, vectorFromArray } from 'apache-arrow';
import { batchFromSpecs } from '../../engine/batch/timer-batch.ts';
import { type Admitted, type Clock, Engine } from '../../engine/engine.ts';
import { errorCodes, isFermataError } from '../../engine/errors.ts';
import { decodeTimerId, encodeTimerId } from '../../engine/ids.ts';
import { emptyOutcomes, outcomeKind } from '../../engine/records.ts';
import { Prng } from '../helpers/prng.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';

const dataDir = '/data';
const t0 = 1_796_220_000_000;

function manualClock(start = t0): Clock & { set(ms: number): void } {
  let now = start;
  return { now: () => now, set: (ms) => (now = ms) };
}

const idsOf = (admitted: Admitted): string[] => Array.from({ length: admitted.rows }, (_, row) => admitted.idOf(row));

test('admit makes timers durable and gettable; ids carry sequence, row and fire time', async () => {
  const fs = new SimFileSystem({ seed: 1 });
  const engine = await Engine.open({ dataDir, fs, clock: manualClock() });
  const admitted = await engine.admit(
    batchFromSpecs([
      { fireAtMs: t0 + 1000, target: 'https://a.example/hook', payload: 'one', queue: 'billing' },
      { fireAtMs: t0 + 500, target: 'https://b.example/', payload: 'two', headers: { 'x-trace': 'abc' } },
    ]),
  );
  const ids = idsOf(admitted);
  assert.deepEqual(decodeTimerId(ids[1] as string), { seq: admitted.seq, row: 1, fireAtMs: t0 + 500 });
  assert.deepEqual(engine.get(ids[0] as string), {
    id: ids[0],
    state: 'pending',
    revision: 1,
    fireAtMs: t0 + 1000,
    dueAtMs: t0 + 1000,
    attempts: 0,
    queue: 'billing',
    target: 'https://a.example/hook',
    key: null,
    lastStatus: null,
    lastError: null,
    lastAttemptAtMs: null,
    nextAttemptAtMs: null,
    callback: null,
    failureCallback: null,
    headers: {},
    payload: new TextEncoder().encode('one'),
    createdAtMs: t0,
  });
  assert.deepEqual(engine.get(ids[1] as string)?.headers, { 'x-trace': 'abc' }, 'headers as the add gave them');
  assert.equal(new TextDecoder().decode(engine.payloadOf(ids[1] as string)), 'two');
  assert.equal(engine.stats().pending, 2);
  assert.equal(engine.get('0'.repeat(24)), undefined);
  const parts = decodeTimerId(ids[0] as string) as { seq: number; row: number; fireAtMs: number };
  const forged = encodeTimerId(parts.seq, parts.row, parts.fireAtMs + 1);
  assert.equal(engine.get(forged), undefined, 'an id with the right sequence and row but another fire time is not that timer');
  assert.equal(await engine.cancel(forged), 'not-found');
  assert.equal(engine.get('not-an-id'), undefined);
  await engine.close();
});

test('cancel: durable, idempotent, unknown ids not found; state survives reopening', async () => {
  const fs = new SimFileSystem({ seed: 2 });
  let engine = await Engine.open({ dataDir, fs, clock: manualClock() });
  const ids = idsOf(await engine.admit(batchFromSpecs([0, 1, 2].map((i) => ({ fireAtMs: t0 + i, target: 'https://a.example/' })))));
  const [first, second] = await Promise.all([engine.cancel(ids[1] as string), engine.cancel(ids[1] as string)]);
  assert.equal(first, 'cancelled');
  assert.equal(second, 'cancelled', 'a cancel racing the first one shares its outcome');
  assert.equal(await engine.cancel(ids[1] as string), 'cancelled');
  assert.equal(await engine.cancel('zzzzzzzzzzzzzzzzzzzzzzzz'), 'not-found');
  assert.equal(engine.stats().pending, 2, 'a cancelled timer leaves the heap');
  await engine.close();

  engine = await Engine.open({ dataDir, fs, clock: manualClock() });
  assert.deepEqual(
    ids.map((id) => engine.get(id)?.state),
    ['pending', 'cancelled', 'pending'],
  );
  assert.equal(engine.stats().pending, 2);
  await engine.close();
});

test('cancel of a handed-out timer the dispatcher has not sent: withdrawn, it is cancelled for good; started, too late; a failed CANCEL puts it back', async () => {
  const fs = new SimFileSystem({ seed: 4 });
  let engine = await Engine.open({ dataDir, fs, clock: manualClock() });
  const ids = idsOf(await engine.admit(batchFromSpecs([0, 1, 2].map(() => ({ fireAtMs: t0 + 100, target: 'https://a.example/' })))));
  // Taken 100 ms ahead, as the dispatcher takes request-mode timers.
  const slice = engine.takeDue(t0, 10, undefined, { ms: 1000, queue: () => true });
  assert.equal(slice.count, 3);
  const asked: number[] = [];
  // The dispatcher's answer: rows 0 and 2 are still held, row 1 was sent.
  engine.setWithdrawHook((_seq, row) => {
    asked.push(row);
    return row !== slice.rows[1];
  });
  assert.equal(await engine.cancel(ids[0] as string), 'cancelled');
  assert.equal(await engine.cancel(ids[1] as string), 'too-late', 'sent already');
  assert.deepEqual(asked, [slice.rows[0], slice.rows[1]]);
  assert.deepEqual(ids.map((id) => engine.get(id)?.state), ['cancelled', 'delivering', 'delivering']);
  fs.failAfter('datasync', 0, 'EIO');
  await assert.rejects(engine.cancel(ids[2] as string));
  assert.equal(engine.get(ids[2] as string)?.state, 'pending', 'its CANCEL was not logged: waiting again, not "delivering" for ever');
  assert.equal(engine.nextDueMs(), t0 + 100, 'and back in the heap');
  await engine.close();
  engine = await Engine.open({ dataDir, fs, clock: manualClock() });
  // (The failed cancel's record was written before its sync failed: a restart may find it either way.)
  assert.deepEqual([ids[0], ids[1]].map((id) => engine.get(id as string)?.state), ['cancelled', 'pending'], 'the withdrawn timer stays cancelled after a restart; the sent one is delivered again');
  await engine.close();
});

test('Arrow batches are logged whole: delay_ms keeps its accept time across a restart', async () => {
  const fs = new SimFileSystem({ seed: 3 });
  const clock = manualClock();
  let engine = await Engine.open({ dataDir, fs, clock });
  const ipc = tableToIPC(
    tableFromArrays({
      delay_ms: makeVector(makeData({ type: new Int32(), length: 2, data: Int32Array.of(0, 60_000) })),
      target: vectorFromArray(['https://a.example/', 'https://a.example/'], new Utf8()),
    } as never) as unknown as Table,
    'stream',
  );
  const ids = idsOf(await engine.admitArrow(ipc));
  await engine.close();
  clock.set(t0 + 3_600_000);
  engine = await Engine.open({ dataDir, fs, clock });
  assert.deepEqual(
    ids.map((id) => engine.get(id)?.fireAtMs),
    [t0, t0 + 60_000],
  );
  await engine.close();
});

test('an invalid batch is refused whole, naming column and row, and nothing is logged', async () => {
  const fs = new SimFileSystem({ seed: 4 });
  const engine = await Engine.open({ dataDir, fs, clock: manualClock() });
  const cases: Array<[Parameters<typeof batchFromSpecs>[0], string, number | undefined]> = [
    [[{ fireAtMs: t0, target: 'https://a.example/' }, { fireAtMs: t0, target: 'ftp://a.example/' }], 'target', 1],
    [[{ fireAtMs: t0, target: 'https://a.example/', key: 'k'.repeat(257) }], 'key', 0],
    [[{ fireAtMs: t0 + 0.5, target: 'https://a.example/' }], 'fire_at', 0],
    [[{ fireAtMs: t0, target: 'https://a.example/', queue: 'bad queue' }], 'queue', 0],
    [[{ fireAtMs: t0, target: 'https://a.example/', headers: { 'fermata-attempt': '9' } }], 'headers', 0],
    [[], 'fire_at', undefined],
  ];
  for (const [specs, column, row] of cases) {
    await assert.rejects(engine.admit(batchFromSpecs(specs)), (err) => isFermataError(err, errorCodes.batchInvalid) && err.details.column === column && err.details.row === row);
  }
  assert.equal(engine.log.lastSeq, 0, 'no refused batch reached the log');
  await engine.close();
});

test('a full store refuses with CAPACITY_FULL before logging, counting rows still in flight', async () => {
  const fs = new SimFileSystem({ seed: 5 });
  const engine = await Engine.open({ dataDir, fs, clock: manualClock(), store: { capacityMax: 4, capacityInitial: 2 } });
  const spec = { fireAtMs: t0, target: 'https://a.example/' };
  const first = engine.admit(batchFromSpecs([spec, spec, spec]));
  await assert.rejects(engine.admit(batchFromSpecs([spec, spec])), (err) => isFermataError(err, errorCodes.capacityFull));
  await first;
  assert.equal(engine.log.lastSeq, 1);
  await engine.close();
});

test('power loss during admits and cancels: acknowledged work survives, batches are whole', { timeout: 300_000 }, async () => {
  for (let seed = 1; seed <= 300; seed++) {
    const prng = new Prng(seed);
    const fs = new SimFileSystem({ seed });
    let image: SimFileSystem | undefined;
    const crashAt = 8 + prng.below(120);
    fs.setFault(() => {
      if (image === undefined && fs.opCount >= crashAt) image = fs.powerLoss();
      return undefined;
    });
    const admittedIds: string[][] = [];
    const attemptedBatches = new Map<string, number>();
    const cancelled: string[] = [];
    try {
      const engine = await Engine.open({ dataDir, fs, clock: manualClock(), walLimits: { segmentBytes: 4096 } });
      const work: Array<Promise<void>> = [];
      for (let b = 0; b < 12; b++) {
        const rows = 1 + prng.below(5);
        const specs = Array.from({ length: rows }, (_, r) => ({ fireAtMs: t0 + b * 10 + r, target: `https://t${b % 3}.example/`, payload: `b${b}r${r}` }));
        work.push(
          engine.admit(batchFromSpecs(specs)).then(async (admitted) => {
            const ids = idsOf(admitted);
            admittedIds.push(ids);
            if (prng.below(2) === 0 && (await engine.cancel(ids[0] as string)) === 'cancelled') cancelled.push(ids[0] as string);
          }),
        );
        for (let r = 0; r < rows; r++) attemptedBatches.set(`b${b}r${r}`, rows);
      }
      await Promise.allSettled(work);
      await engine.close().catch(() => undefined);
    } catch {
      // The crash can come during open itself.
    }
    const recovered = await Engine.open({ dataDir, fs: image ?? fs.powerLoss(), clock: manualClock() });
    const context = `seed ${seed}`;
    for (const ids of admittedIds) for (const id of ids) assert.ok(recovered.get(id) !== undefined, `${context}: acknowledged timer ${id} lost`);
    for (const id of cancelled) assert.equal(recovered.get(id)?.state, 'cancelled', `${context}: acknowledged cancel of ${id} lost`);
    // Whole batches only: count recovered rows per batch via their payload tags.
    const rowsSeen = new Map<string, number>();
    for (let seq = 1; seq <= recovered.log.lastSeq; seq++) {
      for (let row = 0; ; row++) {
        const id = idsAt(recovered, seq, row);
        if (id === undefined) break;
        const tag = new TextDecoder().decode(recovered.payloadOf(id)).split('r')[0] as string;
        rowsSeen.set(tag, (rowsSeen.get(tag) ?? 0) + 1);
      }
    }
    for (const [tag, count] of rowsSeen) assert.equal(count, attemptedBatches.get(`${tag}r0`), `${context}: batch ${tag} recovered partly`);
    await recovered.close();
  }
});

/** The id of (seq, row) if the engine holds it, trying the fire times this test uses. */
function idsAt(engine: Engine, seq: number, row: number): string | undefined {
  for (let b = 0; b < 12; b++) {
    const id = encodeTimerId(seq, row, t0 + b * 10 + row);
    if (engine.get(id) !== undefined) return id;
  }
  return undefined;
}


test('power loss during delivery outcomes: every acknowledged outcome survives; the rest are delivered again', { timeout: 300_000 }, async () => {
  for (let seed = 1; seed <= 300; seed++) {
    const prng = new Prng(seed);
    const fs = new SimFileSystem({ seed });
    const clock = manualClock();
    const setup = await Engine.open({ dataDir, fs, clock });
    const admitted = await setup.admit(batchFromSpecs(Array.from({ length: 20 }, (_, i) => ({ fireAtMs: t0 + i, target: 'https://a.example/' }))));
    await setup.close();
    let image: SimFileSystem | undefined;
    const crashAt = fs.opCount + 4 + prng.below(40);
    fs.setFault(() => {
      if (image === undefined && fs.opCount >= crashAt) image = fs.powerLoss();
      return undefined;
    });
    const settled = new Map<string, string>();
    try {
      const engine = await Engine.open({ dataDir, fs, clock });
      const work: Array<Promise<void>> = [];
      for (let round = 0; round < 5; round++) {
        const slice = engine.takeDue(t0 + 100, 4);
        const outcomes = emptyOutcomes(slice.count);
        const expected: Array<[string, string]> = [];
        for (let i = 0; i < slice.count; i++) {
          const kind = [outcomeKind.delivered, outcomeKind.retry, outcomeKind.dead][prng.below(3)] as number;
          outcomes.seqs[i] = slice.seqs[i] as number;
          outcomes.rows[i] = slice.rows[i] as number;
          outcomes.kinds[i] = kind;
          outcomes.statuses[i] = 500;
          outcomes.attempts[i] = 1;
          outcomes.retryAtMs[i] = t0 + 10_000;
          expected.push([admitted.idOf(slice.rows[i] as number), kind === outcomeKind.delivered ? 'delivered' : kind === outcomeKind.retry ? 'retrying' : 'dead']);
        }
        outcomes.count = slice.count;
        work.push(engine.settle(outcomes).then(() => void expected.forEach(([id, state]) => settled.set(id, state))));
      }
      await Promise.allSettled(work);
      await engine.close().catch(() => undefined);
    } catch {
      // The crash can come during open itself.
    }
    const recovered = await Engine.open({ dataDir, fs: image ?? fs.powerLoss(), clock });
    for (const [id, state] of settled) assert.equal(recovered.get(id)?.state, state, `seed ${seed}: acknowledged outcome of ${id} lost`);
    for (let row = 0; row < 20; row++) {
      const view = recovered.get(admitted.idOf(row));
      assert.ok(view !== undefined, `seed ${seed}: timer ${row} lost`);
      if (!settled.has(view.id)) assert.ok(['pending', 'delivered', 'retrying', 'dead'].includes(view.state), `seed ${seed}: ${view.state}`);
    }
    await recovered.close();
  }
});

test('a second outcome for one delivery is refused, before or while the first is logged, and refusing releases the claims', async () => {
  const engine = await Engine.open({ dataDir, fs: new SimFileSystem({ seed: 3 }), clock: manualClock() });
  const admitted = await engine.admit(batchFromSpecs([0, 1, 2].map((i) => ({ fireAtMs: t0 + i, target: 'https://a.example/' }))));
  const slice = engine.takeDue(t0 + 10, 10);
  assert.equal(slice.count, 3);
  const delivered = (rows: readonly number[]) => {
    const outcomes = emptyOutcomes(rows.length);
    outcomes.count = rows.length;
    rows.forEach((row, i) => {
      outcomes.seqs[i] = slice.seqs[row] as number;
      outcomes.rows[i] = slice.rows[row] as number;
      outcomes.kinds[i] = outcomeKind.delivered;
      outcomes.statuses[i] = 200;
      outcomes.attempts[i] = 1;
    });
    return outcomes;
  };
  // Rows 0 and 1, then row 1 twice in one call: refused whole, row 0's claim released with it.
  await assert.rejects(engine.settle(delivered([0, 1, 1])), /two outcomes for one delivery/);
  const first = engine.settle(delivered([0, 1]));
  // Row 1 again while the first call is being logged.
  await assert.rejects(engine.settle(delivered([2, 1])), /two outcomes for one delivery/);
  await first;
  assert.equal(engine.get(admitted.idOf(0))?.state, 'delivered');
  assert.equal(engine.get(admitted.idOf(1))?.state, 'delivered');
  // Row 2's claim from the refused call was released: its own outcome goes through.
  assert.equal(engine.get(admitted.idOf(2))?.state, 'delivering');
  await engine.settle(delivered([2]));
  assert.equal(engine.get(admitted.idOf(2))?.state, 'delivered');
  await assert.rejects(engine.settle(delivered([2])), /not being delivered/);
  await engine.close();
});
