// Delivery at scale and under flow limits: 100,000 timers fault-free (none lost, none twice,
// none early); timers taken ahead are held by the worker until their time, and a cancel
// withdraws one it holds; a queue's max_concurrent and rate_per_s hold, and a queue stuck on a
// slow target does not delay another; an idle worker's HTTP/2 session still answers a PING; a
// name that resolves to loopback is refused at delivery when loopback is not allowed; ready()
// waits for every worker's code; an Arrow batch's buffers are sized for its timers, come back
// from the worker, and the next batch built in them is its own timers byte for byte.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { tableFromIPC } from 'apache-arrow';
import pino from 'pino';
import { batchFromSpecs, type TimerSpec } from '../../engine/batch/timer-batch.ts';
import { Engine, systemClock } from '../../engine/engine.ts';
import { Dispatcher, type DispatcherOptions } from '../../dispatch/dispatcher.ts';
import { type Sink, type SinkScript, startH2Sink } from '../helpers/sinks.ts';

interface Rig {
  readonly engine: Engine;
  readonly dispatcher: Dispatcher;
  close(): Promise<void>;
}

async function rig(options: Partial<DispatcherOptions> = {}): Promise<Rig> {
  const dataDir = mkdtempSync(join(tmpdir(), 'fermata-flow-'));
  const engine = await Engine.open({ dataDir });
  const dispatcher = new Dispatcher({ engine, clock: systemClock, logger: pino({ level: 'silent' }), threads: 1, allowLoopback: true, ...options });
  return {
    engine,
    dispatcher,
    async close() {
      await dispatcher.close();
      await engine.close();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

async function addAll(engine: Engine, specs: TimerSpec[]): Promise<string[]> {
  const ids: string[] = [];
  for (let start = 0; start < specs.length; start += 10_000) {
    const chunk = specs.slice(start, start + 10_000);
    const admitted = await engine.admit(batchFromSpecs(chunk));
    for (let row = 0; row < chunk.length; row++) ids.push(admitted.idOf(row));
  }
  return ids;
}

async function until(what: string, ms: number, done: () => boolean): Promise<void> {
  const deadline = Date.now() + ms;
  while (!done()) {
    assert.ok(Date.now() < deadline, `timed out after ${ms} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

async function withSink<T>(script: SinkScript | undefined, use: (sink: Sink) => Promise<T>): Promise<T> {
  const sink = await startH2Sink(script);
  try {
    return await use(sink);
  } finally {
    await sink.close();
  }
}

test('100,000 timers against a well-behaved sink: 0 lost, 0 duplicates, 0 early', { timeout: 240_000 }, async () => {
  const { engine, dispatcher, close } = await rig();
  try {
    await withSink(undefined, async (sink) => {
      const count = 100_000;
      const t0 = Date.now() + 500;
      // Fire times spread over two seconds, so most are not yet due when the dispatcher starts.
      const ids = await addAll(engine, Array.from({ length: count }, (_, i) => ({ fireAtMs: t0 + (i % 2000), target: `${sink.url}/t/${i}`, payload: 'x'.repeat(128) })));
      dispatcher.start();
      await until('every delivery to be recorded', 200_000, () => engine.stats().counts.delivered === count);
      assert.equal(sink.requests.length, count, 'no duplicates: the sink saw each timer once');
      const seen = new Set<string>();
      for (const request of sink.requests) {
        const id = String(request.headers['fermata-timer-id']);
        assert.ok(!seen.has(id), `${id} delivered twice`);
        seen.add(id);
        const fireAt = Number(request.headers['fermata-fire-at']);
        assert.ok(request.atMs >= fireAt, `${id} arrived ${fireAt - request.atMs} ms early`);
      }
      for (const id of ids) assert.ok(seen.has(id), `${id} was never delivered`);
      assert.equal(dispatcher.earlyDeliveries, 0, 'no first attempt started before its fire time');
    });
  } finally {
    await close();
  }
});

test('timers taken ahead wait in the worker for their fire time, and a cancel withdraws one the worker holds', { timeout: 30_000 }, async () => {
  // A lead of seconds (20 ms by default), so the worker surely holds the timers when the cancel
  // comes; the timers fall due 50 ms past it, so the scheduler must wake for the lead, not the fire time.
  const { engine, dispatcher, close } = await rig({ limits: { takeAheadMs: 2000 } });
  try {
    await withSink(undefined, async (sink) => {
      const fireAtMs = Date.now() + 2050;
      const [kept, cancelled] = await addAll(engine, [0, 1].map((i) => ({ fireAtMs, target: `${sink.url}/ahead/${i}` })));
      dispatcher.start();
      await until('both timers to be handed to the worker', 5_000, () => engine.get(kept as string)?.state === 'delivering' && engine.get(cancelled as string)?.state === 'delivering');
      assert.ok(Date.now() < fireAtMs - 1500, `handed out ${fireAtMs - Date.now()} ms before their fire time, not about 2000`);
      assert.equal(await engine.cancel(cancelled as string), 'cancelled', 'not sent yet: the cancel withdraws it');
      await until('the kept timer to be delivered', 10_000, () => engine.get(kept as string)?.state === 'delivered');
      assert.equal(sink.requests.length, 1, 'the withdrawn timer was never sent');
      const [request] = sink.requests;
      assert.equal(request?.path, '/ahead/0');
      assert.ok((request?.atMs ?? 0) >= fireAtMs, `arrived ${fireAtMs - (request?.atMs ?? 0)} ms early`);
      assert.equal(await engine.cancel(kept as string), 'too-late');
      assert.equal(engine.get(cancelled as string)?.state, 'cancelled');
      assert.equal(dispatcher.inFlight, 0, 'the withdrawn timer left no delivery in flight');
      assert.equal(dispatcher.earlyDeliveries, 0);
    });
  } finally {
    await close();
  }
});

test('max_concurrent and rate_per_s hold per queue, and a queue stuck on a slow target does not delay another', { timeout: 60_000 }, async () => {
  const { engine, dispatcher, close } = await rig();
  try {
    await withSink(
      // The stuck queue's target never answers (within its timeout); the others answer at once.
      (path) => (path.startsWith('/slow/') ? { hang: true } : { status: 200 }),
      async (sink) => {
        await engine.setQueue('stuck', { max_concurrent: 2, timeout_ms: 30_000 });
        await engine.setQueue('metered', { rate_per_s: 10 });
        const now = Date.now();
        await addAll(engine, Array.from({ length: 10 }, (_, i) => ({ fireAtMs: now - 1000, target: `${sink.url}/slow/${i}`, queue: 'stuck' })));
        await addAll(engine, Array.from({ length: 30 }, (_, i) => ({ fireAtMs: now, target: `${sink.url}/fast/${i}`, queue: 'default' })));
        dispatcher.start();
        await until('the default queue to be delivered past the stuck one', 10_000, () => sink.requests.filter((request) => request.path.startsWith('/fast/')).length === 30);
        assert.equal(sink.requests.filter((request) => request.path.startsWith('/slow/')).length, 2, 'the stuck queue has exactly max_concurrent in flight');
        // Added once the session to the sink is up: on a loaded machine its setup could take
        // longer than the bucket's refills and deliver a throttled stream all at once.
        await addAll(engine, Array.from({ length: 30 }, (_, i) => ({ fireAtMs: Date.now(), target: `${sink.url}/metered/${i}`, queue: 'metered' })));
        await until('the metered queue', 10_000, () => sink.requests.filter((request) => request.path.startsWith('/metered/')).length === 30);
        const metered = sink.requests.filter((request) => request.path.startsWith('/metered/')).map((request) => request.atMs);
        // A bucket of 10 tokens lets the first 10 through at once; the other 20 come as it refills
        // at 10/s: the 11th to the 30th span about 1.9 s (unthrottled, a few ms).
        const spanMs = (metered[29] as number) - (metered[10] as number);
        assert.ok(spanMs >= 1200, `the 11th to the 30th delivery at 10/s took only ${spanMs} ms`);
      },
    );
  } finally {
    await close();
  }
});

test('an idle worker keeps its HTTP/2 session: it answers a PING after 5 s without work', { timeout: 30_000 }, async () => {
  const { engine, dispatcher, close } = await rig();
  try {
    await withSink(undefined, async (sink) => {
      await addAll(engine, [{ fireAtMs: Date.now(), target: `${sink.url}/warm` }]);
      dispatcher.start();
      await until('the delivery', 10_000, () => engine.stats().counts.delivered === 1);
      await new Promise((resolve) => setTimeout(resolve, 5_500));
      const [session] = [...sink.sessions];
      assert.ok(session !== undefined && !session.closed, 'the session is still open');
      // An event loop parked in Atomics.wait could not answer: the PING would time out.
      const rttMs = await new Promise<number>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error('no PING ack within 3 s: the worker is not running its event loop')), 3000);
        session.ping((err, duration) => {
          clearTimeout(timer);
          if (err !== null) reject(err);
          else resolve(duration);
        });
      });
      assert.ok(rttMs >= 0);
      assert.equal(sink.connections, 1);
    });
  } finally {
    await close();
  }
});

test('a name that resolves to loopback is refused at delivery when loopback is not allowed: dead, 0 connections', { timeout: 30_000 }, async () => {
  const { engine, dispatcher, close } = await rig({ allowLoopback: false });
  try {
    await withSink(undefined, async (sink) => {
      const port = new URL(sink.url).port;
      const [id] = await addAll(engine, [{ fireAtMs: Date.now(), target: `http://localhost:${port}/ssrf` }]);
      dispatcher.start();
      await until('the refusal', 10_000, () => engine.stats().counts.dead === 1);
      assert.equal(engine.listDead(10)[0]?.reason, 'target_refused');
      assert.equal(engine.get(id as string)?.attempts, 1, 'refused at once, not retried');
      assert.equal(sink.connections, 0);
    });
  } finally {
    await close();
  }
});

test('queue-share: a queue without max_concurrent, stuck on a silent target, leaves room for other queues', { timeout: 60_000 }, async () => {
  // A small in-flight room, so that 200 stuck timers would fill it all without the per-queue share.
  const { engine, dispatcher, close } = await rig({ limits: { inFlightMax: 64, requestsInFlightMax: 64 } });
  try {
    await withSink(
      (path) => (path.startsWith('/silent/') ? { hang: true } : { status: 200 }),
      async (sink) => {
        const now = Date.now();
        await addAll(engine, Array.from({ length: 200 }, (_, i) => ({ fireAtMs: now - 1000, target: `${sink.url}/silent/${i}`, queue: 'stuck' })));
        dispatcher.start();
        await until('the stuck queue to fill its share', 10_000, () => sink.requests.length >= 16);
        const [id] = await addAll(engine, [{ fireAtMs: Date.now(), target: `${sink.url}/other`, queue: 'other' }]);
        await until('the other queue\'s timer', 5_000, () => engine.get(id as string)?.state === 'delivered');
        assert.equal(sink.to('/other').length, 1);
        assert.equal(sink.requests.filter((request) => request.path.startsWith('/silent/')).length, 16, 'the stuck queue holds a quarter of the room');
      },
    );
  } finally {
    await close();
  }
});

test('single deliveries in flight stay within requestsInFlightMax across queues; rows of Arrow batches go past it, up to inFlightMax', { timeout: 60_000 }, async () => {
  const limits = { inFlightMax: 64, requestsInFlightMax: 8 };
  // Six request queues with a share of 2 each (a quarter of 8): 12 in all, 8 at most.
  let { engine, dispatcher, close } = await rig({ limits });
  try {
    await withSink(
      () => ({ hang: true }),
      async (sink) => {
        await addAll(engine, Array.from({ length: 60 }, (_, i) => ({ fireAtMs: Date.now() - 1000, target: `${sink.url}/silent/${i}`, queue: `q${i % 6}` })));
        dispatcher.start();
        await until('the first single deliveries', 10_000, () => sink.requests.length >= 8);
        await new Promise((resolve) => setTimeout(resolve, 300));
        assert.equal(sink.requests.length, 8, 'single deliveries: requestsInFlightMax, whatever the queues\' shares add up to');
        assert.equal(dispatcher.inFlight, 8);
      },
    );
  } finally {
    await close();
  }
  // Rows of Arrow batches: 50 in flight, as 5 batches of 10, past the 8 single deliveries' limit.
  ({ engine, dispatcher, close } = await rig({ limits }));
  try {
    await withSink(
      () => ({ hang: true }),
      async (sink) => {
        await engine.setQueue('pipe', { delivery: 'arrow', sink: `${sink.url}/ingest`, batch_rows_max: 10, linger_ms: 1 });
        await addAll(engine, Array.from({ length: 50 }, (_, i) => ({ fireAtMs: Date.now() - 1000, target: `${sink.url}/row/${i}`, queue: 'pipe' })));
        dispatcher.start();
        await until('every row in flight', 10_000, () => dispatcher.inFlight === 50);
        assert.equal(engine.stats().counts.pending, 0, 'none held back');
      },
    );
  } finally {
    await close();
  }
});

test('in-flight bytes: tasks holding large payloads for a silent target stop further slices until they settle', { timeout: 60_000 }, async () => {
  const { engine, dispatcher, close } = await rig({ limits: { inFlightBytesMax: 256 * 1024, drainTimeoutMs: 500 } });
  try {
    await withSink(
      () => ({ hang: true }),
      async (sink) => {
        const payload = 'p'.repeat(32 * 1024);
        await addAll(engine, Array.from({ length: 12 }, (_, i) => ({ fireAtMs: Date.now() - 1000, target: `${sink.url}/silent/${i}`, payload, queue: `q${i % 6}` })));
        dispatcher.start();
        await until('the first wave to reach the sink', 10_000, () => sink.requests.length >= 12);
        assert.ok(dispatcher.inFlightBytes >= 12 * 32 * 1024, `in-flight bytes ${dispatcher.inFlightBytes}`);
        assert.equal(dispatcher.room(), 0, 'past the byte budget there is no room, whatever the count room');
        await addAll(engine, Array.from({ length: 20 }, (_, i) => ({ fireAtMs: Date.now() - 1000, target: `${sink.url}/later/${i}`, payload, queue: `q${i % 6}` })));
        await new Promise((resolve) => setTimeout(resolve, 1000));
        assert.equal(sink.requests.length, 12, 'nothing more is sent while the budget is spent');
      },
    );
  } finally {
    await close();
  }
});

test('ready(): resolves once every worker has loaded its code, with the time that took', { timeout: 60_000 }, async () => {
  const { dispatcher, close } = await rig({ threads: 2 });
  try {
    const loadedMs = await dispatcher.ready();
    assert.ok(loadedMs > 0 && loadedMs < 60_000, `loaded in ${loadedMs} ms`);
    assert.equal(await dispatcher.ready(), loadedMs, 'later calls resolve with the same time');
  } finally {
    await close();
  }
});

/**
 * `count` timers of `payloadBytes` each, due already, on an "arrow" queue of `batchRowsMax`
 * rows whose sink never answers; `check` runs once the dispatcher has started.
 */
async function withUnansweredArrowBatch(count: number, payloadBytes: number, batchRowsMax: number, check: (dispatcher: Dispatcher, sink: Sink) => Promise<void>): Promise<void> {
  const { engine, dispatcher, close } = await rig({ limits: { drainTimeoutMs: 500 } });
  try {
    await withSink(
      () => ({ hang: true }),
      async (sink) => {
        await engine.setQueue('pipe', { delivery: 'arrow', sink: `${sink.url}/ingest`, batch_rows_max: batchRowsMax, linger_ms: 1 });
        await addAll(engine, Array.from({ length: count }, () => ({ fireAtMs: Date.now() - 1000, target: `${sink.url}/row`, payload: 'p'.repeat(payloadBytes), queue: 'pipe' })));
        dispatcher.start();
        await check(dispatcher, sink);
        assert.equal(engine.stats().counts.delivered, 0);
      },
    );
  } finally {
    await close();
  }
}

test('an Arrow batch of small timers holds buffers sized for them, not for a guess of 1 KiB a timer', { timeout: 60_000 }, async () => {
  // batch_rows_max rows of capacity, 2,000 rows in it: a 1 KiB guess a row would hold 10,000 × 1 KiB × 1.25 = 12.8 MB.
  await withUnansweredArrowBatch(2_000, 16, 10_000, async (dispatcher) => {
    await until('the batch in flight', 10_000, () => dispatcher.inFlight === 2_000);
    assert.ok(dispatcher.inFlightBytes < 4 * 1024 * 1024, `in-flight bytes ${dispatcher.inFlightBytes}`);
  });
});

test('an Arrow batch\'s buffers come back once its body is encoded, before the sink answers', { timeout: 60_000 }, async () => {
  await withUnansweredArrowBatch(1_000, 256, 1_000, async (dispatcher, sink) => {
    await until('the batch at the sink', 10_000, () => sink.requests.length === 1);
    // The task's buffers (the in-flight bytes count them until the answer) are in the pool.
    const taskBytes = dispatcher.inFlightBytes;
    assert.ok(taskBytes >= 1_000 * (256 + 80), `in-flight bytes ${taskBytes}`);
    await until('the task\'s buffers back in the pool', 10_000, () => dispatcher.pooledBytes >= taskBytes);
    assert.equal(dispatcher.inFlight, 1_000, 'the batch is still unanswered');
  });
});

test('an Arrow batch\'s buffers come back from the worker and the next batches are built in them', { timeout: 60_000 }, async () => {
  const { engine, dispatcher, close } = await rig();
  try {
    await withSink(undefined, async (sink) => {
      await engine.setQueue('pipe', { delivery: 'arrow', sink: `${sink.url}/ingest`, batch_rows_max: 1_000, linger_ms: 1 });
      await addAll(engine, Array.from({ length: 1_000 }, () => ({ fireAtMs: Date.now() - 1000, target: `${sink.url}/row`, payload: 'p'.repeat(64), queue: 'pipe' })));
      dispatcher.start();
      await until('the first batch delivered', 10_000, () => engine.stats().counts.delivered === 1_000);
      const kept = dispatcher.pooledBytes;
      assert.ok(kept > 1_000 * 64, `${kept} bytes kept after the first batch`);
      await addAll(engine, Array.from({ length: 1_000 }, () => ({ fireAtMs: Date.now() - 1000, target: `${sink.url}/row`, payload: 'q'.repeat(64), queue: 'pipe' })));
      await until('the second batch delivered', 10_000, () => engine.stats().counts.delivered === 2_000);
      const batches = sink.requests.filter((request) => request.headers['content-type'] === 'application/vnd.apache.arrow.stream');
      assert.equal(batches.length, 2);
      // Built in the first batch's buffers, the second is still its own timers, byte for byte.
      const second = tableFromIPC(batches[1]?.body as Uint8Array);
      assert.equal(second.numRows, 1_000);
      for (let row = 0; row < second.numRows; row += 97) assert.equal(Buffer.from(second.getChild('payload')?.get(row) as Uint8Array).toString(), 'q'.repeat(64));
    });
  } finally {
    await close();
  }
});
