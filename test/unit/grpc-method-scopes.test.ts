// Every fermata.v1.Timers method of the .proto has the scope it needs in call-auth.ts (a method
// without one would be refused as if it were admin), and the scopes are the HTTP routes' own.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { Metadata } from '@grpc/grpc-js';
import { errorCodes } from '../../engine/errors.ts';
import { Access, fullGrant } from '../../ingest/auth/access.ts';
import { callRefusal, methodScopes } from '../../ingest/grpc/call-auth.ts';

const proto = readFileSync(new URL('../../proto/fermata/v1/timers.proto', import.meta.url), 'utf8');
const methods = [...proto.matchAll(/^\s*rpc (\w+)\(/gm)].map((match) => match[1] as string);

const withToken = (token: string): Metadata => {
  const metadata = new Metadata();
  metadata.set('authorization', `Bearer ${token}`);
  return metadata;
};

test('every method of the .proto has a scope, and none is listed that the .proto lacks', () => {
  assert.equal(methods.length, 19);
  assert.deepEqual([...methods].sort(), Object.keys(methodScopes).sort());
});

test('a token needs the method\'s scope; a queue-limited token is refused; no tokens: every call goes on', () => {
  const access = new Access([fullGrant('all-of-it', 0), { name: 'reader', token: 'reader', scopes: ['read'] }, { name: 'billing', token: 'billing', scopes: ['read', 'write', 'admin'], queues: ['billing'] }]);
  assert.equal(callRefusal(access, withToken('all-of-it'), '/fermata.v1.Timers/PurgeQueue'), undefined);
  assert.equal(callRefusal(access, withToken('reader'), '/fermata.v1.Timers/GetTimer'), undefined);
  const denied = callRefusal(access, withToken('reader'), '/fermata.v1.Timers/AddTimer');
  assert.equal(denied?.code, errorCodes.forbidden);
  assert.match(denied?.message ?? '', /"write"/);
  assert.equal(callRefusal(access, withToken('billing'), '/fermata.v1.Timers/GetTimer')?.code, errorCodes.forbidden);
  assert.equal(callRefusal(access, new Metadata(), '/fermata.v1.Timers/GetTimer')?.code, errorCodes.unauthorized);
  assert.equal(callRefusal(new Access([]), new Metadata(), '/fermata.v1.Timers/PurgeQueue'), undefined);
});
