// The export (engine/timer-export.ts): one Arrow IPC stream that apache-arrow reads back whole,
// every match in the list's order with the view's columns and nulls, resident and spilled alike,
// the schema alone when nothing matches; and over HTTP it is made only as fast as the client
// reads (a client that stops reading holds the export at a few batches).
import assert from 'node:assert/strict';
import http from 'node:http';
import type net from 'node:net';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { tableFromIPC } from 'apache-arrow';
import { pino } from 'pino';
import { batchFromSpecs, type TimerSpec } from '../../engine/batch/timer-batch.ts';
import { Engine, type TimerFilter } from '../../engine/engine.ts';
import { createHttpServer } from '../../ingest/http/server.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';

const dataDir = '/data';
const hour = 3600_000;
const t0 = 1_796_220_000_000 - (1_796_220_000_000 % hour);
const target = 'https://a.example/hook';

async function exported(engine: Engine, filter: TimerFilter, batchRows: number): Promise<Buffer> {
  const chunks: Uint8Array[] = [];
  for await (const chunk of engine.exportTimers(filter, batchRows)) chunks.push(chunk);
  return Buffer.concat(chunks);
}

test('an export is every match in the list\'s order, with the view\'s columns, resident and spilled', async () => {
  const engine = await Engine.open({ dataDir, fs: new SimFileSystem({ seed: 61 }), clock: { now: () => t0 } });
  const specs: TimerSpec[] = Array.from({ length: 50 }, (_, i) => ({
    fireAtMs: i < 20 ? t0 + 1000 + i * 60_000 : t0 + 10 * hour + i * 60_000,
    target,
    payload: i % 5 === 0 ? '' : `payload ${i}`,
    queue: i % 2 === 0 ? 'even' : 'odd',
    ...(i % 3 === 0 ? { key: `k${i}` } : {}),
    ...(i === 7 ? { headers: { 'x-seven': '7' } } : {}),
    ...(i % 4 === 1 ? { callback: `https://cb.example/done/${i}` } : {}),
    ...(i % 7 === 2 ? { failureCallback: `https://cb.example/dead/${i}` } : {}),
  }));
  const admitted = await engine.admit(batchFromSpecs(specs));
  const patched = admitted.idOf(4);
  assert.equal((await engine.reschedule(patched, { callback: 'https://cb.example/patched' })).outcome, 'rescheduled');
  await engine.checkpoint(t0 + 3 * hour);
  assert.equal(engine.stats().spill.spilled, 30);
  const cancelled = (await engine.listTimers({ queue: 'odd' }, 1)).timers[0]?.id as string;
  assert.equal(await engine.cancel(cancelled), 'cancelled');

  const listed = (await engine.listTimers({}, 1000)).timers;
  const table = tableFromIPC(await exported(engine, {}, 7));
  assert.equal(table.numRows, 50);
  assert.deepEqual(table.schema.fields.map((field) => field.name), ['id', 'state', 'fire_at', 'next_attempt_at', 'attempts', 'queue', 'key', 'target', 'headers', 'payload', 'last_status', 'last_error', 'last_attempt_at', 'revision', 'callback', 'failure_callback', 'created_at']);
  assert.deepEqual(table.getChild('id')?.toArray(), listed.map((timer) => timer.id), 'the list\'s order, across batches of 7');
  const rows = table.toArray().map((row) => row.toJSON() as Record<string, unknown>);
  const byId = new Map(rows.map((row) => [row.id as string, row]));
  assert.equal(byId.get(cancelled)?.state, 'cancelled');
  for (const [i, spec] of specs.entries()) {
    const timer = listed.find((view) => view.fireAtMs === spec.fireAtMs) ?? assert.fail(`timer ${i} listed`);
    const row = byId.get(timer.id) as Record<string, unknown>;
    assert.equal(row.fire_at, spec.fireAtMs, `timer ${i}: fire_at`);
    assert.equal(row.queue, spec.queue);
    assert.equal(row.key, spec.key ?? null, `timer ${i}: key`);
    assert.equal(row.target, target);
    assert.equal(Buffer.from(row.payload as Uint8Array).toString(), spec.payload, `timer ${i}: payload`);
    assert.equal(row.headers, i === 7 ? '{"x-seven":"7"}' : null, `timer ${i}: headers`);
    assert.equal(row.attempts, 0);
    assert.equal(row.last_status, null);
    assert.equal(row.next_attempt_at, null);
    assert.equal(row.last_error, null);
    assert.equal(row.revision, timer.id === patched ? 2 : 1, `timer ${i}: revision`);
    assert.equal(row.callback, timer.id === patched ? 'https://cb.example/patched' : (spec.callback ?? null), `timer ${i}: callback`);
    assert.equal(row.failure_callback, spec.failureCallback ?? null, `timer ${i}: failure_callback`);
    assert.equal(row.created_at, t0, `timer ${i}: created_at, the add's accept time`);
  }
  const even = tableFromIPC(await exported(engine, { queue: 'even', dueAfterMs: t0 + 5 * hour }, 4096));
  assert.deepEqual([...(even.getChild('queue')?.toArray() ?? [])], Array(15).fill('even'), 'a filter holds, on disk too');
  const none = tableFromIPC(await exported(engine, { queue: 'nobody' }, 4096));
  assert.equal(none.numRows, 0);
  assert.equal(none.schema.fields.length, 17, 'no match: the schema alone');
  await engine.close();
});

test('over HTTP the export is made as the client reads: one that stops reading holds it at a few batches', async () => {
  const engine = await Engine.open({ dataDir, fs: new SimFileSystem({ seed: 62 }), clock: { now: () => t0 } });
  const payload = 'x'.repeat(1024);
  for (let batch = 0; batch < 4; batch++) {
    await engine.admit(batchFromSpecs(Array.from({ length: 10_000 }, (_, i) => ({ fireAtMs: t0 + hour + batch * 10_000 + i, target, payload }))));
  }
  // The engine the routes see, counting the batches its export has made.
  let made = 0;
  const counting = new Proxy(engine, {
    get(real, name) {
      if (name === 'exportTimers') {
        return async function* (...args: Parameters<Engine['exportTimers']>): AsyncGenerator<Uint8Array> {
          for await (const chunk of real.exportTimers(...args)) {
            made++;
            yield chunk;
          }
        };
      }
      const value: unknown = Reflect.get(real, name, real);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(real) : value;
    },
  });
  const app = createHttpServer({ logger: pino({ level: 'silent' }), engine: counting });
  await app.listen({ host: '127.0.0.1', port: 0 });
  try {
    const port = (app.server.address() as net.AddressInfo).port;
    const response = await new Promise<http.IncomingMessage>((resolve, reject) => {
      http.get({ host: '127.0.0.1', port, path: '/v1/timers', headers: { accept: 'application/vnd.apache.arrow.stream' } }, resolve).on('error', reject);
    });
    response.pause();
    await sleep(500);
    // 40,000 timers of 1 KiB are 10 batches of 4 MiB (plus the schema and the end): socket buffers hold a few.
    const whilePaused = made;
    assert.ok(whilePaused <= 5, `${whilePaused} of 12 chunks made while the client read nothing`);
    const chunks: Buffer[] = [];
    response.on('data', (chunk: Buffer) => chunks.push(chunk));
    response.resume();
    await new Promise((resolve) => response.on('end', resolve));
    assert.equal(made, 12);
    assert.equal(tableFromIPC(Buffer.concat(chunks)).numRows, 40_000);
  } finally {
    await app.close();
    await engine.close();
  }
});
