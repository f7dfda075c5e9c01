// The dispatcher's warm-up after a start: it opens a session to the origin of a timer due soon
// before that timer fires (and none to one due past the horizon), sends nothing to any target,
// and /readyz stays red until it is done, then turns green. In process, over real sockets.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { test } from 'node:test';
import pino from 'pino';
import { batchFromSpecs } from '../../engine/batch/timer-batch.ts';
import { Engine, systemClock } from '../../engine/engine.ts';
import { dispatchLimits } from '../../engine/limits.ts';
import { DeliveryPool } from '../../dispatch/delivery-pool.ts';
import { Dispatcher } from '../../dispatch/dispatcher.ts';
import { createHttpServer } from '../../ingest/http/server.ts';
import { startH2Sink } from '../helpers/sinks.ts';

async function withDispatcher(use: (engine: Engine, dispatcher: Dispatcher) => Promise<void>): Promise<void> {
  const dataDir = mkdtempSync(join(tmpdir(), 'fermata-warm-up-'));
  const engine = await Engine.open({ dataDir });
  const dispatcher = new Dispatcher({ engine, clock: systemClock, logger: pino({ level: 'silent' }), threads: 1, allowLoopback: true });
  try {
    await use(engine, dispatcher);
  } finally {
    await dispatcher.close();
    await engine.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
}

test('warm-up opens a session to the origin of a timer due soon before it fires, and none to one due past the horizon', { timeout: 60_000 }, async () => {
  const soon = await startH2Sink();
  const later = await startH2Sink();
  try {
    await withDispatcher(async (engine, dispatcher) => {
      const now = Date.now();
      await engine.admit(
        batchFromSpecs([
          { fireAtMs: now + 20_000, target: `${soon.url}/hook`, payload: 'p' },
          { fireAtMs: now + dispatchLimits.warmUpHorizonMs + 60_000, target: `${later.url}/hook`, payload: 'p' },
        ]),
      );
      assert.deepEqual(dispatcher.originsDueSoon(), [new URL(soon.url).origin]);
      assert.equal(dispatcher.warm, false);
      await dispatcher.warmUp();
      assert.equal(dispatcher.warm, true);
      assert.equal(soon.connections, 1, 'a session to the origin due soon is open');
      assert.equal(soon.sessions.size, 1);
      assert.equal(later.connections, 0, 'none to the origin due past the horizon');
      assert.equal(soon.requests.length + later.requests.length, 0, 'the warm-up sends no request to any target');
    });
  } finally {
    await soon.close();
    await later.close();
  }
});

test('the first delivery after a warm-up goes on the session it opened', { timeout: 60_000 }, async () => {
  const sink = await startH2Sink();
  try {
    await withDispatcher(async (engine, dispatcher) => {
      await engine.admit(batchFromSpecs([{ fireAtMs: Date.now() + 1_500, target: `${sink.url}/hook`, payload: 'p' }]));
      await dispatcher.warmUp();
      assert.equal(sink.connections, 1);
      dispatcher.start();
      const deadline = Date.now() + 20_000;
      while (engine.stats().counts.delivered < 1) {
        assert.ok(Date.now() < deadline, 'the timer was not delivered');
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      assert.equal(sink.requests.length, 1);
      assert.equal(sink.connections, 1, 'no second connection: the warm session carried it');
    });
  } finally {
    await sink.close();
  }
});

test('/readyz is red while the delivery workers warm up, then green', { timeout: 60_000 }, async () => {
  await withDispatcher(async (engine, dispatcher) => {
    const app = createHttpServer({ logger: pino({ level: 'silent' }), engine, warm: () => dispatcher.warm });
    try {
      const cold = await app.inject({ method: 'GET', url: '/readyz' });
      assert.equal(cold.statusCode, 503);
      assert.deepEqual(cold.json(), { status: 'not-ready', reason: 'the delivery workers are warming up' });
      await dispatcher.warmUp([]);
      const warm = await app.inject({ method: 'GET', url: '/readyz' });
      assert.equal(warm.statusCode, 200);
      assert.deepEqual(warm.json(), { status: 'ready' });
    } finally {
      await app.close();
    }
  });
});

test('closing the dispatcher while its worker warms up waits for the warm-up: the process ends normally, never by SIGABRT', { timeout: 120_000 }, () => {
  // A worker thread terminated under its warm-up's loopback HTTP/2 server and sessions aborts the
  // whole process (an assertion in node's stream code): seen as exit 134 on a SIGTERM soon after
  // "listening". Each close lands at another point of the warm-up, twelve in all, each with a
  // dispatcher and worker of its own; six in each of two processes (starting a process for every
  // close cost twice the CPU).
  const helper = fileURLToPath(new URL('../helpers/close-while-warming.ts', import.meta.url));
  for (let run = 0; run < 2; run++) {
    const child = spawnSync(process.execPath, [helper, '10', '20', '30', '50', '75', '100'], { encoding: 'utf8', timeout: 90_000 });
    const closing = child.stdout.trimEnd().split('\n').at(-1);
    assert.deepEqual({ status: child.status, signal: child.signal }, { status: 0, signal: null }, `${closing}: ${child.stderr.slice(0, 400)}`);
  }
});

test('the process exiting while a worker warms up (a second stop signal) exits with its code, never by SIGABRT', { timeout: 120_000 }, () => {
  // A worker thread torn down by process.exit while an HTTP/2 server of its own read aborted the
  // whole process (an assertion in node's stream code): seen as SIGABRT on a second signal soon
  // after "listening". Each exit lands at another point of the warm-up, in a process of its own.
  const helper = fileURLToPath(new URL('../helpers/exit-while-warming.ts', import.meta.url));
  for (const delayMs of [10, 20, 30, 40, 50, 75, 100, 150]) {
    const dataDir = mkdtempSync(join(tmpdir(), 'fermata-exit-warming-'));
    try {
      const child = spawnSync(process.execPath, [helper, dataDir, String(delayMs)], { encoding: 'utf8', timeout: 60_000 });
      assert.deepEqual({ status: child.status, signal: child.signal }, { status: 3, signal: null }, `exit ${delayMs} ms into the warm-up: ${child.stderr.slice(0, 400)}`);
    } finally {
      rmSync(dataDir, { recursive: true, force: true });
    }
  }
});

test('a pool closed while its workers load their code waits until they have loaded before it terminates them', { timeout: 60_000 }, async () => {
  // A worker thread terminated inside a module load trips an assertion in node's module loader
  // (ModuleWrap::CreateRequiredModuleFacade) and aborts the process: seen once in CI, a dispatch
  // test closing right after its start.
  const pool = new DeliveryPool({ threads: 2, allow: [], allowLoopback: true, signingSecrets: [], ca: undefined, limits: dispatchLimits, spareBuffers: { give: () => undefined } });
  let loaded = false;
  void pool.ready().then(() => (loaded = true));
  await pool.destroy();
  assert.equal(loaded, true);
});
