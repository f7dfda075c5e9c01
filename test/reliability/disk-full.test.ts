// Full disks and failing writes, on a real `fermata serve`:
// - a size-limited file system (a tmpfs mounted for the test) filled up by another writer: adds
//   are answered 507 (DISK_FULL from the free-space gate, or WAL_POISONED when a write itself
//   found no space), never a 2xx that is not kept; once the space is freed the service takes
//   adds again within seconds, and every add it acknowledged is still there after a restart;
// - the disk failing writes with EIO (libfiu's fiu-run / fiu-ctrl, Debian `fiu-utils`, injected
//   into the running process's pwrite, pwritev and fdatasync: the log's segments are written
//   through, O_DSYNC, so a failed sync is a failed write): the log poisons, adds get 503, and
//   the service opens the data directory again (recovery re-reads the disk) until the disk
//   works, then serves again.
//
// Mounting needs root (CAP_SYS_ADMIN) and fiu needs fiu-utils: without them the tests skip and
// say why (under CI, where .ci/run installs fiu-utils, a missing fiu fails instead).
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, openSync, closeSync, rmSync, writeSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { after, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { testScratch } from '../helpers/scratch.ts';
import { type Service, type ServiceOptions, startService } from '../helpers/service.ts';
import { toolOrSkip } from '../helpers/tools.ts';

const sizes = {
  tmpfsMiB: 48,
  /** The free-space gate's minimum in the gate test. */
  freeBytesMin: 8 * 1024 * 1024,
  payloadBytes: 2_048,
  addsBefore: 50,
  requestTimeoutMs: 10_000,
  /** How long adds keep coming while the disk is full. */
  fullPhaseMs: 3_000,
  /** The gate reads the free space once a second: past this into the full phase, no add may pass. */
  gateSettleMs: 1_500,
  /** Once space is freed (or the disk works again), adds must be taken within this. */
  resumeMsMax: 20_000,
} as const;

const scratch = testScratch('fermata-disk-full');
const mounts: string[] = [];
after(() => {
  for (const dir of mounts) {
    spawnSync('umount', ['-l', dir]);
    rmSync(dir, { recursive: true, force: true });
  }
});

/** A fresh tmpfs of `sizes.tmpfsMiB`, or why one cannot be mounted here. */
function mountTmpfs(): { dir: string } | { skip: string } {
  const dir = mkdtempSync(join(tmpdir(), 'fermata-disk-full-mnt-'));
  const mounted = spawnSync('mount', ['-t', 'tmpfs', '-o', `size=${sizes.tmpfsMiB}m`, 'tmpfs', dir], { encoding: 'utf8' });
  if (mounted.status !== 0) {
    rmSync(dir, { recursive: true, force: true });
    return { skip: `cannot mount a tmpfs (needs root): ${(mounted.stderr || mounted.error?.message || '').trim()}` };
  }
  mounts.push(dir);
  return { dir };
}

const timerBody = JSON.stringify({ delay_ms: 3_600_000, target: 'https://example.com/hook', payload: Buffer.alloc(sizes.payloadBytes, 'p').toString('base64') });

interface AddAnswer {
  readonly status: number;
  readonly id?: string;
  readonly code?: string;
}

async function add(service: Service): Promise<AddAnswer> {
  const response = await fetch(`${service.url}/v1/timers`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: timerBody, signal: AbortSignal.timeout(sizes.requestTimeoutMs) });
  const body = (await response.json()) as { id?: string; error?: { code: string } };
  return { status: response.status, ...(body.id === undefined ? {} : { id: body.id }), ...(body.error === undefined ? {} : { code: body.error.code }) };
}

/** Adds until an answer is 201, for at most resumeMsMax; the ms it took. */
async function untilAdded(service: Service, acked: string[]): Promise<number> {
  const started = performance.now();
  while (performance.now() - started < sizes.resumeMsMax) {
    const answer = await add(service).catch(() => undefined);
    if (answer?.status === 201 && answer.id !== undefined) {
      acked.push(answer.id);
      return performance.now() - started;
    }
    await sleep(50);
  }
  throw new Error(`no add was taken within ${sizes.resumeMsMax} ms after the disk recovered:\n${service.output().slice(-4_000)}`);
}

/** Writes zeros to `path` until the file system has no space left; the bytes written. */
function fillUp(path: string): number {
  const fd = openSync(path, 'w');
  const chunk = Buffer.alloc(1024 * 1024);
  let written = 0;
  try {
    for (;;) written += writeSync(fd, chunk);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
  }
  // The last megabyte may not have fitted whole: fill what is left byte-exactly.
  const small = Buffer.alloc(4096);
  try {
    for (;;) written += writeSync(fd, small);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
  } finally {
    closeSync(fd);
  }
  return written;
}

/**
 * Adds for `fullPhaseMs` while the disk is full: every answer is a 201 (kept: the record fitted
 * in a page the log file already had) or a 507/503; with `refusedAfterMs`, none passes after it.
 */
async function addWhileFull(service: Service, acked: string[], refusedAfterMs?: number): Promise<Map<string, number>> {
  const refusals = new Map<string, number>();
  const started = performance.now();
  while (performance.now() - started < sizes.fullPhaseMs) {
    const sentAtMs = performance.now() - started;
    const answer = await add(service).catch((err: unknown): AddAnswer => ({ status: 0, code: String(err) }));
    if (answer.status === 201 && answer.id !== undefined) {
      assert.ok(refusedAfterMs === undefined || sentAtMs < refusedAfterMs, `an add sent ${sentAtMs.toFixed(0)} ms into a full disk was taken`);
      acked.push(answer.id);
      continue;
    }
    assert.ok(answer.status === 507 || answer.status === 503, `a full disk answers adds 507 or 503, not ${answer.status} (${answer.code}); the service said:\n${service.output().slice(-3_000)}`);
    refusals.set(`${answer.status} ${answer.code}`, (refusals.get(`${answer.status} ${answer.code}`) ?? 0) + 1);
  }
  return refusals;
}

/** `fermata serve` on `dataDir`, and `addsBefore` adds it acknowledged. */
async function serviceWithAdds(dataDir: string, options: ServiceOptions): Promise<{ service: Service; acked: string[] }> {
  const service = await startService(dataDir, (child) => scratch.children.add(child), options);
  const acked: string[] = [];
  for (let i = 0; i < sizes.addsBefore; i++) {
    const answer = await add(service);
    assert.equal(answer.status, 201);
    acked.push(answer.id as string);
  }
  return { service, acked };
}

/** Every acknowledged add is still there (pending) on `service`. */
async function assertKept(service: Service, acked: readonly string[], when: string): Promise<void> {
  for (const id of acked) {
    const response = await fetch(`${service.url}/v1/timers/${id}`, { signal: AbortSignal.timeout(sizes.requestTimeoutMs) });
    assert.equal(response.status, 200, `${when}: acknowledged timer ${id} is missing`);
    const body = (await response.json()) as { state?: string };
    assert.equal(body.state, 'pending', `${when}: timer ${id}`);
  }
}

async function restartAndCheck(dataDir: string, service: Service, acked: readonly string[]): Promise<void> {
  service.child.kill('SIGTERM');
  await service.exited;
  const again = await startService(dataDir, (child) => scratch.children.add(child));
  try {
    await assertKept(again, acked, 'after a restart');
  } finally {
    again.child.kill('SIGKILL');
    await again.exited;
  }
}

function configWith(freeBytesMin: number): string {
  const dir = scratch.tempDir('config');
  const path = join(dir, 'fermata.json');
  writeFileSync(path, JSON.stringify({ readiness: { disk_free_bytes_min: freeBytesMin } }));
  return path;
}

test('a full disk: adds are refused 507 DISK_FULL below the free-space minimum, and taken again within seconds once space is freed', { timeout: 120_000 }, async (t) => {
  const mount = mountTmpfs();
  if ('skip' in mount) return t.skip(mount.skip);
  const dataDir = join(mount.dir, 'data');
  const { service, acked } = await serviceWithAdds(dataDir, { args: ['--config', configWith(sizes.freeBytesMin)] });
  const filler = join(mount.dir, 'filler');
  fillUp(filler);
  const refusals = await addWhileFull(service, acked, sizes.gateSettleMs);
  t.diagnostic(`refusals while full: ${JSON.stringify(Object.fromEntries(refusals))}`);
  assert.ok((refusals.get('507 DISK_FULL') ?? 0) > 0, 'the gate refused adds as DISK_FULL');
  const ready = await fetch(`${service.url}/readyz`);
  assert.equal(ready.status, 503, '/readyz is red while the disk is full');
  await assertKept(service, acked, 'while the disk is full');

  rmSync(filler);
  const resumedMs = await untilAdded(service, acked);
  t.diagnostic(`adds taken again ${resumedMs.toFixed(0)} ms after the space was freed`);
  await assertKept(service, acked, 'after the space was freed');
  await restartAndCheck(dataDir, service, acked);
});

test('a write that finds no space poisons the log; the service opens the data directory again and takes adds once space is freed', { timeout: 120_000 }, async (t) => {
  const mount = mountTmpfs();
  if ('skip' in mount) return t.skip(mount.skip);
  const dataDir = join(mount.dir, 'data');
  // No free-space gate: the log's own writes meet the full disk.
  const { service, acked } = await serviceWithAdds(dataDir, { args: ['--config', configWith(0)] });
  const filler = join(mount.dir, 'filler');
  fillUp(filler);
  const refusals = await addWhileFull(service, acked);
  t.diagnostic(`refusals while full: ${JSON.stringify(Object.fromEntries(refusals))}`);
  assert.ok((refusals.get('507 WAL_POISONED') ?? 0) > 0, 'a write that found no space poisoned the log (507, the cause being ENOSPC)');
  assert.match(service.output(), /the log is poisoned: opening the data directory again/);

  rmSync(filler);
  const resumedMs = await untilAdded(service, acked);
  t.diagnostic(`adds taken again ${resumedMs.toFixed(0)} ms after the space was freed`);
  assert.match(service.output(), /serving again after the poisoned log/);
  await assertKept(service, acked, 'after the space was freed');
  await restartAndCheck(dataDir, service, acked);
});

test('writes failing with EIO (fiu) poison the log; recovery re-reads the disk and the service serves again once the disk works', { timeout: 120_000 }, async (t) => {
  const fiuRun = toolOrSkip(t, 'fiu-run');
  const fiuCtrl = fiuRun === undefined ? undefined : toolOrSkip(t, 'fiu-ctrl');
  if (fiuRun === undefined || fiuCtrl === undefined) return;
  const dir = scratch.tempDir('fiu');
  const fifoDir = join(dir, 'fifo');
  mkdirSync(fifoDir);
  const dataDir = join(dir, 'data');
  // fiu-run preloads libfiu's POSIX wrappers and opens a control FIFO; it execs node, so the pid is the service's.
  const { service, acked } = await serviceWithAdds(dataDir, { wrapper: [fiuRun, '-x', '-f', join(fifoDir, 'ctrl')] });
  const control = (command: string): void => {
    execFileSync(fiuCtrl, ['-f', join(fifoDir, 'ctrl'), '-c', command, String(service.child.pid)], { timeout: 10_000 });
  };
  // Positioned writes (libuv writes files with pwrite and pwritev) and fdatasync, with EIO (5).
  const failingWrites = ['posix/io/rw/pwrite', 'posix/io/rw/pwritev', 'posix/io/sync/fdatasync'];
  for (const name of failingWrites) control(`enable name=${name},failinfo=5`);
  const refusals = new Map<string, number>();
  for (let i = 0; i < 20; i++) {
    const answer = await add(service).catch((err: unknown): AddAnswer => ({ status: 0, code: String(err) }));
    assert.notEqual(answer.status, 201, 'no add is acknowledged while writes fail');
    refusals.set(`${answer.status} ${answer.code}`, (refusals.get(`${answer.status} ${answer.code}`) ?? 0) + 1);
    await sleep(50);
  }
  t.diagnostic(`answers while writes fail: ${JSON.stringify(Object.fromEntries(refusals))}`);
  assert.ok((refusals.get('503 WAL_POISONED') ?? 0) > 0, 'the failed write poisoned the log (503)');
  assert.match(service.output(), /"msg":"WAL poisoned"/);
  assert.equal((await fetch(`${service.url}/readyz`)).status, 503, '/readyz is red while the log is poisoned');

  for (const name of failingWrites) control(`disable name=${name}`);
  const resumedMs = await untilAdded(service, acked);
  t.diagnostic(`adds taken again ${resumedMs.toFixed(0)} ms after writes work again`);
  assert.match(service.output(), /serving again after the poisoned log/);
  await assertKept(service, acked, 'after recovery');
  await restartAndCheck(dataDir, service, acked);
});
