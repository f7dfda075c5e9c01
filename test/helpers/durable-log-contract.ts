// The engine over a DurableLog it is given, as engine/log.ts's contract asks, for any log: the
// in-memory log of test/unit/engine-durable-log.test.ts and the PostgreSQL log of
// test/integration/pg-log-engine.test.ts run these same tests. Admits, outcomes and cancels land
// in the log; a restart replays from it; a checkpoint truncates it; a fenced log stops the
// engine as a poisoned one does. Were the engine to reach around the interface (open a WAL of
// its own, or call a method of the local WAL), the records would not be in the log given and
// the tests would fail; the data directory is checked to hold no log of its own too.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { batchFromSpecs } from '../../engine/batch/timer-batch.ts';
import { type Admitted, type Clock, Engine } from '../../engine/engine.ts';
import { errorCodes, type FermataError, isFermataError } from '../../engine/errors.ts';
import type { LogOpener } from '../../engine/log.ts';
import { outcomeKind, recordType } from '../../engine/records.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';
import { outcomesFor } from './outcomes.ts';

/** One log's storage, outliving the engines opened over it. */
export interface ContractLog {
  /** Opens the log over this storage (each engine's open calls it). */
  readonly opener: LogOpener;
  /** The types of the records the log holds now, in order. */
  recordTypes(): Promise<number[]>;
  /** The highest sequence truncation dropped the log through (0: none). */
  truncatedThrough(): Promise<number>;
  /** Another owner takes the log over: the next append of the log open now is refused as fenced. */
  fence(): Promise<void>;
}

export interface ContractLogKind {
  /** Named in each test's title. */
  readonly name: string;
  /** A new, empty log. */
  newLog(): Promise<ContractLog>;
  /** false, or why the tests skip here. */
  readonly skip?: false | string;
}

const dataDir = '/data';
const hour = 3600_000;
const t0 = 1_796_220_000_000 - (1_796_220_000_000 % hour);
const target = 'https://a.example/hook';

function manualClock(start = t0): Clock & { set(ms: number): void } {
  let now = start;
  return { now: () => now, set: (ms) => (now = ms) };
}

const idsOf = (admitted: Admitted): string[] => Array.from({ length: admitted.rows }, (_, row) => admitted.idOf(row));

function open(fs: SimFileSystem, log: ContractLog, clock: Clock, onLogPoisoned?: (poison: FermataError) => void): Promise<Engine> {
  return Engine.open({ dataDir, fs, clock, openLog: log.opener, spillBucketWidthMs: hour, ...(onLogPoisoned === undefined ? {} : { onLogPoisoned }) });
}

async function assertNoLocalLog(fs: SimFileSystem): Promise<void> {
  const names = await fs.list(dataDir).catch((): string[] => []);
  assert.ok(!names.includes('wal'), `the data directory holds no log of its own (${names.join(', ')})`);
}

/** Registers the contract's tests for logs of this kind. */
export function durableLogContract(kind: ContractLogKind): void {
  const options = { skip: kind.skip ?? false };

  test(`${kind.name}: admits, outcomes and cancels go to the DurableLog given, and a restart replays them from it`, options, async () => {
    const fs = new SimFileSystem({ seed: 41 });
    const log = await kind.newLog();
    const clock = manualClock();
    let engine = await open(fs, log, clock);
    // Several admits in flight at once: the log resolves them in order.
    const admitted = await Promise.all([0, 1, 2].map((i) => engine.admit(batchFromSpecs([{ fireAtMs: t0 + 1000 * (i + 1), target, payload: `timer ${i}` }]))));
    assert.deepEqual(
      admitted.map((a) => a.seq),
      [1, 2, 3],
    );
    const ids = admitted.flatMap(idsOf);
    assert.equal(await engine.cancel(ids[2] as string), 'cancelled');
    clock.set(t0 + 1500);
    const due = engine.takeDue(clock.now(), 10);
    assert.equal(due.count, 1);
    await engine.settle(outcomesFor(due, outcomeKind.delivered));
    assert.deepEqual(await log.recordTypes(), [recordType.add, recordType.add, recordType.add, recordType.cancel, recordType.outcome]);
    assert.equal(engine.log.lastSeq, 5);
    assert.equal(engine.log.counters.appends, 5);
    await engine.close();
    await assertNoLocalLog(fs);

    engine = await open(fs, log, clock);
    assert.equal(engine.get(ids[0] as string)?.state, 'delivered');
    assert.equal(engine.get(ids[1] as string)?.state, 'pending');
    assert.equal(engine.get(ids[2] as string)?.state, 'cancelled');
    assert.equal(engine.stats().pending, 1);
    const next = await engine.admit(batchFromSpecs([{ fireAtMs: t0 + 5000, target }]));
    assert.equal(next.seq, 6, 'the sequence goes on where the log left it');
    await engine.close();
  });

  test(`${kind.name}: a checkpoint truncates the DurableLog to what it covers; reopening restores from the checkpoint and the tail`, options, async () => {
    const fs = new SimFileSystem({ seed: 42 });
    const log = await kind.newLog();
    const clock = manualClock();
    let engine = await open(fs, log, clock);
    const near = idsOf(await engine.admit(batchFromSpecs([{ fireAtMs: t0 + 1000, target, payload: 'near' }])));
    const far = idsOf(await engine.admit(batchFromSpecs([{ fireAtMs: t0 + 10 * hour, target, payload: 'far' }])));
    const report = await engine.checkpoint(t0 + 3 * hour);
    assert.equal(report.coveredSeq, 2);
    assert.equal(report.spilledRows, 1);
    assert.equal(await log.truncatedThrough(), 2, 'the engine truncated through the interface');
    assert.deepEqual(await log.recordTypes(), []);
    assert.equal(engine.log.firstSeq, 3);
    const tail = idsOf(await engine.admit(batchFromSpecs([{ fireAtMs: t0 + 2000, target, payload: 'tail' }])));
    assert.deepEqual(await log.recordTypes(), [recordType.add]);
    await engine.close();
    await assertNoLocalLog(fs);

    engine = await open(fs, log, clock);
    assert.equal(engine.stats().pending, 3);
    assert.equal(engine.get(near[0] as string)?.state, 'pending');
    assert.equal(engine.get(tail[0] as string)?.state, 'pending');
    assert.equal(engine.get(far[0] as string), undefined, 'spilled: on disk, not in memory');
    assert.equal((await engine.lookup(far[0] as string))?.state, 'pending');
    await engine.close();
  });

  test(`${kind.name}: a fenced log stops the engine as a poisoned one does: LOG_FENCED, told once, nothing applied`, options, async () => {
    const fs = new SimFileSystem({ seed: 43 });
    const log = await kind.newLog();
    const clock = manualClock();
    const stops: FermataError[] = [];
    const engine = await open(fs, log, clock, (poison) => stops.push(poison));
    const ids = idsOf(await engine.admit(batchFromSpecs([{ fireAtMs: t0 + 1000, target }])));
    await log.fence();
    await assert.rejects(engine.admit(batchFromSpecs([{ fireAtMs: t0 + 2000, target }])), (err) => isFermataError(err, errorCodes.logFenced));
    assert.equal(stops.length, 1);
    assert.equal(engine.log.poisoned?.code, errorCodes.logFenced);
    clock.set(t0 + 1500);
    const due = engine.takeDue(clock.now(), 10);
    assert.equal(due.count, 1);
    // As under a poison: the outcome is refused and the timer stays delivering (recovery delivers it again).
    await assert.rejects(engine.settle(outcomesFor(due, outcomeKind.delivered)), (err) => isFermataError(err, errorCodes.logFenced));
    assert.equal(engine.get(ids[0] as string)?.state, 'delivering');
    assert.equal(engine.stats().pending, 0);
    await engine.close();
  });
}
