// `fermata import` against the real `fermata serve` (one service for the file): each format is
// imported whole, every row once with the fields it was written with and a derived key; an
// importer killed (-9) mid-way and run again with --resume leaves every row there exactly once;
// fermata's own Arrow export imports with its columns as they are;
// a bad value and a row the service refuses are reported by file, row, column and value.
import assert from 'node:assert/strict';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { FermataClient, type Timer } from '@fermata/client';
import { runCli, startCli } from '../helpers/cli-run.ts';
import { baseMs, type ImportFiles, writeImportFiles } from '../helpers/import-files.ts';
import { testScratch } from '../helpers/scratch.ts';
import { type Service, startService } from '../helpers/service.ts';
import { withTimeout } from '../helpers/timeout.ts';

const scratch = testScratch('import-cli');
const rows = 1000;
const target = 'https://hooks.example/import';
let service: Service;
let client: FermataClient;
let files: ImportFiles;
let env: Record<string, string>;

before(async () => {
  service = await startService(scratch.tempDir('data'), (child) => scratch.children.add(child));
  client = new FermataClient({ url: service.url });
  env = { FERMATA_URL: service.url };
  files = writeImportFiles(scratch.tempDir('files'), rows, target, 400);
});

after(async () => {
  await client?.close();
});

async function timersIn(queue: string): Promise<Timer[]> {
  const timers: Timer[] = [];
  for await (const timer of client.list({ queue }, { pageSize: 1000 })) timers.push(timer);
  return timers;
}

for (const name of ['arrowFile', 'arrowStream', 'parquet', 'csv', 'ndjson'] as const) {
  test(`${name}: every row added once, as written, with a derived key`, async () => {
    const queue = `import-${name.toLowerCase()}`;
    const result = await runCli(['import', files[name], '--map', 'fire_at=due,target=url', '--set', `queue=${queue}`, '--batch-rows', '500', '--json'], env, scratch.children);
    assert.equal(result.code, 0, result.stderr);
    const summary = JSON.parse(result.stdout) as { rows: number; duplicates: number; rss_peak_mb: number };
    assert.equal(summary.rows, rows);
    assert.equal(summary.duplicates, 0);
    const timers = await timersIn(queue);
    assert.equal(timers.length, rows);
    const hashes = new Set<string>();
    for (const timer of timers) {
      const [prefix, hash, row] = (timer.key ?? '').split(':');
      assert.equal(prefix, 'import');
      hashes.add(hash as string);
      assert.equal(Date.parse(timer.fire_at), baseMs + Number(row));
      assert.equal(timer.payload, `p${row}`);
      assert.equal(timer.target, target);
    }
    assert.equal(hashes.size, 1);
  });
}

test('the same file imported again adds nothing: every row is a duplicate of itself', async () => {
  const again = await runCli(['import', files.parquet, '--map', 'fire_at=due,target=url', '--set', 'queue=import-parquet', '--json'], env, scratch.children);
  assert.equal(again.code, 0, again.stderr);
  assert.equal((JSON.parse(again.stdout) as { duplicates: number }).duplicates, rows);
  assert.equal((await timersIn('import-parquet')).length, rows);
});

test('an importer killed mid-way and resumed adds every row exactly once', async () => {
  const dir = scratch.tempDir('resume');
  const total = 6000;
  const resumeFiles = writeImportFiles(dir, total, target, 1000);
  const args = ['import', resumeFiles.csv, '--map', 'fire_at=due,target=url', '--set', 'queue=resume', '--batch-rows', '50', '--concurrency', '2', '--progress', 'lines'];
  const first = startCli(args, env, scratch.children);
  const checkpointPath = `${resumeFiles.csv}.fermata-import.json`;
  const acknowledged = (): number => {
    try {
      return (JSON.parse(readFileSync(checkpointPath, 'utf8')) as { acknowledged: number }).acknowledged;
    } catch {
      return 0;
    }
  };
  await withTimeout(
    (async () => {
      while (acknowledged() < 500) await new Promise((resolve) => setTimeout(resolve, 10));
    })(),
    30_000,
    'the checkpoint to pass row 500',
  );
  first.child.kill('SIGKILL');
  await withTimeout(first.done, 10_000, 'the importer to die');
  const killedAt = acknowledged();
  assert.ok(killedAt < total, `the importer finished (${killedAt} rows) before it was killed`);
  const resumed = await runCli([...args, '--resume', '--json'], env, scratch.children);
  assert.equal(resumed.code, 0, resumed.stderr);
  const summary = JSON.parse(resumed.stdout) as { rows: number; resumed_at: number };
  assert.equal(summary.resumed_at, killedAt);
  assert.equal(summary.rows, total - killedAt);
  const timers = await timersIn('resume');
  assert.equal(timers.length, total);
  assert.equal(new Set(timers.map((timer) => timer.key)).size, total);
});

test("fermata's own Arrow export imports with its columns as they are (keyed by the exported ids here, so they are new)", async () => {
  const exported = join(scratch.tempDir('export'), 'export.arrows');
  const answer = await fetch(`${service.url}/v1/timers?queue=import-csv`, { headers: { accept: 'application/vnd.apache.arrow.stream' } });
  assert.equal(answer.status, 200);
  writeFileSync(exported, Buffer.from(await answer.arrayBuffer()));
  const result = await runCli(['import', exported, '--map', 'key=id', '--set', 'queue=copied', '--json'], env, scratch.children);
  assert.equal(result.code, 0, result.stderr);
  assert.equal((JSON.parse(result.stdout) as { rows: number }).rows, rows);
  const copies = await timersIn('copied');
  const originals = new Map((await timersIn('import-csv')).map((timer) => [timer.id, timer]));
  assert.equal(copies.length, rows);
  for (const copy of copies) {
    const original = originals.get(copy.key ?? '');
    assert.ok(original !== undefined, `no original with id ${copy.key}`);
    assert.deepEqual([copy.fire_at, copy.target, copy.payload, copy.headers], [original.fire_at, original.target, original.payload, original.headers]);
  }
});

test('a bad value stops the import naming the file, row, column and value', async () => {
  const path = join(scratch.tempDir('bad'), 'bad.csv');
  writeFileSync(path, `when,url\n2030-01-01T00:00:00Z,${target}\n1796083200,${target}\n`);
  const result = await runCli(['import', path, '--map', 'fire_at=when,target=url', '--set', 'queue=bad'], env, scratch.children);
  assert.equal(result.code, 1);
  assert.match(result.stderr, /bad\.csv row 1, column "when", value "1796083200": fire_at 1796083200 looks like epoch seconds/);
});

test("a row the service refuses is named by the file's row, column and value", async () => {
  const path = join(scratch.tempDir('refused'), 'refused.ndjson');
  const lines = Array.from({ length: 30 }, (_, i) => JSON.stringify({ fire_at: baseMs + i, target: i === 17 ? 'ftp://files.example/x' : target }));
  writeFileSync(path, `${lines.join('\n')}\n`);
  const result = await runCli(['import', path, '--set', 'queue=refused', '--batch-rows', '10'], env, scratch.children);
  assert.equal(result.code, 1);
  assert.match(result.stderr, /refused\.ndjson row 17, column "target", value "ftp:\/\/files\.example\/x": fermata refused it: /);
});

test('import --help shows an example', async () => {
  const result = await runCli(['import', '--help'], env, scratch.children);
  assert.equal(result.code, 0);
  assert.match(result.stdout, /Examples:\n {2}\$ fermata import timers\.parquet/);
});
