// The spill tier's on-disk formats, as constants. docs/format/spill.md is the specification
// these numbers come from; change both together. Relations are asserted at load.
//
//   spill/run-NNNNNNNNNN.arrow   Arrow IPC file: head | batch … | tail   (one batch per bucket)
//   spill/run-NNNNNNNNNN.keys    keys header (32 B) | counts u32 × B | hashes u32 …
//   spill/MANIFEST               manifest header (24 B) | JSON | pad | seq f64 × T | fire-at f64 × T | row u32 × T
//
//   keys header                        manifest header
//   off len field                      off len field
//    0   8 magic "FRMTKEY\n"             0   8 magic "FRMTMAN\n"
//    8   4 crc32 of bytes [12, end)      8   4 crc32 of bytes [12, end)
//   12   2 version (4; 1–4 read)        12   2 version (5; 1–5 read)
//   14   2 header bytes (32)            14   2 header bytes (24)
//   16   4 run id                       16   4 JSON bytes
//   20   4 bucket count                 20   4 tombstone count
//   24   8 stamp (WAL sequence)
//
// All integers little-endian; the checksum is zlib's CRC-32, as the WAL's.
import assert from 'node:assert/strict';
import { endianness } from 'node:os';
import { errorCodes, FermataError } from '../errors.ts';

/** The version of runs and keys sidecars written: in every run's schema metadata, the manifest's entry for it and its sidecar's header. */
export const spillFormatVersion = 4;
/**
 * The oldest version read, so that an upgrade keeps what the previous releases wrote. Version 3
 * runs lack the last column (created_at: read as null); version 2
 * runs lack the last two columns (callback, failure_callback: read as null); version 1 runs lack
 * two more (last_error, last_attempt_at: read as null) and its manifest's runs name no version
 * (they are all version 1).
 */
export const spillFormatVersionMin = 1;

export function isReadableVersion(version: unknown): version is number {
  return typeof version === 'number' && Number.isInteger(version) && version >= spillFormatVersionMin && version <= spillFormatVersion;
}

/**
 * The manifest's own version, written in its header: raised apart from the runs' when only the
 * manifest changes, so that an older build refuses a manifest whose meaning it would miss (5: the
 * schedules live in the schedules files `scheduleFile` names, which a build reading up to 4 would
 * ignore, losing every schedule). Versions 1 to 4 were the runs' version too and are all read;
 * a version 1 manifest's runs name no version (they are version 1 runs).
 */
export const manifestFormatVersion = 5;
export const manifestFormatVersionMin = 1;

/** Typed-array views of file bytes assume the file's byte order (little-endian, as Arrow's). */
assert.equal(endianness(), 'LE', 'the spill formats are read through typed arrays: little-endian hosts only');

// ---- run files ----

export const runIdMax = 2 ** 32 - 1;
const runIdDigits = 10;
const runFileSuffix = '.arrow';
const keysFileSuffix = '.keys';
const runFilePattern = /^run-(\d{10})\.(arrow|keys)$/;

export const metadataKeys = {
  version: 'fermata.spill.version',
  stamp: 'fermata.stamp',
  run: 'fermata.run',
  bucketWidthMs: 'fermata.bucket_width_ms',
} as const;

/** Column names, in file order. */
export const runColumns = [
  'seq',
  'row',
  'fire_at',
  'due_at',
  'state',
  'attempts',
  'last_status',
  'queue',
  'target',
  'key',
  'payload',
  'headers',
  'dead_reason',
  'last_error',
  'last_attempt_at',
  'callback',
  'failure_callback',
  'created_at',
] as const;

/** How many of runColumns a run of each readable version holds: a version adds columns at the end. */
export const runColumnCounts: Readonly<Record<number, number>> = { 1: 13, 2: 15, 3: 17, 4: 18 };

/** Fixed bytes a row costs in a batch: the numeric columns (created_at last) plus an i32 offset for each of the eight variable-width ones. */
export const batchFixedBytesPerRow = 8 + 4 + 8 + 8 + 1 + 2 + 2 + 1 + 8 + 8 * 4 + 8;

/** The eos marker between the last batch and the footer: continuation, then a zero length. */
export const arrowEos = Uint8Array.from([0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]);
/** "ARROW1", at the start (padded to 8) and at the end of an Arrow IPC file. */
export const arrowMagic = Uint8Array.from([0x41, 0x52, 0x52, 0x4f, 0x57, 0x31]);
/** Largest footer a reader reads (a footer is ~1 KiB of schema plus 24 bytes a batch). */
export const footerBytesMax = 64 * 1024 * 1024;
/** The end of a run: footer length (i32) then the magic. */
export const arrowTrailerBytes = 4 + arrowMagic.length;

export function runFileName(runId: number): string {
  return runStem(runId) + runFileSuffix;
}

export function keysFileName(runId: number): string {
  return runStem(runId) + keysFileSuffix;
}

function runStem(runId: number): string {
  assert.ok(isRunId(runId), `bad run id ${runId}`);
  return `run-${String(runId).padStart(runIdDigits, '0')}`;
}

export function isRunId(value: unknown): value is number {
  return typeof value === 'number' && Number.isInteger(value) && value >= 1 && value <= runIdMax;
}

/** The run id a run or keys file name carries, or undefined for any other name. */
export function parseRunFileName(name: string): number | undefined {
  const match = runFilePattern.exec(name);
  if (match === null) return undefined;
  const id = Number(match[1]);
  return isRunId(id) ? id : undefined;
}

// ---- keys sidecar ----

export const keysMagic = Uint8Array.from([0x46, 0x52, 0x4d, 0x54, 0x4b, 0x45, 0x59, 0x0a]); // "FRMTKEY\n"
export const keysHeaderBytes = 32;

// ---- manifest ----

export const manifestFileName = 'MANIFEST';
export const manifestTempFileName = 'MANIFEST.tmp';
export const manifestMagic = Uint8Array.from([0x46, 0x52, 0x4d, 0x54, 0x4d, 0x41, 0x4e, 0x0a]); // "FRMTMAN\n"
export const manifestHeaderBytes = 24;
/** Both headers: the crc sits right after the magic and covers everything after itself. */
export const headerCrcOffset = 8;
export const crcCoveredFrom = 12;
/** A tombstone in the manifest: seq f64 + fire time f64 + row u32. */
export const tombstoneBytes = 20;

/** Bytes from `at` to the next multiple of 8. */
export function padTo8(at: number): number {
  return (8 - (at % 8)) % 8;
}

/** The coded error for anything wrong in a spill file: names the file, the offset and what. */
export function spillCorrupt(file: string, offset: number, what: string, details: Record<string, unknown> = {}): FermataError {
  return new FermataError(errorCodes.spillCorrupt, `${file} at byte ${offset}: ${what}`, { file, offset, ...details });
}

assert.equal(keysMagic.length, 8);
assert.equal(manifestMagic.length, 8);
assert.equal(headerCrcOffset + 4, crcCoveredFrom);
assert.ok(crcCoveredFrom < manifestHeaderBytes && crcCoveredFrom < keysHeaderBytes);
assert.equal(keysHeaderBytes % 8, 0, 'the keys header keeps the u64 stamp aligned');
assert.equal(manifestHeaderBytes % 8, 0);
assert.equal(runIdMax.toString().length, runIdDigits, 'every run id must fit the padded name');
assert.ok(manifestFormatVersion >= spillFormatVersion, 'a manifest version names runs of its version and before');
assert.equal(runColumns.length, runColumnCounts[spillFormatVersion]);
for (let version = spillFormatVersionMin; version < spillFormatVersion; version++) {
  assert.ok((runColumnCounts[version] as number) < (runColumnCounts[version + 1] as number), 'a version only adds columns, at the end');
}
