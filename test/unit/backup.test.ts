// Backup and restore in process (cli/backup.ts, cli/restore.ts; decision 0027), against an
// engine on the real file system with 4 KiB WAL segments, so that checkpoints replace runs and
// delete segments while the backup runs. A checkpoint that finishes while the backup holds its
// files makes it open them again; under adds and checkpoints running together the restored
// directory holds every timer acknowledged before the backup began, once, and no other timer
// than acknowledged ones. A restore refuses a non-empty directory, a damaged, missing or extra
// file (naming it) and a backup of a later format, and leaves the target as it was; a backup
// refuses a target that is not empty or lies inside the data directory. The schedules files a
// manifest names are copied with it.
import assert from 'node:assert/strict';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { batchFromSpecs } from '../../engine/batch/timer-batch.ts';
import { ManualClock } from '../../engine/clock.ts';
import { Engine } from '../../engine/engine.ts';
import { errorCodes, isFermataError } from '../../engine/errors.ts';
import { takeBackup } from '../../cli/backup.ts';
import { BackupError } from '../../cli/backup-format.ts';
import { restoreBackup } from '../../cli/restore.ts';

const t0 = 1_800_000_000_000;
const hour = 3_600_000;
const scratch = mkdtempSync(join(tmpdir(), 'fermata-backup-'));
after(() => rmSync(scratch, { recursive: true, force: true }));
let dirs = 0;
const fresh = (name: string): string => join(scratch, `${name}-${++dirs}`);

const open = (dataDir: string): Promise<Engine> => Engine.open({ dataDir, clock: new ManualClock(t0), walLimits: { segmentBytes: 4096 } });

/** Adds one keyed timer (every third one a month ahead, so a checkpoint spills it) and records its id once acknowledged. */
async function addOne(engine: Engine, n: number, acked: Map<string, string>): Promise<void> {
  const key = `k-${n}`;
  const admitted = await engine.admit(batchFromSpecs([{ fireAtMs: t0 + hour + (n % 3 === 0 ? 30 * 24 * hour : n * 1000), target: 'https://hooks.example/x', key, payload: `timer ${n}` }]));
  acked.set(admitted.idOf(0), key);
}

/** What a restored directory holds: every timer's id and key, each id once. */
async function restoredTimers(dataDir: string): Promise<Map<string, string | null>> {
  const engine = await open(dataDir);
  try {
    const found = new Map<string, string | null>();
    for (const view of (await engine.listTimers({}, 100_000)).timers) {
      assert.ok(!found.has(view.id), `${view.id} listed twice`);
      found.set(view.id, view.key);
    }
    return found;
  } finally {
    await engine.close();
  }
}

function assertRestored(found: Map<string, string | null>, before: ReadonlyMap<string, string>, all: ReadonlyMap<string, string>): void {
  for (const [id, key] of before) assert.equal(found.get(id), key, `acknowledged before the backup began: ${id} (${key})`);
  for (const [id, key] of found) assert.equal(all.get(id), key ?? undefined, `never acknowledged: ${id}`);
  assert.equal(new Set(found.values()).size, found.size, 'no key twice');
}

test('a checkpoint finishing while the backup holds its files makes it open them again; the copy is whole', async () => {
  const source = fresh('source');
  const engine = await open(source);
  const acked = new Map<string, string>();
  for (let n = 0; n < 120; n++) await addOne(engine, n, acked);
  await engine.checkpoint(t0 + 24 * hour);
  for (let n = 120; n < 160; n++) await addOne(engine, n, acked);
  const before = new Map(acked);
  let moved = false;
  const backup = fresh('backup');
  const report = await takeBackup(source, backup, 'test', {
    onFilesOpened: async () => {
      if (moved) return;
      moved = true;
      // A checkpoint replaces the runs and deletes the segments the held manifest relied on.
      for (let n = 160; n < 200; n++) await addOne(engine, n, acked);
      await engine.checkpoint(t0 + 24 * hour);
    },
  });
  assert.equal(report.attempts, 2);
  assert.ok(report.index.checkpointSeq > 0);
  await engine.close();
  const restored = fresh('restored');
  await restoreBackup(backup, restored);
  assertRestored(await restoredTimers(restored), before, acked);
});

test('a checkpoint whose schedules are in a schedules file is backed up (to a tar file) with it, and restores with every schedule', async () => {
  const source = fresh('source');
  const engine = await open(source);
  for (const name of ['nightly', 'hourly']) await engine.putSchedule(name, { everyMs: hour, startAtMs: t0, target: 'https://hooks.example/s', queue: 'default', payload: new Uint8Array(0), headers: '' });
  await engine.checkpoint();
  await engine.close();
  const backup = `${fresh('backup')}.tar`; // the tar path too: restore keeps only the names a backup may hold
  const report = await takeBackup(source, backup, 'test');
  assert.ok(report.index.files.some((file) => /^spill\/schedules-\d{10}$/.test(file.path)), 'the schedules file is in BACKUP.json');
  const restored = fresh('restored');
  await restoreBackup(backup, restored);
  const reopened = await open(restored);
  try {
    assert.deepEqual(reopened.listSchedules(10).schedules.map((schedule) => schedule.name).sort(), ['hourly', 'nightly']);
  } finally {
    await reopened.close();
  }
});

test('under adds and checkpoints, the restored directory holds every timer acknowledged before the backup began, once, and no unacknowledged one', async () => {
  const source = fresh('source');
  const engine = await open(source);
  const acked = new Map<string, string>();
  let stop = false;
  let n = 0;
  const adding = (async () => {
    while (!stop) await Promise.all(Array.from({ length: 8 }, () => addOne(engine, n++, acked)));
  })();
  const checkpointing = (async () => {
    while (!stop) {
      await engine.checkpoint(t0 + 24 * hour);
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
  })();
  while (acked.size < 400) await new Promise((resolve) => setTimeout(resolve, 5));
  const reports = [];
  const befores = [];
  for (const to of [fresh('backup'), `${fresh('backup')}.tar`]) {
    befores.push(new Map(acked));
    reports.push({ to, report: await takeBackup(source, to, 'test') });
  }
  stop = true;
  await Promise.all([adding, checkpointing]);
  await engine.close();
  for (const [i, { to, report }] of reports.entries()) {
    const restored = fresh('restored');
    await restoreBackup(to, restored);
    const found = await restoredTimers(restored);
    assertRestored(found, befores[i] as Map<string, string>, acked);
    process.stderr.write(`# ${to}: ${found.size} timers, ${report.attempts} attempt(s), checkpoint ${report.index.checkpointSeq}, log to ${report.index.lastSeq}\n`);
  }
});

test('restore refuses a non-empty directory, a damaged, missing or extra file naming it, and a later backup format; the target stays as it was', async () => {
  const source = fresh('source');
  const engine = await open(source);
  for (let n = 0; n < 50; n++) await addOne(engine, n, new Map());
  await engine.checkpoint(t0 + 24 * hour);
  for (let n = 50; n < 60; n++) await addOne(engine, n, new Map());
  await engine.close();
  const backup = fresh('backup');
  const { index } = await takeBackup(source, backup, 'test');
  const segment = index.files.find((file) => file.path.startsWith('wal/'));
  assert.ok(segment !== undefined);

  const occupied = fresh('occupied');
  mkdirSync(occupied);
  writeFileSync(join(occupied, 'something'), 'x');
  await assert.rejects(restoreBackup(backup, occupied), (err) => err instanceof BackupError && err.file === occupied && /not empty/.test(err.message));
  assert.deepEqual(readdirSync(occupied), ['something']);

  const attempt = async (change: (folder: string) => void, check: (err: unknown) => boolean): Promise<void> => {
    const copy = fresh('changed');
    cpSync(backup, copy, { recursive: true });
    change(copy);
    const target = fresh('target');
    await assert.rejects(restoreBackup(copy, target), check);
    assert.ok(!existsSync(target) && !existsSync(`${target}.restoring`), 'nothing restored, nothing left behind');
  };
  await attempt(
    (copy) => {
      const path = join(copy, segment.path);
      const bytes = readFileSync(path);
      bytes[bytes.length - 1] = (bytes[bytes.length - 1] as number) ^ 0xff;
      writeFileSync(path, bytes);
    },
    (err) => err instanceof BackupError && err.file.endsWith(`changed-${dirs - 1}/${segment.path}`) && /SHA-256 .* the file is damaged/.test(err.message),
  );
  await attempt(
    (copy) => rmSync(join(copy, segment.path)),
    (err) => err instanceof BackupError && err.file.endsWith(segment.path) && /missing/.test(err.message),
  );
  await attempt(
    (copy) => writeFileSync(join(copy, 'wal', '0000009999.wal'), 'x'),
    (err) => err instanceof BackupError && /changed-\d+\/wal\/0000009999\.wal: is not named in BACKUP\.json/.test(err.message),
  );
  await attempt(
    (copy) => rmSync(join(copy, 'BACKUP.json')),
    (err) => err instanceof BackupError && /BACKUP\.json: not a complete backup/.test(err.message),
  );
  await attempt(
    (copy) => {
      const path = join(copy, 'BACKUP.json');
      writeFileSync(path, JSON.stringify({ ...JSON.parse(readFileSync(path, 'utf8')), version: 2 }));
    },
    (err) => isFermataError(err, errorCodes.formatTooNew) && /backup format version 2 is newer than this build reads \(version 1\)/.test(err.message),
  );
  await assert.rejects(takeBackup(source, occupied, 'test'), (err) => err instanceof BackupError && /not empty/.test(err.message));
  await assert.rejects(takeBackup(source, join(source, 'backup'), 'test'), (err) => err instanceof BackupError && /inside the data directory/.test(err.message));
  assert.ok(!existsSync(join(source, 'backup')));
});
