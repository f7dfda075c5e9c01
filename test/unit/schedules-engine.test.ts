// Schedules in the engine (engine/schedules/): occurrences created ahead as timers keyed
// schedule:{name}:{occurrence}, exactly once across restarts and checkpoints (the mark rides in
// the ADD's keys and in the manifest); catch_up latest/all/none over a clock step; a replace,
// pause and delete cancel pending occurrences but not one a user patched; user keys with the
// reserved prefix are refused. A simulated disk and a manual clock, in process.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { batchFromSpecs } from '../../engine/batch/timer-batch.ts';
import { ManualClock } from '../../engine/clock.ts';
import { Engine, type ScheduleInput, type TimerView } from '../../engine/engine.ts';
import { errorCodes, isFermataError } from '../../engine/errors.ts';
import { batchToArrow } from '../helpers/arrow.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';

const dataDir = '/data';
const t0 = 1_800_000_000_000; // a whole minute
const minute = 60_000;
const hour = 3_600_000;

const timer = { target: 'http://127.0.0.1:9/hook', queue: 'default', payload: new TextEncoder().encode('tick'), headers: '' };
const everyMinute = (extra: Partial<ScheduleInput> = {}): ScheduleInput => ({ everyMs: minute, startAtMs: t0, ...timer, ...extra });

async function occurrences(engine: Engine, name: string, state?: 'pending' | 'cancelled'): Promise<TimerView[]> {
  const page = await engine.listTimers({ keyPrefix: new TextEncoder().encode(`schedule:${name}:`), ...(state === undefined ? {} : { state }) }, 1000);
  return page.timers;
}

const instants = (timers: TimerView[]): number[] => timers.map((view) => Number((view.key as string).split(':')[2])).sort((a, b) => a - b);

/** Waits until the materializer has nothing left to do at the clock's position (it runs on timers of 0 ms). */
async function settle(): Promise<void> {
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setTimeout(resolve, 5));
}

async function opened(fs: SimFileSystem, clock: ManualClock): Promise<Engine> {
  const engine = await Engine.open({ dataDir, fs, clock });
  await settle();
  return engine;
}

test('a schedule has the occurrences of the next two minutes, and always its next one, as keyed timers', async () => {
  const fs = new SimFileSystem({ seed: 43 });
  const engine = await opened(fs, new ManualClock(t0 + 10_000));
  const view = await engine.putSchedule('minutely', everyMinute());
  assert.deepEqual(view.next.map((next) => next.occurrenceMs), [1, 2, 3, 4, 5].map((k) => t0 + k * minute));
  await settle();
  const created = await occurrences(engine, 'minutely');
  assert.deepEqual(instants(created), [t0 + minute, t0 + 2 * minute]);
  assert.ok(created.every((view) => view.fireAtMs === Number((view.key as string).split(':')[2]) && view.target === timer.target));
  await engine.putSchedule('hourly', everyMinute({ everyMs: hour }));
  await settle();
  assert.deepEqual(instants(await occurrences(engine, 'hourly')), [t0 + hour], 'beyond the window: its next one only');
  await engine.close();
});

test('occurrences are created exactly once across restarts, and across a checkpoint that truncates the log', async () => {
  const fs = new SimFileSystem({ seed: 43 });
  const clock = new ManualClock(t0 + 10_000);
  let engine = await opened(fs, clock);
  await engine.putSchedule('minutely', everyMinute());
  await settle();
  await engine.moveClock({ advanceMs: 30_000 });
  await settle();
  const before = instants(await occurrences(engine, 'minutely'));
  await engine.close();
  engine = await opened(fs, new ManualClock(Date.now()));
  assert.deepEqual(instants(await occurrences(engine, 'minutely')), before, 'the restart created nothing again');
  await engine.checkpoint();
  await engine.close();
  engine = await opened(fs, new ManualClock(Date.now()));
  assert.deepEqual(instants(await occurrences(engine, 'minutely')), before, 'the manifest carried the schedule and its mark');
  assert.equal(engine.schedule('minutely')?.definition.everyMs, minute);
  await engine.close();
});

for (const [catchUp, expected] of [
  ['latest', 'the most recent missed one, once'],
  ['all', 'each missed one'],
  ['none', 'none of them'],
] as const) {
  test(`a clock step of an hour: catch_up ${catchUp} creates ${expected}, then the rule goes on`, async () => {
    const fs = new SimFileSystem({ seed: 43 });
    let engine = await opened(fs, new ManualClock(t0 + 10_000));
    await engine.putSchedule('s', everyMinute({ catchUp }));
    await settle();
    await engine.close();
    // The restart resumes the clock where it stood; then the clock steps an hour, as a downtime would.
    engine = await opened(fs, new ManualClock(Date.now()));
    await engine.moveClock({ advanceMs: hour });
    await settle();
    const nowMs = t0 + 10_000 + hour;
    const pending = instants(await occurrences(engine, 's', 'pending'));
    const overdue = pending.filter((ms) => ms < nowMs);
    const ahead = pending.filter((ms) => ms >= nowMs);
    if (catchUp === 'all') assert.deepEqual(overdue, Array.from({ length: 60 }, (_, k) => t0 + (k + 1) * minute));
    if (catchUp === 'latest') assert.deepEqual(overdue, [t0 + hour]);
    if (catchUp === 'none') assert.deepEqual(overdue, []);
    assert.deepEqual(ahead, [t0 + hour + minute, t0 + hour + 2 * minute], 'the rule resumes after the step');
    // Stats count since this open: the two created ahead before it were overdue at the step.
    const stats = engine.stats().schedules;
    assert.equal(stats.count, 1);
    assert.equal(stats.catchUpCreated, { latest: 1, all: 58, none: 0 }[catchUp]);
    assert.equal(stats.catchUpCancelled, { latest: 2, all: 0, none: 2 }[catchUp]);
    assert.equal(stats.skipped, { latest: 0, all: 0, none: 1 }[catchUp], 'a pass over missed ones is logged once');
    await engine.close();
  });
}

test('a replace cancels pending occurrences and creates the new rule\'s, leaving one a user patched; pause, resume and delete', async () => {
  const fs = new SimFileSystem({ seed: 43 });
  const engine = await opened(fs, new ManualClock(t0 + 10_000));
  await engine.putSchedule('s', everyMinute());
  await settle();
  const [first, second] = (await occurrences(engine, 's', 'pending')).sort((a, b) => a.fireAtMs - b.fireAtMs) as [TimerView, TimerView];
  await engine.reschedule(second.id, { fireAtMs: second.fireAtMs + 5000 });
  await engine.putSchedule('s', everyMinute({ payload: new TextEncoder().encode('tock') }));
  await settle();
  assert.equal((await engine.lookup(first.id))?.state ?? 'released', 'released', 'replaced, and released at once');
  assert.equal((await engine.lookup(second.id))?.state, 'pending', 'the patched one stays');
  const pending = await occurrences(engine, 's', 'pending');
  assert.deepEqual(instants(pending), [t0 + minute, t0 + 2 * minute]);
  assert.equal(new TextDecoder().decode(pending.find((view) => view.id !== second.id)?.payload), 'tock');
  const paused = await engine.setSchedulePaused('s', true);
  assert.equal(paused?.paused, true);
  assert.deepEqual(paused?.next, []);
  assert.deepEqual((await occurrences(engine, 's', 'pending')).map((view) => view.id), [second.id], 'a pause cancels all but the patched one');
  await engine.moveClock({ advanceMs: 5 * minute });
  await settle();
  assert.deepEqual((await occurrences(engine, 's', 'pending')).map((view) => view.id), [second.id], 'paused: nothing created');
  await engine.setSchedulePaused('s', false);
  await settle();
  assert.deepEqual(instants(await occurrences(engine, 's', 'pending')).filter((ms) => ms > t0 + 5 * minute), [t0 + 6 * minute, t0 + 7 * minute], 'resumed from its own time');
  assert.equal(await engine.deleteSchedule('s'), true);
  assert.equal(engine.schedule('s'), undefined);
  assert.deepEqual((await occurrences(engine, 's', 'pending')).map((view) => view.id), [second.id]);
  assert.equal(await engine.deleteSchedule('s'), false);
  await engine.close();
});

test('user keys beginning with schedule: are refused, naming the key, in columns and as Arrow alike', async () => {
  const fs = new SimFileSystem({ seed: 43 });
  const engine = await opened(fs, new ManualClock(t0));
  const batch = batchFromSpecs([
    { fireAtMs: t0, target: timer.target, key: 'mine' },
    { fireAtMs: t0, target: timer.target, key: 'schedule:x:1' },
  ]);
  const refused = (err: unknown): boolean => isFermataError(err, errorCodes.batchInvalid) && err.details.column === 'key' && err.details.row === 1 && /reserved for the occurrences of schedules/.test(err.message);
  await assert.rejects(engine.admit(batch), refused);
  await assert.rejects(engine.admitArrow(batchToArrow(batch)), refused);
  assert.equal(engine.stats().pending, 0, 'nothing of either batch was admitted');
  await engine.close();
});

test('bad schedules are refused before anything is logged: the name, and the rule naming its field', async () => {
  const fs = new SimFileSystem({ seed: 43 });
  const engine = await opened(fs, new ManualClock(t0));
  const seq = engine.log.lastSeq;
  await assert.rejects(engine.putSchedule('a:b', everyMinute()), (err) => isFermataError(err, errorCodes.scheduleInvalid) && err.details.field === 'name');
  await assert.rejects(engine.putSchedule('ok', everyMinute({ everyMs: 999 })), (err) => isFermataError(err, errorCodes.scheduleInvalid) && err.details.field === 'every_ms');
  assert.equal(engine.log.lastSeq, seq);
  await engine.close();
});

test('schedules page by name after a cursor, which need not be a name still there', async () => {
  const fs = new SimFileSystem({ seed: 43 });
  const engine = await opened(fs, new ManualClock(t0));
  for (const name of ['c', 'a', 'e', 'b', 'd']) await engine.putSchedule(name, everyMinute({ everyMs: hour }));
  const page = (limit: number, cursor?: string): [string[], string | null] => {
    const listed = engine.listSchedules(limit, cursor);
    return [listed.schedules.map((view) => view.name), listed.nextCursor];
  };
  assert.deepEqual(page(2), [['a', 'b'], 'b']);
  assert.deepEqual(page(2, 'b'), [['c', 'd'], 'd']);
  assert.equal(await engine.deleteSchedule('c'), true);
  assert.deepEqual(page(2, 'b'), [['d', 'e'], null]);
  assert.deepEqual(page(2, 'bb'), [['d', 'e'], null], 'after a cursor that names no schedule');
  await engine.putSchedule('ca', everyMinute({ everyMs: hour }));
  assert.deepEqual(page(10, 'b'), [['ca', 'd', 'e'], null], 'an add is listed');
  assert.deepEqual(page(10, 'e'), [[], null]);
  await engine.close();
});
