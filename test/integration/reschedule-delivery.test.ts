// A PATCHed timer through real delivery: a real engine, the dispatcher with a piscina worker and
// a loopback HTTP/2 sink. A timer moved earlier than the time it was added with goes out then,
// with its new payload and headers, its id unchanged, its lateness counted from the new time
// (not as an early delivery); a timer moved later does not go out at its old time.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import pino from 'pino';
import { batchFromSpecs } from '../../engine/batch/timer-batch.ts';
import { Engine, systemClock } from '../../engine/engine.ts';
import { Dispatcher } from '../../dispatch/dispatcher.ts';
import { type Sink, startH2Sink } from '../helpers/sinks.ts';

let dataDir: string;
let engine: Engine;
let dispatcher: Dispatcher;
let sink: Sink;

before(async () => {
  dataDir = mkdtempSync(join(tmpdir(), 'fermata-reschedule-delivery-'));
  engine = await Engine.open({ dataDir });
  dispatcher = new Dispatcher({ engine, clock: systemClock, logger: pino({ level: 'silent' }), threads: 1, allowLoopback: true });
  dispatcher.start();
  await dispatcher.ready();
  sink = await startH2Sink();
});

after(async () => {
  await dispatcher.close();
  await engine.close();
  await sink.close();
  rmSync(dataDir, { recursive: true, force: true });
});

async function until(what: string, check: () => boolean, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    assert.ok(Date.now() < deadline, `${what} within ${ms} ms`);
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

test('moved earlier: delivered at the new time with the new payload and headers, the same id, lateness from the new time', async () => {
  const addedFireAtMs = Date.now() + 3_600_000;
  const admitted = await engine.admit(batchFromSpecs([{ fireAtMs: addedFireAtMs, target: `${sink.url}/early`, payload: 'old', headers: { 'x-v': '1' } }]));
  const id = admitted.idOf(0);
  dispatcher.lateness.reset();
  const outcome = await engine.reschedule(id, { fireAtMs: Date.now() + 50, payload: 'new', headers: { 'x-v': '2' } });
  assert.equal(outcome.outcome, 'rescheduled');
  await until('the delivery', () => engine.get(id)?.state === 'delivered');
  const [request] = sink.to('/early');
  assert.ok(request !== undefined);
  assert.equal(request.body.toString('utf8'), 'new');
  assert.equal(request.headers['x-v'], '2');
  assert.equal(request.headers['fermata-timer-id'], id);
  assert.equal(request.headers['fermata-fire-at'], String(addedFireAtMs), 'the fire time as added, which the id carries');
  assert.equal(dispatcher.earlyDeliveries, 0, 'not counted as an early delivery');
  assert.ok(dispatcher.lateness.maxValue < 10_000, `lateness ${dispatcher.lateness.maxValue} ms is from the new fire time`);
});

test('moved later: the old time passes without a delivery', async () => {
  const admitted = await engine.admit(batchFromSpecs([{ fireAtMs: Date.now() + 100, target: `${sink.url}/late` }]));
  const id = admitted.idOf(0);
  const outcome = await engine.reschedule(id, { fireAtMs: Date.now() + 3_600_000 });
  assert.equal(outcome.outcome, 'rescheduled');
  await new Promise((resolve) => setTimeout(resolve, 600));
  assert.equal(sink.to('/late').length, 0);
  assert.equal(engine.get(id)?.state, 'pending');
});
