// The WAL power-loss simulation (wal-power-loss.test.ts says what it checks): plain functions,
// run by the test in a worker thread (test/helpers/off-harness.ts), away from the test runner's
// async hook.
import assert from 'node:assert/strict';
import { Wal } from '../../engine/wal/wal.ts';
import { Prng } from '../helpers/prng.ts';
import type { FileSystem } from '../../engine/fs/file-system.ts';
import { SimFileSystem } from './sim-file-system.ts';
import { withoutDatasync } from './without-datasync.ts';

const dir = '/data/wal';
export const appenders = 256;
const limits = { segmentBytes: 6 * 1024, groupBytesMax: 3 * 1024 };
const encoder = new TextEncoder();
const decoder = new TextDecoder();

interface Ledger {
  /** Every body ever handed to append, text → appender and its index. */
  readonly appended: Map<string, { appender: number; n: number }>;
  /** Resolved appends: sequence → body text. */
  readonly resolved: Map<number, string>;
}

async function appendUntilPowerLoss(fs: FileSystem, prng: Prng, ledger: Ledger): Promise<void> {
  const wal = await Wal.open({ dir, fs, limits });
  const writer = async (appender: number): Promise<void> => {
    const count = 1 + (appender % 3);
    for (let n = 0; n < count; n++) {
      const text = `${appender}.${n}.`.padEnd(8 + prng.below(40), '~');
      ledger.appended.set(text, { appender, n });
      const seq = await wal.append(1 + prng.below(255), encoder.encode(text));
      ledger.resolved.set(seq, text);
    }
  };
  await Promise.allSettled(Array.from({ length: appenders }, (_, appender) => writer(appender)));
  await wal.close().catch(() => undefined);
}

/** Runs `work` on `fs`, cutting the power at its `crashAt`-th file-system call; returns the disk image. */
async function withPowerLossAt(fs: SimFileSystem, crashAt: number, work: () => Promise<void>): Promise<SimFileSystem> {
  let image: SimFileSystem | undefined;
  fs.setFault(() => {
    if (image === undefined && fs.opCount >= crashAt) image = fs.powerLoss();
    return undefined;
  });
  await work().catch(() => undefined);
  return image ?? fs.powerLoss();
}

/** Checks the recovered log; true when its repair cut a torn group with an overlapped one behind it. */
async function checkRecovered(fs: SimFileSystem, ledger: Ledger, context: string): Promise<boolean> {
  const wal = await Wal.open({ dir, fs, limits });
  const cutOverlapped = /overlapped group/.test(wal.recovery.repair?.reason ?? '');
  const seen = new Set<string>();
  const lastOf = new Map<number, number>();
  let count = 0;
  for await (const record of wal.records()) {
    count++;
    const text = decoder.decode(record.body);
    const origin = ledger.appended.get(text);
    assert.ok(origin !== undefined, `${context}: record ${record.seq} was never appended`);
    assert.ok(!seen.has(text), `${context}: record ${record.seq} appears twice`);
    seen.add(text);
    assert.ok((lastOf.get(origin.appender) ?? -1) < origin.n, `${context}: appender ${origin.appender} out of order`);
    lastOf.set(origin.appender, origin.n);
    const acked = ledger.resolved.get(record.seq);
    if (acked !== undefined) assert.equal(text, acked, `${context}: record ${record.seq} differs from what was acknowledged`);
  }
  for (const [seq, text] of ledger.resolved) assert.ok(seen.has(text), `${context}: acknowledged record ${seq} lost`);
  assert.equal(count, wal.lastSeq - wal.firstSeq + 1, context);
  const next = await wal.append(3, encoder.encode('after recovery'));
  await wal.close();
  const again = await Wal.open({ dir, fs, limits });
  assert.equal(again.recovery.repair, undefined, `${context}: a clean reopen repairs nothing`);
  assert.equal(again.lastSeq, next, context);
  await again.close();
  return cutOverlapped;
}


/** The canary: with an fdatasync that syncs nothing, the simulation catches a lost acknowledgement. */
export async function canary(): Promise<void> {
  const callsPerRun = await countCallsPerRun();
  for (let seed = 1; seed <= 200; seed++) {
    const prng = new Prng(seed);
    const ledger: Ledger = { appended: new Map(), resolved: new Map() };
    const fs = new SimFileSystem({ seed });
    const image = await withPowerLossAt(fs, 1 + prng.below(callsPerRun), () => appendUntilPowerLoss(withoutDatasync(fs), prng, ledger));
    const caught = await checkRecovered(image, ledger, `canary seed ${seed}`).then(
      () => false,
      (err: unknown) => err instanceof assert.AssertionError && /lost/.test(err.message),
    );
    if (caught) return;
  }
  assert.fail('200 power losses never caught acknowledged-but-unsynced appends');
}

async function countCallsPerRun(): Promise<number> {
  const probe = new SimFileSystem({ seed: 0 });
  await appendUntilPowerLoss(probe, new Prng(0), { appended: new Map(), resolved: new Map() });
  return probe.opCount;
}

export interface PowerLossRun {
  readonly trials: number;
  /** One seed to replay instead of seeds 1…trials. */
  readonly replaySeed: number | undefined;
  /** The test file, for the replay command a failure prints. */
  readonly testFile: string;
}

/** What the trials came to, for the test's diagnostic. */
export interface PowerLossSummary {
  readonly acknowledged: number;
  readonly crashedInRecovery: number;
  readonly cutWithOverlapped: number;
}

/** Power loss at `trials` random points with the appenders running, and during recovery; the invariants checked after each. */
export async function powerLossTrials({ trials, replaySeed, testFile }: PowerLossRun): Promise<PowerLossSummary> {
  // How many file-system calls a whole run takes, to spread crash points over all of it.
  const callsPerRun = await countCallsPerRun();
  let acknowledged = 0;
  let crashedInRecovery = 0;
  // Recoveries that cut a torn group together with the overlapped group written behind it.
  let cutWithOverlapped = 0;
  for (let trial = 0; trial < trials; trial++) {
    const seed = replaySeed ?? 1 + trial;
    const context = `seed ${seed} (replay: FERMATA_SEED=${seed} node --test ${testFile})`;
    const prng = new Prng(seed);
    const ledger: Ledger = { appended: new Map(), resolved: new Map() };
    // Every other trial on a disk without write-through (no O_DSYNC): the log then fdatasyncs.
    const fs = new SimFileSystem({ seed, writeThrough: seed % 2 === 1 });
    let image = await withPowerLossAt(fs, 1 + prng.below(callsPerRun + 8), () => appendUntilPowerLoss(fs, prng, ledger));
    acknowledged += ledger.resolved.size;
    if (prng.below(4) === 0) {
      // Lose power again in the middle of the recovery (its .broken copy, truncate, syncs).
      const recovering = image;
      image = await withPowerLossAt(recovering, 1 + prng.below(12), async () => (await Wal.open({ dir, fs: recovering, limits })).close());
      crashedInRecovery++;
    }
    if (await checkRecovered(image, ledger, context)) cutWithOverlapped++;
  }
  assert.ok(acknowledged > trials * 10, `appends were acknowledged before the crashes (${acknowledged})`);
  assert.ok(crashedInRecovery > 0 || trials < 4);
  assert.ok(cutWithOverlapped > 0 || trials < 1000, 'some power losses left a torn group behind an intact overlapped one');
  return { acknowledged, crashedInRecovery, cutWithOverlapped };
}
