// `fermata backup --data DIR --to FILE|DIR`: a consistent copy of a data directory, taken while
// the service runs on it, without asking the service anything and without stopping it for a
// moment (decision 0027). It rests on what the data directory already guarantees
// (docs/format/spill.md, "The checkpoint sequence"; docs/format/wal.md): MANIFEST is replaced
// whole, by a rename; the runs a manifest names never change; segments are only appended to, and
// are deleted only once a newer manifest covering their records is durable. So:
//
//   read MANIFEST ─► open the runs it names and every segment ─► MANIFEST still the same? (else again)
//     ─► copy from the open files (a deletion now cannot take them) ─► cut the last segment's copy
//     at its last whole record ─► BACKUP.json (sizes, SHA-256), written last
//
// Every record acknowledged before the backup began is durable in a segment that exists when the
// segments are listed (after it began) and is not deleted before it is opened (the manifest did
// not change in between): the copy holds it. What was being written while the copy was read may
// be cut off; it was not acknowledged before the backup began. The command's main thread.
import { createHash } from 'node:crypto';
import { mkdir, open, readdir, readFile, rename, rm, stat, type FileHandle } from 'node:fs/promises';
import { dirname, join, resolve, sep } from 'node:path';
import { parseArgs } from 'node:util';
import { create as createTar } from 'tar';
import { formatTooNew, formatVersions } from '../engine/format-version.ts';
import { systemErrorCode } from '../engine/errors.ts';
import { decodeManifest, type Manifest } from '../engine/spill/manifest-codec.ts';
import { keysFileName, manifestFileName, runFileName } from '../engine/spill/format.ts';
import { scheduleFileName, scheduleMarksFileName } from '../engine/schedules/schedule-file.ts';
import { decodeFrame, decodeSegmentHeader } from '../engine/wal/decoder.ts';
import { formatVersion as walFormatVersion, parseSegmentFileName, segmentFileName, segmentHeaderBytes } from '../engine/wal/format.ts';
import { BackupError, type BackupFile, backupFormat, backupFormatVersion, type BackupIndex, backupIndexName, sha256 } from './backup-format.ts';

export const backupUsage = `Usage: fermata backup --data DIR --to FILE.tar|DIR

Copies the data directory DIR, while the service runs on it or not, into a new directory, or
into one tar file when the name ends in .tar: its checkpoint (spill/) and the log segments after
it (wal/), and BACKUP.json naming every file with its size and SHA-256. Every timer acknowledged
before the backup began is in it. The service is neither asked nor slowed, beyond the disk reads.
Restore it with \`fermata restore --from FILE.tar|DIR --data NEWDIR\`.
`;

/** Runs are copied in reads of this size, through one buffer: fewer trips through the threadpool than a stream's 64 KiB, and no garbage. */
const copyChunkBytes = 4 * 1024 * 1024;

/** Times the manifest may change under the backup (a checkpoint finishing) before it gives up. */
const snapshotAttemptsMax = 100;

export interface BackupReport {
  readonly index: BackupIndex;
  /** How many times the files were opened: more than 1 when checkpoints finished meanwhile. */
  readonly attempts: number;
}

/** The data directory's files as of one manifest, held open so that no deletion can take them. */
interface Snapshot {
  readonly manifest: Uint8Array | undefined;
  readonly checkpointSeq: number;
  /** The files the manifest names: runs, keys sidecars, schedules files. */
  readonly runs: ReadonlyArray<{ readonly path: string; readonly handle: FileHandle }>;
  readonly segments: ReadonlyArray<{ readonly id: number; readonly handle: FileHandle }>;
}

async function readIfThere(path: string): Promise<Uint8Array | undefined> {
  try {
    return await readFile(path);
  } catch (err) {
    if (systemErrorCode(err) === 'ENOENT') return undefined;
    throw err;
  }
}

async function openIfThere(path: string): Promise<FileHandle | undefined> {
  try {
    return await open(path, 'r');
  } catch (err) {
    if (systemErrorCode(err) === 'ENOENT') return undefined;
    throw err;
  }
}

async function segmentIds(walDir: string): Promise<number[]> {
  let names: string[];
  try {
    names = await readdir(walDir);
  } catch (err) {
    if (systemErrorCode(err) === 'ENOENT') return [];
    throw err;
  }
  return names.flatMap((name) => parseSegmentFileName(name) ?? []).sort((a, b) => a - b);
}

const sameBytes = (a: Uint8Array | undefined, b: Uint8Array | undefined): boolean => (a === undefined ? b === undefined : b !== undefined && Buffer.compare(a, b) === 0);

export interface BackupOptions {
  /** Awaited each time the files are open, before the manifest is read again: a test's moment to finish a checkpoint there. */
  readonly onFilesOpened?: () => Promise<void>;
}

/** The files beside the manifest that it names: its runs, their keys sidecars, its schedules (and marks) file. */
function checkpointFileNames(manifest: Manifest): string[] {
  const runs = [manifest.residentRun, ...manifest.spilledRuns].flatMap((run) => [runFileName(run.runId), keysFileName(run.runId)]);
  const schedules = manifest.scheduleFile;
  if (schedules === undefined) return runs;
  return [...runs, scheduleFileName(schedules.fileId), ...(schedules.marks === undefined ? [] : [scheduleMarksFileName(schedules.marks.fileId)])];
}

/** One try: the manifest, its runs and the segments opened; undefined when a checkpoint moved on meanwhile. */
async function trySnapshot(dataDir: string, options: BackupOptions): Promise<Snapshot | undefined> {
  const manifestPath = join(dataDir, 'spill', manifestFileName);
  const manifestBytes = await readIfThere(manifestPath);
  const manifest: Manifest | undefined = manifestBytes === undefined ? undefined : decodeManifest(manifestBytes, manifestPath);
  const opened: FileHandle[] = [];
  const runs: Array<{ path: string; handle: FileHandle }> = [];
  const segments: Array<{ id: number; handle: FileHandle }> = [];
  let whole = false;
  try {
    for (const name of manifest === undefined ? [] : checkpointFileNames(manifest)) {
      const handle = await openIfThere(join(dataDir, 'spill', name));
      // A file of this manifest gone: a later checkpoint replaced it and trimmed it.
      if (handle === undefined) return undefined;
      opened.push(handle);
      runs.push({ path: `spill/${name}`, handle });
    }
    for (const id of await segmentIds(join(dataDir, 'wal'))) {
      // One gone since the listing was trimmed: its records are covered by this manifest or a later one.
      const handle = await openIfThere(join(dataDir, 'wal', segmentFileName(id)));
      if (handle === undefined) continue;
      opened.push(handle);
      segments.push({ id, handle });
    }
    await options.onFilesOpened?.();
    if (!sameBytes(manifestBytes, await readIfThere(manifestPath))) return undefined;
    whole = true;
    return { manifest: manifestBytes, checkpointSeq: manifest?.checkpointSeq ?? 0, runs, segments };
  } finally {
    if (!whole) await Promise.all(opened.map((handle) => handle.close()));
  }
}

/** A held segment the backup copies: its id, file and first sequence. */
interface HeldSegment {
  readonly id: number;
  readonly handle: FileHandle;
  readonly baseSeq: number;
}

/** A held segment's first sequence, from its header; undefined for a last segment whose header was still being written. */
async function baseSeqOf(path: string, handle: FileHandle, isLast: boolean): Promise<number | undefined> {
  const bytes = new Uint8Array(segmentHeaderBytes);
  const { bytesRead } = await handle.read(bytes, 0, segmentHeaderBytes, 0);
  const header = decodeSegmentHeader(bytes.subarray(0, bytesRead));
  if (header.verdict === 'too-new') throw formatTooNew(path, 'WAL segment format version', header.version, `version ${walFormatVersion}`);
  if (header.verdict === 'ok') return header.header.baseSeq;
  if (isLast) return undefined;
  throw new BackupError(path, `${header.reason}: the log is damaged; the service would refuse it too`);
}

/** The segments a restore needs: from the one holding the record after the checkpoint to the last, ids consecutive. */
async function logAfter(dataDir: string, snapshot: Snapshot): Promise<HeldSegment[]> {
  const walDir = join(dataDir, 'wal');
  const held: HeldSegment[] = [];
  for (const [i, { id, handle }] of snapshot.segments.entries()) {
    const baseSeq = await baseSeqOf(join(walDir, segmentFileName(id)), handle, i === snapshot.segments.length - 1);
    if (baseSeq !== undefined) held.push({ id, handle, baseSeq });
  }
  // Segments wholly before the checkpoint are not needed (a checkpoint would delete them).
  let first = 0;
  for (let i = 0; i < held.length; i++) if ((held[i] as HeldSegment).baseSeq <= snapshot.checkpointSeq + 1) first = i;
  const needed = held.slice(first);
  const head = needed[0];
  if (head === undefined) {
    if (snapshot.checkpointSeq > 0) throw new BackupError(walDir, `holds no segment, but the checkpoint covers up to sequence ${snapshot.checkpointSeq}`);
    return needed;
  }
  if (head.baseSeq > snapshot.checkpointSeq + 1) throw new BackupError(join(walDir, segmentFileName(head.id)), `starts at sequence ${head.baseSeq}, after the checkpoint's ${snapshot.checkpointSeq} + 1: records are missing`);
  for (let i = 1; i < needed.length; i++) {
    if ((needed[i] as HeldSegment).id !== (needed[i - 1] as HeldSegment).id + 1) throw new BackupError(join(walDir, segmentFileName((needed[i - 1] as HeldSegment).id + 1)), 'is missing from the sequence of segments');
  }
  return needed;
}

/**
 * A held segment's bytes up to the end of its last whole record, and that record's sequence. A
 * sealed one must read to its end, as recovery would demand; the last one was being written, so
 * its copy stops at the first frame that is not a whole record. `expectedBaseSeq` (the segment
 * before it's last sequence + 1) is checked.
 */
async function segmentCopy(path: string, segment: HeldSegment, isLast: boolean, expectedBaseSeq: number | undefined): Promise<{ bytes: Uint8Array; lastSeq: number }> {
  if (expectedBaseSeq !== undefined && segment.baseSeq !== expectedBaseSeq) throw new BackupError(path, `starts at sequence ${segment.baseSeq}, the segment before ended at ${expectedBaseSeq - 1}`);
  const bytes = new Uint8Array(await segment.handle.readFile());
  let offset = segmentHeaderBytes;
  let seq = segment.baseSeq;
  for (;;) {
    const frame = decodeFrame(bytes, offset, segment.id, seq);
    if (frame.verdict === 'record') {
      offset = frame.next;
      seq++;
      continue;
    }
    if (frame.verdict !== 'end' && !isLast) throw new BackupError(path, `${frame.reason} at offset ${offset}: the log is damaged; the service would refuse it too`);
    return { bytes: bytes.subarray(0, offset), lastSeq: seq - 1 };
  }
}

/** Writes `bytes` to a new file and makes it durable. */
async function writeNew(path: string, bytes: Uint8Array): Promise<void> {
  const handle = await open(path, 'wx');
  try {
    await handle.writeFile(bytes);
    await handle.datasync();
  } finally {
    await handle.close();
  }
}

/** Copies a held file from its start to a new file, durably, hashing it on the way (one buffer, reused). */
async function copyHeld(from: FileHandle, path: string): Promise<{ bytes: number; sha256: string }> {
  const hash = createHash('sha256');
  const buffer = Buffer.allocUnsafe(copyChunkBytes);
  const out = await open(path, 'wx');
  let bytes = 0;
  try {
    for (;;) {
      const { bytesRead } = await from.read(buffer, 0, buffer.length, bytes);
      if (bytesRead === 0) break;
      const chunk = buffer.subarray(0, bytesRead);
      hash.update(chunk);
      await out.write(chunk, 0, bytesRead, bytes);
      bytes += bytesRead;
    }
    await out.datasync();
  } finally {
    await out.close();
  }
  return { bytes, sha256: hash.digest('hex') };
}

async function syncDir(path: string): Promise<void> {
  const handle = await open(path, 'r');
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

/** A folder to write the backup into: `dir` itself, which must be absent or empty. */
async function emptyFolder(dir: string): Promise<void> {
  try {
    const entries = await readdir(dir);
    if (entries.length > 0) throw new BackupError(dir, 'is not empty: a backup goes into a new or empty directory');
  } catch (err) {
    if (systemErrorCode(err) !== 'ENOENT') throw err;
    await mkdir(dir, { recursive: true });
  }
}

/** Copies what `snapshot` holds into the folder `out`, BACKUP.json last. */
async function writeBackupFolder(dataDir: string, snapshot: Snapshot, out: string, fermata: string): Promise<BackupIndex> {
  const segments = await logAfter(dataDir, snapshot);
  await mkdir(join(out, 'spill'));
  await mkdir(join(out, 'wal'));
  const files: BackupFile[] = [];
  if (snapshot.manifest !== undefined) {
    await writeNew(join(out, 'spill', manifestFileName), snapshot.manifest);
    files.push({ path: `spill/${manifestFileName}`, bytes: snapshot.manifest.length, sha256: sha256(snapshot.manifest) });
  }
  for (const run of snapshot.runs) files.push({ path: run.path, ...(await copyHeld(run.handle, join(out, run.path))) });
  // One segment in memory at a time: the log may hold as many bytes as the resident timers.
  let lastSeq = snapshot.checkpointSeq;
  for (const [i, segment] of segments.entries()) {
    const path = `wal/${segmentFileName(segment.id)}`;
    const copy = await segmentCopy(join(dataDir, path), segment, i === segments.length - 1, i === 0 ? undefined : lastSeq + 1);
    await writeNew(join(out, path), copy.bytes);
    files.push({ path, bytes: copy.bytes.length, sha256: sha256(copy.bytes) });
    lastSeq = copy.lastSeq;
  }
  for (const folder of ['spill', 'wal']) await syncDir(join(out, folder));
  const index: BackupIndex = {
    format: backupFormat,
    version: backupFormatVersion,
    fermata,
    createdAt: new Date().toISOString(),
    checkpointSeq: snapshot.checkpointSeq,
    lastSeq,
    formats: formatVersions,
    files,
  };
  await writeNew(join(out, `${backupIndexName}.tmp`), new TextEncoder().encode(`${JSON.stringify(index, null, 1)}\n`));
  await rename(join(out, `${backupIndexName}.tmp`), join(out, backupIndexName));
  await syncDir(out);
  return index;
}

/** The backup of `dataDir` into `to`: a folder, or a tar file when `to` ends in .tar. `fermata` is this build's version, for BACKUP.json. */
export async function takeBackup(dataDir: string, to: string, fermata: string, options: BackupOptions = {}): Promise<BackupReport> {
  // Inside the data directory the backup would lie among the files it copies, on the disk it guards against.
  if (`${resolve(to)}${sep}`.startsWith(`${resolve(dataDir)}${sep}`)) throw new BackupError(to, `is inside the data directory ${dataDir}: back up to another place`);
  const asTar = to.endsWith('.tar');
  const folder = asTar ? `${to}.partial` : to;
  if (asTar) {
    if ((await stat(to).catch(() => undefined)) !== undefined) throw new BackupError(to, 'exists: a backup is written to a new file');
    await mkdir(folder);
  } else {
    await emptyFolder(folder);
  }
  try {
    const { index, attempts } = await copyInto(dataDir, folder, fermata, options);
    if (asTar) {
      const partial = `${to}.partial.tar`;
      await createTar({ file: partial, cwd: folder, portable: true }, [backupIndexName, ...index.files.map((file) => file.path)]);
      const handle = await open(partial, 'r+');
      try {
        await handle.datasync();
      } finally {
        await handle.close();
      }
      await rename(partial, to);
      await syncDir(dirname(to));
      await rm(folder, { recursive: true });
    }
    return { index, attempts };
  } catch (err) {
    // A backup that stopped leaves nothing that could be taken for one.
    if (asTar) await Promise.all([rm(folder, { recursive: true, force: true }), rm(`${to}.partial.tar`, { force: true })]);
    else await Promise.all(['spill', 'wal', `${backupIndexName}.tmp`].map((name) => rm(join(folder, name), { recursive: true, force: true })));
    throw err;
  }
}

/** The snapshot taken (again while checkpoints move the manifest on) and copied into `folder`. */
async function copyInto(dataDir: string, folder: string, fermata: string, options: BackupOptions): Promise<BackupReport> {
  let snapshot: Snapshot | undefined;
  let attempts = 0;
  while (snapshot === undefined) {
    if (++attempts > snapshotAttemptsMax) throw new BackupError(join(dataDir, 'spill', manifestFileName), `changed ${snapshotAttemptsMax} times while the backup opened its files`);
    snapshot = await trySnapshot(dataDir, options);
  }
  try {
    return { index: await writeBackupFolder(dataDir, snapshot, folder, fermata), attempts };
  } finally {
    await Promise.all([...snapshot.runs, ...snapshot.segments].map(({ handle }) => handle.close()));
  }
}

export async function backup(argv: string[], fermata: string): Promise<number> {
  let values: { data?: string | undefined; to?: string | undefined; help?: boolean | undefined };
  try {
    ({ values } = parseArgs({ args: argv, options: { data: { type: 'string' }, to: { type: 'string' }, help: { type: 'boolean', short: 'h' } }, strict: true }));
  } catch (err) {
    process.stderr.write(`fermata backup: ${(err as Error).message}\n\n${backupUsage}`);
    return 2;
  }
  if (values.help === true) {
    process.stdout.write(backupUsage);
    return 0;
  }
  if (values.data === undefined || values.to === undefined) {
    process.stderr.write(`fermata backup: --data and --to are required\n\n${backupUsage}`);
    return 2;
  }
  try {
    const { index, attempts } = await takeBackup(values.data, values.to, fermata);
    const bytes = index.files.reduce((sum, file) => sum + file.bytes, 0);
    process.stdout.write(`${JSON.stringify({ msg: 'backup written', to: values.to, from: values.data, checkpointSeq: index.checkpointSeq, lastSeq: index.lastSeq, files: index.files.length, bytes, attempts })}\n`);
    return 0;
  } catch (err) {
    process.stderr.write(`fermata backup: ${(err as Error).message}\n`);
    return 1;
  }
}
