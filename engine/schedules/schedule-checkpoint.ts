// Schedules in a checkpoint (engine/spill/checkpoint.ts, restore.ts), on the main thread: every
// schedule whole, with its pause and high-water mark, since the checkpoint lets go of the
// SCHEDULE records and the occurrences' ADD records that said them. They go into a schedules
// file the manifest names (schedule-file.ts), written a section a turn, and only when a schedule
// was put, paused, resumed or deleted since the last checkpoint; when only marks moved, a marks
// file (8 bytes a schedule) goes with the previous schedules file; when nothing moved, the
// manifest names the previous files again. A manifest from before the files holds the schedules
// inline (`schedules`), and still opens.
//
//   scheduleCutMemory (faulted in over turns) ─► snapshot turn: cutSchedules (marks as of S, and
//   which files can stay) ─► writeSchedules (over many turns) ─► manifest ─► book.checkpointed
//
// The marks are taken in the snapshot's turn (as of S: one copy of the mark column). A schedules
// file's definitions, pauses and times are read as it is written, a section a turn, so a row may
// show a change logged after S; replay puts such a change again, and a SCHEDULE record sets what
// it changes outright (a put or resume the mark too) while marks only rise, so the state after
// replay is the log's.
import { posix } from 'node:path';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { crc32 } from '../checksum.ts';
import { errorCodes, FermataError, systemErrorCode } from '../errors.ts';
import type { FileSystem } from '../fs/file-system.ts';
import type { EngineState } from '../state.ts';
import { type CheckpointedSchedules, encodeScheduleHeader, type ManifestSchedule, encodeScheduleSection, readScheduleFile, scheduleFileMagic, scheduleFileName, type ScheduleFileMeta, scheduleHeaderBytes, scheduleMarksFile, scheduleMarksFileName, type ScheduleSection, scheduleSectionRows } from './schedule-file.ts';
import type { ScheduleBook } from './schedule-book.ts';
import { definitionFromJson, definitionJson } from './schedule-records.ts';

export type { CheckpointedSchedules, ManifestSchedule } from './schedule-file.ts';

/** The schedules as of a checkpoint's snapshot turn: what must be written, and every slot's mark. */
export interface ScheduleCut {
  /** none: no schedules; same: the files named last time; marks: their schedules file and a new marks file; all: a new schedules file. */
  readonly kind: 'none' | 'same' | 'marks' | 'all';
  /** The mark column as of S, by slot (one copy of 8 bytes a slot: the snapshot's turn does nothing a schedule). */
  readonly marksBySlot: Float64Array;
  readonly changes: number;
  readonly marksMoved: number;
}

/** Pages faulted in a turn while preparing the cut's memory: 1 MiB. */
const prefaultSliceElements = (1024 * 1024) / 8;
const pageElements = 4096 / 8;
/** Marks gathered into a marks file in one turn (1 MiB of them). */
const marksSliceRows = (1024 * 1024) / 8;

/**
 * Memory for the cut's copy of the marks, faulted in a MiB a turn before the snapshot's turn
 * (zeroing 8 MB of fresh pages there took 15 ms at a million schedules); none when nothing moved
 * since the last checkpoint (its files are named again).
 */
export async function scheduleCutMemory(s: EngineState): Promise<Float64Array> {
  const book = s.schedules;
  const last = book.checkpointed;
  if (book.size === 0 || (last !== undefined && last.changes === book.changes && last.marksMoved === book.marksMoved)) return new Float64Array(0);
  // Room for schedules put meanwhile; a cut that finds too little copies into a new array.
  const memory = new Float64Array(book.slotCount + 4096);
  for (let i = 0; i < memory.length; i += pageElements) {
    memory[i] = 0;
    if (i > 0 && i % prefaultSliceElements === 0) await nextTurn();
  }
  return memory;
}

/** Takes the schedules' marks as they are, in the snapshot's turn (into `memory`, from scheduleCutMemory). */
export function cutSchedules(s: EngineState, memory: Float64Array): ScheduleCut {
  const book = s.schedules;
  const { changes, marksMoved } = book;
  const last = book.checkpointed;
  const none = new Float64Array(0);
  if (book.size === 0) return { kind: 'none', marksBySlot: none, changes, marksMoved };
  if (last !== undefined && last.changes === changes && last.marksMoved === marksMoved) return { kind: 'same', marksBySlot: none, changes, marksMoved };
  return { kind: last !== undefined && last.changes === changes ? 'marks' : 'all', marksBySlot: book.marksBySlot(memory), changes, marksMoved };
}

/**
 * Writes what `cut` needs into the spill directory (fdatasynced; the checkpoint syncs the
 * directory), new files taking ids from s.nextRunId; the manifest's `scheduleFile` and what the
 * book is to remember once that manifest is durable, or undefined when there are no schedules.
 */
export async function writeSchedules(s: EngineState, cut: ScheduleCut): Promise<CheckpointedSchedules | undefined> {
  const last = s.schedules.checkpointed;
  if (cut.kind === 'none') return undefined;
  if (cut.kind === 'same' && last !== undefined) return last;
  const { changes, marksMoved } = cut;
  if (cut.kind === 'marks' && last !== undefined) {
    const fileId = s.nextRunId++;
    // The file's rows are the same slots as when it was written: no schedule was put or deleted
    // since. Gathered a slice a turn, so that the fresh pages are not all faulted in one.
    const { bytes, marks } = scheduleMarksFile(fileId, last.meta.fileId, last.slots.length);
    for (let from = 0; from < marks.length; from += marksSliceRows) {
      if (from > 0) await nextTurn();
      for (let i = from, end = Math.min(marks.length, from + marksSliceRows); i < end; i++) marks[i] = cut.marksBySlot[last.slots[i] as number] as number;
    }
    await writeWhole(s.fs, posix.join(s.spillDir, scheduleMarksFileName(fileId)), bytes);
    const { fileId: schedulesId, rows, bytes: schedulesBytes, headCrc32, sections } = last.meta;
    const meta: ScheduleFileMeta = { fileId: schedulesId, rows, bytes: schedulesBytes, headCrc32, sections, marks: { fileId, bytes: bytes.length, crc32: crc32(bytes) } };
    return { meta, slots: last.slots, changes, marksMoved };
  }
  return writeScheduleFile(s, s.nextRunId++, cut);
}

/**
 * A new schedules file, a section a turn: the schedules in the slots the cut saw, in slot order,
 * with the cut's marks. A slot emptied since is left out (its DELETE record is after S, and
 * replay deletes it anyway); one filled since holds a schedule put after S, whose record replay
 * puts again, setting its mark. Returns the slots it holds, in its row order.
 */
async function writeScheduleFile(s: EngineState, fileId: number, cut: ScheduleCut): Promise<CheckpointedSchedules> {
  const book = s.schedules;
  const path = posix.join(s.spillDir, scheduleFileName(fileId));
  await unlinkIfPresent(s.fs, path);
  const handle = await s.fs.open(path, 'create');
  const slotCount = cut.marksBySlot.length;
  const slots = new Int32Array(slotCount);
  const sections: ScheduleSection[] = [];
  let rows = 0;
  let at = scheduleHeaderBytes;
  try {
    for (let slot = 0; slot < slotCount; ) {
      if (slot > 0) await nextTurn();
      const entries: ManifestSchedule[] = [];
      for (; slot < slotCount && entries.length < scheduleSectionRows; slot++) {
        if (!book.isLive(slot)) continue;
        entries.push(entryOf(book, slot, cut.marksBySlot[slot] as number));
        slots[rows++] = slot;
      }
      if (entries.length === 0) continue;
      const bytes = encodeScheduleSection(entries);
      await handle.writev([bytes], at);
      sections.push([entries.length, bytes.length, crc32(bytes)]);
      at += bytes.length;
    }
    const head = encodeScheduleHeader(scheduleFileMagic, fileId, rows, sections.length);
    await handle.writev([head], 0);
    await handle.datasync();
    const meta: ScheduleFileMeta = { fileId, rows, bytes: at, headCrc32: crc32(head), sections };
    return { meta, slots: slots.slice(0, rows), changes: cut.changes, marksMoved: cut.marksMoved };
  } finally {
    await handle.close();
  }
}

function entryOf(book: ScheduleBook, slot: number, markMs: number): ManifestSchedule {
  return { name: book.nameOf(slot), created_at_ms: book.createdAtOf(slot), updated_at_ms: book.updatedAtOf(slot), paused: book.isPaused(slot), mark_ms: markMs, definition: definitionJson(book.definitionOf(slot)) };
}

async function writeWhole(fs: FileSystem, path: string, bytes: Uint8Array): Promise<void> {
  await unlinkIfPresent(fs, path);
  const handle = await fs.open(path, 'create');
  try {
    await handle.writev([bytes], 0);
    await handle.datasync();
  } finally {
    await handle.close();
  }
}

/** A file bearing a new id is the leftover of a checkpoint that crashed before its manifest: replaced. */
async function unlinkIfPresent(fs: FileSystem, path: string): Promise<void> {
  try {
    await fs.unlink(path);
  } catch (err) {
    if (systemErrorCode(err) !== 'ENOENT') throw err;
  }
}

/** Puts the schedules of a schedules file back (restore at open, a section a turn); the book remembers the file as its last checkpoint's. */
export async function restoreScheduleFile(s: EngineState, meta: ScheduleFileMeta): Promise<void> {
  const slots = new Int32Array(meta.rows);
  await readScheduleFile(s.fs, s.spillDir, meta, (entries, firstRow) => {
    for (let i = 0; i < entries.length; i++) slots[firstRow + i] = restoreEntry(s, entries[i] as ManifestSchedule);
  });
  s.schedules.checkpointed = { meta, slots, changes: s.schedules.changes, marksMoved: s.schedules.marksMoved };
}

/** Puts a manifest's inline schedules back (a manifest from before schedules files), a slice a turn. */
export async function restoreSchedules(s: EngineState, schedules: readonly ManifestSchedule[]): Promise<void> {
  for (let from = 0; from < schedules.length; from += scheduleSectionRows) {
    if (from > 0) await nextTurn();
    for (let i = from, end = Math.min(schedules.length, from + scheduleSectionRows); i < end; i++) restoreEntry(s, schedules[i] as ManifestSchedule);
  }
}

/** One schedule back into the book; its slot. SPILL_CORRUPT when it does not read. */
function restoreEntry(s: EngineState, entry: ManifestSchedule): number {
  const definition = definitionFromJson(entry.definition);
  const wholeMs = (value: unknown): boolean => typeof value === 'number' && Number.isSafeInteger(value);
  if (definition === undefined || !wholeMs(entry.created_at_ms) || !wholeMs(entry.updated_at_ms) || !wholeMs(entry.mark_ms) || typeof entry.paused !== 'boolean' || s.schedules.slotOf(entry.name) >= 0) {
    throw new FermataError(errorCodes.spillCorrupt, `spill manifest: schedule ${String(entry.name)} does not read`, { schedule: entry.name });
  }
  return s.schedules.restore(entry.name, definition, entry.created_at_ms, entry.updated_at_ms, entry.paused, entry.mark_ms);
}

/** Every schedule a manifest holds, inline or in its files (cluster import splits them by partition). */
export async function manifestSchedules(fs: FileSystem, dir: string, manifest: { readonly schedules?: readonly ManifestSchedule[]; readonly scheduleFile?: ScheduleFileMeta }): Promise<ManifestSchedule[]> {
  const out: ManifestSchedule[] = [...(manifest.schedules ?? [])];
  if (manifest.scheduleFile !== undefined) await readScheduleFile(fs, dir, manifest.scheduleFile, (entries) => out.push(...entries));
  return out;
}
