// Every byte-truncation of a last segment (~8 KiB; ~64 KiB under `npm run soak`), with five tail
// variants: recovery keeps exactly the complete-record prefix, later appends land after it, and
// the next open finds nothing to repair.
import { test } from 'node:test';
import { offHarness } from '../helpers/off-harness.ts';
import { soak } from '../helpers/soak.ts';

/** Five opens a byte: 64 KiB takes minutes, so the default size keeps the file within its budget. */
const segmentBytes = (soak ? 64 : 8) * 1024;

test(`every byte-truncation of a ~${segmentBytes / 1024} KiB last segment × 5 tails recovers the complete-record prefix`, { timeout: 900_000 }, () =>
  offHarness({ module: new URL('./wal-truncation-sweep.ts', import.meta.url), name: 'truncationSweep', input: segmentBytes }),
);
