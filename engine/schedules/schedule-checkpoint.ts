// Schedules in a checkpoint (engine/spill/checkpoint.ts, restore.ts), on the main thread: the
// manifest keeps every schedule whole, with its pause and high-water mark, since the checkpoint
// lets go of the SCHEDULE records and the occurrences' ADD records that said them.
import { errorCodes, FermataError } from '../errors.ts';
import type { EngineState } from '../state.ts';
import { definitionFromJson, definitionJson } from './schedule-records.ts';

/** A schedule in a checkpoint's manifest: its definition and state as one JSON object (docs/format/spill.md). */
export interface ManifestSchedule {
  readonly name: string;
  readonly created_at_ms: number;
  readonly updated_at_ms: number;
  readonly paused: boolean;
  readonly mark_ms: number;
  readonly definition: unknown;
}

/** Every schedule as the manifest keeps it. */
export function schedulesInForce(s: EngineState): ManifestSchedule[] {
  const out: ManifestSchedule[] = [];
  const book = s.schedules;
  for (const slot of book.slots()) {
    out.push({ name: book.nameOf(slot), created_at_ms: book.createdAtOf(slot), updated_at_ms: book.updatedAtOf(slot), paused: book.isPaused(slot), mark_ms: book.markOf(slot), definition: definitionJson(book.definitionOf(slot)) });
  }
  return out;
}

/** Puts a manifest's schedules back (restore at open); SPILL_CORRUPT when one does not read. */
export function restoreSchedules(s: EngineState, schedules: readonly ManifestSchedule[]): void {
  for (const entry of schedules) {
    const definition = definitionFromJson(entry.definition);
    const wholeMs = (value: unknown): boolean => typeof value === 'number' && Number.isSafeInteger(value);
    if (definition === undefined || !wholeMs(entry.created_at_ms) || !wholeMs(entry.updated_at_ms) || !wholeMs(entry.mark_ms) || typeof entry.paused !== 'boolean') {
      throw new FermataError(errorCodes.spillCorrupt, `spill manifest: schedule ${String(entry.name)} does not read`, { schedule: entry.name });
    }
    s.schedules.restore(entry.name, definition, entry.created_at_ms, entry.updated_at_ms, entry.paused, entry.mark_ms);
  }
}
