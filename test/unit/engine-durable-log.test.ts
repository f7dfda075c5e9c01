// The DurableLog seam (engine/log.ts): the engine over a second log written here, in memory,
// that implements the interface and nothing more. Admits, outcomes and cancels land in it;
// a restart replays from it; a checkpoint truncates it; a fenced log stops the engine as a
// poisoned one does. Were the engine to reach around the interface (open a WAL of its own, or
// call a method of the local WAL), these records would not be here and the tests would fail;
// the data directory is checked to hold no log of its own too.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { batchFromSpecs } from '../../engine/batch/timer-batch.ts';
import { type Admitted, type Clock, Engine } from '../../engine/engine.ts';
import { errorCodes, FermataError, isFermataError } from '../../engine/errors.ts';
import type { AppendOptions, DurableLog, LogCounters, LogOpener, LogRecord } from '../../engine/log.ts';
import { outcomeKind, recordType } from '../../engine/records.ts';
import { outcomesFor } from '../helpers/outcomes.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';

const dataDir = '/data';
const hour = 3600_000;
const t0 = 1_796_220_000_000 - (1_796_220_000_000 % hour);
const target = 'https://a.example/hook';

function manualClock(start = t0): Clock & { set(ms: number): void } {
  let now = start;
  return { now: () => now, set: (ms) => (now = ms) };
}

const idsOf = (admitted: Admitted): string[] => Array.from({ length: admitted.rows }, (_, row) => admitted.idOf(row));

/** What outlives one engine: the records, as a database table would hold them. */
class MemoryLogTable {
  records: LogRecord[] = [];
  nextSeq = 1;
  /** Set: the next append of any log over this table fails as fenced. */
  fenced = false;
  truncations: number[] = [];
}

/**
 * A DurableLog in memory. Appends become durable after a delay of a few ms (a database round
 * trip), several at once, resolved in order.
 */
class MemoryLog implements DurableLog {
  readonly #table: MemoryLogTable;
  readonly #onPoisoned: ((poison: FermataError) => void) | undefined;
  readonly #counters = { appends: 0, syncs: 0, bytesWritten: 0, slowSyncs: 0 };
  #lastSeq: number;
  /** The last append's durability: the next resolves after it. */
  #tail: Promise<unknown> = Promise.resolve();
  #poison: FermataError | undefined;
  #closed = false;

  constructor(table: MemoryLogTable, onPoisoned: ((poison: FermataError) => void) | undefined) {
    this.#table = table;
    this.#onPoisoned = onPoisoned;
    this.#lastSeq = table.nextSeq - 1;
  }

  append(type: number, body: Uint8Array | readonly Uint8Array[], _options?: AppendOptions): Promise<number> {
    if (this.#poison !== undefined) return Promise.reject(this.#poison);
    if (this.#closed) return Promise.reject(new FermataError(errorCodes.walClosed, 'the log is closed'));
    if (this.#table.fenced) {
      this.#poison = new FermataError(errorCodes.logFenced, 'another owner holds the log');
      this.#onPoisoned?.(this.#poison);
      return Promise.reject(this.#poison);
    }
    const parts = body instanceof Uint8Array ? [body] : body;
    const copy = new Uint8Array(parts.reduce((bytes, part) => bytes + part.length, 0));
    let at = 0;
    for (const part of parts) {
      copy.set(part, at);
      at += part.length;
    }
    const seq = this.#table.nextSeq++;
    this.#counters.appends++;
    const durable = this.#tail.then(() => sleep(1 + (seq % 3))).then(() => {
      this.#table.records.push({ seq, type, body: copy });
      this.#lastSeq = seq;
      this.#counters.syncs++;
      this.#counters.bytesWritten += copy.length;
      return seq;
    });
    this.#tail = durable;
    return durable;
  }

  async *records(fromSeq = 1): AsyncIterable<LogRecord> {
    for (const record of this.#table.records) if (record.seq >= fromSeq) yield record;
  }

  get lastSeq(): number {
    return this.#lastSeq;
  }

  get firstSeq(): number {
    return this.#table.records[0]?.seq ?? this.#lastSeq + 1;
  }

  get poisoned(): FermataError | undefined {
    return this.#poison;
  }

  get counters(): LogCounters {
    return this.#counters;
  }

  get bytesToReplay(): number {
    return this.#table.records.reduce((bytes, record) => bytes + record.body.length, 0);
  }

  async truncateCovered(coveredSeq: number): Promise<number> {
    const before = this.#table.records.length;
    this.#table.records = this.#table.records.filter((record) => record.seq > coveredSeq);
    this.#table.truncations.push(coveredSeq);
    return before - this.#table.records.length;
  }

  async cutToSynced(): Promise<void> {
    await this.#tail.catch(() => undefined);
  }

  describe(): Readonly<Record<string, string | number>> {
    return { log: 'memory' };
  }

  async close(): Promise<void> {
    this.#closed = true;
    await this.#tail.catch(() => undefined);
  }
}

/** Opens a MemoryLog over `table` and replays what it holds past the checkpoint, as the contract asks. */
function memoryLog(table: MemoryLogTable): LogOpener {
  return async ({ coveredSeq, replay, onPoisoned }) => {
    const shown = table.records.filter((record) => record.seq > coveredSeq);
    replay.expectBytes(shown.reduce((bytes, record) => bytes + record.body.length, 0));
    for (const record of shown) await replay.record(record.seq, record.type, record.body, record.body.length);
    return new MemoryLog(table, onPoisoned);
  };
}

async function open(fs: SimFileSystem, table: MemoryLogTable, clock: Clock, onLogPoisoned?: (poison: FermataError) => void): Promise<Engine> {
  return Engine.open({ dataDir, fs, clock, openLog: memoryLog(table), spillBucketWidthMs: hour, ...(onLogPoisoned === undefined ? {} : { onLogPoisoned }) });
}

async function assertNoLocalLog(fs: SimFileSystem): Promise<void> {
  const names = await fs.list(dataDir).catch((): string[] => []);
  assert.ok(!names.includes('wal'), `the data directory holds no log of its own (${names.join(', ')})`);
}

test('admits, outcomes and cancels go to the DurableLog given, and a restart replays them from it', async () => {
  const fs = new SimFileSystem({ seed: 41 });
  const table = new MemoryLogTable();
  const clock = manualClock();
  let engine = await open(fs, table, clock);
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
  assert.deepEqual(
    table.records.map((record) => record.type),
    [recordType.add, recordType.add, recordType.add, recordType.cancel, recordType.outcome],
  );
  assert.equal(engine.log.lastSeq, 5);
  assert.equal(engine.log.counters.appends, 5);
  await engine.close();
  await assertNoLocalLog(fs);

  engine = await open(fs, table, clock);
  assert.equal(engine.get(ids[0] as string)?.state, 'delivered');
  assert.equal(engine.get(ids[1] as string)?.state, 'pending');
  assert.equal(engine.get(ids[2] as string)?.state, 'cancelled');
  assert.equal(engine.stats().pending, 1);
  const next = await engine.admit(batchFromSpecs([{ fireAtMs: t0 + 5000, target }]));
  assert.equal(next.seq, 6, 'the sequence goes on where the log left it');
  await engine.close();
});

test('a checkpoint truncates the DurableLog to what it covers; reopening restores from the checkpoint and the tail', async () => {
  const fs = new SimFileSystem({ seed: 42 });
  const table = new MemoryLogTable();
  const clock = manualClock();
  let engine = await open(fs, table, clock);
  const near = idsOf(await engine.admit(batchFromSpecs([{ fireAtMs: t0 + 1000, target, payload: 'near' }])));
  const far = idsOf(await engine.admit(batchFromSpecs([{ fireAtMs: t0 + 10 * hour, target, payload: 'far' }])));
  const report = await engine.checkpoint(t0 + 3 * hour);
  assert.equal(report.coveredSeq, 2);
  assert.equal(report.spilledRows, 1);
  assert.deepEqual(table.truncations, [2], 'the engine truncated through the interface');
  assert.equal(table.records.length, 0);
  assert.equal(engine.log.firstSeq, 3);
  const tail = idsOf(await engine.admit(batchFromSpecs([{ fireAtMs: t0 + 2000, target, payload: 'tail' }])));
  assert.equal(table.records.length, 1);
  await engine.close();
  await assertNoLocalLog(fs);

  engine = await open(fs, table, clock);
  assert.equal(engine.stats().pending, 3);
  assert.equal(engine.get(near[0] as string)?.state, 'pending');
  assert.equal(engine.get(tail[0] as string)?.state, 'pending');
  assert.equal(engine.get(far[0] as string), undefined, 'spilled: on disk, not in memory');
  assert.equal((await engine.lookup(far[0] as string))?.state, 'pending');
  await engine.close();
});

test('a fenced log stops the engine as a poisoned one does: LOG_FENCED, told once, nothing applied', async () => {
  const fs = new SimFileSystem({ seed: 43 });
  const table = new MemoryLogTable();
  const clock = manualClock();
  const stops: FermataError[] = [];
  const engine = await open(fs, table, clock, (poison) => stops.push(poison));
  const ids = idsOf(await engine.admit(batchFromSpecs([{ fireAtMs: t0 + 1000, target }])));
  table.fenced = true;
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
