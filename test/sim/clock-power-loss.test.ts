// A seeded simulation of the manual test clock's durability (engine/clock-moves.ts) over the
// simulated file system: moves of the clock (several at once), adds and checkpoints (which let
// the log before them go, so the position must ride the manifest), with the power cut at a
// random file-system call. After each recovery, on a new manual clock that starts elsewhere:
//   - the engine opens (no CLOCK record moves the clock back);
//   - the clock stands at or past the last acknowledged move, and at a position some move (or
//     the first start) asked for: never one nobody asked for, never past the last one asked;
//   - with nothing logged, at the new clock's own start.
// A canary (an fdatasync that syncs nothing) must be caught. A failure prints the seed;
// FERMATA_SEED=N replays that trial. Sizes: 2,000 trials (`npm run soak`: 100,000).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { batchFromSpecs } from '../../engine/batch/timer-batch.ts';
import { ManualClock } from '../../engine/clock.ts';
import { Engine } from '../../engine/engine.ts';
import type { FileSystem } from '../../engine/fs/file-system.ts';
import { Prng } from '../helpers/prng.ts';
import { soak } from '../helpers/soak.ts';
import { canaryCatches, simStoreOptions, withPowerLossAt } from './power-loss-at.ts';
import { SimFileSystem } from './sim-file-system.ts';
import { withoutDatasync } from './without-datasync.ts';

const dataDir = '/data';
const day = 86_400_000;
const t0 = 1_800_000_000_000;
/** Where a recovery's clock starts (a restart's real time): below every position a trial logs. */
const recoveryStart = t0 - day;
const replaySeed = process.env.FERMATA_SEED === undefined ? undefined : Number(process.env.FERMATA_SEED);
const trials = replaySeed !== undefined ? 1 : Number(process.env.FERMATA_SIM_TRIALS ?? (soak ? 100_000 : 2_000));
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

test('canary: with an fdatasync that syncs nothing, the clock simulation catches a lost move', async () => {
  const calls = await callsPerRun();
  const caught = await canaryCatches({ calls, seeds: 300, newLedger, run: (fs, prng, ledger) => workload(withoutDatasync(fs), prng, ledger), check: checkRecovered });
  assert.ok(caught, '300 power losses never caught an acknowledged-but-unsynced move');
});

test(`power loss at ${trials} random points of moves, adds and checkpoints: the clock resumes at or past the last acknowledged move, at a position asked for`, { timeout: soak ? 3_600_000 : 600_000 }, async () => {
  const calls = await callsPerRun();
  let moves = 0;
  for (let trial = 0; trial < trials; trial++) {
    const seed = replaySeed ?? 1 + trial;
    const context = `seed ${seed} (replay: FERMATA_SEED=${seed} node --test ${new URL(import.meta.url).pathname})`;
    const prng = new Prng(seed);
    const ledger = newLedger();
    const fs = new SimFileSystem({ seed });
    const image = await withPowerLossAt(fs, 1 + prng.below(calls + 16), () => workload(fs, prng, ledger));
    if (ledger.ackedMax !== undefined) moves++;
    await checkRecovered(image, ledger, context);
  }
  assert.ok(moves > trials / 4, `only ${moves} of ${trials} trials acknowledged a move`);
});
