// Simulated power loss at random points while 256 appenders write to the WAL, and again at
// random points of the recovery that follows; on a disk with write-through (O_DSYNC) segments
// and, every other trial, on one without. After each recovery:
//   - every append that resolved is present, with its bytes;
//   - nothing that was never appended appears, and nothing appears twice;
//   - each appender's records are in the order it appended them;
//   - the recovered log takes appends and reopens with nothing to repair.
// A failure prints the seed; FERMATA_SEED=N replays that one trial.
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { offHarness } from '../helpers/off-harness.ts';
import { soak } from '../helpers/soak.ts';
import { appenders, type PowerLossRun } from './wal-power-loss-sim.ts';

const replaySeed = process.env.FERMATA_SEED === undefined ? undefined : Number(process.env.FERMATA_SEED);
const trials = replaySeed !== undefined ? 1 : soak ? 100_000 : 10_000;
const sim = new URL('./wal-power-loss-sim.ts', import.meta.url);

test('canary: with an fdatasync that syncs nothing, the simulation catches a lost acknowledgement', () => offHarness({ module: sim, name: 'canary' }));

test(`power loss at ${trials} random points with ${appenders} concurrent appenders, and during recovery`, { timeout: 1_800_000 }, () =>
  offHarness({ module: sim, name: 'powerLossTrials', input: { trials, replaySeed, testFile: fileURLToPath(import.meta.url) } satisfies PowerLossRun }),
);
