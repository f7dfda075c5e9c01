// kill -9 of a real `fermata serve` under HTTP/2 load, again and again on one data directory.
// Each cycle starts the service, runs a mixed load for a random span (JSON adds with and without
// keys, Arrow adds whose ids come back as an Arrow stream, cancels, repeated keys) while due
// timers are delivered to a loopback HTTP/2 sink, then sends SIGKILL at that random moment. The
// test keeps its own ledger of acknowledgements (test/helpers/kill9-ledger.ts); after the last
// cycle the service runs once more until every acknowledged add is delivered, and the ledger's
// invariants are checked against the sink's requests and GET of every acknowledged timer.
//
// (test/integration/delivery-e2e.test.ts has the single-timer case: one delivery cut by kill -9
// is delivered again. This is the same promise under load, with adds and cancels in flight.)
//
// Every other cycle is a failpoint cycle instead: the service starts with FERMATA_FAILPOINTS
// arming one named point (engine/failpoints.ts) at a random hit, and kills itself there; the
// test checks that it died by SIGKILL having named that point, and sends the timed SIGKILL only
// if the point was not reached in time (counted). The points are armed in rounds of every name in
// a seeded order. Some adds are due days ahead, and failpoint cycles run with a small memory
// budget, so the loader spills them in checkpoints and the checkpoint's points are reached.
// A WAL segment is only started by a checkpoint that finds the log quiet (or at 64 MiB), so the
// cycle arming that point adds one far timer now and then and nothing else.
// Replay: FERMATA_SEED picks the same failpoint plan (the load's timing still varies).
//
// Sizes: `npm test` runs one round of the failpoint plan: twice as many cycles as there are
// failpoints (20 for 10), so every point is armed once between timed kills; a second round only
// arms the same points at other hits. `npm run soak` runs 1,000; FERMATA_KILL9_CYCLES=N with
// FERMATA_SEED=S runs N (a long soak in chunks, each on its own data directory).
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { type FailpointName, failpointNames } from '../../engine/failpoints.ts';
import { after, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { tableFromIPC } from 'apache-arrow';
import { batchFromSpecs, type TimerSpec } from '../../engine/batch/timer-batch.ts';
import { batchToArrow } from '../helpers/arrow.ts';
import { H2Client, jsonBody } from '../helpers/h2-client.ts';
import { deliveriesByUid, Kill9Ledger } from '../helpers/kill9-ledger.ts';
import { Prng } from '../helpers/prng.ts';
import { testScratch } from '../helpers/scratch.ts';
import { type Service, startService } from '../helpers/service.ts';
import { startH2Sink } from '../helpers/sinks.ts';
import { soak } from '../helpers/soak.ts';
import { withTimeout } from '../helpers/timeout.ts';

const sizes = {
  // FERMATA_KILL9_CYCLES=N runs N instead (a soak in chunks, each with its own FERMATA_SEED).
  cycles: Number(process.env.FERMATA_KILL9_CYCLES ?? (soak ? 1_000 : 2 * failpointNames.length)),
  /** A cycle's load runs this long (uniform) before the kill. */
  loadMsMin: 150,
  loadMsMax: 1_200,
  lanes: 8,
  /** Timers are due this far after their add (uniform), so most fire during the run and some are still cancellable. */
  fireAheadMsMax: 3_000,
  arrowRowsMax: 20,
  requestTimeoutMs: 10_000,
  /** After the last cycle, every acknowledged add must be delivered within this. */
  finalDeliveryMs: 60_000,
  /** Percent of JSON adds due days ahead (farAheadMsMin..farAheadMsMax): far past the loader's lead, so they can spill. */
  farAddPercent: 15,
  farAheadMsMin: 24 * 3600_000,
  farAheadMsMax: 48 * 3600_000,
  /** A failpoint cycle's memory budget: a few hundred timers, so every loader step (1 s) with far adds to spill checkpoints. */
  failpointMemoryBudget: '64KiB',
  /** How long a failpoint cycle's load runs for its point to be reached, before the timed SIGKILL: a checkpoint's point needs a loader step or two (one a second), a slow disk makes group commits few. */
  failpointLoadMs: 4_000,
  /** The quiet cycle (for the segment point): one far add this often, for this long. */
  quietAddIntervalMs: 400,
  quietLoadMs: 5_000,
  /** A failpoint must have killed the process this soon after its exit is seen (stderr drained). */
  exitTimeoutMs: 10_000,
} as const;

/**
 * A failpoint cycle arms its point at hit 1..this (uniform): the points passed at every group
 * commit or delivery also get moments later in the load; a checkpoint comes about once a second,
 * a new segment once a cycle at most.
 */
const failpointHitsMax: Readonly<Record<FailpointName, number>> = {
  'wal.written-before-sync': 12,
  'wal.synced-before-ack': 12,
  'wal.segment-created-empty': 1,
  'checkpoint.runs-written': 2,
  'spill.manifest-before-rename': 2,
  'checkpoint.manifest-installed': 2,
  'checkpoint.segments-deleted': 2,
  'delivery.outcome-before-append': 8,
  // This load sends no PATCH: its cycles fall back to the timed kill (test/sim covers RESCHEDULE).
  'reschedule.before-append': 1,
  'reschedule.after-append': 1,
};

/** Points every load passes many times a second: a cycle arming one must reach it. */
const reachedUnderLoad: readonly FailpointName[] = ['wal.written-before-sync', 'wal.synced-before-ack', 'delivery.outcome-before-append'];

const seed = Number(process.env.FERMATA_SEED ?? 20261203);
/** Seeds the failpoint plan apart from the load's PRNG, whose draws depend on timing. */
const planSeedMix = 0x5f3759df;
const arrowType = 'application/vnd.apache.arrow.stream';
const scratch = testScratch('fermata-kill9-load');
const sink = await startH2Sink();
after(() => sink.close());

/** One incarnation's load: lanes of random operations until `stop` is set or the session dies. */
class Load {
  readonly #ledger: Kill9Ledger;
  readonly #prng: Prng;
  readonly #cycle: number;
  #counter = 0;
  stopped = false;

  constructor(ledger: Kill9Ledger, prng: Prng, cycle: number) {
    this.#ledger = ledger;
    this.#prng = prng;
    this.#cycle = cycle;
  }

  async run(client: H2Client): Promise<void> {
    const lane = async (lane: number): Promise<void> => {
      while (!this.stopped && client.usable) {
        try {
          await this.#step(client, lane);
        } catch {
          // A request cut by the kill: its outcome is unknown, and the ledger allows either.
          if (!this.stopped) await sleep(5);
        }
      }
    };
    await Promise.all(Array.from({ length: sizes.lanes }, (_, i) => lane(i)));
  }

  /** The quiet load: one far add now and then, so a checkpoint finds the log idle. */
  async runQuiet(client: H2Client): Promise<void> {
    while (!this.stopped && client.usable) {
      try {
        await this.#addJson(client, 0, false, true);
      } catch {
        // cut by the kill, as in run()
      }
      await sleep(sizes.quietAddIntervalMs);
    }
  }

  #uid(lane: number): string {
    const uid = `c${this.#cycle}-l${lane}-${this.#counter++}`;
    this.#ledger.sent.add(uid);
    return uid;
  }

  #fireAtMs(): number {
    return Date.now() + this.#prng.below(sizes.fireAheadMsMax);
  }

  #farFireAtMs(): number {
    return Date.now() + sizes.farAheadMsMin + this.#prng.below(sizes.farAheadMsMax - sizes.farAheadMsMin);
  }

  async #step(client: H2Client, lane: number): Promise<void> {
    const roll = this.#prng.below(100);
    if (roll < 45) return this.#addJson(client, lane, this.#prng.coin(), this.#prng.below(100) < sizes.farAddPercent);
    if (roll < 60) return this.#addArrow(client, lane);
    if (roll < 80) return this.#cancel(client);
    return this.#repeatKey(client);
  }

  async #addJson(client: H2Client, lane: number, keyed: boolean, far: boolean): Promise<void> {
    const uid = this.#uid(lane);
    const fireAtMs = far ? this.#farFireAtMs() : this.#fireAtMs();
    const timer = { fire_at: fireAtMs, target: `${sink.url}/k9`, payload: uid, ...(keyed ? { key: `key-${uid}` } : {}) };
    const answer = await client.request({ method: 'POST', path: '/v1/timers', headers: { 'content-type': 'application/json' }, body: JSON.stringify(timer) });
    const body = jsonBody(answer) as { id?: string; fire_at?: string; duplicate?: boolean } | undefined;
    if (answer.status === 201 && typeof body?.id === 'string' && body.duplicate === false) {
      this.#ledger.adds.set(uid, { uid, id: body.id, fireAtMs: Date.parse(body.fire_at ?? ''), key: keyed ? `key-${uid}` : undefined, far });
    } else if (answer.status >= 400 && answer.status < 500) {
      this.#ledger.refused.add(uid);
      this.#ledger.problem(`a valid add was refused: ${answer.status} ${answer.body.toString('utf8')}`);
    } else {
      this.#ledger.problem(`add ${uid}: ${answer.status} ${answer.body.toString('utf8')}`);
    }
  }

  async #addArrow(client: H2Client, lane: number): Promise<void> {
    const rows = 1 + this.#prng.below(sizes.arrowRowsMax);
    const specs: TimerSpec[] = Array.from({ length: rows }, () => ({ fireAtMs: this.#fireAtMs(), target: `${sink.url}/k9-arrow`, payload: this.#uid(lane) }));
    const answer = await client.request({ method: 'POST', path: '/v1/timers', headers: { 'content-type': arrowType, accept: arrowType }, body: batchToArrow(batchFromSpecs(specs)) });
    if (answer.status !== 201) {
      this.#ledger.problem(`Arrow add of ${rows}: ${answer.status} ${answer.body.toString('utf8')}`);
      return;
    }
    const ids = [...(tableFromIPC(answer.body).getChild('id') ?? [])] as string[];
    if (ids.length !== rows) this.#ledger.problem(`Arrow add of ${rows} answered ${ids.length} ids`);
    specs.forEach((spec, row) => {
      const uid = spec.payload as string;
      this.#ledger.adds.set(uid, { uid, id: ids[row] as string, fireAtMs: spec.fireAtMs, key: undefined, far: false });
    });
  }

  async #cancel(client: H2Client): Promise<void> {
    const candidates = this.#ledger.cancellable(Date.now() + 200);
    const add = candidates[this.#prng.below(candidates.length)];
    if (add === undefined) return;
    this.#ledger.cancelsUnanswered.add(add.uid);
    const answer = await client.request({ method: 'DELETE', path: `/v1/timers/${add.id}` });
    this.#ledger.cancelsUnanswered.delete(add.uid);
    if (answer.status === 200) this.#ledger.cancels.set(add.uid, { uid: add.uid, id: add.id, ackedAtMs: Date.now() });
    else if (answer.status === 409) this.#ledger.tooLate.add(add.uid);
    else this.#ledger.problem(`cancel of acknowledged ${add.uid} (${add.id}): ${answer.status} ${answer.body.toString('utf8')}`);
  }

  /** A key acknowledged before (often in an earlier incarnation) added again: the original id, duplicate: true. */
  async #repeatKey(client: H2Client): Promise<void> {
    const keyed = [...this.#ledger.adds.values()].filter((add) => add.key !== undefined);
    const add = keyed[this.#prng.below(keyed.length)];
    if (add === undefined) return;
    const timer = { delay_ms: 0, target: `${sink.url}/k9-repeat`, payload: `repeat-of-${add.uid}`, key: add.key };
    const answer = await client.request({ method: 'POST', path: '/v1/timers', headers: { 'content-type': 'application/json' }, body: JSON.stringify(timer) });
    const body = jsonBody(answer) as { id?: string; duplicate?: boolean } | undefined;
    if (answer.status !== 200 || body?.id !== add.id || body.duplicate !== true) {
      this.#ledger.problem(`key ${add.key} added again: ${answer.status} ${answer.body.toString('utf8')}, expected 200 with ${add.id}`);
    }
  }
}

async function kill9(service: Service, ledger: Kill9Ledger): Promise<void> {
  ledger.killed(Date.now());
  service.child.kill('SIGKILL');
  await withTimeout(service.exited, 10_000, 'fermata to die after SIGKILL');
}

async function waitForDeliveries(ledger: Kill9Ledger): Promise<string[]> {
  const deadline = Date.now() + sizes.finalDeliveryMs;
  for (;;) {
    const missing = ledger.undelivered(deliveriesByUid(sink.requests));
    if (missing.length === 0 || Date.now() > deadline) return missing;
    await sleep(100);
  }
}

/** GET of every acknowledged timer: delivered, or cancelled when its cancel was acknowledged. */
async function checkStates(client: H2Client, ledger: Kill9Ledger): Promise<void> {
  const adds = [...ledger.adds.values()];
  let next = 0;
  const lane = async (): Promise<void> => {
    for (let index = next++; index < adds.length; index = next++) {
      const add = adds[index] as (typeof adds)[number];
      const answer = await client.request({ method: 'GET', path: `/v1/timers/${add.id}` });
      const state = (jsonBody(answer) as { state?: string } | undefined)?.state;
      const expected = ledger.expectedStates(add);
      if (answer.status !== 200 || state === undefined || !expected.includes(state)) ledger.problem(`GET ${add.id} (${add.uid}): ${answer.status} ${state}, expected ${expected.join(' or ')}`);
    }
  };
  await Promise.all(Array.from({ length: 16 }, lane));
}

/** A failpoint cycle's point and the hit that kills. */
interface FailpointPlan {
  readonly failpoint: FailpointName;
  readonly hit: number;
}

/** Odd cycles arm a failpoint: every name once per round, in a seeded order. */
function planCycles(cycles: number): Array<FailpointPlan | undefined> {
  const prng = new Prng(seed ^ planSeedMix);
  const round: FailpointName[] = [];
  return Array.from({ length: cycles }, (_, cycle) => {
    if (cycle % 2 === 0) return undefined;
    if (round.length === 0) {
      round.push(...failpointNames);
      prng.shuffle(round);
    }
    const failpoint = round.pop() as FailpointName;
    return { failpoint, hit: 1 + prng.below(failpointHitsMax[failpoint]) };
  });
}

/** A started child's stderr, kept whole, and when its streams are done (so a failpoint's line is in). */
interface Watched {
  readonly child: ChildProcess;
  readonly closed: Promise<void>;
  stderr(): string;
}

function watch(child: ChildProcess): Watched {
  const chunks: string[] = [];
  child.stderr?.on('data', (chunk: Buffer | string) => chunks.push(chunk.toString()));
  const closed = new Promise<void>((resolve) => child.on('close', () => resolve()));
  return { child, closed, stderr: () => chunks.join('') };
}

/** Undefined when the child died by SIGKILL at the armed hit of its failpoint, having said so; else what went wrong. */
async function failpointDeath(watched: Watched, plan: FailpointPlan): Promise<string | undefined> {
  await withTimeout(watched.closed, sizes.exitTimeoutMs, 'fermata to exit at its failpoint');
  const said = `"failpoint":"${plan.failpoint}","hit":${plan.hit}`;
  if (watched.child.signalCode === 'SIGKILL' && watched.stderr().includes(said)) return undefined;
  const ended = watched.child.signalCode ?? `exit code ${watched.child.exitCode}`;
  return `armed ${plan.failpoint}@${plan.hit}, fermata ended (${ended}) without its failpoint's line; stderr:\n${watched.stderr().slice(-2_000)}`;
}

/** Per failpoint: cycles that armed it, how many reached it, how many fell back to the timed kill. */
type FailpointTally = Map<FailpointName, { armed: number; reached: number; fellBack: number }>;

function tallyOf(tally: FailpointTally, name: FailpointName): { armed: number; reached: number; fellBack: number } {
  let entry = tally.get(name);
  if (entry === undefined) tally.set(name, (entry = { armed: 0, reached: 0, fellBack: 0 }));
  return entry;
}

test(`kill -9 under HTTP/2 load, ${sizes.cycles} cycles on one data directory: the ledger's invariants hold (seed ${seed})`, { timeout: soak ? 14_400_000 : 420_000 }, async (t) => {
  const dataDir = scratch.tempDir('data');
  const ledger = new Kill9Ledger();
  const prng = new Prng(seed);
  const plans = planCycles(sizes.cycles);
  const tally: FailpointTally = new Map();
  // The children in start order; a closure's assignment would escape the loop's narrowing.
  const started: Watched[] = [];
  const track = (child: ChildProcess): void => {
    scratch.children.add(child);
    started.push(watch(child));
  };

  for (let cycle = 0; cycle < sizes.cycles; cycle++) {
    const plan = plans[cycle];
    if (plan === undefined) {
      const service = await startService(dataDir, track);
      ledger.restarted(Date.now());
      const client = await H2Client.connect(service.url, sizes.requestTimeoutMs);
      const load = new Load(ledger, prng, cycle);
      const running = load.run(client);
      await sleep(sizes.loadMsMin + prng.below(sizes.loadMsMax - sizes.loadMsMin));
      await kill9(service, ledger);
      load.stopped = true;
      await withTimeout(running, sizes.requestTimeoutMs * 2, 'the load to stop after the kill');
      client.close();
      continue;
    }
    const counts = tallyOf(tally, plan.failpoint);
    counts.armed++;
    const env = { FERMATA_FAILPOINTS: `${plan.failpoint}@${plan.hit}`, FERMATA_MEMORY_BUDGET_FLOOR: 'off' };
    let service: Service;
    try {
      service = await startService(dataDir, track, { env, args: ['--memory-budget', sizes.failpointMemoryBudget] });
    } catch (err) {
      // Reached while opening (a fresh directory's first segment): the kill came before "listening".
      const problem = await failpointDeath(started.at(-1) as Watched, plan);
      if (problem !== undefined) throw err;
      ledger.killed(Date.now());
      counts.reached++;
      continue;
    }
    const watched = started.at(-1) as Watched;
    ledger.restarted(Date.now());
    const load = new Load(ledger, prng, cycle);
    const quiet = plan.failpoint === 'wal.segment-created-empty';
    const running = H2Client.connect(service.url, sizes.requestTimeoutMs).then(
      async (client) => {
        await (quiet ? load.runQuiet(client) : load.run(client));
        client.close();
      },
      // Killed at its point before the test connected.
      () => undefined,
    );
    const died = await Promise.race([service.exited.then(() => true), sleep(quiet ? sizes.quietLoadMs : sizes.failpointLoadMs).then(() => false)]);
    if (died) {
      ledger.killed(Date.now());
      const problem = await failpointDeath(watched, plan);
      if (problem !== undefined) ledger.problem(`cycle ${cycle}: ${problem}`);
      counts.reached++;
    } else {
      counts.fellBack++;
      await kill9(service, ledger);
    }
    load.stopped = true;
    await withTimeout(running, sizes.requestTimeoutMs * 2, 'the load to stop after the kill');
  }

  const service = await startService(dataDir, track);
  ledger.restarted(Date.now());
  const client = await H2Client.connect(service.url, sizes.requestTimeoutMs);
  try {
    const missing = await waitForDeliveries(ledger);
    for (const uid of missing.slice(0, 10)) ledger.problem(`acknowledged add ${uid} (${ledger.adds.get(uid)?.id}) never delivered within ${sizes.finalDeliveryMs} ms`);
    await checkStates(client, ledger);
  } finally {
    client.close();
  }
  const deliveries = deliveriesByUid(sink.requests.filter((request) => request.path !== '/k9-repeat'));
  ledger.checkDeliveries(deliveries);

  const duplicates = [...deliveries.values()].filter((requests) => requests.length > 1).length;
  const far = [...ledger.adds.values()].filter((add) => add.far).length;
  t.diagnostic(
    `${sizes.cycles} kills; sent ${ledger.sent.size} timers, acknowledged ${ledger.adds.size} (${far} far-future), cancels acknowledged ${ledger.cancels.size} (409: ${ledger.tooLate.size}); ` +
      `deliveries ${sink.requests.length}, timers delivered more than once ${duplicates}`,
  );
  const perFailpoint = failpointNames.map((name) => {
    const counts = tallyOf(tally, name);
    return `${name}: armed ${counts.armed}, reached ${counts.reached}, timed kill instead ${counts.fellBack}`;
  });
  t.diagnostic(`failpoint cycles: ${perFailpoint.join('; ')}`);
  assert.ok(ledger.adds.size > sizes.cycles, 'the load got adds acknowledged');
  assert.ok(ledger.cancels.size > 0, 'the load got cancels acknowledged');
  // A full round of the plan arms every point: the default size must not leave one out.
  if (sizes.cycles >= 2 * failpointNames.length) for (const name of failpointNames) assert.ok(tallyOf(tally, name).armed > 0, `${name} was never armed in ${sizes.cycles} cycles`);
  for (const name of reachedUnderLoad) {
    const counts = tallyOf(tally, name);
    assert.ok(counts.armed === 0 || counts.reached > 0, `${name} was armed in ${counts.armed} cycles and never reached`);
  }
  assert.deepEqual(ledger.problems, []);
  service.child.kill('SIGTERM');
  await withTimeout(service.exited, 20_000, 'fermata to stop after SIGTERM');
});
