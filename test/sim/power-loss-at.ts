// The power cut the simulations share: run a workload on the simulated disk and take the disk's
// image (what a power loss leaves) at its `crashAt`-th file-system call.
import assert from 'node:assert/strict';
import type { SimFileSystem } from './sim-file-system.ts';

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
