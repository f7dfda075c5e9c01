// What a timer carries, as GET /v1/timers/{id} and list pages show it (engine/timer-content.ts,
// ingest/http/timer-views.ts): its headers ({} when none), its payload as text when the bytes are
// UTF-8 and as base64 when they are not (the other null), for resident and spilled timers alike;
// and a view's content sent back to an add makes the same timer content.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import pino from 'pino';
import { batchFromSpecs } from '../../engine/batch/timer-batch.ts';
import { Engine } from '../../engine/engine.ts';
import { createHttpServer } from '../../ingest/http/server.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';

const dataDir = '/data';
const hour = 3600_000;
const t0 = 1_796_220_000_000 - (1_796_220_000_000 % hour);
const target = 'https://a.example/hook';
const binary = Uint8Array.of(0xff, 0x00, 0xfe, 0x41);

test('headers and payload (text or base64) in the view of resident and spilled timers, over GET, list pages and back into an add', async () => {
  const engine = await Engine.open({ dataDir, fs: new SimFileSystem({ seed: 7 }), clock: { now: () => t0 } });
  const app = createHttpServer({ logger: pino({ level: 'silent' }), engine });
  try {
    const admitted = await engine.admit(
      batchFromSpecs([
        { fireAtMs: t0 + 1000, target, payload: 'héllo', headers: { 'x-trace': 't1', 'x-b': 'two' } },
        { fireAtMs: t0 + 2000, target, payload: binary },
        { fireAtMs: t0 + 10 * hour, target, payload: binary, headers: { 'x-far': 'yes' } },
        { fireAtMs: t0 + 11 * hour, target, payload: '' },
      ]),
    );
    await engine.checkpoint(t0 + 3 * hour);
    assert.equal(engine.stats().spill.spilled, 2, 'the far two are on disk');
    const expected = [
      { headers: { 'x-trace': 't1', 'x-b': 'two' }, payload: 'héllo', payload_base64: null },
      { headers: {}, payload: null, payload_base64: '/wD+QQ==' },
      { headers: { 'x-far': 'yes' }, payload: null, payload_base64: '/wD+QQ==' },
      { headers: {}, payload: '', payload_base64: null },
    ];
    const contentOf = (view: Record<string, unknown>): object => ({ headers: view.headers, payload: view.payload, payload_base64: view.payload_base64 });
    for (const [row, content] of expected.entries()) {
      const answer = await app.inject({ method: 'GET', url: `/v1/timers/${admitted.idOf(row)}` });
      assert.equal(answer.statusCode, 200, answer.body);
      assert.deepEqual(contentOf(answer.json()), content, `row ${row}`);
    }
    const page = await app.inject({ method: 'GET', url: '/v1/timers?limit=10' });
    assert.equal(page.statusCode, 200, page.body);
    assert.deepEqual((page.json() as { timers: Record<string, unknown>[] }).timers.map(contentOf), expected, 'a list page shows the same, resident and spilled');

    // The view's fields as they are, back into an add: the same headers and bytes.
    for (const [row, content] of expected.entries()) {
      const again = await app.inject({ method: 'POST', url: '/v1/timers', payload: { delay_ms: 60_000, target, ...content } });
      assert.equal(again.statusCode, 201, again.body);
      const view = await app.inject({ method: 'GET', url: `/v1/timers/${(again.json() as { id: string }).id}` });
      assert.deepEqual(contentOf(view.json()), content, `row ${row} sent back`);
    }
  } finally {
    await app.close();
    await engine.close();
  }
});
