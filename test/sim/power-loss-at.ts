// The power cut the simulations share: run a workload on the simulated disk and take the disk's
// image (what a power loss leaves) at its `crashAt`-th file-system call.
import assert from 'node:assert/strict';
import { Prng } from '../helpers/prng.ts';
import { SimFileSystem } from './sim-file-system.ts';

/**
 * The store options of the engines a simulation opens, two or three a trial: 64 KiB arena slabs.
 * A trial's engine holds a few dozen timers; at the default 4 MiB slabs its first add had two
 * slabs made ahead (8 MiB read from /dev/zero on the threadpool, and as much outside the heap for
 * the garbage collector to chase), which cost the simulations more CPU than their own work. They
 * reach the same arena code at either size.
 */
export const simStoreOptions = { arena: { slabBytes: 64 * 1024 } } as const;

/**
 * Runs `work` on `fs`, cutting the power at its `crashAt`-th file-system call; returns the disk
 * image. Errors of the workload after the cut are expected (the disk is gone) and dropped; its
 * own assertions must hold whenever it got to make them.
 */
export async function withPowerLossAt(fs: SimFileSystem, crashAt: number, work: () => Promise<void>): Promise<SimFileSystem> {
  let image: SimFileSystem | undefined;
  fs.setFault(() => {
    if (image === undefined && fs.opCount >= crashAt) image = fs.powerLoss();
    return undefined;
  });
  await work().catch((err: unknown) => {
    if (err instanceof assert.AssertionError) throw err;
  });
  return image ?? fs.powerLoss();
}

/**
 * A canary of a simulation: runs `workload` on a disk whose fdatasync syncs nothing (the caller's
 * `lying` wrapper), cut at a random call of up to `calls`, for seeds 1 … `seeds`, and says whether
 * `check` caught a lost acknowledgement (an assertion naming something "lost") or corruption at
 * any of them. A simulation whose canary never sings proves nothing about where syncs are.
 */
export async function canaryCatches<L>(options: {
  readonly calls: number;
  readonly seeds: number;
  readonly newLedger: () => L;
  readonly run: (fs: SimFileSystem, prng: Prng, ledger: L) => Promise<void>;
  readonly check: (image: SimFileSystem, ledger: L, context: string) => Promise<void>;
}): Promise<boolean> {
  for (let seed = 1; seed <= options.seeds; seed++) {
    const prng = new Prng(seed);
    const ledger = options.newLedger();
    const fs = new SimFileSystem({ seed });
    const image = await withPowerLossAt(fs, 1 + prng.below(options.calls), () => options.run(fs, prng, ledger));
    const caught = await options.check(image, ledger, `canary seed ${seed}`).then(
      () => false,
      (err: unknown) => (err instanceof assert.AssertionError && /lost/.test(err.message)) || (err instanceof Error && /SPILL_CORRUPT|WAL corrupt/.test(`${(err as { code?: string }).code} ${err.message}`)),
    );
    if (caught) return true;
  }
  return false;
}
