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
// The simulation runs in a worker thread (clock-power-loss-sim.ts), where the test runner's async
// hook does not slow every promise.
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { offHarness } from '../helpers/off-harness.ts';
import { soak } from '../helpers/soak.ts';
import type { PowerLossRun } from './clock-power-loss-sim.ts';

const replaySeed = process.env.FERMATA_SEED === undefined ? undefined : Number(process.env.FERMATA_SEED);
const trials = replaySeed !== undefined ? 1 : Number(process.env.FERMATA_SIM_TRIALS ?? (soak ? 100_000 : 2_000));
const sim = new URL('./clock-power-loss-sim.ts', import.meta.url);

test('canary: with an fdatasync that syncs nothing, the clock simulation catches a lost move', () => offHarness({ module: sim, name: 'canary' }));

test(`power loss at ${trials} random points of moves, adds and checkpoints: the clock resumes at or past the last acknowledged move, at a position asked for`, { timeout: soak ? 3_600_000 : 600_000 }, () =>
  offHarness({ module: sim, name: 'powerLossTrials', input: { trials, replaySeed, testFile: fileURLToPath(import.meta.url) } satisfies PowerLossRun }),
);
