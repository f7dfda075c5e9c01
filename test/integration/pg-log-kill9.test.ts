// An engine over the PostgreSQL log, end to end across a crash: a child process adds timers
// with 16 admits in flight and is killed with SIGKILL mid-stream; an engine opened again over the
// same partition holds every timer whose add was acknowledged, pending, and goes on from there.
// Cycles: 2 (FERMATA_SOAK=1: 20). Each wait is bounded; children are killed in `after`.
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { after, before, describe, test } from 'node:test';
import { fileURLToPath } from 'node:url';
import type { Sql } from 'postgres';
import { initCluster } from '../../cluster/cluster-init.ts';
import { openClusterPool } from '../../cluster/connection.ts';
import { batchFromSpecs } from '../../engine/batch/timer-batch.ts';
import { Engine } from '../../engine/engine.ts';
import { pgLog } from '../../engine/pg-log/pg-log.ts';
import { type PostgresServer, startPostgres } from '../helpers/postgres.ts';
import { testScratch } from '../helpers/scratch.ts';
import { skipUnlessTool } from '../helpers/tools.ts';

const noPostgres = skipUnlessTool('initdb');
const cycles = process.env.FERMATA_SOAK === '1' ? 20 : 2;
const childPath = fileURLToPath(new URL('../helpers/pg-engine-child.ts', import.meta.url));
const { children, tempDir } = testScratch('fermata-pg-kill9');

/** Runs the child until it has acknowledged `acks` timers, then SIGKILLs it; the ids it acknowledged. */
async function addUntilKilled(env: Record<string, string>, acks: number): Promise<string[]> {
  const child = spawn(process.execPath, [childPath], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const acknowledged: string[] = [];
  const enough = new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`the child acknowledged ${acknowledged.length} of ${acks} in 60 s: ${stderr}`)), 60_000);
    createInterface({ input: child.stdout }).on('line', (line) => {
      if (line === 'open') return;
      acknowledged.push(line);
      if (acknowledged.length === acks) {
        clearTimeout(timer);
        child.kill('SIGKILL');
        resolve();
      }
    });
    child.once('exit', (code, signal) => {
      if (signal !== 'SIGKILL') reject(new Error(`the child exited (${signal ?? code}) before the kill: ${stderr}`));
    });
  });
  await enough;
  await exited;
  return acknowledged;
}

describe('an engine over the PostgreSQL log, killed', { skip: noPostgres, timeout: 300_000 }, () => {
  let server: PostgresServer;
  let url: string;
  let sql: Sql;
  before(async () => {
    server = await startPostgres();
    url = await server.createDatabase('kill9');
    sql = openClusterPool(url, { max: 4 });
    await initCluster(sql, 4);
  });
  after(async () => {
    await sql?.end({ timeout: 5 });
    await server?.stop();
  });

  test(`every acknowledged add is there after kill -9 (${cycles} cycles)`, async () => {
    const partition = 2;
    const [row] = await sql<{ epoch: string }[]>`UPDATE fermata_partitions SET epoch = epoch + 1 WHERE partition = ${partition} RETURNING epoch`;
    const epoch = Number(row?.epoch);
    const dataDir = tempDir('data');
    const env = { FERMATA_TEST_PG_URL: url, FERMATA_TEST_PG_PARTITION: String(partition), FERMATA_TEST_PG_EPOCH: String(epoch), FERMATA_TEST_DATA_DIR: dataDir };
    const ledger: string[] = [];
    for (let cycle = 0; cycle < cycles; cycle++) ledger.push(...(await addUntilKilled(env, 300 + cycle * 37)));

    const engine = await Engine.open({ dataDir, openLog: pgLog({ sql, partition, epoch }) });
    try {
      const missing = ledger.filter((id) => engine.get(id)?.state !== 'pending');
      assert.deepEqual(missing, [], `${missing.length} of ${ledger.length} acknowledged timers are not pending after the kills`);
      const lastSeq = engine.log.lastSeq;
      const next = await engine.admit(batchFromSpecs([{ fireAtMs: Date.now() + 3600_000, target: 'https://a.example/hook' }]));
      assert.equal(next.seq, lastSeq + 1, 'the log goes on gapless');
    } finally {
      await engine.close();
    }
  });
});
