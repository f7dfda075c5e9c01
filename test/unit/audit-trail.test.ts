// The audit trail over the HTTP adapter (ingest/http/audit-hook.ts, ingest/auth/audit.ts): each
// administrative action answered 2xx is recorded once, with the caller's token name (never the
// token), what it named and how many timers it touched; a refused one is not; /metrics counts
// them by action. A server on a manual clock, so a clock move is one of them.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import pino from 'pino';
import { ManualClock } from '../../engine/clock.ts';
import { Engine } from '../../engine/engine.ts';
import { outcomeKind } from '../../engine/records.ts';
import { fullGrant } from '../../ingest/auth/access.ts';
import { Access } from '../../ingest/auth/access.ts';
import { AuditTrail } from '../../ingest/auth/audit.ts';
import { createHttpServer } from '../../ingest/http/server.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';
import { outcomesFor } from '../helpers/outcomes.ts';
import { t0 } from '../helpers/sim-engine.ts';

const admin = 'audit-admin-token-000000';
const writer = 'audit-writer-token-00000';

test('administrative actions are recorded once each with who, what and how many; refusals are not', async () => {
  const engine = await Engine.open({ dataDir: '/data', fs: new SimFileSystem({ seed: 5 }), clock: new ManualClock(t0) });
  const lines: Array<Record<string, unknown>> = [];
  const audit = new AuditTrail({ info: (fields, message) => lines.push({ ...fields, msg: message }) });
  const access = new Access([{ ...fullGrant(admin, 0), name: 'ops' }, { name: 'producer', token: writer, scopes: ['write'] }]);
  const app = createHttpServer({ logger: pino({ level: 'silent' }), engine, access, audit });
  const call = async (method: 'GET' | 'POST' | 'PUT' | 'DELETE', url: string, token: string, body?: unknown): Promise<number> =>
    (await app.inject({ method, url, headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) }, ...(body === undefined ? {} : { payload: JSON.stringify(body) }) })).statusCode;
  try {
    for (let n = 0; n < 4; n++) assert.equal(await call('POST', '/v1/timers', writer, { fire_at: t0 + 3_600_000, target: 'https://a.example/hook', queue: n < 3 ? 'billing' : 'emails', key: `k${n}` }), 201);
    assert.equal(await call('PUT', '/v1/queues/billing', admin, { max_attempts: 3 }), 200);
    assert.equal(await call('POST', '/v1/queues/billing/pause', admin), 200);
    assert.equal(await call('POST', '/v1/queues/billing/resume', admin), 200);
    assert.equal(await call('POST', '/v1/timers/cancel', admin, { queue: 'billing', key_prefix: 'k' }), 200);
    assert.equal(await call('DELETE', '/v1/queues/emails/timers', admin), 200);
    assert.equal(await call('POST', '/v1/clock', admin, { advance_ms: 60_000 }), 200);
    assert.equal(await call('POST', '/v1/queues/billing/pause', writer), 403, 'refused: no action');
    assert.equal(await call('DELETE', '/v1/queues/nowhere/timers', admin), 404, 'failed: no action');
    // A dead timer, redriven.
    assert.equal(await call('POST', '/v1/timers', writer, { fire_at: t0 + 60_000, target: 'https://a.example/hook', key: 'dies' }), 201);
    const slice = engine.takeDue(t0 + 60_000, 10);
    await engine.settle(outcomesFor(slice, outcomeKind.dead, 0, 410));
    const [dead] = engine.listDead(10);
    assert.ok(dead !== undefined);
    assert.equal(await call('POST', `/v1/dead/${dead.id}/retry`, admin), 200);

    const actions = lines.map((line) => line.audit);
    assert.deepEqual(actions, ['queue_put', 'pause', 'resume', 'bulk_cancel', 'purge', 'clock_move', 'redrive']);
    for (const line of lines) {
      assert.equal(line.who, 'ops');
      assert.equal(line.msg, 'audit');
      assert.ok(!JSON.stringify(line).includes(admin), 'never the token');
    }
    assert.deepEqual(lines[3], { audit: 'bulk_cancel', who: 'ops', queue: 'billing', key_prefix: 'k', count: 3, msg: 'audit' });
    assert.deepEqual(lines[4], { audit: 'purge', who: 'ops', name: 'emails', count: 1, msg: 'audit' });
    assert.deepEqual(lines[5], { audit: 'clock_move', who: 'ops', advance_ms: 60_000, msg: 'audit' });
    assert.deepEqual(lines[6], { audit: 'redrive', who: 'ops', id: dead.id, msg: 'audit' });
    const metrics = (await app.inject({ method: 'GET', url: '/metrics', headers: { authorization: `Bearer ${admin}` } })).body;
    for (const action of ['queue_put', 'pause', 'resume', 'bulk_cancel', 'purge', 'clock_move', 'redrive']) assert.match(metrics, new RegExp(`^fermata_audit_actions_total\\{action="${action}"\\} 1$`, 'm'));
  } finally {
    await app.close();
    await engine.close();
  }
});
