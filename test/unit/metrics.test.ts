import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pino } from 'pino';
import { batchFromSpecs } from '../../engine/batch/timer-batch.ts';
import { Engine } from '../../engine/engine.ts';
import { createHttpServer } from '../../ingest/http/server.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';

test('GET /metrics: Prometheus text read from the engine at scrape time', async () => {
  const fs = new SimFileSystem({ seed: 71 });
  const engine = await Engine.open({ dataDir: '/data', fs });
  const app = createHttpServer({ logger: pino({ level: 'silent' }), engine });
  try {
    const admitted = await engine.admit(batchFromSpecs([0, 1].map((i) => ({ fireAtMs: Date.now() + 60_000 + i, target: 'https://a.example/' }))));
    await engine.cancel(admitted.idOf(0));
    const response = await app.inject({ method: 'GET', url: '/metrics' });
    assert.equal(response.statusCode, 200);
    assert.match(String(response.headers['content-type']), /^text\/plain; version=0\.0\.4/);
    const lines = response.body.split('\n');
    for (const line of ['fermata_timers{state="pending"} 1', 'fermata_timers{state="cancelled"} 1', 'fermata_wal_appends_total 2', 'fermata_wal_last_sequence 2', 'fermata_wal_poisoned 0']) {
      assert.ok(lines.includes(line), `missing ${line}`);
    }
    assert.ok(lines.includes('# TYPE fermata_wal_fdatasyncs_total counter'));
  } finally {
    await app.close();
    await engine.close();
  }
});
