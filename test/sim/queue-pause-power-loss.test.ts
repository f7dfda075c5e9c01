// A seeded simulation of pausing and resuming queues over the simulated file system, with the
// power cut at a random file-system call: pauses, resumes (twice in a row too), PUTs of a
// config, adds (to paused queues too) and checkpoints, one at a time. After each recovery:
//   - every queue is paused exactly as its last acknowledged change left it, or as the change
//     the power cut interrupted would have (a change is durable or absent, never half);
//   - a paused queue hands out none of its due timers, and a running one all of them;
//   - a PUT never resumed a queue.
// A canary (an fdatasync that syncs nothing) must be caught. A failure prints the seed;
// FERMATA_SEED=N replays that trial; FERMATA_SIM_TRIALS=N runs N trials (default 1,000).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { batchFromSpecs } from '../../engine/batch/timer-batch.ts';
import { type Clock, Engine } from '../../engine/engine.ts';
import type { FileSystem } from '../../engine/fs/file-system.ts';
import { Prng } from '../helpers/prng.ts';
import { canaryCatches, simStoreOptions, withPowerLossAt } from './power-loss-at.ts';
import { SimFileSystem } from './sim-file-system.ts';
import { withoutDatasync } from './without-datasync.ts';

const dataDir = '/data';
const t0 = 1_796_220_000_000;
const queues = ['q0', 'q1', 'q2'] as const;
const replaySeed = process.env.FERMATA_SEED === undefined ? undefined : Number(process.env.FERMATA_SEED);
const trials = replaySeed !== undefined ? 1 : Number(process.env.FERMATA_SIM_TRIALS ?? 1_000);
const operationsPerTrial = 12;

/** Per queue: the paused state its last acknowledged change left, and the one a change under way would leave. */
interface Ledger {
  readonly acked: Map<string, boolean>;
  readonly underWay: Map<string, boolean>;
}

const newLedger = (): Ledger => ({ acked: new Map(queues.map((queue) => [queue, false])), underWay: new Map() });

const clock: Clock = { now: () => t0 };
const open = (fs: FileSystem): Promise<Engine> => Engine.open({ dataDir, fs, clock, walLimits: { segmentBytes: 4096 }, store: simStoreOptions });

async function operation(engine: Engine, prng: Prng, ledger: Ledger, added: { count: number }): Promise<void> {
  const queue = queues[prng.below(queues.length)] as string;
  const pick = prng.below(100);
  if (pick < 45) {
    const paused = prng.below(2) === 0;
    ledger.underWay.set(queue, paused);
    const view = await engine.setQueuePaused(queue, paused);
    assert.equal(view?.paused, paused);
    ledger.acked.set(queue, paused);
    ledger.underWay.delete(queue);
    return;
  }
  if (pick < 60) {
    await engine.setQueue(queue, { max_attempts: 1 + prng.below(10) });
    assert.equal(engine.findQueueView(queue)?.paused, ledger.acked.get(queue), 'a PUT keeps the pause');
    return;
  }
  if (pick < 90) {
    await engine.admit(batchFromSpecs([{ fireAtMs: t0 - 1000 + added.count++, target: 'https://a.example/hook', queue }]));
    return;
  }
  await engine.checkpoint();
}

async function workload(fs: FileSystem, prng: Prng, ledger: Ledger): Promise<void> {
  const engine = await open(fs);
  const added = { count: 0 };
  try {
    // Every queue exists from the start (configured), so a pause of it is always known.
    for (const queue of queues) await engine.setQueue(queue, {});
    for (let done = 0; done < operationsPerTrial; done++) await operation(engine, prng, ledger, added);
  } finally {
    await engine.close().catch(() => undefined);
  }
}

async function checkRecovered(fs: SimFileSystem, ledger: Ledger, context: string): Promise<void> {
  const engine = await open(fs);
  try {
    const running = new Set<string>();
    for (const queue of queues) {
      const view = engine.findQueueView(queue);
      // Before the configs were durable a queue may not exist yet: then it runs (none of its timers can exist either).
      const paused = view?.paused ?? false;
      const allowed = [ledger.acked.get(queue), ledger.underWay.get(queue)];
      assert.ok(allowed.includes(paused), `${context}: ${queue} is ${paused ? 'paused' : 'running'}; acknowledged ${ledger.acked.get(queue)}, under way ${ledger.underWay.get(queue)}: lost`);
      if (!paused) running.add(queue);
    }
    const slice = engine.takeDue(t0, 1000);
    for (const index of slice.queues) assert.ok(running.has(engine.queueNameAt(index)), `${context}: a timer of paused ${engine.queueNameAt(index)} was handed out`);
    assert.equal(engine.stats().counts.pending, engine.queueHoldStats().held, `${context}: every timer left waiting is held by a pause`);
  } finally {
    await engine.close();
  }
}

async function callsPerRun(): Promise<number> {
  const probe = new SimFileSystem({ seed: 0 });
  await workload(probe, new Prng(0), newLedger());
  return probe.opCount;
}

test('canary: with an fdatasync that syncs nothing, the pause simulation catches a lost acknowledgement', async () => {
  const calls = await callsPerRun();
  const caught = await canaryCatches({ calls, seeds: 300, newLedger, run: (fs, prng, ledger) => workload(withoutDatasync(fs), prng, ledger), check: checkRecovered });
  assert.ok(caught, '300 power losses never caught an acknowledged-but-unsynced pause');
});

test(`power loss at ${trials} random points of pausing and resuming: every acknowledged pause holds, and a paused queue hands out nothing`, { timeout: 600_000 }, async () => {
  const calls = await callsPerRun();
  for (let trial = 0; trial < trials; trial++) {
    const seed = replaySeed ?? 1 + trial;
    const context = `seed ${seed} (replay: FERMATA_SEED=${seed} node --test ${new URL(import.meta.url).pathname})`;
    const prng = new Prng(seed);
    const ledger = newLedger();
    const fs = new SimFileSystem({ seed });
    const image = await withPowerLossAt(fs, 1 + prng.below(calls + 16), () => workload(fs, prng, ledger));
    await checkRecovered(image, ledger, context);
  }
});
