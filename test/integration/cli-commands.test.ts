// The `fermata` commands for people against the real `fermata serve` (one service for the
// file), run as a person runs them: add with each of its flags, get, reschedule with and
// without a stale revision, cancel, ls as a table and as JSON, queues, dead letters and their
// redrive, schedules, stats; FERMATA_URL and --url; help with an example; exit 2 for a usage
// mistake and 1 with the service's code for a refusal.
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { after, before, test } from 'node:test';
import { FermataClient } from '@fermata/client';
import { type CliResult, runCli, startCli } from '../helpers/cli-run.ts';
import { testScratch } from '../helpers/scratch.ts';
import { type Service, startService } from '../helpers/service.ts';
import { withTimeout } from '../helpers/timeout.ts';

const scratch = testScratch('cli-commands');
let service: Service;
let client: FermataClient;

before(async () => {
  service = await startService(scratch.tempDir('data'), (child) => scratch.children.add(child));
  client = new FermataClient({ url: service.url });
});

after(async () => {
  await client?.close();
});

function fermata(...args: string[]): Promise<CliResult> {
  return runCli(args, { FERMATA_URL: service.url }, scratch.children);
}

function ok(result: CliResult): string {
  assert.equal(result.code, 0, `exit ${result.code}: ${result.stderr}`);
  return result.stdout;
}

test('add with every flag, then get, reschedule (compare-and-set), ls and cancel', async () => {
  const payloadFile = join(scratch.tempDir('payload'), 'body.json');
  writeFileSync(payloadFile, '{"user":42}');
  const added = JSON.parse(ok(await fermata('add', '--target', 'https://hooks.example/trial', '--in', '3d', '--payload-file', payloadFile, '--header', 'x-tenant: acme', '--key', 'trial-42', '--queue', 'trials', '--json'))) as { id: string; duplicate: boolean };
  assert.equal(added.duplicate, false);
  const timer = await client.get(added.id);
  assert.equal(timer.payload, '{"user":42}');
  assert.deepEqual(timer.headers, { 'x-tenant': 'acme' });
  assert.equal(timer.queue, 'trials');
  assert.equal(timer.key, 'trial-42');
  const inThreeDays = Date.now() + 3 * 86_400_000;
  assert.ok(Math.abs(Date.parse(timer.fire_at) - inThreeDays) < 60_000, timer.fire_at);

  assert.match(ok(await fermata('add', '--target', 'https://hooks.example/trial', '--in', '3d', '--payload', 'other', '--key', 'trial-42', '--queue', 'trials')), new RegExp(`^${added.id} \\(already there: key trial-42 is pending, differs in payload, headers\\)`));

  const shown = ok(await fermata('get', added.id));
  assert.match(shown, /^id: +\S+\nstate: +pending\nrevision: +1\n/);
  assert.match(shown, /headers: +\{"x-tenant":"acme"\}/);

  assert.match(ok(await fermata('reschedule', added.id, '--at', '2031-01-01T00:00:00Z', '--revision', '1')), /fires at 2031-01-01T00:00:00\.000Z \(revision 2\)/);
  const stale = await fermata('reschedule', added.id, '--in', '1h', '--revision', '1');
  assert.equal(stale.code, 1);
  assert.match(stale.stderr, /^fermata reschedule: REVISION_MISMATCH \(412\): /);

  const table = ok(await fermata('ls', '--queue', 'trials'));
  assert.match(table, /^ID +STATE +FIRE_AT +QUEUE +ATTEMPTS +KEY +TARGET\n/);
  assert.match(table, new RegExp(`${added.id} +pending +2031-01-01T00:00:00.000Z +trials +0 +trial-42 +https://hooks.example/trial`));
  const lines = ok(await fermata('ls', '--queue', 'trials', '--json')).trim().split('\n');
  assert.deepEqual(lines.map((line) => (JSON.parse(line) as { id: string }).id), [added.id]);

  assert.equal(ok(await fermata('cancel', added.id)), `${added.id} cancelled\n`);
  assert.equal((await client.get(added.id)).state, 'cancelled');
});

test('queues set, pause, resume and ls', async () => {
  assert.match(ok(await fermata('queues', 'set', 'billing', '--max-attempts', '7', '--min-backoff', '2s', '--max-backoff', '1h', '--rate', '50')), /billing +running +7 +2000\.\.3600000 +50 +-/);
  assert.match(ok(await fermata('queues', 'pause', 'billing')), /billing +paused/);
  assert.equal((await client.queue('billing')).paused, true);
  assert.match(ok(await fermata('queues', 'resume', 'billing')), /billing +running/);
  const all = JSON.parse(ok(await fermata('queues', 'ls', '--json'))) as { name: string; max_attempts: number }[];
  assert.equal(all.find((queue) => queue.name === 'billing')?.max_attempts, 7);
  ok(await fermata('queues', 'set', 'imports', '--max-pending', '100', '--retention', '1h', '--dead-retention', '3d'));
  const imports = await client.queue('imports');
  assert.deepEqual([imports.max_pending, imports.retention_ms, imports.dead_retention_ms], [100, 3_600_000, 3 * 86_400_000]);
});

test('a timer that dies is listed by dead ls and redriven by dead retry', async () => {
  await client.setQueue('once', { max_attempts: 1 });
  // Port 1 on loopback refuses at once: one attempt, then dead.
  const added = await client.add({ target: 'http://127.0.0.1:1/gone', delay_ms: 0, queue: 'once' });
  await withTimeout(
    (async () => {
      while ((await client.get(added.id)).state !== 'dead') await new Promise((resolve) => setTimeout(resolve, 50));
    })(),
    20_000,
    'the timer to die',
  );
  assert.match(ok(await fermata('dead', 'ls', '--queue', 'once')), new RegExp(`${added.id} +once +1 +attempts_exhausted +connection refused`));
  assert.equal(ok(await fermata('dead', 'retry', added.id)), `${added.id} pending\n`);
});

test('schedules set, get, ls, pause and rm', async () => {
  assert.match(ok(await fermata('schedules', 'set', 'report', '--cron', '0 9 * * MON-FRI', '--time-zone', 'Europe/Berlin', '--target', 'https://hooks.example/report', '--payload', 'daily')), /^report: cron "0 9 \* \* MON-FRI" in Europe\/Berlin → https:\/\/hooks\.example\/report \(queue default\)\nnext:\n( {2}\S+\n){5}$/);
  assert.match(ok(await fermata('schedules', 'ls')), /report +cron 0 9 \* \* MON-FRI Europe\/Berlin +running/);
  assert.match(ok(await fermata('schedules', 'pause', 'report')), /, paused\n/);
  assert.equal((JSON.parse(ok(await fermata('schedules', 'get', 'report', '--json'))) as { paused: boolean }).paused, true);
  assert.equal(ok(await fermata('schedules', 'rm', 'report')), 'report deleted\n');
  const missing = await fermata('schedules', 'get', 'report');
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /NOT_FOUND \(404\)/);
});

test('stats as a table and as JSON; --url overrides FERMATA_URL', async () => {
  assert.match(ok(await fermata('stats')), /^PENDING +RESIDENT +SPILLED +IN_FLIGHT +DELIVERED +DEAD +CANCELLED +HELD\n\d+/);
  const stats = JSON.parse(ok(await runCli(['stats', '--json', '--url', service.url], { FERMATA_URL: 'http://127.0.0.1:9' }, scratch.children))) as { cancelled: number };
  assert.ok(stats.cancelled >= 1);
});

test('stats --watch prints the counts again until stopped', async () => {
  const watch = startCli(['stats', '--watch', '1'], { FERMATA_URL: service.url }, scratch.children);
  let stdout = '';
  watch.child.stdout?.on('data', (chunk: Buffer) => (stdout += chunk.toString()));
  await withTimeout(
    (async () => {
      while ((stdout.match(/^PENDING/gm) ?? []).length < 2) await new Promise((resolve) => setTimeout(resolve, 50));
    })(),
    30_000,
    'two printings of the stats',
  );
  watch.child.kill('SIGTERM');
  await watch.done;
  assert.match(stdout, /^\d{4}-\d{2}-\d{2}T\S+Z\nPENDING +RESIDENT/m);
});

test('help shows an example; usage mistakes exit 2 naming the flag', async () => {
  assert.match(ok(await fermata('add', '--help')), /Examples:\n {2}\$ fermata add --target https:\/\/api\.example\/trial-end --in 30d/);
  assert.match(ok(await fermata('schedules', '--help')), /Examples:\n {2}\$ fermata schedules set heartbeat --every 5m/);
  assert.match(ok(await fermata('queues', 'set', '--help')), /Example:\n {2}\$ fermata queues set billing/);
  const noWhen = await fermata('add', '--target', 'https://hooks.example/x');
  assert.equal(noWhen.code, 2);
  assert.match(noWhen.stderr, /when to deliver: --at TIME or --in DURATION/);
  const badDuration = await fermata('add', '--target', 'https://hooks.example/x', '--in', '3 days');
  assert.equal(badDuration.code, 2);
  assert.match(badDuration.stderr, /option '--in <duration>' argument '3 days' is invalid\. "3 days" is not a duration/);
  const refused = await fermata('add', '--target', 'ftp://hooks.example/x', '--in', '1h');
  assert.equal(refused.code, 1);
  assert.match(refused.stderr, /^fermata add: BATCH_INVALID \(400\): .*\[field target/);
});
