// The schedules of a checkpoint, in files of their own beside the runs (docs/format/spill.md,
// "Schedules files"): a manifest's JSON holding a million schedules neared its size cap, and
// every checkpoint rewrote them all. The manifest names the files and holds their checksums, as
// it does a run's. Bytes and checks only, any thread; schedule-checkpoint.ts fills and reads them.
//
//   spill/schedules-NNNNNNNNNN        header (24 B) | section … (UTF-8 JSON: an array of schedules)
//   spill/schedule-marks-NNNNNNNNNN   header (24 B) | mark f64 × rows (the schedules file's rows, in its order)
//
//   header: off len field
//            0   8 magic "FRMTSCH\n" (schedules) or "FRMTSMK\n" (marks)
//            8   2 version (1)
//           10   2 header bytes (24)
//           12   4 file id (from the manifest's run ids: never named twice)
//           16   4 rows
//           20   4 sections (schedules) or the schedules file's id (marks)
//
// A schedules file changes when a schedule is put, paused, resumed or deleted; the marks move
// with every occurrence created, so they alone are written again (8 bytes a schedule) while the
// definitions have not changed.
import { posix } from 'node:path';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { crc32 } from '../checksum.ts';
import type { FileSystem } from '../fs/file-system.ts';
import { hex } from '../spill/keys-file.ts';
import { isRunId, spillCorrupt } from '../spill/format.ts';

/** A schedule in a schedules file (and inline in a manifest from before them): its definition and state as one JSON object (docs/format/spill.md). */
export interface ManifestSchedule {
  readonly name: string;
  readonly created_at_ms: number;
  readonly updated_at_ms: number;
  readonly paused: boolean;
  readonly mark_ms: number;
  readonly definition: unknown;
}

/** What the durable manifest names, and the book as of it: its slots in the file's row order, and its change counts then. */
export interface CheckpointedSchedules {
  readonly meta: ScheduleFileMeta;
  readonly slots: Int32Array;
  readonly changes: number;
  readonly marksMoved: number;
}

export const scheduleFileVersion = 1;
export const scheduleHeaderBytes = 24;
export const scheduleFileMagic = Uint8Array.from([0x46, 0x52, 0x4d, 0x54, 0x53, 0x43, 0x48, 0x0a]); // "FRMTSCH\n"
export const scheduleMarksMagic = Uint8Array.from([0x46, 0x52, 0x4d, 0x54, 0x53, 0x4d, 0x4b, 0x0a]); // "FRMTSMK\n"
/** Schedules a section holds when written: its JSON is made in one turn (about 300 bytes and a few µs a schedule). */
export const scheduleSectionRows = 1024;
/** The largest section a reader reads (a section is read whole before it is checked). */
export const scheduleSectionBytesMax = 64 * 1024 * 1024;

/** A section of a schedules file as the manifest names it: its rows, its bytes, the CRC-32 of those bytes. */
export type ScheduleSection = readonly [rows: number, byteLength: number, crc32: number];

/** The manifest's `scheduleFile`: the schedules file and, if the marks moved since it was written, the marks file that overrides its `mark_ms`. */
export interface ScheduleFileMeta {
  readonly fileId: number;
  readonly rows: number;
  /** The file's size: the header and the sections, which follow one another from byte 24. */
  readonly bytes: number;
  /** CRC-32 of the header. */
  readonly headCrc32: number;
  readonly sections: readonly ScheduleSection[];
  readonly marks?: ScheduleMarksMeta;
}

export interface ScheduleMarksMeta {
  readonly fileId: number;
  /** The file's size: 24 + 8 × rows. */
  readonly bytes: number;
  /** CRC-32 of the whole file. */
  readonly crc32: number;
}

const idDigits = 10;
const fileNamePattern = /^(schedules|schedule-marks)-(\d{10})$/;

export function scheduleFileName(fileId: number): string {
  return `schedules-${String(fileId).padStart(idDigits, '0')}`;
}

export function scheduleMarksFileName(fileId: number): string {
  return `schedule-marks-${String(fileId).padStart(idDigits, '0')}`;
}

/** The id a schedules or marks file name carries, or undefined for any other name. */
export function parseScheduleFileName(name: string): number | undefined {
  const match = fileNamePattern.exec(name);
  if (match === null) return undefined;
  const id = Number(match[2]);
  return isRunId(id) ? id : undefined;
}

/** The ids of the files a manifest's `scheduleFile` names. */
export function scheduleFileIds(meta: ScheduleFileMeta | undefined): number[] {
  if (meta === undefined) return [];
  return meta.marks === undefined ? [meta.fileId] : [meta.fileId, meta.marks.fileId];
}

export function encodeScheduleHeader(magic: Uint8Array, fileId: number, rows: number, last: number): Uint8Array {
  const bytes = new Uint8Array(scheduleHeaderBytes);
  const view = new DataView(bytes.buffer);
  bytes.set(magic, 0);
  view.setUint16(8, scheduleFileVersion, true);
  view.setUint16(10, scheduleHeaderBytes, true);
  view.setUint32(12, fileId, true);
  view.setUint32(16, rows, true);
  view.setUint32(20, last, true);
  return bytes;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true });

/** A section's bytes: the schedules as one JSON array, each as the inline manifest kept it. */
export function encodeScheduleSection(entries: readonly ManifestSchedule[]): Uint8Array {
  return encoder.encode(JSON.stringify(entries));
}

/** A marks file's bytes: the marks of schedules file `schedulesId`'s rows, in its order. */
export function encodeScheduleMarks(fileId: number, schedulesId: number, marks: Float64Array): Uint8Array {
  const file = scheduleMarksFile(fileId, schedulesId, marks.length);
  file.marks.set(marks);
  return file.bytes;
}

/** A marks file's bytes with its header, and the view its marks go into (to be filled by the caller). */
export function scheduleMarksFile(fileId: number, schedulesId: number, rows: number): { readonly bytes: Uint8Array; readonly marks: Float64Array } {
  const bytes = new Uint8Array(scheduleHeaderBytes + 8 * rows);
  bytes.set(encodeScheduleHeader(scheduleMarksMagic, fileId, rows, schedulesId), 0);
  return { bytes, marks: new Float64Array(bytes.buffer, scheduleHeaderBytes, rows) };
}

const isCount = (value: unknown): value is number => typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
const isCrc = (value: unknown): value is number => isCount(value) && value <= 0xffffffff;

/** Why a manifest's `scheduleFile` is not well-formed, or undefined. */
export function scheduleFileMetaProblem(value: unknown): string | undefined {
  if (typeof value !== 'object' || value === null) return 'scheduleFile is not an object';
  const meta = value as Record<string, unknown>;
  if (!isRunId(meta.fileId) || !isCount(meta.rows) || !isCount(meta.bytes) || !isCrc(meta.headCrc32) || !Array.isArray(meta.sections)) return 'scheduleFile has a bad field';
  let rows = 0;
  let bytes = scheduleHeaderBytes;
  for (const [i, section] of (meta.sections as unknown[]).entries()) {
    if (!Array.isArray(section) || section.length !== 3 || !isCount(section[0]) || section[0] === 0 || !isCount(section[1]) || section[1] > scheduleSectionBytesMax || !isCrc(section[2])) {
      return `scheduleFile section ${i} is not [rows ≥ 1, bytes, crc32]`;
    }
    rows += section[0] as number;
    bytes += section[1] as number;
  }
  if (rows !== meta.rows || bytes !== meta.bytes) return `scheduleFile sections do not add up to its ${String(meta.rows)} rows and ${String(meta.bytes)} bytes`;
  if (meta.marks !== undefined) {
    const marks = meta.marks as Record<string, unknown>;
    if (typeof marks !== 'object' || marks === null || !isRunId(marks.fileId) || marks.fileId === meta.fileId || marks.bytes !== scheduleHeaderBytes + 8 * rows || !isCrc(marks.crc32)) {
      return 'scheduleFile marks is not {fileId, bytes = 24 + 8 × rows, crc32}';
    }
  }
  return undefined;
}

/**
 * Reads the schedules `meta` names, a section at a time (a turn each: a million schedules are
 * never looked at in one), handing each section's entries to `each` with the row of its first.
 * Marks from the marks file, if named, replace the entries' `mark_ms`. SPILL_CORRUPT naming the
 * file and offset when anything does not check out; nothing is handed over before its checksum
 * matched.
 */
export async function readScheduleFile(fs: FileSystem, dir: string, meta: ScheduleFileMeta, each: (entries: readonly ManifestSchedule[], firstRow: number) => void): Promise<void> {
  const marks = meta.marks === undefined ? undefined : await readMarks(fs, dir, meta.marks, meta);
  const name = scheduleFileName(meta.fileId);
  const bad = (offset: number, what: string): Error => spillCorrupt(name, offset, what, { fileId: meta.fileId });
  const handle = await fs.open(posix.join(dir, name), 'read');
  try {
    const size = await handle.size();
    if (size !== meta.bytes) throw bad(Math.min(size, meta.bytes), `the file is ${size} bytes, the manifest expects ${meta.bytes}`);
    const head = await readAt(handle, 0, scheduleHeaderBytes, bad);
    checkHeader(head, scheduleFileMagic, meta.fileId, meta.rows, meta.sections.length, meta.headCrc32, bad);
    let at = scheduleHeaderBytes;
    let row = 0;
    for (const [rows, byteLength, crc] of meta.sections) {
      const bytes = await readAt(handle, at, byteLength, bad);
      const actual = crc32(bytes);
      if (actual !== crc) throw bad(at, `section checksum mismatch: the manifest has ${hex(crc)}, computed ${hex(actual)}`);
      let entries: unknown;
      try {
        entries = JSON.parse(decoder.decode(bytes));
      } catch (err) {
        throw bad(at, `the section does not parse: ${(err as Error).message}`);
      }
      if (!Array.isArray(entries) || entries.length !== rows || entries.some((entry) => typeof entry !== 'object' || entry === null || typeof (entry as Record<string, unknown>).name !== 'string')) {
        throw bad(at, `the section is not a list of ${rows} named schedules`);
      }
      const list = entries as ManifestSchedule[];
      each(marks === undefined ? list : list.map((entry, i) => ({ ...entry, mark_ms: marks[row + i] as number })), row);
      row += rows;
      at += byteLength;
      await nextTurn();
    }
  } finally {
    await handle.close();
  }
}

async function readMarks(fs: FileSystem, dir: string, meta: ScheduleMarksMeta, schedules: ScheduleFileMeta): Promise<Float64Array> {
  const name = scheduleMarksFileName(meta.fileId);
  const bad = (offset: number, what: string): Error => spillCorrupt(name, offset, what, { fileId: meta.fileId });
  const bytes = await fs.readFile(posix.join(dir, name));
  if (bytes.length !== meta.bytes) throw bad(Math.min(bytes.length, meta.bytes), `the file is ${bytes.length} bytes, the manifest expects ${meta.bytes}`);
  const actual = crc32(bytes);
  if (actual !== meta.crc32) throw bad(0, `checksum mismatch: the manifest has ${hex(meta.crc32)}, computed ${hex(actual)}`);
  checkHeader(bytes.subarray(0, scheduleHeaderBytes), scheduleMarksMagic, meta.fileId, schedules.rows, schedules.fileId, undefined, bad);
  // A copy: the read buffer's offset may not be aligned.
  const marks = new Float64Array(bytes.slice(scheduleHeaderBytes).buffer);
  for (let i = 0; i < marks.length; i++) if (!Number.isSafeInteger(marks[i])) throw bad(scheduleHeaderBytes + 8 * i, `mark ${i} is not a whole number of ms`);
  return marks;
}

function checkHeader(head: Uint8Array, magic: Uint8Array, fileId: number, rows: number, last: number, crc: number | undefined, bad: (offset: number, what: string) => Error): void {
  if (crc !== undefined && crc32(head) !== crc) throw bad(0, `header checksum mismatch: the manifest has ${hex(crc)}, computed ${hex(crc32(head))}`);
  for (let i = 0; i < magic.length; i++) if (head[i] !== magic[i]) throw bad(0, 'bad magic');
  const view = new DataView(head.buffer, head.byteOffset, head.byteLength);
  if (view.getUint16(8, true) !== scheduleFileVersion) throw bad(8, `version ${view.getUint16(8, true)} is not ${scheduleFileVersion}`);
  if (view.getUint16(10, true) !== scheduleHeaderBytes) throw bad(10, `header size ${view.getUint16(10, true)} is not ${scheduleHeaderBytes}`);
  if (view.getUint32(12, true) !== fileId) throw bad(12, `holds file ${view.getUint32(12, true)}, the manifest expects ${fileId}`);
  if (view.getUint32(16, true) !== rows) throw bad(16, `holds ${view.getUint32(16, true)} rows, the manifest expects ${rows}`);
  if (view.getUint32(20, true) !== last) throw bad(20, `says ${view.getUint32(20, true)} at byte 20, the manifest expects ${last}`);
}

async function readAt(handle: { read(into: Uint8Array, position: number): Promise<number> }, at: number, length: number, bad: (offset: number, what: string) => Error): Promise<Uint8Array> {
  const bytes = new Uint8Array(length);
  let done = 0;
  while (done < length) {
    const read = await handle.read(bytes.subarray(done), at + done);
    if (read === 0) throw bad(at + done, `the file ended at byte ${at + done}`);
    done += read;
  }
  return bytes;
}
