// GET and DELETE /v1/queues/{name} as a client meets them over HTTP (the real `fermata serve`,
// port 0): one queue's config, 404 for an unknown one, a delete refused while timers wait (409
// QUEUE_NOT_EMPTY with the count) and for `default` (409 QUEUE_PROTECTED), and a delete that
// holds after a kill -9 and a restart. Every wait is bounded; children are killed in `after`.
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { type Service, startService } from '../helpers/service.ts';
import { withTimeout } from '../helpers/timeout.ts';

const target = 'https://a.example/hook';
const children = new Set<ChildProcess>();
const dataDir = mkdtempSync(join(tmpdir(), 'fermata-queues-'));

after(() => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  rmSync(dataDir, { recursive: true, force: true });
});

async function call(service: Service, method: string, path: string, body?: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${service.url}${path}`, {
    method,
    ...(body === undefined ? {} : { headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) }),
    signal: AbortSignal.timeout(10_000),
  });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

const errorOf = (answer: { body: Record<string, unknown> }): Record<string, unknown> => answer.body.error as Record<string, unknown>;

test('GET and DELETE /v1/queues/{name}: 404 unknown, 409 while timers wait and for default, durable across a restart', async () => {
  let service = await startService(dataDir, (child) => children.add(child));
  assert.equal((await call(service, 'PUT', '/v1/queues/billing', { max_attempts: 5 })).status, 200);
  const got = await call(service, 'GET', '/v1/queues/billing');
  assert.equal(got.status, 200);
  assert.deepEqual([got.body.name, got.body.max_attempts, got.body.timeout_ms], ['billing', 5, 30_000]);
  assert.equal((await call(service, 'GET', '/v1/queues/default')).body.max_attempts, 20, 'default always answers');

  const unknown = await call(service, 'GET', '/v1/queues/nowhere');
  assert.equal(unknown.status, 404);
  assert.equal(errorOf(unknown).code, 'NOT_FOUND');
  assert.equal((await call(service, 'DELETE', '/v1/queues/nowhere')).status, 404);

  const added = await call(service, 'POST', '/v1/timers', { delay_ms: 3_600_000, target, queue: 'billing' });
  await call(service, 'POST', '/v1/timers', { delay_ms: 3_600_000, target, queue: 'billing' });
  const busy = await call(service, 'DELETE', '/v1/queues/billing');
  assert.equal(busy.status, 409);
  assert.deepEqual([errorOf(busy).code, errorOf(busy).pending], ['QUEUE_NOT_EMPTY', 2]);
  const protectedDefault = await call(service, 'DELETE', '/v1/queues/default');
  assert.equal(protectedDefault.status, 409);
  assert.equal(errorOf(protectedDefault).code, 'QUEUE_PROTECTED');

  // A cancelled timer no longer waits: the count drops; a queue whose timers are all finished is deleted.
  assert.equal((await call(service, 'DELETE', `/v1/timers/${String(added.body.id)}`)).status, 200);
  assert.equal(errorOf(await call(service, 'DELETE', '/v1/queues/billing')).pending, 1);
  assert.ok(((await call(service, 'GET', '/v1/queues')).body.queues as Array<{ name: string }>).some((queue) => queue.name === 'billing'), 'a refused delete leaves the queue listed');
  const timers = await call(service, 'POST', '/v1/timers', { delay_ms: 3_600_000, target, queue: 'scratch' });
  assert.equal((await call(service, 'DELETE', `/v1/timers/${String(timers.body.id)}`)).status, 200);
  assert.deepEqual(await call(service, 'DELETE', '/v1/queues/scratch'), { status: 200, body: { name: 'scratch', deleted: true } });
  assert.equal((await call(service, 'GET', '/v1/queues/scratch')).status, 404);
  assert.ok(!((await call(service, 'GET', '/v1/queues')).body.queues as Array<{ name: string }>).some((queue) => queue.name === 'scratch'), 'a deleted queue is not listed');

  // A configured queue that never held a timer: deleted, then gone after a kill -9 and a restart.
  assert.equal((await call(service, 'PUT', '/v1/queues/emails', { max_attempts: 3 })).status, 200);
  assert.equal((await call(service, 'DELETE', '/v1/queues/emails')).status, 200);
  service.child.kill('SIGKILL');
  await withTimeout(service.exited, 10_000, 'fermata to die');

  service = await startService(dataDir, (child) => children.add(child));
  assert.equal((await call(service, 'GET', '/v1/queues/emails')).status, 404, 'the delete was durable');
  assert.equal((await call(service, 'GET', '/v1/queues/scratch')).status, 404);
  assert.equal((await call(service, 'GET', '/v1/queues/billing')).body.max_attempts, 5, 'a refused delete changed nothing');
  await call(service, 'POST', '/v1/timers', { delay_ms: 3_600_000, target, queue: 'emails' });
  assert.equal((await call(service, 'GET', '/v1/queues/emails')).body.max_attempts, 20, 'named again, it runs with the defaults: its config is gone');
});
