// A seeded simulation of schedules over the simulated file system, with the power cut at a random
// file-system call: PUTs of schedules (every minute, catch_up all), replacements (a new payload;
// half of them with a checkpoint taken between the replace's record and the cancel of the old
// occurrences), pauses and resumes, steps of the manual clock (which create occurrences) and
// checkpoints. After each recovery:
//   - every schedule exists and is paused exactly as its last acknowledged change left it, or as
//     the change the power cut interrupted would have (a change is durable or absent, never half);
//   - a paused schedule has no pending occurrence, and a running one's pending occurrences carry
//     its payload: the occurrences a replace or a pause cancels go with it, even when the power
//     went between the change's record and the cancel's;
//   - once the clock has moved on, a schedule never paused holds each of its occurrences since
//     its PUT exactly once, none missing: the mark and the occurrences it covers were durable
//     together (a mark without its timers would leave a gap).
// A canary (an fdatasync that syncs nothing) must be caught. A failure prints the seed;
// FERMATA_SEED=N replays that trial; FERMATA_SIM_TRIALS=N runs N trials (default 200).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ManualClock } from '../../engine/clock.ts';
import { Engine } from '../../engine/engine.ts';
import type { FileSystem } from '../../engine/fs/file-system.ts';
import { Prng } from '../helpers/prng.ts';
import { canaryCatches, simStoreOptions, withPowerLossAt } from './power-loss-at.ts';
import { SimFileSystem } from './sim-file-system.ts';
import { withoutDatasync } from './without-datasync.ts';

const dataDir = '/data';
const t0 = 1_796_220_000_000; // a whole minute
const minute = 60_000;
const replaySeed = process.env.FERMATA_SEED === undefined ? undefined : Number(process.env.FERMATA_SEED);
const trials = replaySeed !== undefined ? 1 : Number(process.env.FERMATA_SIM_TRIALS ?? 200);
const operationsPerTrial = 10;

interface ScheduleFacts {
  /** Acknowledged: paused or not (absent from the map: not acknowledged as created). */
  paused: boolean;
  /** How many times it was replaced: its payload is `v{replaced}`. */
  replaced: number;
  /** The PUT's time: occurrences come after it. */
  readonly putAtMs: number;
}

interface Ledger {
  readonly acked: Map<string, ScheduleFacts>;
  /** The change under way when the power went: a put (paused false), a replace or a pause/resume. */
  underWay: { readonly name: string; readonly paused: boolean; readonly putAtMs: number; readonly replaced: number } | undefined;
  /** Names ever paused or replaced (or asked to be): their occurrences have gaps by design. */
  readonly everPaused: Set<string>;
}

const newLedger = (): Ledger => ({ acked: new Map(), underWay: undefined, everPaused: new Set() });

const open = (fs: FileSystem): Promise<Engine> => Engine.open({ dataDir, fs, clock: new ManualClock(t0), walLimits: { segmentBytes: 4096 }, store: simStoreOptions });

const target = { target: 'https://a.example/hook', queue: 'default', headers: '' };
const payloadOf = (replaced: number): Uint8Array => new TextEncoder().encode(`v${replaced}`);

async function operation(engine: Engine, prng: Prng, ledger: Ledger): Promise<void> {
  const pick = prng.below(100);
  const names = [...ledger.acked.keys()];
  if (pick < 30 || names.length === 0) {
    const name = `s${ledger.acked.size}`;
    const putAtMs = engine.clock.now();
    ledger.underWay = { name, paused: false, putAtMs, replaced: 0 };
    await engine.putSchedule(name, { everyMs: minute, startAtMs: t0, catchUp: 'all', payload: payloadOf(0), ...target });
    ledger.acked.set(name, { paused: false, putAtMs, replaced: 0 });
    ledger.underWay = undefined;
    return;
  }
  if (pick < 40) {
    const name = names[prng.below(names.length)] as string;
    const facts = ledger.acked.get(name) as ScheduleFacts;
    ledger.everPaused.add(name);
    const putAtMs = engine.clock.now();
    ledger.underWay = { name, paused: false, putAtMs, replaced: facts.replaced + 1 };
    const replacing = engine.putSchedule(name, { everyMs: minute, startAtMs: t0, catchUp: 'all', payload: payloadOf(facts.replaced + 1), ...target });
    if (prng.below(2) === 0) {
      // A checkpoint taken once the replace's record is applied, while the cancel of the old
      // occurrences (a record of its own) is still under way: the manifest holds the new
      // schedule and the old occurrences, and the cancel may never land.
      const wanted = new TextDecoder().decode(payloadOf(facts.replaced + 1));
      while (new TextDecoder().decode(engine.schedule(name)?.definition.payload ?? new Uint8Array(0)) !== wanted) {
        if (await Promise.race([replacing.then(() => true, () => true), new Promise<false>((resolve) => setImmediate(() => resolve(false)))])) break;
      }
      await Promise.all([replacing, engine.checkpoint()]);
    } else {
      await replacing;
    }
    ledger.acked.set(name, { paused: false, putAtMs, replaced: facts.replaced + 1 });
    ledger.underWay = undefined;
    return;
  }
  if (pick < 50) {
    const name = names[prng.below(names.length)] as string;
    const facts = ledger.acked.get(name) as ScheduleFacts;
    ledger.everPaused.add(name);
    ledger.underWay = { name, paused: !facts.paused, putAtMs: facts.putAtMs, replaced: facts.replaced };
    await engine.setSchedulePaused(name, !facts.paused);
    facts.paused = !facts.paused;
    ledger.underWay = undefined;
    return;
  }
  if (pick < 90) {
    await engine.moveClock({ advanceMs: 10_000 + prng.below(5 * minute) });
    // The materializer runs on 0 ms timers after a move: let it.
    await new Promise((resolve) => setTimeout(resolve, 2));
    return;
  }
  await engine.checkpoint();
}

async function workload(fs: FileSystem, prng: Prng, ledger: Ledger): Promise<void> {
  const engine = await open(fs);
  try {
    for (let done = 0; done < operationsPerTrial; done++) await operation(engine, prng, ledger);
  } finally {
    await engine.close().catch(() => undefined);
  }
}

async function occurrenceInstants(engine: Engine, name: string): Promise<number[]> {
  const page = await engine.listTimers({ keyPrefix: new TextEncoder().encode(`schedule:${name}:`) }, 1000);
  return page.timers.map((view) => Number((view.key as string).split(':')[2])).sort((a, b) => a - b);
}

async function checkRecovered(fs: SimFileSystem, ledger: Ledger, context: string): Promise<void> {
  const engine = await open(fs);
  try {
    const names = new Set([...ledger.acked.keys(), ...(ledger.underWay === undefined ? [] : [ledger.underWay.name])]);
    const live: Array<{ name: string; putAtMs: number }> = [];
    for (const name of names) {
      const view = engine.schedule(name);
      const acked = ledger.acked.get(name);
      const underWay = ledger.underWay?.name === name ? ledger.underWay : undefined;
      const allowed = [acked?.paused, underWay?.paused];
      if (view === undefined) {
        assert.ok(acked === undefined, `${context}: schedule ${name} was acknowledged and is lost`);
        continue;
      }
      assert.ok(allowed.includes(view.paused), `${context}: ${name} is ${view.paused ? 'paused' : 'running'}; acknowledged ${acked?.paused}, under way ${underWay?.paused}: lost`);
      const payload = new TextDecoder().decode(view.definition.payload);
      assert.ok([acked?.replaced, underWay?.replaced].some((replaced) => replaced !== undefined && payload === `v${replaced}`), `${context}: ${name} has payload ${payload}; acknowledged v${acked?.replaced}, under way v${underWay?.replaced}`);
      const pending = (await engine.listTimers({ keyPrefix: new TextEncoder().encode(`schedule:${name}:`), state: 'pending' }, 1000)).timers;
      if (view.paused) assert.deepEqual(pending.map((timer) => timer.key), [], `${context}: ${name} is paused and still has pending occurrences`);
      for (const timer of pending) assert.equal(new TextDecoder().decode(timer.payload), payload, `${context}: ${name}'s occurrence ${timer.key} carries another payload than the schedule's`);
      if (!ledger.everPaused.has(name)) live.push({ name, putAtMs: (acked ?? underWay)?.putAtMs as number });
    }
    await engine.moveClock({ advanceMs: 5 * minute });
    await new Promise((resolve) => setTimeout(resolve, 5));
    const nowMs = engine.clock.now();
    for (const { name, putAtMs } of live) {
      const expected: number[] = [];
      for (let at = t0 + minute * Math.max(0, Math.floor((putAtMs - t0) / minute) + 1); at <= nowMs + 2 * minute; at += minute) expected.push(at);
      const got = await occurrenceInstants(engine, name);
      assert.deepEqual(got.filter((ms) => ms <= nowMs), expected.filter((ms) => ms <= nowMs), `${context}: ${name}'s occurrences up to now, each once (lost or made twice otherwise)`);
    }
  } finally {
    await engine.close();
  }
}

async function callsPerRun(): Promise<number> {
  const probe = new SimFileSystem({ seed: 0 });
  await workload(probe, new Prng(0), newLedger());
  return probe.opCount;
}

test('canary: with an fdatasync that syncs nothing, the schedule simulation catches a lost acknowledgement', async () => {
  const calls = await callsPerRun();
  const caught = await canaryCatches({ calls, seeds: 300, newLedger, run: (fs, prng, ledger) => workload(withoutDatasync(fs), prng, ledger), check: checkRecovered });
  assert.ok(caught, '300 power losses never caught an acknowledged-but-unsynced schedule change');
});

test(`power loss at ${trials} random points of schedules at work: acknowledged changes hold, each occurrence exactly once`, { timeout: 600_000 }, async () => {
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

test("a checkpoint taken between a replace's record and its cancel's keeps the cancel owed: the next open cancels the old occurrences", async () => {
  const fs = new SimFileSystem({ seed: 7 });
  const engine = await open(fs);
  await engine.putSchedule('s', { everyMs: minute, startAtMs: t0, catchUp: 'all', payload: payloadOf(0), ...target });
  for (let step = 0; step < 3; step++) {
    await engine.moveClock({ advanceMs: minute });
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  const old = await engine.listTimers({ keyPrefix: new TextEncoder().encode('schedule:s:'), state: 'pending' }, 1000);
  assert.ok(old.timers.length > 0, 'the schedule has pending occurrences');
  // The replace's record lands (the first log sync from here); the cancel's (the second) fails,
  // which stops the log: the cancel is owed. The checkpoint then covers the replace alone.
  let logSyncs = 0;
  fs.setFault((op, path) => (op === 'datasync' && path.includes('/wal/') && ++logSyncs === 2 ? 'EIO' : undefined));
  await assert.rejects(engine.putSchedule('s', { everyMs: minute, startAtMs: t0, catchUp: 'all', payload: payloadOf(1), ...target }), 'the cancel of the old occurrences did not land');
  assert.equal(new TextDecoder().decode(engine.schedule('s')?.definition.payload), 'v1', 'the replace itself is durable');
  fs.setFault(undefined);
  await engine.checkpoint();
  await engine.close().catch(() => undefined);

  const reopened = await open(fs.powerLoss());
  try {
    assert.equal(new TextDecoder().decode(reopened.schedule('s')?.definition.payload), 'v1');
    const pending = await reopened.listTimers({ keyPrefix: new TextEncoder().encode('schedule:s:'), state: 'pending' }, 1000);
    for (const timer of pending.timers) assert.equal(new TextDecoder().decode(timer.payload), 'v1', `occurrence ${timer.key} of the replaced rule is still pending`);
  } finally {
    await reopened.close();
  }
});
