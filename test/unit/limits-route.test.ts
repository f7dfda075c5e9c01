// GET /v1/limits answers the limits the routes enforce: a body one byte over
// `json_body_bytes_max` is 413, a batch of `batch_rows_max` + 1 rows is refused and one of
// `batch_rows_max` accepted, so a client that splits at these numbers is never refused for size.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { pino } from 'pino';
import { Engine } from '../../engine/engine.ts';
import { createHttpServer } from '../../ingest/http/server.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';

test('GET /v1/limits names the limits the routes enforce', async () => {
  const engine = await Engine.open({ dataDir: '/data', fs: new SimFileSystem({ seed: 45 }) });
  const app = createHttpServer({ logger: pino({ level: 'silent' }), engine });
  try {
    await app.ready();
    const answer = await app.inject({ method: 'GET', url: '/v1/limits' });
    assert.equal(answer.statusCode, 200);
    const limits = answer.json<Record<string, number>>();
    for (const [name, value] of Object.entries(limits)) assert.ok(Number.isSafeInteger(value) && value > 0, name);

    const post = (type: string, body: string) => app.inject({ method: 'POST', url: '/v1/timers', headers: { 'content-type': type }, payload: body });
    const timer = JSON.stringify({ delay_ms: 60_000, target: 'https://a.example/hook' });
    const jsonLimit = limits.json_body_bytes_max ?? 0;
    const padded = (bytes: number): string => `${timer.slice(0, -1)}${' '.repeat(bytes - timer.length)}}`;
    assert.equal((await post('application/json', padded(jsonLimit + 1))).statusCode, 413);
    assert.equal((await post('application/json', padded(jsonLimit))).statusCode, 201);

    const rows = limits.batch_rows_max ?? 0;
    const line = `${timer}\n`;
    const over = await post('application/x-ndjson', line.repeat(rows + 1));
    assert.equal(over.statusCode, 400);
    assert.match(over.json().error.message, new RegExp(String(rows)));
    const at = await post('application/x-ndjson', line.repeat(rows));
    assert.deepEqual([at.statusCode, at.json().accepted], [201, rows]);
  } finally {
    await app.close();
    await engine.close();
  }
});
