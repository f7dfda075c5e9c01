// The manifest's bytes (docs/format/spill.md, "Manifest"): a checksummed header, a JSON
// document naming the runs, and the tombstones as three columns. Encoding sorts the
// tombstones; decoding checks everything (crc, sizes, the document's shape, the order of the
// tombstones) and answers SPILL_CORRUPT naming the offset. Pure functions, any thread.
//
//   header (24 B) | JSON (J B) | zero pad to 8 | seqs f64 × T | fireAtMs f64 × T | rows u32 × T
import assert from 'node:assert/strict';
import { crc32 } from '../checksum.ts';
import { formatTooNew } from '../format-version.ts';
import { crcCoveredFrom, headerCrcOffset, isRunId, manifestFileName, manifestFormatVersion, manifestFormatVersionMin, manifestHeaderBytes, manifestMagic, padTo8, runIdMax, spillCorrupt, tombstoneBytes } from './format.ts';
import { hex } from './keys-file.ts';
import { type RunMeta, runMetaProblem } from './run-meta.ts';
import type { TombstoneColumns } from './tombstones.ts';
import { noRescheduled, type RescheduledColumns } from '../rescheduled-timers.ts';
import type { AddTimeColumns } from '../add-times.ts';
import type { ManifestSchedule } from '../schedules/schedule-checkpoint.ts';
import { scheduleFileIds, type ScheduleFileMeta, scheduleFileMetaProblem } from '../schedules/schedule-file.ts';

/** A spilled run and the start of its part that still counts (promotion raises it). */
export interface SpilledRunMeta extends RunMeta {
  readonly validFromMs: number;
}

/** A queue change in force, as its QUEUE record's JSON: `{name, config}` or `{name, paused: true}` (engine-records.md). */
export interface ManifestQueue {
  readonly name: string;
  readonly config?: unknown;
  readonly paused?: boolean;
}

export interface Manifest {
  /** The WAL sequence the manifest covers: every record ≤ it is in its runs. */
  readonly checkpointSeq: number;
  /** Pending timers due before it are in the resident run; Infinity when nothing is spilled. */
  readonly watermarkMs: number;
  /** The engine's latest expiry already acted on (opaque here; may be ±Infinity). */
  readonly releasedExpiryMaxMs: number;
  /** Greater than every run id the manifest names: the next checkpoint's first id. */
  readonly nextRunId: number;
  readonly residentRun: RunMeta;
  readonly spilledRuns: readonly SpilledRunMeta[];
  readonly queues: readonly ManifestQueue[];
  /** Cancelled spilled timers; any order when writing, sorted by (seq, row) when read. */
  readonly tombstones: TombstoneColumns;
  /** A manual clock's last logged position (engine/clock-moves.ts); absent when none was logged (and in manifests from before). */
  readonly clockPositionMs?: number;
  /** Timers a PATCH changed, resident in the resident run: revision and current fire time (absent: none). */
  readonly rescheduled?: RescheduledColumns;
  /** When the ADD records it covers that still hold a timer were accepted, seqs ascending (engine/add-times.ts); absent: none known (and in manifests from before). */
  readonly addTimes?: AddTimeColumns;
  /** Every schedule, whole, inline: how manifests from before schedules files kept them (read, never written); absent: none. */
  readonly schedules?: readonly ManifestSchedule[];
  /** The schedules file (and marks file) holding every schedule (engine/schedules/schedule-file.ts); absent: none (and in manifests from before). */
  readonly scheduleFile?: ScheduleFileMeta;
  /**
   * The pending timers its spilled runs hold by queue, [name, count] with names ascending and
   * counts above 0 (spilled-queue-counts.ts): written whenever it names spilled runs; absent in
   * a manifest from before, whose counts are read from its runs at open.
   */
  readonly spilledQueues?: readonly SpilledQueueCount[];
  /** Schedule changes whose cancel of the older occurrences had not landed as of the checkpoint: [name, the change record's sequence] (engine/schedules/schedule-book.ts); absent: none (and in manifests from before). */
  readonly scheduleCancelsOwed?: readonly (readonly [string, number])[];
}

/** A queue and how many of its pending timers the spilled runs hold. */
export type SpilledQueueCount = readonly [queue: string, count: number];

/** Fields that may be ±Infinity: JSON has no such number, so they are written as strings. */
const unboundedFields = new Set(['watermarkMs', 'releasedExpiryMaxMs', 'validFromMs']);

function jsonValue(key: string, value: unknown): unknown {
  if (typeof value !== 'number' || Number.isFinite(value)) return value;
  assert.ok(unboundedFields.has(key) && !Number.isNaN(value), `manifest field ${key} is ${value}`);
  return value > 0 ? 'Infinity' : '-Infinity';
}

function unbounded(value: unknown): number | undefined {
  if (value === 'Infinity') return Infinity;
  if (value === '-Infinity') return -Infinity;
  return typeof value === 'number' && Number.isSafeInteger(value) ? value : undefined;
}

export function encodeManifest(manifest: Manifest): Uint8Array {
  const { seqs, rows, fireAtMs } = sortedTombstones(manifest.tombstones);
  const document = {
    checkpointSeq: manifest.checkpointSeq,
    watermarkMs: manifest.watermarkMs,
    releasedExpiryMaxMs: manifest.releasedExpiryMaxMs,
    nextRunId: manifest.nextRunId,
    residentRun: manifest.residentRun,
    spilledRuns: manifest.spilledRuns,
    queues: manifest.queues,
    ...(manifest.clockPositionMs === undefined ? {} : { clockPositionMs: manifest.clockPositionMs }),
    // Only when there are any: a manifest without patched timers is byte for byte as before.
    ...(manifest.rescheduled !== undefined && manifest.rescheduled.seqs.length > 0 ? { rescheduled: rescheduledRows(manifest.rescheduled) } : {}),
    ...(manifest.addTimes !== undefined && manifest.addTimes.seqs.length > 0 ? { addTimes: addTimeRows(manifest.addTimes) } : {}),
    ...(manifest.schedules !== undefined && manifest.schedules.length > 0 ? { schedules: manifest.schedules } : {}),
    ...(manifest.scheduleFile === undefined ? {} : { scheduleFile: manifest.scheduleFile }),
    ...(manifest.spilledQueues === undefined ? {} : { spilledQueues: manifest.spilledQueues }),
    ...(manifest.scheduleCancelsOwed !== undefined && manifest.scheduleCancelsOwed.length > 0 ? { scheduleCancelsOwed: manifest.scheduleCancelsOwed } : {}),
  };
  const json = new TextEncoder().encode(JSON.stringify(document, jsonValue));
  const count = seqs.length;
  const columnsAt = manifestHeaderBytes + json.length + padTo8(manifestHeaderBytes + json.length);
  const bytes = new Uint8Array(columnsAt + tombstoneBytes * count);
  const view = new DataView(bytes.buffer);
  bytes.set(manifestMagic, 0);
  view.setUint16(12, manifestFormatVersion, true);
  view.setUint16(14, manifestHeaderBytes, true);
  view.setUint32(16, json.length, true);
  view.setUint32(20, count, true);
  bytes.set(json, manifestHeaderBytes);
  new Float64Array(bytes.buffer, columnsAt, count).set(seqs);
  new Float64Array(bytes.buffer, columnsAt + 8 * count, count).set(fireAtMs);
  new Uint32Array(bytes.buffer, columnsAt + 16 * count, count).set(rows);
  view.setUint32(headerCrcOffset, crc32(bytes.subarray(crcCoveredFrom)), true);
  const problem = manifestProblem(document, seqs, rows);
  assert.equal(problem, undefined, `writing a malformed manifest: ${problem}`);
  return bytes;
}

function sortedTombstones(columns: TombstoneColumns): TombstoneColumns {
  const count = columns.seqs.length;
  assert.ok(columns.rows.length === count && columns.fireAtMs.length === count, 'tombstone columns have one length');
  const order = new Uint32Array(count);
  for (let i = 0; i < count; i++) order[i] = i;
  order.sort((a, b) => (columns.seqs[a] as number) - (columns.seqs[b] as number) || (columns.rows[a] as number) - (columns.rows[b] as number));
  const out = { seqs: new Float64Array(count), rows: new Uint32Array(count), fireAtMs: new Float64Array(count) };
  for (let i = 0; i < count; i++) {
    const from = order[i] as number;
    out.seqs[i] = columns.seqs[from] as number;
    out.rows[i] = columns.rows[from] as number;
    out.fireAtMs[i] = columns.fireAtMs[from] as number;
  }
  return out;
}

/** `path` names the file in a FORMAT_TOO_NEW refusal (SPILL_CORRUPT names it MANIFEST). */
export function decodeManifest(bytes: Uint8Array, path: string = manifestFileName): Manifest {
  const bad = (offset: number, what: string): Error => spillCorrupt(manifestFileName, offset, what);
  if (bytes.length < manifestHeaderBytes) throw bad(0, `${bytes.length} bytes, shorter than the header (${manifestHeaderBytes})`);
  for (let i = 0; i < manifestMagic.length; i++) if (bytes[i] !== manifestMagic[i]) throw bad(0, 'bad magic: not a spill manifest');
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const stored = view.getUint32(headerCrcOffset, true);
  const actual = crc32(bytes.subarray(crcCoveredFrom));
  if (stored !== actual) throw bad(headerCrcOffset, `checksum mismatch: stored ${hex(stored)}, computed ${hex(actual)}`);
  const version = view.getUint16(12, true);
  // A newer build's manifest may mean more than this build can read (and name runs of a newer
  // version): refused whole, before its document.
  if (version > manifestFormatVersion) throw formatTooNew(path, 'spill manifest format version', version, `versions ${manifestFormatVersionMin}–${manifestFormatVersion}`, { offset: 12 });
  if (version < manifestFormatVersionMin) throw bad(12, `version ${version} is not one this release reads (${manifestFormatVersion} and before)`);
  if (view.getUint16(14, true) !== manifestHeaderBytes) throw bad(14, `header size ${view.getUint16(14, true)} is not ${manifestHeaderBytes}`);
  const jsonBytes = view.getUint32(16, true);
  const count = view.getUint32(20, true);
  const columnsAt = manifestHeaderBytes + jsonBytes + padTo8(manifestHeaderBytes + jsonBytes);
  if (columnsAt + tombstoneBytes * count !== bytes.length) throw bad(16, `JSON of ${jsonBytes} bytes and ${count} tombstones do not make the file's ${bytes.length} bytes`);
  let document: unknown;
  try {
    document = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes.subarray(manifestHeaderBytes, manifestHeaderBytes + jsonBytes)));
  } catch (err) {
    throw bad(manifestHeaderBytes, `the JSON document does not parse: ${(err as Error).message}`);
  }
  if (version === 1) document = withVersion1Runs(document);
  // Copies: the columns must not alias the read buffer, and its offset may not be aligned.
  const columns = bytes.slice(columnsAt);
  const seqs = new Float64Array(columns.buffer, 0, count);
  const fireAtMs = new Float64Array(columns.buffer, 8 * count, count);
  const rows = new Uint32Array(columns.buffer, 16 * count, count);
  const problem = manifestProblem(document, seqs, rows);
  if (problem !== undefined) throw bad(manifestHeaderBytes, problem);
  const doc = document as Record<string, unknown>;
  const spilledRuns = (doc.spilledRuns as Array<Record<string, unknown>>).map((run) => ({ ...run, validFromMs: unbounded(run.validFromMs) as number }) as unknown as SpilledRunMeta);
  return {
    checkpointSeq: doc.checkpointSeq as number,
    watermarkMs: unbounded(doc.watermarkMs) as number,
    releasedExpiryMaxMs: unbounded(doc.releasedExpiryMaxMs) as number,
    nextRunId: doc.nextRunId as number,
    residentRun: doc.residentRun as RunMeta,
    spilledRuns,
    queues: doc.queues as ManifestQueue[],
    tombstones: { seqs, rows, fireAtMs },
    ...(doc.clockPositionMs === undefined ? {} : { clockPositionMs: doc.clockPositionMs as number }),
    rescheduled: doc.rescheduled === undefined ? noRescheduled : rescheduledColumns(doc.rescheduled as number[][]),
    ...(doc.addTimes === undefined ? {} : { addTimes: addTimeColumns(doc.addTimes as number[][]) }),
    ...(doc.schedules === undefined ? {} : { schedules: doc.schedules as ManifestSchedule[] }),
    ...(doc.scheduleFile === undefined ? {} : { scheduleFile: doc.scheduleFile as ScheduleFileMeta }),
    ...(doc.spilledQueues === undefined ? {} : { spilledQueues: doc.spilledQueues as SpilledQueueCount[] }),
    ...(doc.scheduleCancelsOwed === undefined ? {} : { scheduleCancelsOwed: doc.scheduleCancelsOwed as [string, number][] }),
  };
}

/** The ADD records' accept times as the document lists them: [seq, accepted-at ms] each. */
function addTimeRows(columns: AddTimeColumns): number[][] {
  return Array.from(columns.seqs, (seq, i) => [seq, columns.acceptedAtMs[i] as number]);
}

function addTimeColumns(entries: readonly number[][]): AddTimeColumns {
  return { seqs: Float64Array.from(entries, (entry) => entry[0] as number), acceptedAtMs: Float64Array.from(entries, (entry) => entry[1] as number) };
}

function addTimesProblem(entries: unknown): string | undefined {
  if (entries === undefined) return undefined;
  if (!Array.isArray(entries)) return 'addTimes is not a list';
  let previous = 0;
  for (const [i, entry] of entries.entries()) {
    const ok = Array.isArray(entry) && entry.length === 2 && Number.isSafeInteger(entry[0]) && (entry[0] as number) > previous && Number.isFinite(entry[1]);
    if (!ok) return `addTimes entry ${i} is not [seq, accepted-at ms] with seqs ascending`;
    previous = entry[0] as number;
  }
  return undefined;
}

function spilledQueuesProblem(entries: unknown): string | undefined {
  if (entries === undefined) return undefined;
  if (!Array.isArray(entries)) return 'spilledQueues is not a list';
  let previous: string | undefined;
  for (const [i, entry] of entries.entries()) {
    const ok = Array.isArray(entry) && entry.length === 2 && typeof entry[0] === 'string' && (previous === undefined || entry[0] > previous) && Number.isSafeInteger(entry[1]) && (entry[1] as number) > 0;
    if (!ok) return `spilledQueues entry ${i} is not [queue, count > 0] with queues ascending`;
    previous = entry[0] as string;
  }
  return undefined;
}

/** The rescheduled timers as the document lists them: [seq, row, revision, fire-at ms] each. */
function rescheduledRows(columns: RescheduledColumns): number[][] {
  const out: number[][] = [];
  for (let i = 0; i < columns.seqs.length; i++) out.push([columns.seqs[i] as number, columns.rows[i] as number, columns.revisions[i] as number, columns.fireAtMs[i] as number]);
  return out;
}

function rescheduledColumns(entries: readonly number[][]): RescheduledColumns {
  return {
    seqs: Float64Array.from(entries, (entry) => entry[0] as number),
    rows: Uint32Array.from(entries, (entry) => entry[1] as number),
    revisions: Uint32Array.from(entries, (entry) => entry[2] as number),
    fireAtMs: Float64Array.from(entries, (entry) => entry[3] as number),
  };
}

function rescheduledProblem(entries: unknown): string | undefined {
  if (entries === undefined) return undefined;
  if (!Array.isArray(entries)) return 'rescheduled is not a list';
  for (const [i, entry] of entries.entries()) {
    const ok =
      Array.isArray(entry) &&
      entry.length === 4 &&
      entry.every((value) => Number.isSafeInteger(value)) &&
      (entry[0] as number) >= 1 &&
      (entry[1] as number) >= 0 &&
      (entry[1] as number) <= 0xffffffff &&
      (entry[2] as number) >= 2 &&
      (entry[2] as number) <= 0xffffffff;
    if (!ok) return `rescheduled entry ${i} is not [seq, row, revision ≥ 2, fire-at ms]`;
  }
  return undefined;
}

/**
 * A version 1 document (the previous release's) with its runs' version said: every run it names
 * is a version 1 run, and it has no field for that. One that has the field is not version 1's.
 */
function withVersion1Runs(document: unknown): unknown {
  if (typeof document !== 'object' || document === null) return document;
  const doc = document as Record<string, unknown>;
  const versioned = (run: unknown): unknown => (typeof run === 'object' && run !== null ? { ...run, version: 'version' in run ? undefined : 1 } : run);
  return { ...doc, residentRun: versioned(doc.residentRun), spilledRuns: Array.isArray(doc.spilledRuns) ? doc.spilledRuns.map(versioned) : doc.spilledRuns };
}

/** Why a manifest document (as JSON would give it) and its tombstones are not well-formed, or undefined. */
function manifestProblem(document: unknown, seqs: Float64Array, rows: Uint32Array): string | undefined {
  if (typeof document !== 'object' || document === null) return 'the document is not an object';
  const doc = document as Record<string, unknown>;
  const checkpointSeq = doc.checkpointSeq;
  if (typeof checkpointSeq !== 'number' || !Number.isSafeInteger(checkpointSeq) || checkpointSeq < 0) return 'bad checkpointSeq';
  for (const field of ['watermarkMs', 'releasedExpiryMaxMs']) if (unbounded(jsonValue(field, doc[field])) === undefined) return `bad ${field}`;
  const nextRunId = doc.nextRunId;
  if (typeof nextRunId !== 'number' || !Number.isSafeInteger(nextRunId) || nextRunId < 1 || nextRunId > runIdMax + 1) return 'bad nextRunId';
  if (!Array.isArray(doc.spilledRuns)) return 'spilledRuns is not a list';
  const runs: unknown[] = [doc.residentRun, ...(doc.spilledRuns as unknown[])];
  const ids = new Set<number>();
  for (const [index, run] of runs.entries()) {
    const problem = runMetaProblem(run);
    if (problem !== undefined) return problem;
    const meta = run as RunMeta & { validFromMs?: unknown };
    if (index > 0 && unbounded(jsonValue('validFromMs', meta.validFromMs)) === undefined) return `run ${meta.runId}: bad validFromMs`;
    if (!isRunId(meta.runId) || meta.runId >= nextRunId || ids.has(meta.runId)) return `run ${meta.runId} is named twice or not below nextRunId ${nextRunId}`;
    if (meta.stamp > checkpointSeq) return `run ${meta.runId} is stamped ${meta.stamp}, after the checkpoint (${checkpointSeq})`;
    ids.add(meta.runId);
  }
  const clockPositionMs = doc.clockPositionMs;
  if (clockPositionMs !== undefined && (typeof clockPositionMs !== 'number' || !Number.isSafeInteger(clockPositionMs) || clockPositionMs < 0)) return 'bad clockPositionMs';
  if (!Array.isArray(doc.queues)) return 'queues is not a list';
  for (const queue of doc.queues as unknown[]) {
    if (typeof queue !== 'object' || queue === null || typeof (queue as Record<string, unknown>).name !== 'string' || !('config' in queue || 'paused' in queue)) return 'a queue lacks its name, or a config or pause';
  }
  if (doc.schedules !== undefined && (!Array.isArray(doc.schedules) || (doc.schedules as unknown[]).some((entry) => typeof entry !== 'object' || entry === null || typeof (entry as Record<string, unknown>).name !== 'string'))) return 'schedules is not a list of named schedules';
  if (doc.scheduleFile !== undefined) {
    const problem = scheduleFileMetaProblem(doc.scheduleFile);
    if (problem !== undefined) return problem;
    if (doc.schedules !== undefined) return 'schedules are both inline and in a schedules file';
    for (const id of scheduleFileIds(doc.scheduleFile as ScheduleFileMeta)) if (id >= nextRunId || ids.has(id)) return `schedules file ${id} is named twice or not below nextRunId ${nextRunId}`;
  }
  const rescheduled = rescheduledProblem(doc.rescheduled);
  if (rescheduled !== undefined) return rescheduled;
  const addTimes = addTimesProblem(doc.addTimes);
  if (addTimes !== undefined) return addTimes;
  const spilledQueues = spilledQueuesProblem(doc.spilledQueues);
  if (spilledQueues !== undefined) return spilledQueues;
  const cancelsOwed = doc.scheduleCancelsOwed;
  if (cancelsOwed !== undefined && (!Array.isArray(cancelsOwed) || cancelsOwed.some((entry) => !Array.isArray(entry) || entry.length !== 2 || typeof entry[0] !== 'string' || !Number.isSafeInteger(entry[1]) || (entry[1] as number) < 1))) {
    return 'scheduleCancelsOwed is not a list of [schedule, sequence ≥ 1]';
  }
  for (let i = 0; i < seqs.length; i++) {
    if (!Number.isSafeInteger(seqs[i]) || (seqs[i] as number) < 1) return `tombstone ${i} has a bad sequence`;
    if (i > 0 && ((seqs[i] as number) - (seqs[i - 1] as number) || (rows[i] as number) - (rows[i - 1] as number)) <= 0) return `tombstone ${i} is out of order or repeated`;
  }
  return undefined;
}
