// TLS to the cluster database, against the real PostgreSQL and the real `fermata` commands:
//
//   - with the server's TLS off, `sslmode=require` fails with an error that says the server does
//     not accept TLS (`fermata cluster status` exits 1 with it; `fermata serve --cluster` exits
//     before listening, logging it), not the client's bare connection reset
//   - with TLS on (a CA and a server certificate for 127.0.0.1 and localhost, made by openssl in
//     the test's directory, put in force by a reload), `fermata cluster init` and a node started
//     with `sslmode=verify-full&sslrootcert=CA` work: the node joins, takes a timer over curl and
//     answers it, and every connection of fermata's is encrypted (pg_stat_ssl)
//   - with several hosts in the URL, one that does not accept TLS is passed over, as one that is
//     down is, and the next one serves
//   - `verify-full` with a CA that did not sign the server's certificate is refused, and so is a
//     certificate that names localhost and not the address the URL names (the client alone would check
//     an address as "localhost"), which `verify-ca` (the CA alone) accepts
import assert from 'node:assert/strict';
import type { ChildProcess } from 'node:child_process';
import { execFileSync } from 'node:child_process';
import { chmodSync, chownSync, copyFileSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { type AddressInfo, createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { after, describe, test } from 'node:test';
import postgres, { type Sql } from 'postgres';
import { openClusterPool } from '../../cluster/connection.ts';
import { runCli } from '../helpers/cli-run.ts';
import { curlRequest, json } from '../helpers/curl.ts';
import { type PostgresServer, postgresTestUser, startPostgres } from '../helpers/postgres.ts';
import { type Service, startService } from '../helpers/service.ts';
import { skipUnlessTool } from '../helpers/tools.ts';

const secret = 'the-tls-nodes-secret';

/** A key and a certificate signed by `ca` (or self-signed: a CA), for `names` (subjectAltName entries). */
function certificate(dir: string, name: string, subject: string, names: string | undefined, ca?: string): { cert: string; key: string } {
  const pair = { cert: join(dir, `${name}.crt`), key: join(dir, `${name}.key`) };
  const extensions = names === undefined ? [] : ['-addext', `subjectAltName=${names}`, '-addext', 'basicConstraints=critical,CA:FALSE'];
  const signer = ca === undefined ? [] : ['-CA', join(dir, `${ca}.crt`), '-CAkey', join(dir, `${ca}.key`)];
  execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '1', '-subj', `/CN=${subject}`, ...extensions, ...signer, '-keyout', pair.key, '-out', pair.cert], { stdio: 'ignore' });
  return pair;
}

describe('TLS to the cluster database (sslmode, sslrootcert)', { skip: skipUnlessTool('initdb') || skipUnlessTool('openssl') || skipUnlessTool('curl'), timeout: 90_000 }, () => {
  const children = new Set<ChildProcess>();
  const dir = mkdtempSync(join(tmpdir(), 'fermata-pg-tls-'));
  let server: PostgresServer | undefined;
  let admin: Sql | undefined;
  after(async () => {
    for (const child of children) child.kill('SIGKILL');
    await admin?.end({ timeout: 1 });
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  /** Puts `pair` in force as the server's certificate (TLS on), by a reload: the files go where the server's user may read them. */
  async function serveTls(pair: { cert: string; key: string }): Promise<void> {
    assert.ok(server !== undefined && admin !== undefined);
    const { uid, gid } = statSync(server.dir);
    // Files of their own: a new connection that shows their name is served with them.
    const names = { cert: join(server.dir, basename(pair.cert)), key: join(server.dir, basename(pair.key)) };
    copyFileSync(pair.cert, names.cert);
    copyFileSync(pair.key, names.key);
    for (const file of [names.cert, names.key]) {
      chownSync(file, uid, gid);
      chmodSync(file, 0o600);
    }
    await admin.unsafe(`ALTER SYSTEM SET ssl_cert_file = '${names.cert}'`);
    await admin.unsafe(`ALTER SYSTEM SET ssl_key_file = '${names.key}'`);
    await admin.unsafe('ALTER SYSTEM SET ssl = on');
    await admin`SELECT pg_reload_conf()`;
    // The postmaster loads the files at its SIGHUP; a connection made after it shows their name.
    for (let tries = 0; ; tries++) {
      const probe = openClusterPool(`${server.url}?sslmode=require`, { max: 1, connectTimeoutSeconds: 2 });
      try {
        const [row] = await probe<{ ssl_cert_file: string }[]>`SHOW ssl_cert_file`;
        if (row?.ssl_cert_file === names.cert) break;
      } catch (err) {
        if (tries > 100) throw err;
      } finally {
        await probe.end({ timeout: 1 });
      }
      assert.ok(tries < 100, `the server does not serve ${names.cert} after its reload`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  /** The error a query through a pool on `url` fails with. */
  async function failureOf(url: string): Promise<Error> {
    const sql = openClusterPool(url, { max: 1, connectTimeoutSeconds: 5 });
    try {
      await sql`SELECT 1`;
      return assert.fail(`${url} connected`);
    } catch (err) {
      return err as Error;
    } finally {
      await sql.end({ timeout: 1 });
    }
  }

  test('sslmode=require against a server without TLS fails naming it; verify-full with the CA works for the CLI and a node; a wrong CA or host name is refused', async () => {
    server = await startPostgres();
    admin = postgres({ host: server.dir, port: server.port, user: postgresTestUser, database: 'postgres', max: 1, onnotice: () => {} });
    const base = await server.createDatabase('tls');

    const refused = await runCli(['cluster', 'status', '--cluster', `${base}?sslmode=require`], {}, children);
    assert.equal(refused.code, 1, refused.stderr);
    assert.match(refused.stderr, /does not accept TLS connections, and the cluster URL asks for TLS \(sslmode=require\)/);
    const config = join(dir, 'node.json');
    writeFileSync(config, JSON.stringify({ cluster: { node_id: 'node-tls', lease_ttl_ms: 1_000, renew_ms: 200 }, dispatch: { threads: 1 } }));
    const nodeDir = mkdtempSync(join(dir, 'node-'));
    await assert.rejects(
      startService(nodeDir, (child) => children.add(child), { args: ['--cluster', `${base}?sslmode=verify-ca&sslrootcert=${join(dir, 'none.crt')}`, '--config', config], env: { FERMATA_CLUSTER_SECRET: secret } }),
      /sslrootcert ".*none\.crt" cannot be read/,
    );
    await assert.rejects(
      startService(nodeDir, (child) => children.add(child), { args: ['--cluster', `${base}?sslmode=require`, '--config', config], env: { FERMATA_CLUSTER_SECRET: secret } }),
      /does not accept TLS connections/,
    );

    certificate(dir, 'ca', 'fermata-test-ca', undefined);
    certificate(dir, 'other-ca', 'another-ca', undefined);
    await serveTls(certificate(dir, 'server', '127.0.0.1', 'IP:127.0.0.1,DNS:localhost', 'ca'));
    const verified = `${base}?sslmode=verify-full&sslrootcert=${join(dir, 'ca.crt')}`;

    const init = await runCli(['cluster', 'init', '--partitions', '2', '--cluster', verified], {}, children);
    assert.equal(init.code, 0, init.stderr);
    const node = await startService(nodeDir, (child) => children.add(child), { args: ['--cluster', verified, '--config', config], env: { FERMATA_CLUSTER_SECRET: secret } });
    // Ready once joined; the partitions it took open as their logs replay, so both are waited for.
    for (let started = performance.now(); ; ) {
      const readyz = await curlRequest({ url: `${node.url}/readyz` });
      const cluster = readyz.status === 200 ? await curlRequest({ url: `${node.url}/v1/cluster` }) : undefined;
      if (cluster?.status === 200 && json<{ owned: unknown[] }>(cluster).owned.length === 2) break;
      assert.ok(performance.now() - started < 20_000, `the node does not own both partitions: ${(cluster ?? readyz).body.toString()}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    await addAndRead(node);
    // With several hosts, one without TLS is passed over as one that is down: the next answers.
    const cleartextOnly = createServer((socket) => {
      socket.once('data', () => socket.write('N'));
      socket.on('error', () => undefined);
    });
    await new Promise<void>((resolve) => cleartextOnly.listen(0, '127.0.0.1', resolve));
    const twoHosts = `postgres://${postgresTestUser}@127.0.0.1:${(cleartextOnly.address() as AddressInfo).port},127.0.0.1:${server.port}/tls?sslmode=verify-full&sslrootcert=${join(dir, 'ca.crt')}`;
    const throughSecond = openClusterPool(twoHosts, { max: 1, connectTimeoutSeconds: 5 });
    try {
      const [row] = await throughSecond<{ ssl: boolean }[]>`SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()`;
      assert.equal(row?.ssl, true);
    } finally {
      await throughSecond.end({ timeout: 1 });
      cleartextOnly.close();
    }
    const sessions = await admin<{ ssl: boolean }[]>`SELECT s.ssl FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid) WHERE a.application_name = 'fermata'`;
    assert.ok(sessions.length > 0, 'the node holds connections');
    assert.ok(sessions.every((session) => session.ssl), 'every connection of the node is encrypted');

    const wrongCa = await failureOf(`${base}?sslmode=verify-full&sslrootcert=${join(dir, 'other-ca.crt')}`);
    assert.match(wrongCa.message, /unable to verify|self.signed|certificate/i);
    await serveTls(certificate(dir, 'localhost-only', 'localhost', 'DNS:localhost', 'ca'));
    const wrongName = await failureOf(verified);
    assert.match(wrongName.message, /IP: 127\.0\.0\.1 is not in the cert.s list/);
    const caOnly = openClusterPool(`${base}?sslmode=verify-ca&sslrootcert=${join(dir, 'ca.crt')}`, { max: 1, connectTimeoutSeconds: 5 });
    try {
      const [row] = await caOnly<{ ssl: boolean }[]>`SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()`;
      assert.equal(row?.ssl, true);
    } finally {
      await caOnly.end({ timeout: 1 });
    }
  });
});

/** A timer added over curl through the node and read back: the node's log and engine work over the encrypted connections. */
async function addAndRead(node: Service): Promise<void> {
  const added = await curlRequest({ url: `${node.url}/v1/timers`, method: 'POST', body: JSON.stringify({ delay_ms: 3_600_000, target: 'http://127.0.0.1:9/hook', key: 'over-tls' }) });
  assert.equal(added.status, 201, added.body.toString());
  const { id } = json<{ id: string }>(added);
  const read = await curlRequest({ url: `${node.url}/v1/timers/${id}` });
  assert.equal(read.status, 200, read.body.toString());
  assert.equal(json<{ key: string }>(read).key, 'over-tls');
}
