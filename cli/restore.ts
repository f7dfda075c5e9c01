// `fermata restore --from FILE.tar|DIR --data NEWDIR`: a backup (cli/backup-format.ts) made into a
// data directory the service can start on. NEWDIR must be absent or empty; the files go first
// into NEWDIR.restoring beside it, each checked against BACKUP.json (size and SHA-256; a file
// missing, extra, or different is named), the manifest and every segment read for a format
// version this build knows, all made durable, and only then is the folder renamed to NEWDIR. A
// refused restore leaves NEWDIR as it was. The command's main thread.
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { copyFile, mkdir, open, readdir, readFile, rename, rm, rmdir, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { parseArgs } from 'node:util';
import { extract as extractTar } from 'tar';
import { formatTooNew } from '../engine/format-version.ts';
import { systemErrorCode } from '../engine/errors.ts';
import { decodeManifest } from '../engine/spill/manifest-codec.ts';
import { decodeSegmentHeader } from '../engine/wal/decoder.ts';
import { formatVersion as walFormatVersion } from '../engine/wal/format.ts';
import { BackupError, type BackupIndex, backupIndexName, isBackupPath, readBackupIndex } from './backup-format.ts';

export const restoreUsage = `Usage: fermata restore --from FILE.tar|DIR --data NEWDIR

Makes the backup FILE.tar or DIR (from \`fermata backup\`) into the data directory NEWDIR, which
must be absent or empty. Every file is checked against the backup's BACKUP.json (size and
SHA-256) before NEWDIR is made; a bad or missing file is named and nothing is restored. Then
start the service with --data NEWDIR.
`;

async function sha256Of(path: string): Promise<string> {
  const hash = createHash('sha256');
  for await (const chunk of createReadStream(path) as AsyncIterable<Buffer>) hash.update(chunk);
  return hash.digest('hex');
}

/** Every regular file under `dir`, as paths relative to it with '/'. */
async function filesUnder(dir: string, prefix = ''): Promise<string[]> {
  const out: string[] = [];
  for (const entry of await readdir(join(dir, prefix), { withFileTypes: true })) {
    const path = prefix === '' ? entry.name : `${prefix}/${entry.name}`;
    if (entry.isDirectory()) out.push(...(await filesUnder(dir, path)));
    else out.push(path);
  }
  return out;
}

/**
 * Checks the files in `folder` against its BACKUP.json: the same set, each its size and SHA-256;
 * and the formats readable. `shown` names a file in errors as the backup it came from has it.
 */
async function verifyFolder(folder: string, shown: (path: string) => string): Promise<BackupIndex> {
  const index = await readBackupIndex(folder, shown(backupIndexName));
  const named = new Set(index.files.map((file) => file.path));
  for (const path of await filesUnder(folder)) {
    if (path !== backupIndexName && !named.has(path)) throw new BackupError(shown(path), `is not named in ${backupIndexName}`);
  }
  for (const file of index.files) {
    const path = join(folder, file.path);
    const size = await stat(path).then(
      (found) => found.size,
      (err: unknown) => {
        if (systemErrorCode(err) === 'ENOENT') throw new BackupError(shown(file.path), `is missing: ${backupIndexName} names it`);
        throw err;
      },
    );
    if (size !== file.bytes) throw new BackupError(shown(file.path), `has ${size} bytes, ${backupIndexName} says ${file.bytes}`);
    const digest = await sha256Of(path);
    if (digest !== file.sha256) throw new BackupError(shown(file.path), `SHA-256 ${digest}, ${backupIndexName} says ${file.sha256}: the file is damaged`);
  }
  // The checksums held: what remains is whether this build reads the formats the files are in.
  for (const file of index.files) {
    const path = join(folder, file.path);
    if (file.path === 'spill/MANIFEST') decodeManifest(await readFile(path), shown(file.path));
    if (file.path.startsWith('wal/')) {
      const header = decodeSegmentHeader(new Uint8Array(await readFile(path)));
      if (header.verdict === 'too-new') throw formatTooNew(shown(file.path), 'WAL segment format version', header.version, `version ${walFormatVersion}`);
    }
  }
  return index;
}

async function syncPath(path: string): Promise<void> {
  const handle = await open(path, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** Refuses a `dataDir` that holds anything; true when it is there (and empty), false when absent. */
async function emptyOrAbsent(dataDir: string): Promise<boolean> {
  let entries: string[];
  try {
    entries = await readdir(dataDir);
  } catch (err) {
    if (systemErrorCode(err) === 'ENOENT') return false;
    throw err;
  }
  if (entries.length > 0) throw new BackupError(dataDir, 'is not empty: a restore goes into a new or empty directory');
  return true;
}

/** Restores the backup at `from` (a folder, or a tar file) into `dataDir`. */
export async function restoreBackup(from: string, dataDir: string): Promise<BackupIndex> {
  const fromStat = await stat(from).catch((err: unknown) => {
    throw new BackupError(from, `cannot be read: ${(err as Error).message}`);
  });
  // Checked before anything is written, and again before the rename takes its name.
  await emptyOrAbsent(dataDir);
  const staging = `${dataDir}.restoring`;
  if ((await stat(staging).catch(() => undefined)) !== undefined) throw new BackupError(staging, 'exists: left by a restore that stopped; remove it');
  await mkdir(staging, { recursive: true });
  try {
    if (fromStat.isDirectory()) {
      // Everything the folder holds is copied, and checked below as the files of a tar would be.
      await mkdir(join(staging, 'spill'));
      await mkdir(join(staging, 'wal'));
      for (const path of await filesUnder(from)) {
        if (!isBackupPath(path)) throw new BackupError(join(from, path), 'is not a file a backup holds');
        await copyFile(join(from, path), join(staging, path));
      }
    } else {
      // Only plain files of the names a backup holds are taken out: no links, nothing outside staging.
      await extractTar({ file: from, cwd: staging, strict: true, preserveOwner: false, filter: (path, entry) => isBackupPath(path) && 'type' in entry && entry.type === 'File' });
    }
    const index = await verifyFolder(staging, (path) => (fromStat.isDirectory() ? join(from, path) : `${from}:${path}`));
    await rm(join(staging, backupIndexName));
    for (const folder of ['spill', 'wal']) await mkdir(join(staging, folder), { recursive: true });
    for (const file of index.files) {
      const handle = await open(join(staging, file.path), 'r+');
      try {
        await handle.datasync();
      } finally {
        await handle.close();
      }
    }
    for (const folder of ['spill', 'wal', '.']) await syncPath(join(staging, folder));
    if (await emptyOrAbsent(dataDir)) await rmdir(dataDir);
    await rename(staging, dataDir);
    await syncPath(dirname(dataDir));
    return index;
  } catch (err) {
    await rm(staging, { recursive: true, force: true });
    throw err;
  }
}

export async function restore(argv: string[]): Promise<number> {
  let values: { from?: string | undefined; data?: string | undefined; help?: boolean | undefined };
  try {
    ({ values } = parseArgs({ args: argv, options: { from: { type: 'string' }, data: { type: 'string' }, help: { type: 'boolean', short: 'h' } }, strict: true }));
  } catch (err) {
    process.stderr.write(`fermata restore: ${(err as Error).message}\n\n${restoreUsage}`);
    return 2;
  }
  if (values.help === true) {
    process.stdout.write(restoreUsage);
    return 0;
  }
  if (values.from === undefined || values.data === undefined) {
    process.stderr.write(`fermata restore: --from and --data are required\n\n${restoreUsage}`);
    return 2;
  }
  try {
    const index = await restoreBackup(values.from, values.data);
    process.stdout.write(`${JSON.stringify({ msg: 'backup restored', from: values.from, data: values.data, createdAt: index.createdAt, checkpointSeq: index.checkpointSeq, lastSeq: index.lastSeq, files: index.files.length })}\n`);
    return 0;
  } catch (err) {
    process.stderr.write(`fermata restore: ${(err as Error).message}\n`);
    return 1;
  }
}
