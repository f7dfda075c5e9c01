// Scoped tokens on a cluster node's front (ingest/http/cluster/front.ts): a queue-limited token's
// adds are checked row by row there as on one node (JSON, NDJSON, Arrow), a scope it lacks is
// 403 naming it, and a single timer's routes refuse it (a node does not look the timer's queue
// up across partitions). One in-process node owning every partition, asked through inject.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import pino from 'pino';
import { batchFromSpecs } from '../../engine/batch/timer-batch.ts';
import { Access } from '../../ingest/auth/access.ts';
import { createHttpServer, type HttpServer } from '../../ingest/http/server.ts';
import { batchToArrow } from '../helpers/arrow.ts';
import { FixtureDirectory } from '../helpers/partition-fixture.ts';

const partitions = 2;
const limited = 'cluster-limited-token-00';
const later = Date.now() + 3_600_000;
let directory: FixtureDirectory;
let app: HttpServer;

before(async () => {
  directory = new FixtureDirectory('a', partitions);
  for (let partition = 0; partition < partitions; partition++) await directory.take(partition, partition + 1);
  const engine = directory.engineOf(0);
  assert.ok(engine);
  const access = new Access([{ name: 'billing', token: limited, scopes: ['write'], queues: ['billing'] }]);
  app = createHttpServer({ logger: pino({ level: 'silent' }), access, cluster: { directory, secret: 'the-cluster-secret', forwardTimeoutMs: 2000, clock: engine.clock } });
  await app.ready();
});

after(async () => {
  await app.close();
  await directory.close();
});

async function add(body: string | Uint8Array, contentType: string): Promise<{ status: number; json: { error?: { code: string; queue?: string; scope?: string }; id?: string } }> {
  const answer = await app.inject({ method: 'POST', url: '/v1/timers', headers: { authorization: `Bearer ${limited}`, 'content-type': contentType }, payload: Buffer.from(body) });
  return { status: answer.statusCode, json: answer.json() };
}

test('a cluster node checks a queue-limited token\'s rows, scopes and single-timer routes', async () => {
  const row = (queue: string, key: string): Record<string, unknown> => ({ fire_at: later, target: 'https://example.com/hook', queue, key });
  const mine = await add(JSON.stringify(row('billing', 'b-1')), 'application/json');
  assert.equal(mine.status, 201, JSON.stringify(mine.json));
  const other = await add(JSON.stringify(row('default', 'd-1')), 'application/json');
  assert.deepEqual([other.status, other.json.error?.code, other.json.error?.queue], [403, 'FORBIDDEN', 'default']);
  const ndjson = await add([row('billing', 'b-2'), row('emails', 'e-1')].map((line) => JSON.stringify(line)).join('\n'), 'application/x-ndjson');
  assert.deepEqual([ndjson.status, ndjson.json.error?.queue], [403, 'emails']);
  const arrow = batchToArrow(batchFromSpecs([{ fireAtMs: later, target: 'https://example.com/hook', queue: 'emails' }]));
  const arrowed = await add(arrow, 'application/vnd.apache.arrow.stream');
  assert.deepEqual([arrowed.status, arrowed.json.error?.queue], [403, 'emails']);
  const read = await app.inject({ method: 'GET', url: `/v1/timers/${mine.json.id}`, headers: { authorization: `Bearer ${limited}` } });
  assert.deepEqual([read.statusCode, read.json().error.scope], [403, 'read']);
  const cancel = await app.inject({ method: 'DELETE', url: `/v1/timers/${mine.json.id}`, headers: { authorization: `Bearer ${limited}` } });
  assert.equal(cancel.statusCode, 403);
  assert.match(cancel.json().error.message, /a cluster node does not check on a single timer's routes/);
});
