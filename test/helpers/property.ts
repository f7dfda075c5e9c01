// fast-check settings shared by the property tests. `npm test` runs a fixed seed, so CI is
// reproducible and a red run is the code's fault, not the dice's; `npm run soak` draws fresh
// seeds and runs longer. FERMATA_PROPERTY_SEED=N replays a seed fast-check printed.
import { soak } from './soak.ts';

const replay = process.env.FERMATA_PROPERTY_SEED;

export function propertyRuns(numRuns: number): { numRuns: number; seed?: number } {
  if (replay !== undefined) return { numRuns, seed: Number(replay) };
  return soak ? { numRuns: numRuns * 20 } : { numRuns, seed: 20261202 };
}
