// The versions of every on-disk format this build writes and reads, in one place, and the one
// coded error for a file written by a newer build: FORMAT_TOO_NEW, naming the file, the version
// found and the one this build knows. It is never a corruption error: the bytes checked out (a
// header's checksum, a record's checksum), they are only from a later release, and the operator's
// remedy is to run that release, not to restore. Pure; any thread.
//
//   format            where its version lives                    written  read
//   WAL segment       segment header bytes 8–9                   1        1
//   record-type set   a WAL segment's version (types 1–13)       1        1
//   spill manifest    manifest header bytes 12–13                5        1–5
//   spill run, keys   their manifest's run entries ("version")   4        1–4
//
// The record-type set rides on the segment version: a release that adds a record type raises the
// WAL version of the segments it writes (docs/format/wal.md, "Versions"). A record of a type this
// build does not know, in a complete record whose checksum matches, is refused the same way,
// because a build can only have written it as a newer one (a torn or garbled record fails its
// checksum first and stays what recovery makes of it).
import { errorCodes, FermataError } from './errors.ts';
import { recordType } from './records.ts';
import { manifestFormatVersion, spillFormatVersion } from './spill/format.ts';
import { formatVersion as walFormatVersion } from './wal/format.ts';

/** The record types of record-type set 1 (docs/format/engine-records.md). */
const recordTypesKnown: ReadonlySet<number> = new Set(Object.values(recordType));

/** The record-type set this build writes and reads: the types above. */
export const recordSetVersion = walFormatVersion;

/** The highest record type this build knows (types are numbered without gaps from 1). */
export const recordTypeKnownMax = Math.max(...recordTypesKnown);

export function isKnownRecordType(type: number): boolean {
  return recordTypesKnown.has(type);
}

/** The format versions this build writes, for logs, `fermata --version` and backups. */
export const formatVersions = { wal: walFormatVersion, recordSet: recordSetVersion, manifest: manifestFormatVersion, spill: spillFormatVersion } as const;

/**
 * The refusal of a file (or a record in it) that a newer build wrote. `format` says what was read
 * ("WAL segment", "record type", "spill manifest", "backup"), `found` the version (or type) on
 * disk and `known` what this build reads.
 */
export function formatTooNew(file: string, format: string, found: number, known: string, details: Record<string, unknown> = {}): FermataError {
  return new FermataError(
    errorCodes.formatTooNew,
    `${file}: ${format} ${found} is newer than this build reads (${known}); written by a later release of fermata: run that release, or restore a backup taken before the upgrade (docs/operations.md, "Upgrade and downgrade"); refusing to start`,
    { file, format, found, known, ...details },
  );
}
