// The TLS a cluster URL asks for, read as libpq reads it (cluster/connection.ts, clusterTlsOf):
// the modes, the CA file, the environment's PGSSL* variables, and the URL handed to the client
// without them (the client would send them to the server as settings). The connections
// themselves are test/integration/cluster-pg-tls.test.ts.
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { chooseClusterUrl, clusterTlsOf } from '../../cluster/connection.ts';

const dir = mkdtempSync(join(tmpdir(), 'fermata-tls-url-'));
after(() => rmSync(dir, { recursive: true, force: true }));
const ca = join(dir, 'ca.crt');
writeFileSync(ca, 'not parsed here');
const base = 'postgres://fermata@db1:5432,db2:5432/fermata';

test('no sslmode is no TLS; allow is prefer; require checks nothing unless a CA is given, then it is verify-ca', () => {
  assert.equal(clusterTlsOf(base, {}).mode, 'disable');
  assert.equal(clusterTlsOf(`${base}?sslmode=allow`, {}).mode, 'prefer');
  const required = clusterTlsOf(`${base}?sslmode=require`, {});
  assert.deepEqual([required.mode, required.options.rejectUnauthorized, required.options.ca], ['require', false, undefined]);
  const withCa = clusterTlsOf(`${base}?sslmode=require&sslrootcert=${ca}`, {});
  assert.deepEqual([withCa.mode, withCa.options.rejectUnauthorized, String(withCa.options.ca)], ['verify-ca', true, 'not parsed here']);
});

test('the TLS parameters leave the URL the client gets; the others stay', () => {
  const tls = clusterTlsOf(`${base}?sslmode=verify-full&target_session_attrs=read-write&sslrootcert=${ca}`, {});
  assert.equal(tls.url, `${base}?target_session_attrs=read-write`);
  assert.equal(clusterTlsOf(`${base}?sslmode=disable`, {}).url, base);
});

test('the environment gives what the URL does not (PGSSLMODE, PGSSLROOTCERT); the URL wins', () => {
  assert.equal(clusterTlsOf(base, { PGSSLMODE: 'verify-full', PGSSLROOTCERT: ca }).mode, 'verify-full');
  assert.equal(clusterTlsOf(`${base}?sslmode=disable`, { PGSSLMODE: 'verify-full' }).mode, 'disable');
  assert.equal(clusterTlsOf(base, { PGSSLROOTCERT: 'system', PGSSLMODE: 'verify-full' }).options.ca, undefined, 'system: Node\'s own CAs');
});

test('an unknown mode, an unreadable CA or half a client certificate is refused before anything connects', () => {
  const refused = (url: string, env: NodeJS.ProcessEnv = {}): string => {
    const choice = chooseClusterUrl(undefined, { ...env, FERMATA_CLUSTER_URL: url });
    assert.equal(choice.kind, 'refused', url);
    return choice.kind === 'refused' ? choice.message : '';
  };
  assert.match(refused(`${base}?sslmode=verify`), /sslmode "verify" is not one of disable, allow, prefer, require, verify-ca, verify-full/);
  assert.match(refused(`${base}?sslmode=verify-ca&sslrootcert=${join(dir, 'missing.crt')}`), /sslrootcert ".*missing\.crt" cannot be read/);
  assert.match(refused(`${base}?sslmode=require&sslcert=${ca}`), /needs both sslcert and sslkey/);
  assert.match(refused(`${base}?sslmode=verify-full`, { HOME: dir }), /no sslrootcert is given, and the default ".*root\.crt" cannot be read/);
});
