// What a backup is on disk (docs/operations.md, "Backup and restore"; decision 0027): a folder
// holding a data directory's checkpoint and log, laid out as the data directory lays them out
// (spill/MANIFEST, its runs and keys sidecars and its schedules files; wal/ segments from the one
// holding the record after the checkpoint), and BACKUP.json, written last, which names every
// file with its size and SHA-256. A backup without BACKUP.json is incomplete and is never
// restored. The same folder may be packed into one tar file (a `--to` ending in .tar). Used by
// `fermata backup` and `fermata restore`, on the command's main thread.
//
//   BACKUP.json = { format: "fermata-backup", version: 1, fermata, createdAt, checkpointSeq,
//                   lastSeq, formats: { wal, recordSet, manifest, spill }, files: [{ path, bytes, sha256 }] }
import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { formatTooNew, formatVersions } from '../engine/format-version.ts';

export const backupIndexName = 'BACKUP.json';
export const backupFormat = 'fermata-backup';
/** The version of the index's shape and of the folder's layout. */
export const backupFormatVersion = 1;

export interface BackupFile {
  /** Relative to the backup (and to the data directory it restores to): `spill/…` or `wal/…`. */
  readonly path: string;
  readonly bytes: number;
  readonly sha256: string;
}

export interface BackupIndex {
  readonly format: typeof backupFormat;
  readonly version: number;
  /** The fermata version that took it. */
  readonly fermata: string;
  readonly createdAt: string;
  /** The WAL sequence its manifest covers (0: none). */
  readonly checkpointSeq: number;
  /** The last WAL sequence it holds: every record acknowledged before the backup began is at or before it. */
  readonly lastSeq: number;
  readonly formats: typeof formatVersions;
  readonly files: readonly BackupFile[];
}

/** Paths a backup may name: the data directory's own folders and names, nothing that climbs out. */
const filePathPattern = /^(spill\/(MANIFEST|run-\d{10}\.(arrow|keys)|schedules-\d{10}|schedule-marks-\d{10})|wal\/\d{10}\.wal)$/;

/** Whether `path` (relative, '/'-separated) is one a backup may hold: BACKUP.json, or a data directory's own file. */
export function isBackupPath(path: string): boolean {
  return path === backupIndexName || filePathPattern.test(path);
}

export function sha256(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** A backup that cannot be taken or restored as it is: names the file and what is wrong. */
export class BackupError extends Error {
  readonly file: string;

  constructor(file: string, what: string) {
    super(`${file}: ${what}`);
    this.name = 'BackupError';
    this.file = file;
  }
}

function backupInvalid(file: string, what: string): BackupError {
  return new BackupError(file, what);
}

/**
 * BACKUP.json of the backup folder `dir`, checked: its format, a version this build reads, every
 * file named once, safely. Errors name it `shownAs` (where the backup the folder came from has it).
 */
export async function readBackupIndex(dir: string, shownAs: string = join(dir, backupIndexName)): Promise<BackupIndex> {
  const path = shownAs;
  let index: unknown;
  try {
    index = JSON.parse(await readFile(join(dir, backupIndexName), 'utf8'));
  } catch (err) {
    throw backupInvalid(path, `not a complete backup (${(err as Error).message})`);
  }
  const doc = (typeof index === 'object' && index !== null ? index : {}) as Record<string, unknown>;
  if (doc.format !== backupFormat) throw backupInvalid(path, `not a fermata backup index (format ${JSON.stringify(doc.format)})`);
  if (typeof doc.version !== 'number' || !Number.isInteger(doc.version) || doc.version < 1) throw backupInvalid(path, `bad version ${JSON.stringify(doc.version)}`);
  if (doc.version > backupFormatVersion) throw formatTooNew(path, 'backup format version', doc.version, `version ${backupFormatVersion}`);
  const files = doc.files;
  if (!Array.isArray(files)) throw backupInvalid(path, 'files is not a list');
  const seen = new Set<string>();
  for (const file of files as unknown[]) {
    const entry = (typeof file === 'object' && file !== null ? file : {}) as Record<string, unknown>;
    const ok = typeof entry.path === 'string' && filePathPattern.test(entry.path) && !seen.has(entry.path) && Number.isSafeInteger(entry.bytes) && typeof entry.sha256 === 'string' && /^[0-9a-f]{64}$/.test(entry.sha256);
    if (!ok) throw backupInvalid(path, `bad file entry ${JSON.stringify(file)}`);
    seen.add(entry.path as string);
  }
  for (const field of ['checkpointSeq', 'lastSeq']) if (!Number.isSafeInteger(doc[field])) throw backupInvalid(path, `bad ${field}`);
  return doc as unknown as BackupIndex;
}
