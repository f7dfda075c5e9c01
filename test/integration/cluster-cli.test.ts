// `fermata cluster` as an operator runs it (bin/fermata.js in a child process) against a real
// PostgreSQL that wants a password over TCP: the password is taken from PGPASSWORD, the
// environment's URL or a .pgpass file and refused on the command line; init creates P
// partitions once and refuses another P; status shows partitions, epochs and log sizes as a
// table and as JSON. Every run is bounded in time.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, test } from 'node:test';
import postgres from 'postgres';
import { type PostgresServer, startPostgres } from '../helpers/postgres.ts';
import { binPath, serviceEnv } from '../helpers/service.ts';
import { skipUnlessTool } from '../helpers/tools.ts';

const noPostgres = skipUnlessTool('initdb');
const password = 'correct horse battery';
const runTimeoutMs = 30_000;

interface Run {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

function fermataCluster(args: readonly string[], env: Record<string, string> = {}): Promise<Run> {
  const childEnv = serviceEnv(env);
  for (const name of ['PGPASSWORD', 'PGPASSFILE', 'FERMATA_CLUSTER_URL']) if (!(name in env)) delete childEnv[name];
  return new Promise((resolve) => {
    execFile(process.execPath, [binPath, 'cluster', ...args], { encoding: 'utf8', env: childEnv, timeout: runTimeoutMs, killSignal: 'SIGKILL' }, (err, stdout, stderr) => {
      resolve({ code: err === null ? 0 : typeof err.code === 'number' ? err.code : -1, stdout, stderr });
    });
  });
}

describe('fermata cluster', { skip: noPostgres, timeout: 180_000 }, () => {
  let server: PostgresServer;
  let url: string;
  let scratch: string;
  let pgpassFile: string;
  before(async () => {
    server = await startPostgres({ password });
    url = await server.createDatabase('cli');
    scratch = mkdtempSync(join(tmpdir(), 'fermata-cluster-cli-'));
    pgpassFile = join(scratch, 'pgpass');
    writeFileSync(pgpassFile, `127.0.0.1:${server.port}:cli:fermata:${password}\n`, { mode: 0o600 });
  });
  after(async () => {
    await server.stop();
    rmSync(scratch, { recursive: true, force: true });
  });

  test('a password on the command line is refused before anything connects', async () => {
    const withPassword = url.replace('fermata@', `fermata:${encodeURIComponent(password)}@`);
    for (const given of [withPassword, `${url}?password=x`]) {
      const run = await fermataCluster(['status', '--cluster', given]);
      assert.equal(run.code, 2, run.stderr);
      assert.match(run.stderr, /carries a password, which every user of this machine could read in the process list/);
      assert.match(run.stderr, /PGPASSWORD/);
    }
    const none = await fermataCluster(['status']);
    assert.equal(none.code, 2);
    assert.match(none.stderr, /no cluster database: give --cluster .* or set FERMATA_CLUSTER_URL/);
  });

  test('status on an empty database names init; a wrong password fails', async () => {
    const empty = await fermataCluster(['status', '--cluster', url], { PGPASSFILE: pgpassFile });
    assert.equal(empty.code, 1, empty.stderr);
    assert.match(empty.stderr, /holds no fermata cluster \(create one with `fermata cluster init --partitions P`\)/);
    const wrong = await fermataCluster(['status', '--cluster', url], { PGPASSWORD: 'wrong' });
    assert.equal(wrong.code, 1);
    assert.match(wrong.stderr, /password authentication failed/);
  });

  test('init fixes P once; status shows each partition with its epoch and log size', async () => {
    const created = await fermataCluster(['init', '--partitions', '4', '--cluster', url], { PGPASSFILE: pgpassFile });
    assert.equal(created.code, 0, created.stderr);
    assert.match(created.stdout, /created a cluster of 4 partitions \(schema version 3\)/);
    const again = await fermataCluster(['init', '--partitions', '4'], { FERMATA_CLUSTER_URL: url, PGPASSWORD: password });
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stdout, /the cluster exists with 4 partitions/);
    const other = await fermataCluster(['init'], { FERMATA_CLUSTER_URL: url.replace('fermata@', `fermata:${encodeURIComponent(password)}@`) });
    assert.equal(other.code, 2);
    assert.match(other.stderr, /exists with 4 partitions; its partition count is fixed, and 32 were asked for/);
    const bad = await fermataCluster(['init', '--partitions', '0', '--cluster', url]);
    assert.equal(bad.code, 2);
    assert.match(bad.stderr, /--partitions must be an integer from 1 to 4096, not "0"/);

    const sql = postgres(url, { max: 1, pass: password, onnotice: () => {} });
    try {
      await sql`UPDATE fermata_partitions SET epoch = 3, owner = 'node-a', owner_address = '127.0.0.1:7000' WHERE partition = 2`;
      await sql`INSERT INTO fermata_log (partition, seq, type, epoch, body) VALUES (2, 1, 1, 3, ${new Uint8Array(100)}), (2, 2, 2, 3, ${new Uint8Array(28)})`;
      await sql`INSERT INTO fermata_checkpoint_files (partition, name, chunk, body) VALUES (2, 'spill/MANIFEST', 0, ${new Uint8Array(24)}), (2, 'spill/run-0000000001.arrow', 0, ${new Uint8Array(1000)})`;
    } finally {
      await sql.end();
    }

    const human = await fermataCluster(['status', '--cluster', url], { PGPASSFILE: pgpassFile });
    assert.equal(human.code, 0, human.stderr);
    assert.match(human.stdout, /^cluster: 4 partitions, created \S+, schema version 3\n/);
    const lines = human.stdout.split('\n').filter((line) => /^\s*\d+\s/.test(line));
    assert.equal(lines.length, 4, human.stdout);
    assert.match(lines[2] ?? '', /^\s*2\s+3\s+node-a\s+127\.0\.0\.1:7000\s+-\s+2\s+128\s+1\.\.2\s+1024$/);

    const json = await fermataCluster(['status', '--json', '--cluster', url], { PGPASSFILE: pgpassFile });
    assert.equal(json.code, 0, json.stderr);
    const status = JSON.parse(json.stdout) as { partitionCount: number; schemaVersion: number; nodes: unknown; partitions: { partition: number; epoch: number; owner: string | null; logRows: number; logBytes: number; lastSeq: number | null; checkpointBytes: number }[] };
    assert.equal(status.partitionCount, 4);
    assert.equal(status.schemaVersion, 3);
    assert.deepEqual(status.nodes, []);
    assert.deepEqual(status.partitions.map((p) => [p.partition, p.epoch, p.owner, p.logRows, p.logBytes, p.lastSeq, p.checkpointBytes]), [
      [0, 0, null, 0, 0, null, 0],
      [1, 0, null, 0, 0, null, 0],
      [2, 3, 'node-a', 2, 128, 2, 1024],
      [3, 0, null, 0, 0, null, 0],
    ]);
  });
});
