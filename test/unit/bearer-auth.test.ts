import assert from 'node:assert/strict';
import { test } from 'node:test';
import { bearerCheck, isLoopbackHost, listenRefusal } from '../../ingest/http/listen/bearer-auth.ts';

test('loopback hosts are 127.0.0.0/8, ::1 (also IPv4-mapped) and localhost; nothing else', () => {
  for (const host of ['127.0.0.1', '127.255.0.9', '::1', '::ffff:127.0.0.1', 'localhost']) assert.ok(isLoopbackHost(host), host);
  for (const host of ['0.0.0.0', '::', '10.0.0.1', '192.168.1.2', '128.0.0.1', 'example.com', '::ffff:10.0.0.1']) assert.ok(!isLoopbackHost(host), host);
  assert.match(listenRefusal('0.0.0.0', [], false) ?? '', /needs bearer tokens/);
  assert.equal(listenRefusal('0.0.0.0', [], true), undefined, '--insecure allows it');
  assert.equal(listenRefusal('0.0.0.0', ['a-long-enough-token'], false), undefined);
  assert.equal(listenRefusal('127.0.0.1', [], false), undefined);
});

test('the bearer check accepts only a configured token, and never guards the health checks', () => {
  const check = bearerCheck(['first-token-0000000', 'second-token-000000']);
  assert.ok(check.allows('/v1/stats', 'Bearer second-token-000000'));
  assert.ok(check.allows('/v1/stats', 'Bearer first-token-0000000'));
  assert.ok(!check.allows('/v1/stats', 'Bearer second-token-00000'));
  assert.ok(!check.allows('/v1/stats', 'bearer second-token-000000'));
  assert.ok(!check.allows('/v1/stats', undefined));
  assert.ok(check.allows('/healthz', undefined));
  assert.ok(check.allows('/readyz', undefined));
});
