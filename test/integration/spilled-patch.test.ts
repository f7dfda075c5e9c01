// A PATCHed timer after the loader spilled it, through the real service (`fermata serve`, port
// 0, a small --memory-budget) spoken to with curl: its id still encodes the fire time it was
// added with, so GET and a bulk cancel naming it must find it on disk through the redirect to its
// new time (engine/rescheduled-timers.ts placeOf). The GET view is the PATCHed one (revision,
// fire_at, target, payload); POST /v1/timers/cancel with its id cancels it, and kill -9 and a
// restart keep it cancelled. Every wait is bounded; the children are killed in the scratch's cleanup.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { curlRequest, json, text } from '../helpers/curl.ts';
import { testScratch } from '../helpers/scratch.ts';
import { type Service, startService } from '../helpers/service.ts';
import { withTimeout } from '../helpers/timeout.ts';
import { toolOrSkip } from '../helpers/tools.ts';

const scratch = testScratch('fermata-spilled-patch');
const day = 24 * 3600_000;
const target = 'https://hooks.example/far';
/** A budget that spills a few thousand timers (below the floor a user is held to, as spill-serve.test.ts does). */
const options = { args: ['--memory-budget', '2MiB'], env: { FERMATA_MEMORY_BUDGET_FLOOR: 'off' } };

interface TimerView {
  state: string;
  revision: number;
  fire_at: string;
  target: string;
  payload?: string;
}

interface Stats {
  pending: number;
  spilled: number;
  horizon: number | null;
  memory: { budget_bytes: number; resident_bytes: number };
}

const view = async (service: Service, id: string): Promise<TimerView> => json<TimerView>(await curlRequest({ url: `${service.url}/v1/timers/${id}` }));

test('a PATCHed timer spilled to disk: GET shows the PATCHed view, a bulk cancel naming it cancels it, also after kill -9', { timeout: 120_000 }, async (t) => {
  if (toolOrSkip(t, 'curl') === undefined) return;
  const dataDir = scratch.tempDir('data');
  let service = await startService(dataDir, (child) => scratch.children.add(child), options);
  const farAt = Date.now() + 10 * day;

  // Added due in a minute, then moved past every bulk timer with new content: its id names the minute.
  const added = await curlRequest({ method: 'POST', url: `${service.url}/v1/timers`, body: JSON.stringify({ delay_ms: 60_000, target: 'https://hooks.example/near', payload: 'before' }) });
  assert.equal(added.status, 201);
  const id = json<{ id: string }>(added).id;
  const movedAt = new Date(farAt + 5 * day).toISOString();
  const patched = await curlRequest({ method: 'PATCH', url: `${service.url}/v1/timers/${id}`, body: JSON.stringify({ fire_at: movedAt, target, payload: 'after' }) });
  assert.equal(patched.status, 200, text(patched));

  // The bulk takes memory past the budget; the loader spills the far end, the PATCHed timer with it.
  const bulk = 15_000;
  const lines = Array.from({ length: bulk }, (_, i) => JSON.stringify({ fire_at: farAt + i * 1000, target, payload: `far timer ${i} `.padEnd(100, '.') })).join('\n');
  const bulkAdded = await curlRequest({ url: `${service.url}/v1/timers`, body: lines, headers: { 'content-type': 'application/x-ndjson' }, timeoutMs: 30_000 });
  assert.equal(bulkAdded.status, 201);
  const stats = async (): Promise<Stats> => json<Stats>(await curlRequest({ url: `${service.url}/v1/stats` }));
  await withTimeout(
    (async () => {
      for (let s = await stats(); !(s.spilled > bulk / 2 && s.horizon !== null && s.horizon <= Date.parse(movedAt)); s = await stats()) await new Promise((resolve) => setTimeout(resolve, 200));
    })(),
    30_000,
    'the loader to spill the PATCHed timer (a horizon before its new time)',
  );

  const spilled = await view(service, id);
  assert.deepEqual([spilled.state, spilled.revision, spilled.fire_at, spilled.target, spilled.payload], ['pending', 2, movedAt, target, 'after']);

  const cancelled = await curlRequest({ method: 'POST', url: `${service.url}/v1/timers/cancel`, body: JSON.stringify({ ids: [id] }) });
  assert.equal(cancelled.status, 200);
  assert.deepEqual(json(cancelled), { cancelled: 1, in_flight: 0 });
  assert.equal((await view(service, id)).state, 'cancelled');

  service.child.kill('SIGKILL');
  await withTimeout(service.exited, 10_000, 'fermata to die');
  service = await startService(dataDir, (child) => scratch.children.add(child), options);
  const restarted = await view(service, id);
  assert.deepEqual([restarted.state, restarted.revision, restarted.fire_at], ['cancelled', 2, movedAt]);
  assert.equal((await stats()).pending, bulk, 'only the bulk is pending: the cancelled timer never loads again');
  service.child.kill('SIGKILL');
  await withTimeout(service.exited, 10_000, 'fermata to die');
});
