// The materializer's wakes (engine/schedules/materializer.ts, scheduleLimits.wakeCoalesceMs):
// schedules falling due within a few ms of one another have their next occurrences created
// together, a few ADD records for many schedules, not one each (a million hourly schedules fall
// due 280 times a second). On the real clock and disk: 200 hourly schedules whose first
// occurrences fall due over 100 ms.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { Engine } from '../../engine/engine.ts';

const scratch = mkdtempSync(join(tmpdir(), 'fermata-schedule-wakes-'));
after(() => rmSync(scratch, { recursive: true, force: true }));

const hour = 3_600_000;
const timer = { target: 'http://127.0.0.1:9/hook', queue: 'default', payload: new TextEncoder().encode('tick'), headers: '' };

async function until(what: string, done: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!done()) {
    assert.ok(Date.now() < deadline, `timed out waiting for ${what}`);
    await sleep(5);
  }
}

test('schedules falling due within a few ms of one another get their next occurrences in one ADD record', async () => {
  const count = 200;
  const spanMs = 100;
  const engine = await Engine.open({ dataDir: join(scratch, 'data') });
  try {
    const firstMs = Date.now() + 1000;
    await Promise.all(Array.from({ length: count }, (_, i) => engine.putSchedule(`s${i}`, { everyMs: hour, startAtMs: firstMs + Math.floor((i * spanMs) / count), ...timer })));
    await until('every first occurrence', () => engine.stats().schedules.occurrencesCreated >= count);
    assert.ok(Date.now() < firstMs, 'the PUTs were done before the first occurrence fell due');
    const seqBefore = engine.log.lastSeq;
    await until('every next occurrence', () => engine.stats().schedules.occurrencesCreated >= 2 * count);
    const records = engine.log.lastSeq - seqBefore;
    // One ADD a wake, a wake at most every 20 ms over the 100 ms: 7 at most (one each: about 20 here).
    assert.ok(records <= 10, `${records} records for the next occurrences of ${count} schedules due over ${spanMs} ms`);
  } finally {
    await engine.close();
  }
});
