// Pull delivery's leases (dispatch/pull-queues.ts) over a real engine on the simulated disk, with
// a manual clock and lease timers fired by hand: a DoGet's batch (rows, bytes, schema metadata),
// ack → delivered, nack and expiry → a counted attempt with backoff then dead, the queue's bound,
// refusals by code, bounded waits and lingering, a stop that records nothing, and timers handed
// back when a queue stops pulling.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import pino from 'pino';
import { tableFromIPC } from 'apache-arrow';
import { batchFromSpecs } from '../../engine/batch/timer-batch.ts';
import { type Clock, Engine } from '../../engine/engine.ts';
import { leaseMetadata, type PullLimits, PullQueues, PullRefusal, pullRefusalCodes } from '../../dispatch/pull-queues.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';

const t0 = 1_796_220_000_000;

function manualClock(start = t0): Clock & { set(ms: number): void } {
  let now = start;
  return { now: () => now, set: (ms) => (now = ms) };
}

/** Lease timers armed by PullQueues, fired by the test. */
class ManualTimers {
  readonly #armed = new Set<{ atMs: number; callback: () => void }>();
  readonly #clock: Clock;

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  readonly arm = (callback: () => void, ms: number): (() => void) => {
    const entry = { atMs: this.#clock.now() + ms, callback };
    this.#armed.add(entry);
    return () => this.#armed.delete(entry);
  };

  get armed(): number {
    return this.#armed.size;
  }

  /** Fires every timer due by the clock now. */
  fire(): void {
    for (const entry of [...this.#armed]) {
      if (entry.atMs > this.#clock.now()) continue;
      this.#armed.delete(entry);
      entry.callback();
    }
  }
}

interface Setup {
  readonly engine: Engine;
  readonly clock: ReturnType<typeof manualClock>;
  readonly timers: ManualTimers;
  readonly pull: PullQueues;
  readonly ids: string[];
  /** Records made durable, and room freed, as the dispatcher would be told. */
  readonly recorded: Array<{ count: number; attempted: boolean }>;
  roomFreed: number;
  /** Hands every due timer to the pull queues, as the dispatcher does; returns how many. */
  handOut(): number;
}

async function setup(seed: number, config: object, timers = 5, limits: Partial<PullLimits> = {}): Promise<Setup> {
  const clock = manualClock();
  const engine = await Engine.open({ dataDir: '/data', fs: new SimFileSystem({ seed }), clock });
  await engine.setQueue('pulled', { delivery: 'pull', ...config });
  await engine.setQueue('pushed', {});
  const admitted = await engine.admit(
    batchFromSpecs(Array.from({ length: timers }, (_, i) => ({ fireAtMs: t0 - 100 + i, target: 'https://unused.example/', queue: 'pulled', payload: new Uint8Array([0, 255, i, 10, 13]), key: `key-${i}` }))),
  );
  const manual = new ManualTimers(clock);
  const recorded: Setup['recorded'] = [];
  const result: Setup = {
    engine,
    clock,
    timers: manual,
    ids: Array.from({ length: timers }, (_, i) => admitted.idOf(i)),
    recorded,
    roomFreed: 0,
    pull: new PullQueues({
      engine,
      clock,
      logger: pino({ level: 'silent' }),
      record: async (outcomes, _queue, attempted) => {
        await engine.settle(outcomes);
        recorded.push({ count: outcomes.count, attempted });
      },
      roomFreed: () => result.roomFreed++,
      random: () => 0.5,
      armTimer: manual.arm,
      limits,
    }),
    handOut: () => {
      const slice = engine.takeDue(clock.now(), 1000, (queue) => result.pull.room(queue, engine.queueConfig(engine.queueNameAt(queue))));
      for (let i = 0; i < slice.count; i++) result.pull.add(slice, i);
      return slice.count;
    },
  };
  return result;
}

async function refusal(promise: Promise<unknown>): Promise<PullRefusal> {
  try {
    await promise;
  } catch (err) {
    assert.ok(err instanceof PullRefusal, String(err));
    return err;
  }
  assert.fail('expected a refusal');
}

test('a lease carries the rows byte for byte; ack makes them delivered once, durably', async () => {
  const s = await setup(1, { batch_rows_max: 3 });
  assert.equal(s.handOut(), 5);
  assert.deepEqual(s.pull.counts('pulled'), { waiting: 5, leased: 0 });

  const batch = await s.pull.lease('pulled', undefined, 0);
  assert.equal(batch.rows, 3, 'batch_rows_max bounds a DoGet');
  assert.ok(batch.lease !== undefined);
  assert.equal(batch.expiresAtMs, t0 + 30_000, 'the lease lasts timeout_ms');
  const table = tableFromIPC(batch.ipc);
  assert.equal(table.schema.metadata.get(leaseMetadata.lease), batch.lease);
  assert.equal(table.schema.metadata.get(leaseMetadata.queue), 'pulled');
  assert.deepEqual(table.schema.fields.map((field) => field.name), ['id', 'fire_at', 'attempt', 'target', 'key', 'payload', 'headers']);
  assert.deepEqual([...(table.getChild('id') ?? [])], s.ids.slice(0, 3), 'oldest first');
  assert.deepEqual([...(table.getChild('attempt') ?? [])], [1, 1, 1]);
  assert.deepEqual([...(table.getChild('key') ?? [])], ['key-0', 'key-1', 'key-2']);
  for (let i = 0; i < 3; i++) assert.deepEqual([...(table.getChild('payload')?.get(i) as Uint8Array)], [0, 255, i, 10, 13]);
  assert.deepEqual(s.pull.counts('pulled'), { waiting: 2, leased: 3 });
  assert.equal(s.engine.get(s.ids[0] as string)?.state, 'delivering');

  const settled = await s.pull.settle(batch.lease, 'ack', 'pulled');
  assert.deepEqual(settled, { lease: batch.lease, delivered: 3, retried: 0, dead: 0 });
  for (const id of s.ids.slice(0, 3)) assert.equal(s.engine.get(id)?.state, 'delivered');
  assert.deepEqual(s.recorded, [{ count: 3, attempted: true }], 'one OUTCOME record for the lease');
  assert.equal(s.roomFreed, 1);
  assert.equal(s.timers.armed, 0, 'the expiry is disarmed');
  const again = await refusal(s.pull.settle(batch.lease, 'ack'));
  assert.equal(again.code, pullRefusalCodes.leaseUnknown);
  assert.match(again.message, /expired .* or was already settled/);

  const rest = await s.pull.lease('pulled', 10, 0);
  assert.equal(rest.rows, 2);
  assert.equal((await refusal(s.pull.settle(rest.lease as string, 'ack', 'pushed'))).code, pullRefusalCodes.leaseOtherQueue);
  await s.pull.settle(rest.lease as string, 'ack');
  assert.equal(s.engine.stats().counts.delivered, 5);
  s.pull.close();
  await s.engine.close();
});

test('an expired or nacked lease is a failed attempt: retried after the backoff with attempt 2, dead after max_attempts', async () => {
  const s = await setup(2, { timeout_ms: 1_000, max_attempts: 2, min_backoff_ms: 500, max_backoff_ms: 500 }, 2);
  s.handOut();
  const first = await s.pull.lease('pulled', 1, 0);
  const second = await s.pull.lease('pulled', 1, 0);
  const nacked = await s.pull.settle(second.lease as string, 'nack');
  assert.deepEqual(nacked, { lease: second.lease, delivered: 0, retried: 1, dead: 0 });

  s.clock.set(t0 + 999);
  s.timers.fire();
  assert.equal(s.engine.get(s.ids[0] as string)?.state, 'delivering', 'not expired before timeout_ms');
  s.clock.set(t0 + 1_000);
  s.timers.fire();
  for (let waited = 0; s.recorded.length < 2 && waited < 500; waited++) await new Promise((resolve) => setTimeout(resolve, 10));
  const expired = s.engine.get(s.ids[0] as string);
  assert.equal(expired?.state, 'retrying');
  assert.equal(expired?.attempts, 1);
  assert.equal(expired?.dueAtMs, t0 + 1_000 + 500, 'retried after the queue backoff');
  assert.equal((await refusal(s.pull.settle(first.lease as string, 'ack'))).code, pullRefusalCodes.leaseUnknown, 'an expired lease cannot be acked');

  assert.equal(s.handOut(), 1, 'the nacked one, due at t0 + 500');
  s.clock.set(t0 + 1_499);
  assert.equal(s.handOut(), 0, 'the expired one not before its backoff');
  s.clock.set(t0 + 1_500);
  assert.equal(s.handOut(), 1);
  const retry = await s.pull.lease('pulled', undefined, 0);
  assert.deepEqual([...(tableFromIPC(retry.ipc).getChild('attempt') ?? [])], [2, 2]);
  const last = await s.pull.settle(retry.lease as string, 'nack');
  assert.deepEqual(last, { lease: retry.lease, delivered: 0, retried: 0, dead: 2 });
  assert.equal(s.engine.get(s.ids[1] as string)?.state, 'dead');
  assert.deepEqual(s.engine.listDead(10, 'pulled').map((dead) => dead.reason), ['attempts_exhausted', 'attempts_exhausted']);
  s.pull.close();
  await s.engine.close();
});

test('room is the bound less waiting and leased; a batch stops at leaseBytesMax but takes one timer at least', async () => {
  const s = await setup(3, { max_concurrent: 3 }, 5, { leaseBytesMax: 40 });
  assert.equal(s.handOut(), 3, 'max_concurrent bounds waiting + leased');
  assert.equal(s.engine.stats().heldBack, 2);
  const first = await s.pull.lease('pulled', undefined, 0);
  // Each timer is 5 payload bytes, 5 key bytes and 22 target bytes (×3): the first alone passes 40.
  assert.equal(first.rows, 1);
  assert.equal(s.handOut(), 0, 'a leased timer still takes room');
  await s.pull.settle(first.lease as string, 'ack');
  assert.equal(s.handOut(), 1, 'an ack frees its room');
  s.pull.close();
  await s.engine.close();
});

test('refusals name the queue; an empty queue answers a schema-only batch, or waits (bounded) for a timer', async () => {
  const s = await setup(4, {}, 1);
  assert.equal((await refusal(s.pull.lease('nowhere', undefined, 0))).code, pullRefusalCodes.queueUnknown);
  const notPull = await refusal(s.pull.lease('pushed', undefined, 0));
  assert.equal(notPull.code, pullRefusalCodes.queueNotPull);
  assert.match(notPull.message, /queue "pushed" has "delivery": "request"/);

  const empty = await s.pull.lease('pulled', undefined, 0);
  assert.deepEqual([empty.lease, empty.rows], [undefined, 0]);
  assert.equal(tableFromIPC(empty.ipc).numRows, 0);
  assert.equal(tableFromIPC(empty.ipc).schema.fields.length, 7);

  const started = Date.now();
  const waited = await s.pull.lease('pulled', undefined, 50);
  assert.equal(waited.rows, 0);
  assert.ok(Date.now() - started >= 40, 'waited for wait_ms');

  const waiting = s.pull.lease('pulled', undefined, 10_000);
  await new Promise((resolve) => setTimeout(resolve, 10));
  s.handOut();
  const arrived = await waiting;
  assert.equal(arrived.rows, 1, 'a timer arriving ends the wait');
  assert.ok(Date.now() - started < 5_000);

  const aborted = new AbortController();
  const cut = s.pull.lease('pulled', undefined, 10_000, aborted.signal);
  aborted.abort();
  assert.equal((await cut).rows, 0, 'the caller going away ends the wait');
  s.pull.close();
  await s.engine.close();
});

test('a DoGet that waited lingers up to linger_ms for its rows (the dispatcher hands them over in slices), ending once it has them', async () => {
  const s = await setup(7, { linger_ms: 5_000 }, 3);
  const handOutOne = (): void => {
    const slice = s.engine.takeDue(s.clock.now(), 1);
    for (let i = 0; i < slice.count; i++) s.pull.add(slice, i);
  };
  const started = Date.now();
  const waiting = s.pull.lease('pulled', 2, 10_000);
  await new Promise((resolve) => setTimeout(resolve, 10));
  handOutOne();
  await new Promise((resolve) => setTimeout(resolve, 30));
  handOutOne();
  const batch = await waiting;
  assert.equal(batch.rows, 2, 'both slices in one lease');
  assert.ok(Date.now() - started < 4_000, 'it stops lingering once max_rows are waiting');
  s.pull.close();
  await s.engine.close();
});

test('a stop records nothing (the timers stay delivering, pending in the log); later calls are refused', async () => {
  const s = await setup(5, {}, 2);
  s.handOut();
  const batch = await s.pull.lease('pulled', 2, 0);
  const waiting = s.pull.lease('pulled', undefined, 10_000);
  await new Promise((resolve) => setTimeout(resolve, 10));
  s.pull.close();
  assert.equal((await refusal(waiting)).code, pullRefusalCodes.stopped);
  assert.equal((await refusal(s.pull.settle(batch.lease as string, 'ack'))).code, pullRefusalCodes.stopped);
  assert.equal(s.timers.armed, 0);
  assert.deepEqual(s.recorded, []);
  assert.equal(s.engine.stats().counts.delivering, 2);
  await s.engine.close();
});

test('timers waiting in a queue that stops pulling go back to the engine without an attempt counted', async () => {
  const s = await setup(6, {}, 3, { sweepMs: 10 });
  s.handOut();
  await s.pull.lease('pulled', 1, 0);
  await s.engine.setQueue('pulled', { delivery: 'request' });
  const deadline = Date.now() + 5_000;
  while (s.recorded.length === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
  assert.deepEqual(s.recorded, [{ count: 2, attempted: false }]);
  for (const id of s.ids.slice(1)) assert.deepEqual([s.engine.get(id)?.state, s.engine.get(id)?.attempts], ['pending', 0]);
  assert.equal(s.engine.get(s.ids[0] as string)?.state, 'delivering', 'the leased one stays leased');
  assert.deepEqual(s.pull.counts('pulled'), { waiting: 0, leased: 1 });
  s.pull.close();
  await s.engine.close();
});
