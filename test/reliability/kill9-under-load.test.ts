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
// Sizes: `npm test` 30 cycles (about a minute and a half); `npm run soak` 1,000.
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
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
  cycles: soak ? 1_000 : 30,
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
} as const;

const seed = Number(process.env.FERMATA_SEED ?? 20261203);
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

  #uid(lane: number): string {
    const uid = `c${this.#cycle}-l${lane}-${this.#counter++}`;
    this.#ledger.sent.add(uid);
    return uid;
  }

  #fireAtMs(): number {
    return Date.now() + this.#prng.below(sizes.fireAheadMsMax);
  }

  async #step(client: H2Client, lane: number): Promise<void> {
    const roll = this.#prng.below(100);
    if (roll < 45) return this.#addJson(client, lane, this.#prng.coin());
    if (roll < 60) return this.#addArrow(client, lane);
    if (roll < 80) return this.#cancel(client);
    return this.#repeatKey(client);
  }

  async #addJson(client: H2Client, lane: number, keyed: boolean): Promise<void> {
    const uid = this.#uid(lane);
    const fireAtMs = this.#fireAtMs();
    const timer = { fire_at: fireAtMs, target: `${sink.url}/k9`, payload: uid, ...(keyed ? { key: `key-${uid}` } : {}) };
    const answer = await client.request({ method: 'POST', path: '/v1/timers', headers: { 'content-type': 'application/json' }, body: JSON.stringify(timer) });
    const body = jsonBody(answer) as { id?: string; fire_at?: string; duplicate?: boolean } | undefined;
    if (answer.status === 201 && typeof body?.id === 'string' && body.duplicate === false) {
      this.#ledger.adds.set(uid, { uid, id: body.id, fireAtMs: Date.parse(body.fire_at ?? ''), key: keyed ? `key-${uid}` : undefined });
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
      this.#ledger.adds.set(uid, { uid, id: ids[row] as string, fireAtMs: spec.fireAtMs, key: undefined });
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
      const expected = ledger.cancels.has(add.uid) ? ['cancelled'] : ledger.cancelsUnanswered.has(add.uid) ? ['cancelled', 'delivered'] : ['delivered'];
      if (answer.status !== 200 || state === undefined || !expected.includes(state)) ledger.problem(`GET ${add.id} (${add.uid}): ${answer.status} ${state}, expected ${expected.join(' or ')}`);
    }
  };
  await Promise.all(Array.from({ length: 16 }, lane));
}

test(`kill -9 under HTTP/2 load, ${sizes.cycles} cycles on one data directory: the ledger's invariants hold (seed ${seed})`, { timeout: soak ? 14_400_000 : 300_000 }, async (t) => {
  const dataDir = scratch.tempDir('data');
  const ledger = new Kill9Ledger();
  const prng = new Prng(seed);
  const track = (child: ChildProcess): void => void scratch.children.add(child);

  for (let cycle = 0; cycle < sizes.cycles; cycle++) {
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
  t.diagnostic(
    `${sizes.cycles} kills; sent ${ledger.sent.size} timers, acknowledged ${ledger.adds.size}, cancels acknowledged ${ledger.cancels.size} (409: ${ledger.tooLate.size}); ` +
      `deliveries ${sink.requests.length}, timers delivered more than once ${duplicates}`,
  );
  assert.ok(ledger.adds.size > sizes.cycles, 'the load got adds acknowledged');
  assert.ok(ledger.cancels.size > 0, 'the load got cancels acknowledged');
  assert.deepEqual(ledger.problems, []);
  service.child.kill('SIGTERM');
  await withTimeout(service.exited, 20_000, 'fermata to stop after SIGTERM');
});
