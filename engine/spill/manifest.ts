// The spill directory's MANIFEST: which runs and tombstones make up the state as of a WAL
// sequence (docs/format/spill.md). Replaced atomically: MANIFEST.tmp is written and
// fdatasynced, renamed over MANIFEST, and the directory fsynced, so after a power loss the
// directory holds the old manifest or the new one, whole. Main thread.
import { posix } from 'node:path';
import type { FileSystem } from '../fs/file-system.ts';
import { systemErrorCode } from '../errors.ts';
import { failpoint } from '../failpoints.ts';
import { spillLimits } from '../limits.ts';
import { manifestFileName, manifestTempFileName, parseRunFileName, spillCorrupt } from './format.ts';
import { decodeManifest, encodeManifest, type Manifest } from './manifest-codec.ts';
import { parseScheduleFileName, scheduleFileIds } from '../schedules/schedule-file.ts';
import { writeSynced } from './run-writer.ts';

export { decodeManifest, encodeManifest, type Manifest, type ManifestQueue, type SpilledRunMeta } from './manifest-codec.ts';

/** Makes `manifest` the directory's manifest: tmp file, fdatasync, rename, fsync of the directory. */
export async function writeManifest(fs: FileSystem, dir: string, manifest: Manifest): Promise<void> {
  const bytes = encodeManifest(manifest);
  const temp = posix.join(dir, manifestTempFileName);
  await writeSynced(fs, temp, bytes);
  failpoint('spill.manifest-before-rename');
  await fs.rename(temp, posix.join(dir, manifestFileName));
  await fs.syncDir(dir);
}

/** The directory's manifest, or undefined when it has none (a fresh directory). SPILL_CORRUPT when it does not check out. */
export async function readManifest(fs: FileSystem, dir: string, bytesMax: number = spillLimits.manifestBytesMax): Promise<Manifest | undefined> {
  let handle;
  try {
    handle = await fs.open(posix.join(dir, manifestFileName), 'read');
  } catch (err) {
    if (systemErrorCode(err) === 'ENOENT') return undefined;
    throw err;
  }
  let bytes: Uint8Array;
  try {
    const size = await handle.size();
    if (size > bytesMax) throw spillCorrupt(manifestFileName, 0, `${size} bytes, more than the ${bytesMax} a manifest may have`);
    bytes = new Uint8Array(size);
    let done = 0;
    while (done < size) {
      const read = await handle.read(bytes.subarray(done), done);
      if (read === 0) throw spillCorrupt(manifestFileName, done, `the file ended at byte ${done} while reading ${size}`);
      done += read;
    }
  } finally {
    await handle.close();
  }
  return decodeManifest(bytes, posix.join(dir, manifestFileName));
}

/**
 * Deletes the run, keys and schedules files `manifest` does not name, and a stale MANIFEST.tmp, then
 * fsyncs the directory if anything went. Other files are left alone. Returns the names removed.
 */
export async function removeUnreferenced(fs: FileSystem, dir: string, manifest: Manifest | undefined): Promise<string[]> {
  const named = new Set<number>();
  if (manifest !== undefined) {
    named.add(manifest.residentRun.runId);
    for (const run of manifest.spilledRuns) named.add(run.runId);
    for (const id of scheduleFileIds(manifest.scheduleFile)) named.add(id);
  }
  const removed: string[] = [];
  for (const name of await fs.list(dir)) {
    const runId = parseRunFileName(name) ?? parseScheduleFileName(name);
    if (name !== manifestTempFileName && (runId === undefined || named.has(runId))) continue;
    await fs.unlink(posix.join(dir, name));
    removed.push(name);
  }
  if (removed.length > 0) await fs.syncDir(dir);
  return removed.sort();
}
