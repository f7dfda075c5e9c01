// A cluster node's TLS port and HTTP/3 serve the cluster front, as its cleartext port does: two
// real `fermata serve --cluster` nodes over one PostgreSQL (P = 2, one partition each once
// settled), node A with a TLS port (a self-signed certificate made by openssl) and `--http3`
// (the supervised Caddy), asked with curl over TLS:
//
//   - a keyed add over HTTP/1.1 on A's TLS port, whose key's partition node B owns, lands in B
//     (its id names that partition, B answers it itself), and a GET of it over HTTP/2 (ALPN) on
//     the TLS port is forwarded to B and answered
//   - the TLS port advertises HTTP/3, and gtlsclient's GET of the timer over HTTP/3 is answered
//     200 (Caddy's access log); without gtlsclient that part is skipped, saying so
import assert from 'node:assert/strict';
import { type ChildProcess, execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, describe, test } from 'node:test';
import postgres from 'postgres';
import { initCluster } from '../../cluster/cluster-init.ts';
import { clusterIdParts, partitionOfKey } from '../../cluster/partitioning.ts';
import { freePort, waitFor } from '../helpers/chromium.ts';
import { curlRequest, json } from '../helpers/curl.ts';
import { type PostgresServer, startPostgres } from '../helpers/postgres.ts';
import { run } from '../helpers/python-venv.ts';
import { type Service, startService } from '../helpers/service.ts';
import { skipUnlessTool, toolOrNote } from '../helpers/tools.ts';

const partitions = 2;
const secret = 'the-tls-port-secret';

interface ClusterView {
  readonly owned: { partition: number }[];
  readonly owners: { partition: number; address: string | null }[];
}

describe('a cluster node\'s TLS port and HTTP/3 serve the cluster front', { skip: skipUnlessTool('initdb') || skipUnlessTool('curl') || skipUnlessTool('openssl') || skipUnlessTool('caddy'), timeout: 90_000 }, () => {
  const children = new Set<ChildProcess>();
  const dir = mkdtempSync(join(tmpdir(), 'fermata-cluster-tls-'));
  let server: PostgresServer | undefined;
  after(async () => {
    // SIGTERM first: a node killed with SIGKILL leaves its Caddy running.
    await Promise.all([...children].map(async (child) => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      await Promise.race([exited, new Promise((resolve) => setTimeout(resolve, 10_000))]);
    }));
    for (const child of children) child.kill('SIGKILL');
    await server?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  async function startNode(name: string, url: string, args: readonly string[] = []): Promise<{ node: Service; dataDir: string }> {
    const dataDir = mkdtempSync(join(dir, `${name}-`));
    const config = join(dataDir, 'config.json');
    writeFileSync(config, JSON.stringify({ cluster: { node_id: name, lease_ttl_ms: 1_000, renew_ms: 200 }, dispatch: { threads: 1 } }));
    const node = await startService(dataDir, (child) => children.add(child), { args: ['--cluster', url, '--config', config, ...args], env: { FERMATA_CLUSTER_SECRET: secret }, tls: args.length > 0 });
    return { node, dataDir };
  }

  async function view(node: Service): Promise<ClusterView> {
    const answer = await curlRequest({ url: `${node.url}/v1/cluster`, timeoutMs: 2_000 });
    return answer.status === 200 ? json<ClusterView>(answer) : { owned: [], owners: [] };
  }

  test('an add on the TLS port forwarded to the other owner lands there; a GET over HTTP/2 and over HTTP/3 answers it', async (t) => {
    server = await startPostgres();
    const url = await server.createDatabase('tlsport');
    const admin = postgres(url, { max: 1, onnotice: () => {} });
    await initCluster(admin, partitions);
    await admin.end();

    const cert = join(dir, 'node.crt');
    const key = join(dir, 'node.key');
    execFileSync('openssl', ['req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-days', '1', '-subj', '/CN=localhost', '-addext', 'subjectAltName=IP:127.0.0.1,DNS:localhost', '-keyout', key, '-out', cert], { stdio: 'ignore' });
    const h3Port = await freePort();
    const { node: a, dataDir: aDir } = await startNode('node-a', url, ['--tls-cert', cert, '--tls-key', key, '--tls-listen', '127.0.0.1:0', '--http3', String(h3Port)]);
    const { node: b } = await startNode('node-b', url);
    let ownedByB = new Set<number>();
    await waitFor('each node owning one partition, every owner\'s address known', async () => {
      const views = await Promise.all([view(a), view(b)]);
      ownedByB = new Set(views[1]?.owned.map((entry) => entry.partition));
      return views.every((one) => one.owned.length === 1 && one.owners.every((owner) => owner.address !== null));
    });
    let timerKey = 'tls-0';
    for (let i = 1; !ownedByB.has(partitionOfKey(timerKey, partitions)); i++) timerKey = `tls-${i}`;
    const tlsUrl = a.tlsUrl as string;

    const added = await curlRequest({ url: `${tlsUrl}/v1/timers`, method: 'POST', flags: ['--cacert', cert], body: JSON.stringify({ delay_ms: 3_600_000, target: 'http://127.0.0.1:9/hook', key: timerKey }) });
    assert.equal(added.status, 201, added.body.toString());
    const { id } = json<{ id: string }>(added);
    assert.equal(clusterIdParts(id, partitions)?.partition, partitionOfKey(timerKey, partitions), "the id names the key's partition");
    const atB = await curlRequest({ url: `${b.url}/v1/timers/${id}`, headers: { 'fermata-forwarded': '1', 'fermata-cluster-secret': secret } });
    assert.equal(atB.status, 200, 'node B holds it');

    const read = await curlRequest({ url: `${tlsUrl}/v1/timers/${id}`, protocol: 'http2', flags: ['--cacert', cert] });
    assert.equal(read.status, 200, read.body.toString());
    assert.equal(read.httpVersion, '2');
    assert.equal(json<{ key: string }>(read).key, timerKey);
    assert.equal(read.headers['alt-svc'], `h3=":${h3Port}"; ma=86400`);

    const gtlsclient = toolOrNote(t, 'gtlsclient', 'the HTTP/3 request is skipped');
    if (gtlsclient === undefined) return;
    await waitFor('the "http3 listening" line', () => a.output().includes('"msg":"http3 listening"'));
    const h3 = await run(gtlsclient, ['--quiet', '--exit-on-all-streams-close', '127.0.0.1', String(h3Port), `https://127.0.0.1:${h3Port}/v1/timers/${id}`], 30_000, 'gtlsclient');
    assert.equal(h3.code, 0, h3.stderr);
    await waitFor('the HTTP/3 GET in Caddy\'s access log', () => accessLog(aDir).some((entry) => entry.request.uri === `/v1/timers/${id}`));
    const entry = accessLog(aDir).find((one) => one.request.uri === `/v1/timers/${id}`);
    assert.deepEqual([entry?.request.proto, entry?.status], ['HTTP/3.0', 200]);
  });
});

interface AccessEntry {
  readonly request: { readonly proto: string; readonly uri: string };
  readonly status: number;
}

function accessLog(dataDir: string): AccessEntry[] {
  try {
    return readFileSync(join(dataDir, 'http3', 'access.log'), 'utf8').split('\n').filter((line) => line !== '').map((line) => JSON.parse(line) as AccessEntry);
  } catch {
    return [];
  }
}
