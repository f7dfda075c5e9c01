// A pull queue's timer that dies (its last lease nacked, or expired) is logged once at warn, as
// a pushed timer's death is: the real engine on a temp data dir and the dispatcher (with its
// piscina worker), the pull queue leased and nacked as a Flight DoGet and DoAction would; the
// lines are read from the dispatcher's own logger.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import pino from 'pino';
import { batchFromSpecs } from '../../engine/batch/timer-batch.ts';
import { Engine, systemClock } from '../../engine/engine.ts';
import { Dispatcher } from '../../dispatch/dispatcher.ts';

test('a pull queue timer that dies is logged once at warn, naming its id, its reason and its target origin', async () => {
  const dataDir = mkdtempSync(join(tmpdir(), 'fermata-pull-deaths-'));
  const lines: Array<Record<string, unknown>> = [];
  const logger = pino({ level: 'info' }, { write: (line: string) => void lines.push(JSON.parse(line) as Record<string, unknown>) });
  const engine = await Engine.open({ dataDir });
  const dispatcher = new Dispatcher({ engine, clock: systemClock, logger, threads: 1 });
  try {
    await engine.setQueue('pulled', { delivery: 'pull', max_attempts: 1 });
    const admitted = await engine.admit(batchFromSpecs([0, 1].map((i) => ({ fireAtMs: Date.now() - 10 + i, target: `https://puller.example/t/${i}?token=secret`, queue: 'pulled' }))));
    const ids = [admitted.idOf(0), admitted.idOf(1)];
    dispatcher.start();
    const batch = await dispatcher.pull.lease('pulled', undefined, 5_000);
    assert.equal(batch.rows, 2);
    const settled = await dispatcher.pull.settle(batch.lease as string, 'nack');
    assert.deepEqual([settled.dead, engine.get(ids[0] as string)?.state], [2, 'dead']);

    const deaths = lines.filter((line) => line.msg === 'timer dead: no more delivery attempts');
    assert.deepEqual(
      deaths.map((line) => [line.level, line.id, line.reason, line.attempts, line.target]),
      ids.map((id) => [40, id, 'attempts_exhausted', 1, 'https://puller.example']),
    );
    assert.ok(!JSON.stringify(deaths).includes('secret'), 'the target path and query stay out of the log');
  } finally {
    await dispatcher.close();
    await engine.close();
    rmSync(dataDir, { recursive: true, force: true });
  }
});
