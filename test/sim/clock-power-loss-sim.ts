// The clock power-loss simulation (clock-power-loss.test.ts says what it checks): plain
// functions, run by the test in a worker thread (test/helpers/off-harness.ts), away from the test
// runner's async hook, which every promise of the engine's work paid for.
import assert from 'node:assert/strict';
import { batchFromSpecs } from '../../engine/batch/timer-batch.ts';
import { ManualClock } from '../../engine/clock.ts';
import { Engine } from '../../engine/engine.ts';
import type { FileSystem } from '../../engine/fs/file-system.ts';
import { Prng } from '../helpers/prng.ts';
import { canaryCatches, simStoreOptions, withPowerLossAt } from './power-loss-at.ts';
import { SimFileSystem } from './sim-file-system.ts';
import { withoutDatasync } from './without-datasync.ts';

const dataDir = '/data';
const day = 86_400_000;
const t0 = 1_800_000_000_000;
/** Where a recovery's clock starts (a restart's real time): below every position a trial logs. */
const recoveryStart = t0 - day;
const operationsPerTrial = 12;

interface Ledger {
  /** Every position a move asked for, and the first start's. */
  readonly asked: Set<number>;
  /** The highest position a move was acknowledged at (undefined: none). */
  ackedMax: number | undefined;
  /** The next position a move asks for: moves only ask forward, so each is known before it is made. */
  next: number;
}

const open = (fs: FileSystem, clock: ManualClock): Promise<Engine> => Engine.open({ dataDir, fs, clock, walLimits: { segmentBytes: 4096 }, spillBucketWidthMs: 60_000, store: simStoreOptions });

async function operation(engine: Engine, prng: Prng, ledger: Ledger): Promise<void> {
  const pick = prng.below(100);
  if (pick < 50) {
    ledger.next += 1 + prng.below(30 * day);
    const toMs = ledger.next;
    ledger.asked.add(toMs);
    const movedTo = await engine.moveClock({ toMs });
    assert.equal(movedTo, toMs, 'moves are applied in the order they were asked');
    ledger.ackedMax = Math.max(ledger.ackedMax ?? 0, movedTo);
    return;
  }
  if (pick < 85) {
    await engine.admit(batchFromSpecs([{ fireAtMs: engine.clock.now() + prng.below(60 * day), target: 'https://a.example/hook' }]));
    return;
  }
  await engine.checkpoint();
}

async function workload(fs: FileSystem, prng: Prng, ledger: Ledger): Promise<void> {
  ledger.asked.add(t0);
  const engine = await open(fs, new ManualClock(t0));
  try {
    for (let done = 0; done < operationsPerTrial; ) {
      const together = 1 + prng.below(3);
      await Promise.all(Array.from({ length: together }, () => operation(engine, prng, ledger)));
      done += together;
    }
  } finally {
    await engine.close().catch(() => undefined);
  }
}

async function checkRecovered(fs: SimFileSystem, ledger: Ledger, context: string): Promise<void> {
  const clock = new ManualClock(recoveryStart);
  const engine = await open(fs, clock);
  try {
    const at = clock.now();
    if (ledger.ackedMax !== undefined) assert.ok(at >= ledger.ackedMax, `${context}: an acknowledged move to ${ledger.ackedMax} lost (the clock stands at ${at})`);
    assert.ok(at === recoveryStart || ledger.asked.has(at), `${context}: the clock stands at ${at}, which nothing asked for`);
    assert.equal(engine.loggedClockMs, at, `${context}: what the engine says it logged`);
  } finally {
    await engine.close();
  }
}

function newLedger(): Ledger {
  return { asked: new Set(), ackedMax: undefined, next: t0 };
}

async function callsPerRun(): Promise<number> {
  const probe = new SimFileSystem({ seed: 0 });
  await workload(probe, new Prng(0), newLedger());
  return probe.opCount;
}

/** The canary: with an fdatasync that syncs nothing, the simulation catches a lost move. */
export async function canary(): Promise<void> {
  const calls = await callsPerRun();
  const caught = await canaryCatches({ calls, seeds: 300, newLedger, run: (fs, prng, ledger) => workload(withoutDatasync(fs), prng, ledger), check: checkRecovered });
  assert.ok(caught, '300 power losses never caught an acknowledged-but-unsynced move');
}

export interface PowerLossRun {
  readonly trials: number;
  /** One seed to replay instead of seeds 1…trials. */
  readonly replaySeed: number | undefined;
  /** The test file, for the replay command a failure prints. */
  readonly testFile: string;
}

/** Power loss at `trials` random points of moves, adds and checkpoints; the clock checked after each recovery. */
export async function powerLossTrials({ trials, replaySeed, testFile }: PowerLossRun): Promise<void> {
  const calls = await callsPerRun();
  let moves = 0;
  for (let trial = 0; trial < trials; trial++) {
    const seed = replaySeed ?? 1 + trial;
    const context = `seed ${seed} (replay: FERMATA_SEED=${seed} node --test ${testFile})`;
    const prng = new Prng(seed);
    const ledger = newLedger();
    const fs = new SimFileSystem({ seed });
    const image = await withPowerLossAt(fs, 1 + prng.below(calls + 16), () => workload(fs, prng, ledger));
    if (ledger.ackedMax !== undefined) moves++;
    await checkRecovered(image, ledger, context);
  }
  assert.ok(moves > trials / 4, `only ${moves} of ${trials} trials acknowledged a move`);
}
