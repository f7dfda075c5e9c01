// The query engine part (engine/timer-query.ts) over resident and spilled timers together: pages
// in (due, id) order whatever tier a timer is in (two spilled runs sharing buckets included),
// each filter, cursors that carry on after a restart, and cursors that are not cursors.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { batchFromSpecs, type TimerSpec } from '../../engine/batch/timer-batch.ts';
import { type Admitted, type Clock, decodeCursor, Engine, type QueryPosition, queryStart, type TimerFilter } from '../../engine/engine.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';

const dataDir = '/data';
const hour = 3600_000;
const t0 = 1_796_220_000_000 - (1_796_220_000_000 % hour);
const target = 'https://a.example/hook';
const utf8 = new TextEncoder();

function manualClock(start = t0): Clock {
  const now = start;
  return { now: () => now };
}

const open = (fs: SimFileSystem, clock: Clock): Promise<Engine> => Engine.open({ dataDir, fs, clock, walLimits: { segmentBytes: 64 * 1024 } });

interface Expected {
  readonly id: string;
  readonly dueMs: number;
  readonly queue: string;
  readonly key: string;
}

/** Timers with repeated fire times (ties broken by id), two queues, keys `k<i>` and `other<i>`. */
function specs(count: number, fromMs: number, stepMs: number, tag: string): TimerSpec[] {
  return Array.from({ length: count }, (_, i) => ({
    fireAtMs: fromMs + Math.floor(i / 3) * stepMs,
    target,
    payload: `${tag} ${i}`,
    queue: i % 4 === 0 ? 'billing' : 'default',
    key: i % 2 === 0 ? `k-${tag}-${i}` : `other-${tag}-${i}`,
  }));
}

function expected(admitted: Admitted, input: TimerSpec[]): Expected[] {
  return input.map((spec, row) => ({ id: admitted.idOf(row), dueMs: spec.fireAtMs as number, queue: spec.queue ?? 'default', key: spec.key ?? '' }));
}

const byDueThenId = (a: Expected, b: Expected): number => a.dueMs - b.dueMs || (a.id < b.id ? -1 : a.id > b.id ? 1 : 0);

/** Every page of `filter`, `limit` at a time, as ids. */
async function allPages(engine: Engine, filter: TimerFilter, limit: number, after: QueryPosition = queryStart): Promise<string[]> {
  const ids: string[] = [];
  let cursor: QueryPosition | undefined = after;
  while (cursor !== undefined) {
    const page = await engine.listTimers(filter, limit, cursor);
    assert.ok(page.timers.length <= limit);
    ids.push(...page.timers.map((timer) => timer.id));
    cursor = page.nextCursor === null ? undefined : decodeCursor(page.nextCursor);
    if (page.nextCursor !== null) assert.ok(cursor !== undefined, 'a page\'s cursor decodes');
  }
  return ids;
}

/** Resident near timers, and far ones spilled in two runs whose buckets share starts. */
async function filled(fs: SimFileSystem, clock: Clock): Promise<{ engine: Engine; all: Expected[] }> {
  const engine = await open(fs, clock);
  const near = specs(30, t0 + 1000, 60_000, 'near');
  const far = specs(60, t0 + 10 * hour, hour / 4, 'far');
  const later = specs(45, t0 + 10 * hour + 7, hour / 5, 'later');
  const all = [...expected(await engine.admit(batchFromSpecs(near)), near), ...expected(await engine.admit(batchFromSpecs(far)), far)];
  await engine.checkpoint(t0 + 3 * hour);
  all.push(...expected(await engine.admit(batchFromSpecs(later)), later));
  await engine.checkpoint();
  assert.equal(engine.stats().spill.spilled, 105, 'the far timers are on disk, in two runs');
  assert.ok(engine.stats().spill.runs >= 2);
  return { engine, all: all.sort(byDueThenId) };
}

test('pages walk resident and spilled timers in (due, id) order, whatever the page size', async () => {
  const fs = new SimFileSystem({ seed: 41 });
  const { engine, all } = await filled(fs, manualClock());
  for (const limit of [1, 7, 100, 1000]) assert.deepEqual(await allPages(engine, {}, limit), all.map((timer) => timer.id), `limit ${limit}`);
  const first = await engine.listTimers({}, 5);
  assert.equal(first.timers[0]?.state, 'pending');
  assert.equal(first.timers[0]?.target, target);
  const spilledView = (await engine.listTimers({ dueAfterMs: t0 + 10 * hour }, 1)).timers[0];
  assert.equal(spilledView?.id, all.find((timer) => timer.dueMs >= t0 + 10 * hour)?.id);
  assert.equal(spilledView?.queue, 'billing');
  await engine.close();
});

test('each filter holds over both tiers: queue, key prefix, exact key, due range and state', async () => {
  const fs = new SimFileSystem({ seed: 42 });
  const { engine, all } = await filled(fs, manualClock());
  const ids = (list: Expected[]): string[] => list.map((timer) => timer.id);
  assert.deepEqual(await allPages(engine, { queue: 'billing' }, 4), ids(all.filter((timer) => timer.queue === 'billing')));
  assert.deepEqual(await allPages(engine, { queue: 'nobody' }, 4), []);
  assert.deepEqual(await allPages(engine, { keyPrefix: utf8.encode('k-') }, 6), ids(all.filter((timer) => timer.key.startsWith('k-'))));
  assert.deepEqual(await allPages(engine, { keyPrefix: utf8.encode('k-far-1') }, 3), ids(all.filter((timer) => timer.key.startsWith('k-far-1'))));
  const [from, to] = [t0 + 10 * hour + hour, t0 + 10 * hour + 3 * hour];
  assert.deepEqual(await allPages(engine, { dueAfterMs: from, dueBeforeMs: to }, 5), ids(all.filter((timer) => timer.dueMs >= from && timer.dueMs < to)));
  assert.deepEqual(await allPages(engine, { dueBeforeMs: t0 + hour, queue: 'billing' }, 2), ids(all.filter((timer) => timer.dueMs < t0 + hour && timer.queue === 'billing')));
  for (const key of ['k-near-4', 'k-far-8', 'other-later-11']) {
    const page = await engine.listTimers({ key: utf8.encode(key) }, 10);
    assert.deepEqual(page.timers.map((timer) => timer.key), [key], `key ${key}`);
    assert.equal(page.nextCursor, null);
  }
  assert.deepEqual((await engine.listTimers({ key: utf8.encode('k-far-8'), queue: 'billing' }, 10)).timers.length, 1);
  assert.deepEqual((await engine.listTimers({ key: utf8.encode('k-far-2'), queue: 'billing' }, 10)).timers.length, 0, 'k-far-2 is in default');
  assert.deepEqual((await engine.listTimers({ key: utf8.encode('nope') }, 10)).timers, []);

  // A cancelled resident timer and a cancelled spilled one leave "pending" and show as "cancelled".
  const residentOne = all.find((timer) => timer.key === 'k-near-2') as Expected;
  const spilledOne = all.find((timer) => timer.key === 'k-far-2') as Expected;
  assert.equal(await engine.cancel(residentOne.id), 'cancelled');
  assert.equal(await engine.cancel(spilledOne.id), 'cancelled');
  const cancelled = [residentOne, spilledOne].sort(byDueThenId);
  assert.deepEqual(await allPages(engine, { state: 'cancelled' }, 1), ids(cancelled));
  const pending = all.filter((timer) => timer !== residentOne && timer !== spilledOne);
  assert.deepEqual(await allPages(engine, { state: 'pending' }, 9), ids(pending));
  assert.deepEqual(await allPages(engine, { state: 'delivered' }, 9), []);
  assert.deepEqual((await engine.listTimers({ key: utf8.encode('k-far-2'), state: 'cancelled' }, 10)).timers.map((timer) => timer.id), [spilledOne.id]);
  await engine.close();
});

test('a cursor carries on after a restart, and a string that is not a cursor is refused', async () => {
  const fs = new SimFileSystem({ seed: 43 });
  const clock = manualClock();
  let { engine, all } = await filled(fs, clock);
  const first = await engine.listTimers({}, 40);
  assert.ok(first.nextCursor !== null);
  await engine.close();
  engine = await open(fs, clock);
  const rest = await allPages(engine, {}, 11, decodeCursor(first.nextCursor));
  assert.deepEqual([...first.timers.map((timer) => timer.id), ...rest], all.map((timer) => timer.id));
  await engine.close();

  for (const bad of ['', 'x', '!!!!', Buffer.from('12~notanid').toString('base64url'), Buffer.from('abc~0000000004000001m8vgw5r0').toString('base64url'), `${first.nextCursor}=`]) {
    assert.equal(decodeCursor(bad), undefined, JSON.stringify(bad));
  }
});
