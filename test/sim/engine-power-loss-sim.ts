// The engine power-loss simulation (engine-power-loss.test.ts says what it checks): plain
// functions, run by the test in a worker thread (test/helpers/off-harness.ts), away from the test
// runner's async hook, which every promise of the engine's work paid for.
import assert from 'node:assert/strict';
import { batchFromSpecs, type TimerSpec } from '../../engine/batch/timer-batch.ts';
import { type Clock, type DueSlice, Engine } from '../../engine/engine.ts';
import type { FileSystem } from '../../engine/fs/file-system.ts';
import { errorCodes, isFermataError } from '../../engine/errors.ts';
import { decodeTimerId, encodeTimerId } from '../../engine/ids.ts';
import { type OutcomeKind, outcomeKind } from '../../engine/records.ts';
import { outcomesFor } from '../helpers/outcomes.ts';
import { Prng } from '../helpers/prng.ts';
import { simStoreOptions, withPowerLossAt } from './power-loss-at.ts';
import { SimFileSystem } from './sim-file-system.ts';
import { withoutDatasync } from './without-datasync.ts';

const dataDir = '/data';
const hour = 3600_000;
const t0 = 1_796_220_000_000 - (1_796_220_000_000 % hour);
const bucketWidthMs = 60_000;
const target = 'https://a.example/hook';
const operationsPerTrial = 14;
const decoder = new TextDecoder();

interface Ledger {
  /** Payloads of every timer handed to admit (each unique) → the batch it came in. */
  readonly attempted: Map<string, number>;
  /** Rows of each batch. */
  readonly batchRows: Map<number, number>;
  /** Acknowledged adds (not duplicates): id → payload and key. */
  readonly acked: Map<string, { payload: string; key: string | undefined }>;
  /** Key → the id an acknowledged add with it was given. */
  readonly keyIds: Map<string, string>;
  readonly cancelAcked: Set<string>;
  readonly deliveredAcked: Set<string>;
  /** PATCHes of each timer in the order they were made (the engine applies one timer's in call order), not the refused ones. */
  readonly patches: Map<string, PatchAttempt[]>;
}

interface PatchAttempt {
  readonly fireAtMs: number;
  readonly payload: string;
  acked: boolean;
}

function newLedger(): Ledger {
  return { attempted: new Map(), batchRows: new Map(), acked: new Map(), keyIds: new Map(), cancelAcked: new Set(), deliveredAcked: new Set(), patches: new Map() };
}

/**
 * What a timer may be after its PATCHes: the last acknowledged one, or any attempted after it
 * (each may have been logged before a crash); with none acknowledged, also the timer as added
 * (undefined). Empty when it was never patched.
 */
function patchOutcomes(ledger: Ledger, id: string): Array<PatchAttempt | undefined> {
  const attempts = ledger.patches.get(id) ?? [];
  let last = -1;
  attempts.forEach((attempt, i) => {
    if (attempt.acked) last = i;
  });
  return last < 0 ? (attempts.length === 0 ? [] : [undefined, ...attempts]) : attempts.slice(last);
}

type ManualClock = Clock & { set(ms: number): void };

function manualClock(): ManualClock {
  let now = t0;
  return { now: () => now, set: (ms) => (now = ms) };
}

const open = (fs: FileSystem, clock: Clock): Promise<Engine> =>
  Engine.open({ dataDir, fs, clock, walLimits: { segmentBytes: 4096 }, spillBucketWidthMs: bucketWidthMs, retention: { finishedMs: 1000 * hour, deadMs: 1000 * hour }, store: simStoreOptions });

const sliceIds = (slice: DueSlice): string[] => Array.from({ length: slice.count }, (_, i) => encodeTimerId(slice.seqs[i] as number, slice.rows[i] as number, slice.fireAtMs[i] as number));

/** Checks a slice handed out for delivery against the ledger. */
function checkHandedOut(slice: DueSlice, nowMs: number, ledger: Ledger, context: string): string[] {
  const ids = sliceIds(slice);
  ids.forEach((id, i) => {
    const outcomes = patchOutcomes(ledger, id);
    // The earliest fire time it may have now: as added, or as a PATCH set it.
    const earliest = outcomes.length === 0 ? (slice.fireAtMs[i] as number) : Math.min(...outcomes.map((patch) => patch?.fireAtMs ?? (slice.fireAtMs[i] as number)));
    assert.ok(earliest <= nowMs, `${context}: ${id} handed out before its fire time${outcomes.length === 0 ? '' : ' (an acknowledged PATCH moved it: the old time fired)'}`);
    assert.ok(!ledger.cancelAcked.has(id), `${context}: ${id} handed out after its cancel was acknowledged`);
    assert.ok(!ledger.deliveredAcked.has(id), `${context}: ${id} handed out again after its delivery was recorded`);
  });
  return ids;
}

async function admitSome(engine: Engine, prng: Prng, clock: Clock, ledger: Ledger): Promise<void> {
  const batch = ledger.batchRows.size;
  const rows = 1 + prng.below(3);
  ledger.batchRows.set(batch, rows);
  const specs: TimerSpec[] = [];
  for (let row = 0; row < rows; row++) {
    const payload = `b${batch}r${row}`;
    ledger.attempted.set(payload, batch);
    const far = prng.below(3) === 0;
    const fireAtMs = far ? clock.now() + hour * (1 + prng.below(48)) + prng.below(hour) : clock.now() - 500 + prng.below(5000);
    const key = prng.below(4) === 0 ? `key${prng.below(6)}` : undefined;
    specs.push({ fireAtMs, target, payload, ...(key === undefined ? {} : { key }) });
  }
  const admitted = await engine.admit(batchFromSpecs(specs));
  specs.forEach((spec, row) => {
    const id = admitted.idOf(row);
    if (spec.key !== undefined) {
      const earlier = ledger.keyIds.get(spec.key);
      assert.ok(earlier === undefined || earlier === id, `key ${spec.key} named two timers: ${earlier} and ${id}`);
      ledger.keyIds.set(spec.key, id);
    }
    if (!admitted.isDuplicate(row)) ledger.acked.set(id, { payload: spec.payload as string, key: spec.key });
  });
}

async function patchSome(engine: Engine, prng: Prng, clock: Clock, ledger: Ledger): Promise<void> {
  const ids = [...ledger.acked.keys()];
  const id = ids[prng.below(Math.max(1, ids.length))];
  if (id === undefined) return;
  const original = (ledger.acked.get(id) as { payload: string }).payload;
  const attempts = ledger.patches.get(id) ?? [];
  ledger.patches.set(id, attempts);
  const payload = `${original}~p${attempts.length + 1}`;
  ledger.attempted.set(payload, ledger.attempted.get(original) as number);
  // Near (due soon) or far (past the watermark: it stays in memory), earlier or later than before.
  const fireAtMs = prng.below(3) === 0 ? clock.now() + hour * (1 + prng.below(48)) : clock.now() - 500 + prng.below(5000);
  const attempt: PatchAttempt = { fireAtMs, payload, acked: false };
  attempts.push(attempt);
  const outcome = await engine.reschedule(id, { fireAtMs, payload }).catch((err: unknown) => {
    // Cut short (the log failed): it may be logged or not; a refusal before the log is not.
    if (isFermataError(err, errorCodes.capacityFull) || isFermataError(err, errorCodes.batchInvalid)) attempts.splice(attempts.indexOf(attempt), 1);
    throw err;
  });
  if (outcome.outcome === 'rescheduled') {
    attempt.acked = true;
    assert.equal(outcome.view.fireAtMs, fireAtMs, `${id}: the PATCH answered another fire time`);
  } else attempts.splice(attempts.indexOf(attempt), 1);
}

async function deliverSome(engine: Engine, prng: Prng, clock: Clock, ledger: Ledger): Promise<void> {
  const slice = engine.takeDue(clock.now(), 8);
  const ids = checkHandedOut(slice, clock.now(), ledger, 'live');
  if (slice.count === 0) return;
  const kind: OutcomeKind = prng.below(4) === 0 ? outcomeKind.retry : outcomeKind.delivered;
  await engine.settle(outcomesFor(slice, kind, clock.now() + prng.below(10_000)));
  if (kind === outcomeKind.delivered) for (const id of ids) ledger.deliveredAcked.add(id);
}

/** A bulk cancel (one CANCEL_BULK record) of a few ids or of a span of due times; what it cancelled is read back from the engine. */
async function bulkCancelSome(engine: Engine, prng: Prng, clock: Clock, ledger: Ledger): Promise<void> {
  const ids = [...ledger.acked.keys()];
  const fromMs = clock.now() + prng.below(48) * hour;
  const named = Array.from({ length: 1 + prng.below(4) }, () => ids[prng.below(Math.max(1, ids.length))]).filter((id) => id !== undefined);
  if (prng.below(2) === 0 && named.length > 0) await engine.bulkCancel({ ids: named });
  else await engine.bulkCancel({ filter: { dueAfterMs: fromMs, dueBeforeMs: fromMs + hour * (1 + prng.below(12)) } });
  // A timer shows "cancelled" only once a cancel of it is durable.
  for (const id of ids) if ((await engine.lookup(id))?.state === 'cancelled') ledger.cancelAcked.add(id);
}

/** One operation of the workload; a few run at once. */
async function operation(engine: Engine, prng: Prng, clock: ManualClock, ledger: Ledger): Promise<void> {
  const pick = prng.below(100);
  if (pick < 34) return admitSome(engine, prng, clock, ledger);
  if (pick < 42) return patchSome(engine, prng, clock, ledger);
  if (pick >= 48 && pick < 52) return bulkCancelSome(engine, prng, clock, ledger);
  if (pick < 52) {
    const ids = [...ledger.acked.keys()];
    const id = ids[prng.below(Math.max(1, ids.length))];
    if (id !== undefined && (await engine.cancel(id)) === 'cancelled') ledger.cancelAcked.add(id);
    return;
  }
  if (pick < 72) return deliverSome(engine, prng, clock, ledger);
  if (pick < 82) {
    clock.set(clock.now() + (prng.below(6) === 0 ? -prng.below(60_000) : prng.below(2 * hour)));
    return;
  }
  const bucketAhead = (Math.floor(clock.now() / bucketWidthMs) + 1 + prng.below(pick < 92 ? 60 : 120)) * bucketWidthMs;
  if (pick < 92) await engine.checkpoint(bucketAhead);
  else await engine.promote(bucketAhead);
}

async function workload(fs: FileSystem, prng: Prng, clock: ManualClock, ledger: Ledger): Promise<void> {
  const engine = await open(fs, clock);
  try {
    for (let done = 0; done < operationsPerTrial; ) {
      const together = 1 + prng.below(3);
      await Promise.all(Array.from({ length: together }, () => operation(engine, prng, clock, ledger)));
      done += together;
    }
  } finally {
    await engine.close().catch(() => undefined);
  }
}

async function checkRecovered(fs: SimFileSystem, clock: ManualClock, ledger: Ledger, context: string): Promise<void> {
  const engine = await open(fs, clock);
  try {
    for (const [id, { payload }] of ledger.acked) {
      const view = await engine.lookup(id);
      assert.ok(view !== undefined, `${context}: acknowledged add ${id} (${payload}) lost`);
      if (ledger.cancelAcked.has(id)) assert.equal(view.state, 'cancelled', `${context}: acknowledged cancel of ${id} lost`);
      if (ledger.deliveredAcked.has(id)) assert.equal(view.state, 'delivered', `${context}: acknowledged delivery of ${id} lost`);
    }
    for (const [key, id] of ledger.keyIds) assert.equal((await engine.lookup(id))?.key ?? key, key, `${context}: key ${key}`);
    for (const id of ledger.patches.keys()) {
      const view = await engine.lookup(id);
      const outcomes = patchOutcomes(ledger, id);
      if (view === undefined || outcomes.length === 0 || view.state !== 'pending') continue;
      // Pending as its last acknowledged PATCH, or a later one, left it (as added, when none was acknowledged).
      const fireTimes = outcomes.map((patch) => patch?.fireAtMs ?? decodeTimerId(id)?.fireAtMs);
      assert.ok(fireTimes.includes(view.fireAtMs), `${context}: ${id} fires at ${view.fireAtMs}, not a time its acknowledged PATCH or a later one set (${fireTimes.join(', ')})`);
    }
    // Fire everything: bring in all that is on disk and move the clock past every fire time.
    clock.set(clock.now() + 100 * hour);
    await engine.promote((Math.floor(clock.now() / bucketWidthMs) + 1) * bucketWidthMs);
    const seenBatches = new Map<number, number>();
    for (;;) {
      const slice = engine.takeDue(clock.now(), 1000);
      if (slice.count === 0) break;
      for (const id of checkHandedOut(slice, clock.now(), ledger, context)) {
        const payload = decoder.decode(engine.payloadOf(id));
        const batch = ledger.attempted.get(payload);
        assert.ok(batch !== undefined, `${context}: ${id} carries ${payload}, which was never added`);
        const outcomes = patchOutcomes(ledger, id);
        if (outcomes.length > 0) {
          const payloads = outcomes.map((patch) => patch?.payload ?? ledger.acked.get(id)?.payload);
          assert.ok(payloads.includes(payload), `${context}: ${id} carries ${payload}, neither its acknowledged PATCH nor one attempted after it (${payloads.join(', ')})`);
        }
        seenBatches.set(batch, (seenBatches.get(batch) ?? 0) + 1);
      }
      await engine.settle(outcomesFor(slice, outcomeKind.delivered));
    }
    assert.equal(engine.stats().pending, 0, `${context}: timers left waiting after everything fell due`);
    // A batch is whole or absent: count its rows among everything the engine holds.
    for (const [batch, fired] of seenBatches) {
      const rows = ledger.batchRows.get(batch) as number;
      assert.ok(fired <= rows, `${context}: batch ${batch} fired ${fired} of ${rows} rows`);
    }
  } finally {
    await engine.close();
  }
}


async function callsPerRun(): Promise<number> {
  const probe = new SimFileSystem({ seed: 0 });
  await workload(probe, new Prng(0), manualClock(), newLedger());
  return probe.opCount;
}

/** The canary: with an fdatasync that syncs nothing, the simulation catches a lost acknowledgement. */
export async function canary(): Promise<void> {
  const calls = await callsPerRun();
  for (let seed = 1; seed <= 300; seed++) {
    const prng = new Prng(seed);
    const ledger = newLedger();
    const clock = manualClock();
    const fs = new SimFileSystem({ seed });
    const image = await withPowerLossAt(fs, 1 + prng.below(calls), () => workload(withoutDatasync(fs), prng, clock, ledger));
    const caught = await checkRecovered(image, clock, ledger, `canary seed ${seed}`).then(
      () => false,
      (err: unknown) => (err instanceof assert.AssertionError && /lost/.test(err.message)) || (err instanceof Error && /SPILL_CORRUPT|WAL corrupt/.test(`${(err as { code?: string }).code} ${err.message}`)),
    );
    if (caught) return;
  }
  assert.fail('300 power losses never caught an acknowledged-but-unsynced change');
}

export interface PowerLossRun {
  readonly trials: number;
  /** The first seed; trials use seeds firstSeed, firstSeed + 1, … */
  readonly firstSeed: number;
  /** One seed to replay instead. */
  readonly replaySeed: number | undefined;
  /** The test file, for the replay command a failure prints. */
  readonly testFile: string;
}

/** Power loss at `trials` random points of the engine's work; the invariants checked after each recovery. */
export async function powerLossTrials({ trials, firstSeed, replaySeed, testFile }: PowerLossRun): Promise<void> {
  const calls = await callsPerRun();
  let acknowledged = 0;
  let patchesAcknowledged = 0;
  for (let trial = 0; trial < trials; trial++) {
    const seed = replaySeed ?? firstSeed + trial;
    const context = `seed ${seed} (replay: FERMATA_SEED=${seed} node --test ${testFile})`;
    const prng = new Prng(seed);
    const ledger = newLedger();
    const clock = manualClock();
    const fs = new SimFileSystem({ seed });
    const image = await withPowerLossAt(fs, 1 + prng.below(calls + 16), () => workload(fs, prng, clock, ledger)).catch((err: unknown) => {
      throw new Error(`${context}: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    });
    acknowledged += ledger.acked.size;
    for (const attempts of ledger.patches.values()) patchesAcknowledged += attempts.filter((attempt) => attempt.acked).length;
    await checkRecovered(image, clock, ledger, context);
  }
  assert.ok(acknowledged > trials, `the trials acknowledged only ${acknowledged} adds`);
  assert.ok(replaySeed !== undefined || patchesAcknowledged > trials / 4, `the trials acknowledged only ${patchesAcknowledged} PATCHes`);
}
