// `fermata backup` of a running service under load, and `fermata restore` (decision 0027), as an
// operator runs them: the service takes adds over HTTP from 16 clients while the backup command
// copies its data directory into a tar file; the backup is restored into a new directory with
// the restore command and a second service is started on it. Every timer acknowledged before the
// backup began is there (GET answers it), none is listed twice, and every timer listed is one a
// client was told about. Meanwhile the adds were not held up beyond the machine's own noise.
import assert from 'node:assert/strict';
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { binPath, type Service, serviceEnv, startService } from '../helpers/service.ts';
import { withTimeout } from '../helpers/timeout.ts';

const clients = 16;
const ackedBeforeBackupMin = 500;
/** An add held up this long while the backup ran (and twice as long as any before it) would be the backup blocking the service. */
const addLatencyBoundMs = 5_000;

const children = new Set<ChildProcess>();
const scratch = mkdtempSync(join(tmpdir(), 'fermata-backup-it-'));
after(() => {
  for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  rmSync(scratch, { recursive: true, force: true });
});

/** Runs `fermata ARGS` to its end: its exit code and what it wrote. */
async function fermata(args: readonly string[]): Promise<{ code: number | null; output: string }> {
  const child = spawn(process.execPath, [binPath, ...args], { env: serviceEnv(), stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  let output = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  const code = await withTimeout(new Promise<number | null>((resolve) => child.on('exit', resolve)), 60_000, `fermata ${args[0]}`);
  return { code, output };
}

async function addOne(base: string, n: number): Promise<{ id: string; key: string; ms: number }> {
  const key = `load-${n}`;
  const started = performance.now();
  const response = await fetch(`${base}/v1/timers`, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ delay_ms: 3_600_000 + n, target: 'https://hooks.example/backup', key, payload: `timer ${n}` }),
    signal: AbortSignal.timeout(10_000),
  });
  const body = (await response.json()) as { id?: string };
  assert.equal(response.status, 201, JSON.stringify(body));
  return { id: body.id as string, key, ms: performance.now() - started };
}

/** Every timer the service lists: id → key, failing on an id listed twice. */
async function listAll(service: Service): Promise<Map<string, string>> {
  const found = new Map<string, string>();
  let cursor: string | null = null;
  do {
    const response = await fetch(`${service.url}/v1/timers?limit=1000${cursor === null ? '' : `&cursor=${encodeURIComponent(cursor)}`}`, { signal: AbortSignal.timeout(10_000) });
    const page = (await response.json()) as { timers: Array<{ id: string; key: string }>; next_cursor: string | null };
    for (const timer of page.timers) {
      assert.ok(!found.has(timer.id), `${timer.id} listed twice`);
      found.set(timer.id, timer.key);
    }
    cursor = page.next_cursor;
  } while (cursor !== null);
  return found;
}

test('a backup taken under load and restored holds every timer acknowledged before it began, once, and no other', async () => {
  const source = join(scratch, 'source');
  const service = await startService(source, (child) => children.add(child));
  const acked = new Map<string, string>();
  let slowest = 0;
  let stop = false;
  let n = 0;
  const loops = Array.from({ length: clients }, async () => {
    while (!stop) {
      const { id, key, ms } = await addOne(service.url, n++);
      acked.set(id, key);
      slowest = Math.max(slowest, ms);
    }
  });
  const failed = Promise.all(loops).then(() => undefined);
  while (acked.size < ackedBeforeBackupMin) await Promise.race([new Promise((resolve) => setTimeout(resolve, 10)), failed]);
  const before = new Map(acked);
  const slowestBefore = slowest;
  slowest = 0;
  const archive = join(scratch, 'backup.tar');
  const backup = await fermata(['backup', '--data', source, '--to', archive]);
  const addedDuring = acked.size - before.size;
  const slowestDuring = slowest;
  stop = true;
  await failed;
  assert.equal(backup.code, 0, backup.output);
  assert.ok(addedDuring > 0, 'adds went on while the backup ran');
  // The machine's own noise sets the bar: twice the slowest add before the backup, or the bound.
  assert.ok(slowestDuring < Math.max(addLatencyBoundMs, 2 * slowestBefore), `the slowest add during the backup took ${slowestDuring} ms (before it: ${slowestBefore} ms)`);
  service.child.kill('SIGTERM');
  await withTimeout(service.exited, 20_000, 'the source service to stop');

  const restoredDir = join(scratch, 'restored');
  const restored = await fermata(['restore', '--from', archive, '--data', restoredDir]);
  assert.equal(restored.code, 0, restored.output);
  const again = await fermata(['restore', '--from', archive, '--data', restoredDir]);
  assert.equal(again.code, 1);
  assert.match(again.output, /is not empty/);

  const copy = await startService(restoredDir, (child) => children.add(child));
  try {
    const found = await listAll(copy);
    for (const [id, key] of before) assert.equal(found.get(id), key, `acknowledged before the backup began: ${id}`);
    for (const [id, key] of found) assert.equal(acked.get(id), key, `never acknowledged: ${id}`);
    const sample = [...before.keys()].filter((_, i) => i % 50 === 0);
    for (const id of sample) assert.equal((await fetch(`${copy.url}/v1/timers/${id}`, { signal: AbortSignal.timeout(10_000) })).status, 200, id);
    process.stderr.write(`# ${before.size} acknowledged before the backup, ${addedDuring} during it; ${found.size} restored; slowest add before ${slowestBefore.toFixed(1)} ms, during ${slowestDuring.toFixed(1)} ms\n`);
  } finally {
    copy.child.kill('SIGTERM');
    await withTimeout(copy.exited, 20_000, 'the restored service to stop');
  }
});
