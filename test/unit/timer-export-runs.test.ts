// The export over spilled buckets held by several runs at once (engine/timer-query.ts merges the
// batches of one bucket start into order; engine/timer-export.ts copies a batch's consecutive
// rows' bytes in one go): every timer once, in the list's order, each with its own key, headers
// and payload, with cancelled spilled timers and resident ones between them, for batch sizes
// that cut those runs of rows anywhere; and over more resident timers than one slice of the
// resident pass (timer-query.ts residentHitsSliced), which leaves the loop to others between slices.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { tableFromIPC } from 'apache-arrow';
import { batchFromSpecs, type TimerSpec } from '../../engine/batch/timer-batch.ts';
import { Engine, type QueryPosition, decodeCursor, queryStart } from '../../engine/engine.ts';
import type { TimerView } from '../../engine/types.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';

const hour = 3600_000;
const t0 = 1_796_220_000_000 - (1_796_220_000_000 % hour);
const target = 'https://a.example/hook';

async function everyListed(engine: Engine): Promise<TimerView[]> {
  const views: TimerView[] = [];
  let after: QueryPosition | undefined = queryStart;
  while (after !== undefined) {
    const page = await engine.listTimers({}, 1000, after);
    views.push(...page.timers);
    after = page.nextCursor === null ? undefined : decodeCursor(page.nextCursor);
  }
  return views;
}

test('an export over buckets several runs share is every timer once, in order, each with its own bytes', async () => {
  const engine = await Engine.open({ dataDir: '/data', fs: new SimFileSystem({ seed: 4101 }), clock: { now: () => t0 } });
  // Three admits spilled by three checkpoints: runs 1–3 each hold a batch of the buckets at
  // hours 10–12, their rows interleaved in time; every tenth timer stays resident.
  for (let run = 0; run < 3; run++) {
    const specs: TimerSpec[] = Array.from({ length: 400 }, (_, i) => {
      const n = run * 400 + i;
      const resident = n % 10 === 0;
      return {
        fireAtMs: resident ? t0 + hour + n * 1000 : t0 + 10 * hour + ((n * 7919) % (3 * hour)),
        target,
        payload: n % 6 === 0 ? '' : `payload ${n} ${'x'.repeat(n % 90)}`,
        ...(n % 3 === 0 ? { key: `key-${n}` } : {}),
        ...(n % 5 === 0 ? { headers: { 'x-n': String(n) } } : {}),
      };
    });
    await engine.admit(batchFromSpecs(specs));
    await engine.checkpoint(t0 + 3 * hour);
  }
  assert.equal(engine.stats().spill.runs, 3);
  const before = await everyListed(engine);
  for (const view of before.filter((_, i) => i % 37 === 5)) assert.equal(await engine.cancel(view.id), 'cancelled');
  const listed = await everyListed(engine);
  assert.equal(listed.length, 1200);

  for (const batchRows of [1, 7, 64, 4096]) {
    const chunks: Uint8Array[] = [];
    for await (const chunk of engine.exportTimers({}, batchRows)) chunks.push(chunk);
    const table = tableFromIPC(Buffer.concat(chunks));
    assert.deepEqual(table.getChild('id')?.toArray(), listed.map((view) => view.id), `batches of ${batchRows}: the list's order`);
    const rows = table.toArray().map((row) => row.toJSON() as Record<string, unknown>);
    for (const [i, view] of listed.entries()) {
      const row = rows[i] as Record<string, unknown>;
      assert.equal(row.state, view.state, `batches of ${batchRows}, row ${i}: state`);
      assert.equal(row.key, view.key, `batches of ${batchRows}, row ${i}: key`);
      assert.deepEqual(row.headers === null ? {} : JSON.parse(row.headers as string), view.headers, `batches of ${batchRows}, row ${i}: headers`);
      assert.deepEqual(Buffer.from(row.payload as Uint8Array), Buffer.from(view.payload), `batches of ${batchRows}, row ${i}: payload`);
    }
  }
  await engine.close();
});

test('an export over more resident timers than one slice of its resident pass is every one once, in order', async () => {
  const engine = await Engine.open({ dataDir: '/data', fs: new SimFileSystem({ seed: 4102 }), clock: { now: () => t0 } });
  // 150,000 resident timers: the export's pass over their slots takes three slices a window.
  const count = 150_000;
  for (let first = 0; first < count; first += 50_000) {
    await engine.admit(batchFromSpecs(Array.from({ length: 50_000 }, (_, i) => ({ fireAtMs: t0 + hour + (((first + i) * 7919) % (20 * hour)), target, payload: `p${first + i}` }))));
  }
  const listed = await everyListed(engine);
  assert.equal(listed.length, count);
  const chunks: Uint8Array[] = [];
  for await (const chunk of engine.exportTimers({}, 4096)) chunks.push(chunk);
  const table = tableFromIPC(Buffer.concat(chunks));
  assert.deepEqual(table.getChild('id')?.toArray(), listed.map((view) => view.id));
  assert.deepEqual(
    table.getChild('payload')?.toArray().map((payload: Uint8Array) => Buffer.from(payload).toString()),
    listed.map((view) => Buffer.from(view.payload).toString()),
  );

  // The pass leaves the loop to others between its slices: while the export makes its first
  // batch (a pass over three slices, then the batch), a callback that reschedules itself every
  // turn runs at least three times; in one go it would run once, before the batch.
  const exporting = engine.exportTimers({}, 4096);
  await exporting.next();
  let turns = 0;
  let counting = true;
  const tick = (): void => {
    if (!counting) return;
    turns++;
    setImmediate(tick);
  };
  setImmediate(tick);
  await exporting.next();
  counting = false;
  assert.ok(turns >= 3, `${turns} turns of the loop while the first batch was made`);
  await exporting.return(undefined);
  await engine.close();
});
