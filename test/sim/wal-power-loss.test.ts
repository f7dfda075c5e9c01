// Simulated power loss at random points while 256 appenders write to the WAL, and again at
// random points of the recovery that follows; on a disk with write-through (O_DSYNC) segments
// and, every other trial, on one without. After each recovery:
//   - every append that resolved is present, with its bytes;
//   - nothing that was never appended appears, and nothing appears twice;
//   - each appender's records are in the order it appended them;
//   - the recovered log takes appends and reopens with nothing to repair.
// A failure prints the seed; FERMATA_SEED=N replays that one trial.
// Sizes: 10,000 trials (`npm run soak`: 100,000; FERMATA_SIM_TRIALS=N runs N). Not fewer: a
// recovery that cuts a torn group with an intact overlapped group behind it comes only a few
// times in 10,000 seeds, and the run must reach one.
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { offHarness } from '../helpers/off-harness.ts';
import { soak } from '../helpers/soak.ts';
import { appenders, type PowerLossRun, type PowerLossSummary } from './wal-power-loss-sim.ts';

const replaySeed = process.env.FERMATA_SEED === undefined ? undefined : Number(process.env.FERMATA_SEED);
const trials = replaySeed !== undefined ? 1 : Number(process.env.FERMATA_SIM_TRIALS ?? (soak ? 100_000 : 10_000));
const sim = new URL('./wal-power-loss-sim.ts', import.meta.url);

test('canary: with an fdatasync that syncs nothing, the simulation catches a lost acknowledgement', () => offHarness({ module: sim, name: 'canary' }));

test(`power loss at ${trials} random points with ${appenders} concurrent appenders, and during recovery`, { timeout: 1_800_000 }, async (t) => {
  const summary = await offHarness<PowerLossSummary>({ module: sim, name: 'powerLossTrials', input: { trials, replaySeed, testFile: fileURLToPath(import.meta.url) } satisfies PowerLossRun });
  t.diagnostic(`${summary.acknowledged} appends acknowledged; ${summary.crashedInRecovery} trials lost power again in recovery; ${summary.cutWithOverlapped} recoveries cut a torn group with an overlapped one`);
});
