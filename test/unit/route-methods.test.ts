// RouteMethods (ingest/http/route-methods.ts): the methods served at a path, for 405's Allow.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { RouteMethods } from '../../ingest/http/route-methods.ts';

test('static and :param segments (an empty one too) match like fastify\'s routes; HEAD goes with GET; a miss is empty', () => {
  const routes = new RouteMethods();
  routes.add('/v1/timers', 'POST');
  routes.add('/v1/timers/stream', 'POST');
  routes.add('/v1/timers/:id', ['GET', 'HEAD']);
  routes.add('/v1/timers/:id', 'delete');
  routes.add('/v1/dead/:id/retry', 'POST');
  routes.add('/healthz', 'GET');
  assert.deepEqual(routes.methodsAt('/v1/timers'), ['POST']);
  assert.deepEqual(routes.methodsAt('/v1/timers/abc'), ['DELETE', 'GET', 'HEAD']);
  // A static route's path is its own: a parametric route that matches it too adds nothing.
  assert.deepEqual(routes.methodsAt('/v1/timers/stream'), ['POST']);
  assert.equal(routes.isStaticPath('/v1/timers/stream'), true);
  assert.equal(routes.isStaticPath('/v1/timers/abc'), false);
  assert.equal(routes.isStaticPath('/v1/timers/:id'), false);
  assert.deepEqual(routes.methodsAt('/v1/dead/x/retry'), ['POST']);
  assert.deepEqual(routes.methodsAt('/healthz'), ['GET', 'HEAD']);
  // fastify's router gives a parameter an empty segment too (GET /v1/timers/ reaches /v1/timers/:id).
  assert.deepEqual(routes.methodsAt('/v1/timers/'), ['DELETE', 'GET', 'HEAD']);
  assert.deepEqual(routes.methodsAt('/v1/dead//retry'), ['POST']);
  for (const miss of ['/', '/v1', '/v1/timers/a/b', '/healthz/', '/HEALTHZ']) assert.deepEqual(routes.methodsAt(miss), [], miss);
});
