// The spill tier through the real service: with a small --memory-budget, far-future timers
// leave memory for runs on disk (/v1/stats says so), GET and DELETE still find them, and a
// restart brings back the same state from the checkpoint and the log's tail. With memory to
// spare, timers due past the far horizon go to disk too once adds go quiet (unless
// --far-horizon off). A bad budget or horizon is refused at start, naming the setting.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';
import { residentSlotsFor } from '../../engine/memory-budget.ts';
import { binPath, serviceEnv, startService } from '../helpers/service.ts';
import { testScratch } from '../helpers/scratch.ts';

const scratch = testScratch('fermata-spill-serve');
const target = 'https://hooks.example/far';
const day = 24 * 3600_000;

interface Stats {
  pending: number;
  resident: number;
  spilled: number;
  horizon: number | null;
  memory: { budget_bytes: number; resident_bytes: number };
}

async function stats(url: string): Promise<Stats> {
  const answer = await fetch(`${url}/v1/stats`, { signal: AbortSignal.timeout(5_000) });
  assert.equal(answer.status, 200);
  return (await answer.json()) as Stats;
}

async function waitFor<T>(what: string, read: () => Promise<T>, done: (value: T) => boolean, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (done(value)) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}: ${JSON.stringify(value)}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

test('a small memory budget spills far-future timers to disk; GET, DELETE and a restart still find them', async () => {
  const dataDir = scratch.tempDir('data');
  const args = ['--memory-budget', '2MiB'];
  // Below the floor a user is held to: a budget that spills a few thousand timers.
  const env = { FERMATA_MEMORY_BUDGET_FLOOR: 'off' };
  let service = await startService(dataDir, (child) => scratch.children.add(child), { args, env });
  const fireAt = Date.now() + 10 * day;
  const bulk = 15_000;
  const lines = Array.from({ length: bulk }, (_, i) => JSON.stringify({ fire_at: fireAt + i * 1000, target, payload: `far timer ${i} `.padEnd(100, '.') })).join('\n');
  const single = async (body: object, status = 201): Promise<string> => {
    const answer = await fetch(`${service.url}/v1/timers`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), signal: AbortSignal.timeout(5_000) });
    assert.equal(answer.status, status);
    return ((await answer.json()) as { id: string }).id;
  };
  const kept = await single({ fire_at: fireAt + 5 * day, target, payload: 'kept', key: 'far-key' });
  const dropped = await single({ fire_at: fireAt + 6 * day, target, payload: 'dropped' });
  // The bulk add last: it takes memory past the budget, and the spill that follows takes all of them.
  const added = await fetch(`${service.url}/v1/timers`, { method: 'POST', headers: { 'content-type': 'application/x-ndjson' }, body: lines, signal: AbortSignal.timeout(30_000) });
  assert.equal(added.status, 201, await added.text());

  // The loader spills what does not fit half the budget: most of the bulk, and the two timers due after it.
  const spilled = await waitFor('the loader to spill', () => stats(service.url), (s) => s.spilled > bulk / 2 && s.memory.resident_bytes <= s.memory.budget_bytes);
  assert.equal(spilled.pending, bulk + 2);
  assert.equal(spilled.resident + spilled.spilled, bulk + 2);
  assert.ok(spilled.horizon !== null && spilled.horizon <= fireAt + 5 * day, `the horizon ${spilled.horizon} lies before the two single timers`);
  assert.ok(readdirSync(join(dataDir, 'spill')).some((name) => name.endsWith('.arrow')), 'runs are Arrow files in the spill directory');

  const view = await fetch(`${service.url}/v1/timers/${kept}`, { signal: AbortSignal.timeout(5_000) });
  assert.equal(view.status, 200);
  const timer = (await view.json()) as { state: string; key: string | null; fire_at: unknown };
  assert.equal(timer.state, 'pending');
  assert.equal(timer.key, 'far-key');
  const cancel = await fetch(`${service.url}/v1/timers/${dropped}`, { method: 'DELETE', signal: AbortSignal.timeout(5_000) });
  assert.ok(cancel.status === 200 || cancel.status === 204, `DELETE of a spilled timer answered ${cancel.status}`);
  // The key of a spilled timer still deduplicates (200: the timer already existed), and the
  // answer compares the request with the spilled timer as its run file holds it.
  const again = await fetch(`${service.url}/v1/timers`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ fire_at: fireAt + 5 * day, target, payload: 'again', key: 'far-key' }),
    signal: AbortSignal.timeout(5_000),
  });
  assert.equal(again.status, 200);
  const duplicate = (await again.json()) as { id: string; state: string; differs: string[] };
  assert.deepEqual([duplicate.id, duplicate.state, duplicate.differs], [kept, 'pending', ['payload']]);

  service.child.kill('SIGTERM');
  await service.exited;
  service = await startService(dataDir, (child) => scratch.children.add(child), { args, env });
  const after = await stats(service.url);
  assert.equal(after.pending, bulk + 1, 'the same timers after a restart, less the cancelled one');
  assert.ok(after.spilled >= spilled.spilled - 1, `${after.spilled} spilled after the restart, ${spilled.spilled} before (one of them cancelled)`);
  const cancelled = (await (await fetch(`${service.url}/v1/timers/${dropped}`, { signal: AbortSignal.timeout(5_000) })).json()) as { state: string };
  assert.equal(cancelled.state, 'cancelled');
  service.child.kill('SIGTERM');
  await service.exited;
});

test('the store takes the slots its memory budget allows, budget by budget, on one data directory', async () => {
  const dataDir = scratch.tempDir('slots');
  for (const budget of ['64GiB', '2MiB']) {
    const service = await startService(dataDir, (child) => scratch.children.add(child), { args: ['--memory-budget', budget], env: { FERMATA_MEMORY_BUDGET_FLOOR: 'off' } });
    const line = service
      .output()
      .split('\n')
      .map((text) => (text.startsWith('{') ? (JSON.parse(text) as { msg?: string; budgetBytes?: number; residentMax?: number }) : {}))
      .find((entry) => entry.msg === 'memory budget');
    assert.ok(line?.budgetBytes !== undefined, `no "memory budget" line in:\n${service.output()}`);
    assert.equal(line.residentMax, residentSlotsFor(line.budgetBytes), `--memory-budget ${budget}`);
    service.child.kill('SIGTERM');
    await service.exited;
  }
});

test('a bad --memory-budget exits 2 naming the setting', () => {
  const result = spawnSync(process.execPath, [binPath, 'serve', '--data', scratch.tempDir('bad'), '--listen', '127.0.0.1:0', '--memory-budget', 'lots'], {
    env: serviceEnv(),
    encoding: 'utf8',
    timeout: 20_000,
  });
  assert.equal(result.status, 2);
  assert.match(result.stderr, /--memory-budget: "lots" is not a size in bytes/);
});

test('with memory to spare, timers due past the far horizon go to disk once adds go quiet; --far-horizon off keeps them in memory', async () => {
  const near = 100;
  const far = 15_000;
  const now = Date.now();
  const lines = [
    ...Array.from({ length: near }, (_, i) => ({ fire_at: now + 20 * 60_000 + i, target, payload: `near timer ${i}` })),
    ...Array.from({ length: far }, (_, i) => ({ fire_at: now + 10 * day + i * 1000, target, payload: `far timer ${i} `.padEnd(300, '.') })),
  ]
    .map((timer) => JSON.stringify(timer))
    .join('\n');
  const [spilling, keeping] = await Promise.all([
    startService(scratch.tempDir('far-default'), (child) => scratch.children.add(child)),
    startService(scratch.tempDir('far-off'), (child) => scratch.children.add(child), { args: ['--far-horizon', 'off'] }),
  ]);
  try {
    for (const service of [spilling, keeping]) {
      const added = await fetch(`${service.url}/v1/timers`, { method: 'POST', headers: { 'content-type': 'application/x-ndjson' }, body: lines, signal: AbortSignal.timeout(30_000) });
      assert.equal(added.status, 201, await added.text());
    }
    const spilled = await waitFor('the far future to spill', () => stats(spilling.url), (s) => s.spilled === far);
    assert.equal(spilled.resident, near, 'the near future stays in memory');
    assert.ok(spilled.horizon !== null && spilled.horizon > now + 3600_000 && spilled.horizon <= Date.now() + 2 * 3600_000, `the horizon ${spilled.horizon} is the end of the hour holding now + 1 h`);
    assert.ok(spilled.memory.resident_bytes < 1024 * 1024, `${spilled.memory.resident_bytes} B resident for ${near} timers`);
    // The other service has been as quiet for as long, and two loader steps more.
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    const kept = await stats(keeping.url);
    assert.equal(kept.spilled, 0);
    assert.equal(kept.resident, near + far);
  } finally {
    for (const service of [spilling, keeping]) {
      service.child.kill('SIGTERM');
      await service.exited;
    }
  }
});

test('a bad --far-horizon exits 2 naming the setting', () => {
  for (const [value, env] of [
    ['5m', {}],
    ['soon', {}],
    [undefined, { FERMATA_FAR_HORIZON: '-1h' }],
  ] as const) {
    const args = [binPath, 'serve', '--data', scratch.tempDir('bad-horizon'), '--listen', '127.0.0.1:0', ...(value === undefined ? [] : ['--far-horizon', value])];
    const result = spawnSync(process.execPath, args, { env: serviceEnv(env), encoding: 'utf8', timeout: 20_000 });
    assert.equal(result.status, 2, result.stderr);
    assert.match(result.stderr, value === undefined ? /FERMATA_FAR_HORIZON: "-1h" is not a duration of at least 10m/ : new RegExp(`--far-horizon: "${value}" is not a duration of at least 10m`));
  }
});
