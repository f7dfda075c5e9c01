// A seeded simulation of the whole engine over the simulated file system and clock: admits
// (some keyed, some far in the future), cancels (single and bulk), PATCHes (new fire time and payload, near or
// far, of resident and spilled timers), deliveries with their outcomes, checkpoints
// that spill, promotions and clock jumps both ways, several at once, with the power cut at a
// random file-system call. After each recovery:
//   - every acknowledged add is there: pending, or delivered or cancelled as acknowledged;
//   - nothing that was never added appears, and a batch is there whole or not at all;
//   - no acknowledged cancel is delivered, and no acknowledged delivery is made again
//     (only deliveries in flight at the crash may go twice);
//   - nothing is handed out before its fire time: after an acknowledged PATCH, before the fire
//     time it set (or one a later PATCH, acknowledged or cut short by the crash, set);
//   - a PATCHed timer is once, with the change acknowledged last or one attempted after it:
//     old or new, never both, never lost;
//   - an idempotency key names one timer, before and after the crash.
// A canary (an fdatasync that syncs nothing) must be caught. A failure prints the seed;
// FERMATA_SEED=N replays that trial. Sizes: 10,000 trials (`npm run soak`: 500,000);
// FERMATA_SIM_TRIALS=N and FERMATA_SIM_FIRST_SEED=S run seeds S … S+N−1 instead.
// The simulation runs in a worker thread (engine-power-loss-sim.ts), where the test runner's async
// hook does not slow every promise.
import { test } from 'node:test';
import { fileURLToPath } from 'node:url';
import { offHarness } from '../helpers/off-harness.ts';
import { soak } from '../helpers/soak.ts';
import type { PowerLossRun } from './engine-power-loss-sim.ts';

const replaySeed = process.env.FERMATA_SEED === undefined ? undefined : Number(process.env.FERMATA_SEED);
const trials = replaySeed !== undefined ? 1 : Number(process.env.FERMATA_SIM_TRIALS ?? (soak ? 500_000 : 10_000));
// Trials use seeds firstSeed, firstSeed + 1, …: a long soak can be run in chunks (on several
// machines, or one after another) that together cover 1 … 500,000.
const firstSeed = Number(process.env.FERMATA_SIM_FIRST_SEED ?? 1);
const sim = new URL('./engine-power-loss-sim.ts', import.meta.url);

test('canary: with an fdatasync that syncs nothing, the engine simulation catches a lost acknowledgement', () => offHarness({ module: sim, name: 'canary' }));

test(`power loss at ${trials} random points of the engine's work (seeds ${firstSeed}…${firstSeed + trials - 1}): acknowledged work survives, nothing else appears`, { timeout: soak ? 4 * 3_600_000 : 3_600_000 }, () =>
  offHarness({ module: sim, name: 'powerLossTrials', input: { trials, firstSeed, replaySeed, testFile: fileURLToPath(import.meta.url) } satisfies PowerLossRun }),
);
