// `fermata serve --cluster` settings (cli/serve/cluster-settings.ts): where the URL comes from,
// what is refused (a password on the command line, a manual clock, unknown or mistyped config
// keys, lease timings that break the deadline's reasoning), and the lease timings derived.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { defaultLeaseSettings } from '../../cluster/leases.ts';
import { clusterSettings, readClusterConfig } from '../../cli/serve/cluster-settings.ts';
import { UsageError } from '../../cli/serve/errors.ts';

const noEnv: NodeJS.ProcessEnv = {};
const secretEnv: NodeJS.ProcessEnv = { FERMATA_CLUSTER_SECRET: 'the-cluster-secret' };

test('no --cluster, no FERMATA_CLUSTER_URL and no "cluster" in the config: a single node', () => {
  assert.equal(clusterSettings(undefined, noEnv, undefined, undefined, 'real'), undefined);
});

test('the URL from the flag, else the environment, else the config file; default lease timings', () => {
  assert.equal(clusterSettings('postgres://fermata@db/f', secretEnv, undefined, undefined, 'real')?.url, 'postgres://fermata@db/f');
  assert.equal(clusterSettings(undefined, { ...secretEnv, FERMATA_CLUSTER_URL: 'postgres://env@db/f' }, { url: 'postgres://config@db/f' }, 'c.json', 'real')?.url, 'postgres://env@db/f');
  const fromConfig = clusterSettings(undefined, noEnv, { url: 'postgres://config:secret@db/f', node_id: 'n1', advertise: '10.0.0.1:7070', secret: 'from-config' }, 'c.json', 'real');
  assert.deepEqual(fromConfig, { url: 'postgres://config:secret@db/f', nodeId: 'n1', advertise: '10.0.0.1:7070', lease: defaultLeaseSettings, secret: 'from-config' });
});

test('a --cluster URL with a password is refused, naming where the password goes', () => {
  assert.throws(() => clusterSettings('postgres://fermata:secret@db/f', noEnv, undefined, undefined, 'real'), (err: unknown) => err instanceof UsageError && /--cluster: .*password.*PGPASSWORD/.test(err.message));
});

test('cluster mode refuses to start without the cluster secret, naming where it goes; the environment wins over the config file', () => {
  assert.throws(
    () => clusterSettings('postgres://fermata@db/f', noEnv, undefined, undefined, 'real'),
    (err: unknown) => err instanceof UsageError && /cluster secret.*FERMATA_CLUSTER_SECRET.*"cluster": \{"secret"\}/.test(err.message),
  );
  assert.throws(() => clusterSettings('postgres://fermata@db/f', { FERMATA_CLUSTER_SECRET: '' }, undefined, undefined, 'real'), /cluster secret/);
  assert.equal(clusterSettings('postgres://fermata@db/f', secretEnv, { secret: 'from-config' }, 'c.json', 'real')?.secret, 'the-cluster-secret');
  assert.throws(() => readClusterConfig({ secret: 7 }, 'c.json'), /"cluster.secret" must be a string/);
});

test('a manual clock is refused in cluster mode', () => {
  assert.throws(() => clusterSettings('postgres://fermata@db/f', noEnv, undefined, undefined, 'manual'), (err: unknown) => err instanceof UsageError && /real clock/.test(err.message));
});

test('lease_ttl_ms and renew_ms set the timings: margin a fifth of the TTL, grace two renewals; ones that break the deadline are refused', () => {
  const settings = clusterSettings('postgres://fermata@db/f', secretEnv, { lease_ttl_ms: 1_000, renew_ms: 200 }, 'c.json', 'real');
  assert.deepEqual(settings?.lease, { leaseTtlMs: 1_000, renewIntervalMs: 200, safetyMarginMs: 200, graceMs: 400 });
  assert.throws(() => clusterSettings('postgres://fermata@db/f', secretEnv, { lease_ttl_ms: 1_000, renew_ms: 900 }, 'c.json', 'real'), (err: unknown) => err instanceof UsageError && /cluster.renew_ms/.test(err.message));
});

test('the config file\'s "cluster": unknown keys, wrong types and bad node ids are refused', () => {
  assert.throws(() => readClusterConfig({ urll: 'x' }, 'c.json'), /unknown key "cluster.urll"/);
  assert.throws(() => readClusterConfig({ renew_ms: '200' }, 'c.json'), /"cluster.renew_ms" must be a whole number/);
  assert.throws(() => readClusterConfig([], 'c.json'), /"cluster" must be a JSON object/);
  assert.throws(() => clusterSettings('postgres://fermata@db/f', noEnv, readClusterConfig({ node_id: 'a b' }, 'c.json'), 'c.json', 'real'), /not a node id/);
});

test('fermata serve --cluster takes a gRPC port as one node does (its TLS port and HTTP/3: test/integration/cluster-tls-port.test.ts)', async () => {
  const { serveSettings } = await import('../../cli/serve/settings.ts');
  const settings = serveSettings({ cluster: 'postgres://fermata@db/f', grpc: '127.0.0.1:0' }, secretEnv);
  assert.equal(settings.cluster?.url, 'postgres://fermata@db/f');
  assert.deepEqual(settings.flight, { host: '127.0.0.1', port: 0 });
});
