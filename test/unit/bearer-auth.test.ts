import assert from 'node:assert/strict';
import { test } from 'node:test';
import pino from 'pino';
import { Engine } from '../../engine/engine.ts';
import { errorCodes, FermataError } from '../../engine/errors.ts';
import { Access, fullGrant, TokenTable } from '../../ingest/auth/access.ts';
import { bearerCheck, isLoopbackHost, listenRefusal } from '../../ingest/http/listen/bearer-auth.ts';
import { accessOf } from '../../ingest/http/route-scopes.ts';
import { createHttpServer } from '../../ingest/http/server.ts';
import { SimFileSystem } from '../sim/sim-file-system.ts';

test('loopback hosts are 127.0.0.0/8, ::1 (also IPv4-mapped) and localhost; nothing else', () => {
  for (const host of ['127.0.0.1', '127.255.0.9', '::1', '::ffff:127.0.0.1', 'localhost']) assert.ok(isLoopbackHost(host), host);
  for (const host of ['0.0.0.0', '::', '10.0.0.1', '192.168.1.2', '128.0.0.1', 'example.com', '::ffff:10.0.0.1']) assert.ok(!isLoopbackHost(host), host);
  assert.match(listenRefusal('0.0.0.0', [], false) ?? '', /needs bearer tokens/);
  assert.equal(listenRefusal('0.0.0.0', [], true), undefined, '--insecure allows it');
  assert.equal(listenRefusal('0.0.0.0', ['a-long-enough-token'], false), undefined);
  assert.equal(listenRefusal('127.0.0.1', [], false), undefined);
});

/** The FermataError `run` throws. */
function refusal(run: () => unknown): FermataError {
  try {
    run();
  } catch (err) {
    assert.ok(err instanceof FermataError, String(err));
    return err;
  }
  assert.fail('not refused');
}

test('the check: a known token with the scope passes; none is 401, a missing scope or queue 403 naming it', () => {
  const access = new Access([
    fullGrant('first-token-0000000', 0),
    { name: 'reader', token: 'reader-token-000000', scopes: ['read'] },
    { name: 'payments', token: 'payments-token-0000', scopes: ['read', 'write'], queues: ['payments'] },
  ]);
  assert.equal(access.authorize('Bearer first-token-0000000', 'admin').name, 'token-1');
  assert.equal(access.authorize('Bearer reader-token-000000', 'read').name, 'reader');
  for (const header of [undefined, 'Bearer reader-token-00000', 'bearer reader-token-000000']) assert.equal(refusal(() => access.authorize(header, 'read')).code, errorCodes.unauthorized);
  const noScope = refusal(() => access.authorize('Bearer reader-token-000000', 'write'));
  assert.equal(noScope.code, errorCodes.forbidden);
  assert.equal(noScope.details.scope, 'write');
  assert.match(noScope.message, /"write" scope; token "reader" has "read"/);
  assert.equal(access.authorize('Bearer payments-token-0000', 'write', 'payments').name, 'payments');
  const otherQueue = refusal(() => access.authorize('Bearer payments-token-0000', 'write', 'default'));
  assert.equal(otherQueue.details.queue, 'default');
  assert.match(otherQueue.message, /may not act on queue "default"/);
  // No tokens: everyone may do everything.
  assert.equal(new TokenTable([]).caller(undefined)?.name, 'anonymous');
  // A reload's new table: the old token is refused at once.
  access.replace([{ name: 'next', token: 'next-token-00000000', scopes: ['read'] }]);
  assert.equal(refusal(() => access.authorize('Bearer first-token-0000000', 'read')).code, errorCodes.unauthorized);
  assert.equal(access.authorize('Bearer next-token-00000000', 'read').name, 'next');
});

test('the HTTP/2 single-add path takes only tokens that may add to every queue', () => {
  const access = new Access([
    fullGrant('first-token-0000000', 0),
    { name: 'writer', token: 'writer-token-000000', scopes: ['write'] },
    { name: 'reader', token: 'reader-token-000000', scopes: ['read'] },
    { name: 'limited', token: 'limited-token-00000', scopes: ['write'], queues: ['a'] },
  ]);
  const check = bearerCheck(access);
  assert.ok(check.allows('/v1/timers', 'Bearer first-token-0000000'));
  assert.ok(check.allows('/v1/timers', 'Bearer writer-token-000000'));
  assert.ok(!check.allows('/v1/timers', 'Bearer reader-token-000000'));
  assert.ok(!check.allows('/v1/timers', 'Bearer limited-token-00000'));
  assert.ok(!check.allows('/v1/timers', undefined));
});

test('every route the server registers has a scope in route-scopes.ts, and one without is refused at registration', async () => {
  const engine = await Engine.open({ dataDir: '/data', fs: new SimFileSystem({ seed: 7 }) });
  const app = createHttpServer({ logger: pino({ level: 'silent' }), engine, reload: async () => ({ reloaded: true, changed: [] }) });
  const registered: string[] = [];
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) registered.push(`${method} ${route.url}`);
  });
  try {
    await app.ready();
    assert.ok(registered.length >= 30, `${registered.length} routes`);
    for (const route of registered) {
      const [method, url] = route.split(' ') as [string, string];
      assert.ok(accessOf(method, url) !== undefined, `${route} has a scope`);
    }
    assert.ok(registered.includes('POST /v1/admin/reload'));
  } finally {
    await app.close();
  }
  const unguarded = createHttpServer({ logger: pino({ level: 'silent' }), engine });
  assert.throws(() => unguarded.get('/v1/unguarded', async () => ({})), /GET \/v1\/unguarded has no scope/);
  await unguarded.close();
  await engine.close();
});
