// Schedules' changes and views, on the main thread: PUT (create or replace), pause, resume and
// delete, each a SCHEDULE record first and a change of the book (schedule-book.ts) once it is
// durable; replay and a checkpoint's restore apply the same changes. Changes of one schedule run
// one at a time, and the materializer (materializer.ts) passes over a schedule while one is in
// flight; changes of different schedules go on together (their records share group commits).
//
// A replace, a pause and a delete cancel the schedule's pending occurrences (one CANCEL_BULK,
// released at once so the rule may create the same instants again): not one already being
// delivered or retried, nor one a user patched (its revision moved) or cancelled by hand. If the
// power goes between the change's record and the cancel's (or a checkpoint is taken between the
// two, or the cancel fails), the next open cancels them (settleOwedCancels) before the
// materializer runs. A put
// and a resume start the rule again from their own time: occurrences before it are not created.
//
//   put(name, input) ─► compile the rule ─► after the materializer's run ─► log SCHEDULE ─► book
//                    ─► cancel the old occurrences (a replace) ─► the materializer wakes
import { errorCodes, FermataError } from '../errors.ts';
import { decodeTimerId } from '../ids.ts';
import { type BulkCancelOutcome, bulkCancel } from '../bulk-cancel.ts';
import { scheduleLimits } from '../limits.ts';
import { recordType } from '../records.ts';
import type { EngineState } from '../state.ts';
import { decodeCursor, listTimers, queryStart } from '../timer-query.ts';
import { Materializer, ruleOf } from './materializer.ts';
import { occurrenceKey, occurrenceKeyPrefix, parseOccurrenceKey } from './occurrence-key.ts';
import { type CatchUp, compileRule } from './rule.ts';
import { decodeScheduleChange, decodeScheduleMarks, encodeScheduleChange, type ScheduleChange, type ScheduleDefinition } from './schedule-records.ts';

/** A schedule name: letters, digits, `.`, `_` and `-`, 1 to 128 of them (no `:`, which ends the name in an occurrence key). */
const namePattern = /^[A-Za-z0-9._-]+$/;

export function validateScheduleName(name: string): void {
  if (name.length === 0 || name.length > scheduleLimits.nameBytesMax || !namePattern.test(name)) {
    throw new FermataError(errorCodes.scheduleInvalid, `a schedule name is 1 to ${scheduleLimits.nameBytesMax} letters, digits, ".", "_" or "-"`, { field: 'name' });
  }
}

/** What a PUT asks for, its timer fields already checked as a timer's (the route's part). */
export interface ScheduleInput {
  readonly cron?: string | undefined;
  readonly timeZone?: string | undefined;
  readonly everyMs?: number | undefined;
  readonly startAtMs?: number | undefined;
  readonly endAtMs?: number | undefined;
  readonly jitterMs?: number | undefined;
  readonly catchUp?: CatchUp | undefined;
  readonly target: string;
  readonly queue: string;
  readonly payload: Uint8Array;
  /** JSON object text, '' for none. */
  readonly headers: string;
}

/** A schedule as the API shows it. */
export interface ScheduleView {
  readonly name: string;
  readonly definition: ScheduleDefinition;
  readonly paused: boolean;
  readonly createdAtMs: number;
  readonly updatedAtMs: number;
  /** Its next occurrences after now (none while paused), each with when it fires. */
  readonly next: ReadonlyArray<{ readonly occurrenceMs: number; readonly fireAtMs: number }>;
}

export interface SchedulePage {
  readonly schedules: ScheduleView[];
  /** The last name listed, to list on from; null after the last page. */
  readonly nextCursor: string | null;
}

export class Schedules {
  readonly #s: EngineState;
  readonly materializer: Materializer;
  /** The last change of each schedule in flight: the next one waits for it. */
  readonly #changes = new Map<string, Promise<unknown>>();

  constructor(s: EngineState) {
    this.#s = s;
    this.materializer = new Materializer(s);
  }

  /** Creates or replaces a schedule; resolves with its view once durable. SCHEDULE_INVALID names a bad field. */
  async put(name: string, input: ScheduleInput): Promise<ScheduleView> {
    validateScheduleName(name);
    const atMs = this.#s.clock.now();
    const definition: ScheduleDefinition = {
      cron: input.cron,
      timeZone: input.timeZone,
      everyMs: input.everyMs,
      anchorMs: input.startAtMs ?? atMs,
      startAtMs: input.startAtMs,
      endAtMs: input.endAtMs,
      jitterMs: input.jitterMs ?? 0,
      catchUp: input.catchUp ?? 'latest',
      target: input.target,
      queue: input.queue,
      payload: input.payload,
      headers: input.headers,
    };
    // Throws SCHEDULE_INVALID naming the field before anything is logged.
    compileRule({ name, ...definition });
    return this.#change(name, async () => {
      const slot = await this.#log({ op: 'put', name, atMs: this.#s.clock.now(), definition });
      await this.#cancelOwed(name);
      return this.#view(slot);
    });
  }

  get(name: string): ScheduleView | undefined {
    const slot = this.#s.schedules.slotOf(name);
    return slot < 0 ? undefined : this.#view(slot);
  }

  /** Schedules by name, after `cursor` (a name), at most `limit`. */
  list(limit: number, cursor?: string): SchedulePage {
    const { names, more } = this.#s.schedules.namesAfter(cursor, limit);
    const schedules = names.map((name) => this.#view(this.#s.schedules.slotOf(name)));
    return { schedules, nextCursor: more ? (names[names.length - 1] as string) : null };
  }

  /** Pauses (true) or resumes (false) a schedule; undefined: no such schedule. A pause cancels its pending occurrences. */
  setPaused(name: string, paused: boolean): Promise<ScheduleView | undefined> {
    return this.#change(name, async () => {
      const slot = this.#s.schedules.slotOf(name);
      if (slot < 0) return undefined;
      if (this.#s.schedules.isPaused(slot) === paused) return this.#view(slot);
      await this.#log({ op: paused ? 'pause' : 'resume', name, atMs: this.#s.clock.now() });
      await this.#cancelOwed(name);
      return this.#view(slot);
    });
  }

  /** Deletes a schedule and cancels its pending occurrences; false: no such schedule. */
  delete(name: string): Promise<boolean> {
    return this.#change(name, async () => {
      if (this.#s.schedules.slotOf(name) < 0) return false;
      await this.#log({ op: 'delete', name, atMs: this.#s.clock.now() });
      await this.#cancelOwed(name);
      return true;
    });
  }

  /** Runs a change of one schedule after the one before it and the materializer's run; the materializer passes over it meanwhile. */
  #change<T>(name: string, work: () => Promise<T>): Promise<T> {
    const before = this.#changes.get(name) ?? Promise.resolve();
    const materializer = this.materializer;
    const run = before.then(async () => {
      materializer.changing.add(name);
      try {
        // A run under way may be creating this schedule's occurrences: its ADD goes first.
        await materializer.settled();
        return await work();
      } finally {
        materializer.changing.delete(name);
        const slot = this.#s.schedules.slotOf(name);
        if (slot >= 0 && !this.#s.schedules.isPaused(slot)) this.#s.schedules.wake(slot, this.#s.clock.now());
        materializer.kick();
      }
    });
    const settled = run.catch(() => undefined);
    this.#changes.set(name, settled);
    void settled.then(() => {
      if (this.#changes.get(name) === settled) this.#changes.delete(name);
    });
    return run;
  }

  /** Logs a change and applies it; a replace, pause or delete now owes the cancel of the schedule's older occurrences. Returns the schedule's slot. */
  async #log(change: ScheduleChange): Promise<number> {
    const seq = await this.#s.log.append(recordType.schedule, encodeScheduleChange(change));
    noteCancelOwed(this.#s, change, seq);
    return this.#s.schedules.apply(change);
  }

  /** Makes the cancel a change of `name` owes, if it owes one: the schedule's pending occurrences that no user changed, released at once. */
  async #cancelOwed(name: string): Promise<BulkCancelOutcome | undefined> {
    const owed = this.#s.schedules.cancelsOwed.get(name);
    if (owed === undefined) return undefined;
    const ids = await this.#untouchedOccurrences(occurrenceKey(name, 0).slice(0, -1), () => Number.POSITIVE_INFINITY);
    const outcome = ids.length === 0 ? undefined : await bulkCancel(this.#s, { ids, releaseAtOnce: true });
    if (this.#s.schedules.cancelsOwed.get(name) === owed) this.#s.schedules.cancelsOwed.delete(name);
    return outcome;
  }

  /**
   * At open, before the materializer runs: a replace, pause or delete is a SCHEDULE record and
   * then a CANCEL_BULK of the occurrences made before it; the power may have gone between the two,
   * a checkpoint may have been taken between them, or the cancel may have failed. The changes
   * still owing their cancel (replayed, or kept by the checkpoint) are settled now: the
   * occurrences of those schedules that are older than the change (their ADD's sequence, in the
   * id, below the change's) and that no user touched are cancelled, in one record; when the
   * cancel had landed there are none. One pass over the pending occurrences, whatever the number
   * of changes; what is owed stays owed if this cancel fails.
   */
  async settleOwedCancels(): Promise<void> {
    const owed = new Map(this.#s.schedules.cancelsOwed);
    if (owed.size === 0) return;
    const ids = await this.#untouchedOccurrences(occurrenceKeyPrefix, (key) => {
      const name = parseOccurrenceKey(key)?.name;
      return name === undefined ? 0 : (owed.get(name) ?? 0);
    });
    if (ids.length > 0) await bulkCancel(this.#s, { ids, releaseAtOnce: true });
    for (const [name, seq] of owed) if (this.#s.schedules.cancelsOwed.get(name) === seq) this.#s.schedules.cancelsOwed.delete(name);
  }

  /** Ids of the pending occurrences under `prefix` that no user changed and whose ADD's sequence is below `beforeSeq(key)`. */
  async #untouchedOccurrences(prefix: string, beforeSeq: (key: string) => number): Promise<string[]> {
    const ids: string[] = [];
    const filter = { keyPrefix: new TextEncoder().encode(prefix), state: 'pending' as const };
    for (let after = queryStart; ; ) {
      const page = await listTimers(this.#s, filter, scheduleLimits.pageRows, after);
      for (const timer of page.timers) {
        if (timer.revision !== 1 || timer.attempts !== 0 || timer.key === null) continue;
        if ((decodeTimerId(timer.id)?.seq ?? Number.POSITIVE_INFINITY) < beforeSeq(timer.key)) ids.push(timer.id);
      }
      const cursor = page.nextCursor === null ? undefined : decodeCursor(page.nextCursor);
      if (cursor === undefined) break;
      after = cursor;
    }
    return ids;
  }

  #view(slot: number): ScheduleView {
    const book = this.#s.schedules;
    const nowMs = this.#s.clock.now();
    const name = book.nameOf(slot);
    const definition = book.definitionOf(slot);
    const paused = book.isPaused(slot);
    const rule = ruleOf(name, definition);
    const next = paused ? [] : rule.after(nowMs - 1, scheduleLimits.nextShown).map((occurrenceMs) => ({ occurrenceMs, fireAtMs: rule.fireAt(occurrenceMs) }));
    return { name, definition, paused, createdAtMs: book.createdAtOf(slot), updatedAtMs: book.updatedAtOf(slot), next };
  }
}

/** Applies a replayed SCHEDULE or SCHEDULE_MARK record (log sequence `seq`); a problem that makes it malformed, or undefined. */
export function replayScheduleRecord(s: EngineState, type: number, body: Uint8Array, seq: number): string | undefined {
  if (type === recordType.scheduleMark) {
    const marks = decodeScheduleMarks(body);
    if (marks === undefined) return 'malformed SCHEDULE_MARK record';
    for (const { name, markMs } of marks) s.schedules.raiseMark(name, markMs);
    return undefined;
  }
  const change = decodeScheduleChange(body);
  if (change === undefined) return 'malformed SCHEDULE record';
  if (change.op === 'put') {
    try {
      compileRule({ name: change.name, ...change.definition });
    } catch (err) {
      return `SCHEDULE record with a rule this version refuses: ${err instanceof Error ? err.message : String(err)}`;
    }
  }
  noteCancelOwed(s, change, seq);
  s.schedules.apply(change);
  return undefined;
}

/** A replace, a pause and a delete owe the cancel of the occurrences made before them (a record of its own after theirs), until it is durable. Called before the change is applied. */
function noteCancelOwed(s: EngineState, change: ScheduleChange, seq: number): void {
  if (change.op === 'pause' || change.op === 'delete' || (change.op === 'put' && s.schedules.slotOf(change.name) >= 0)) s.schedules.cancelsOwed.set(change.name, seq);
}
