// The schedules in memory, on the main thread: each by name in a slot of typed-array columns
// (its rule's numbers, its high-water mark, when the materializer next looks at it) and plain
// arrays of strings (target, queue, payload as a one-byte string, headers, cron, zone), since a
// million schedules as objects cost half as much again (bench `schedules`,
// schedules.bytes_per_schedule). Changed only by durable records (SCHEDULE, SCHEDULE_MARK, and
// the occurrence keys of ADD records) and by a checkpoint's restore, live and in replay alike,
// so the mark after a restart is the one the log holds.
//
//   slotOf: name → slot ──► columns[slot]: mark, wake, anchor, start, end, every, jitter, flags, …
//   wake heap: slots by wakeAtMs (heapAt[slot] = its place, -1 when out)
//   occurrence key  "schedule:{name}:{occurrence epoch ms}"  ──► mark = max(mark, occurrence)
import type { TimerBatch } from '../batch/timer-batch.ts';
import type { CheckpointedSchedules } from './schedule-file.ts';
import { isOccurrenceKey, parseOccurrenceKey } from './occurrence-key.ts';
import type { CatchUp } from './rule.ts';
import type { ScheduleChange, ScheduleDefinition } from './schedule-records.ts';

const catchUps: readonly CatchUp[] = ['latest', 'all', 'none'];
const pausedFlag = 1;
/** flags >> catchUpShift: the catch_up's index in catchUps. */
const catchUpShift = 1;
const initialSlots = 16;

/** A number column that may be absent: NaN stands for none. */
const orNaN = (value: number | undefined): number => value ?? NaN;
const orUndefined = (value: number): number | undefined => (Number.isNaN(value) ? undefined : value);

export class ScheduleBook {
  readonly #slotOf = new Map<string, number>();
  #names: (string | undefined)[] = [];
  readonly #free: number[] = [];
  #capacity = 0;
  /** Every name, sorted, while no schedule was added or deleted since (namesAfter). */
  #sorted: string[] | undefined;
  // Number columns, by slot.
  #mark = new Float64Array(0);
  #wake = new Float64Array(0);
  #created = new Float64Array(0);
  #updated = new Float64Array(0);
  #anchor = new Float64Array(0);
  #startAt = new Float64Array(0);
  #endAt = new Float64Array(0);
  #every = new Float64Array(0);
  #jitter = new Float64Array(0);
  #flags = new Uint8Array(0);
  /** One more at every put and delete of the slot: a pass that began before either sees it. */
  #generation = new Uint32Array(0);
  #heapAt = new Int32Array(0);
  #heap = new Int32Array(0);
  #heapSize = 0;
  // String columns, by slot.
  #target: string[] = [];
  #queue: string[] = [];
  /** The payload's bytes as a one-byte (latin1) string: a third of a Uint8Array's cost. */
  #payload: string[] = [];
  #headers: string[] = [];
  #cron: (string | undefined)[] = [];
  #timeZone: (string | undefined)[] = [];

  /** Occurrences created since open, by the materializer (live only), and those of them that caught up on missed ones. */
  occurrencesCreated = 0;
  catchUpCreated = 0;
  /** Pre-created occurrences found overdue after downtime or a clock step and cancelled by their catch_up. */
  catchUpCancelled = 0;
  /** Passes over missed occurrences by catch_up none or latest. */
  occurrencesSkipped = 0;
  /** Occurrences delivered since open (replayed outcomes count too: since the data directory's last checkpoint). */
  occurrencesFired = 0;
  /** Schedules paused now. */
  pausedCount = 0;
  /**
   * Replaces, pauses and deletes whose cancel of the schedule's older pending occurrences (a
   * record of its own, after the change's) may not have landed: name → the change record's
   * sequence (the latest). Set when such a change is applied (live or replayed), dropped once its
   * cancel is durable; a checkpoint keeps what is left (docs/format/spill.md), and
   * Schedules.settleOwedCancels makes those cancels at open.
   */
  readonly cancelsOwed = new Map<string, number>();
  /** One more at every put, pause, resume and delete applied: a checkpoint writes a new schedules file when it moved. */
  changes = 0;
  /** One more at every mark raised: a checkpoint writes a new marks file when it moved. */
  marksMoved = 0;
  /** The schedules files the durable manifest names, and the book as of them (schedule-checkpoint.ts). */
  checkpointed: CheckpointedSchedules | undefined;

  get size(): number {
    return this.#slotOf.size;
  }

  /** The slot of the schedule `name`, or -1. */
  slotOf(name: string): number {
    return this.#slotOf.get(name) ?? -1;
  }

  nameOf(slot: number): string {
    return this.#names[slot] as string;
  }

  isPaused(slot: number): boolean {
    return ((this.#flags[slot] as number) & pausedFlag) !== 0;
  }

  markOf(slot: number): number {
    return this.#mark[slot] as number;
  }

  createdAtOf(slot: number): number {
    return this.#created[slot] as number;
  }

  updatedAtOf(slot: number): number {
    return this.#updated[slot] as number;
  }

  generationOf(slot: number): number {
    return this.#generation[slot] as number;
  }

  catchUpOf(slot: number): CatchUp {
    return catchUps[(this.#flags[slot] as number) >> catchUpShift] as CatchUp;
  }

  /** The schedule's definition, made from its columns (a new object: callers may keep it). */
  definitionOf(slot: number): ScheduleDefinition {
    return {
      cron: this.#cron[slot],
      timeZone: this.#timeZone[slot],
      everyMs: orUndefined(this.#every[slot] as number),
      anchorMs: this.#anchor[slot] as number,
      startAtMs: orUndefined(this.#startAt[slot] as number),
      endAtMs: orUndefined(this.#endAt[slot] as number),
      jitterMs: this.#jitter[slot] as number,
      catchUp: this.catchUpOf(slot),
      target: this.#target[slot] as string,
      queue: this.#queue[slot] as string,
      payload: new Uint8Array(Buffer.from(this.#payload[slot] as string, 'latin1')),
      headers: this.#headers[slot] as string,
    };
  }

  /** Whether the slot holds a schedule. */
  isLive(slot: number): boolean {
    return this.#names[slot] !== undefined;
  }

  /** Slots handed out so far (free ones among them): what a copy of a column by slot needs. */
  get slotCount(): number {
    return this.#names.length;
  }

  /** Every slot's mark (a free slot's is meaningless), copied into `into` when it has room, else into a new array: one copy, no pass over the schedules. */
  marksBySlot(into: Float64Array): Float64Array {
    const count = this.#names.length;
    if (into.length < count) return this.#mark.slice(0, count);
    into.set(this.#mark.subarray(0, count));
    return into.subarray(0, count);
  }

  /**
   * The names of up to `limit` schedules after `cursor` (a name; undefined: from the first), in
   * name order, and whether more follow. The sorted names are kept until a schedule is added or
   * deleted, so paging through a million sorts them once, not once a page.
   */
  namesAfter(cursor: string | undefined, limit: number): { readonly names: string[]; readonly more: boolean } {
    this.#sorted ??= [...this.#slotOf.keys()].sort();
    const sorted = this.#sorted;
    let from = 0;
    if (cursor !== undefined) {
      // The first name after the cursor, by bisection.
      let to = sorted.length;
      while (from < to) {
        const middle = (from + to) >> 1;
        if ((sorted[middle] as string) <= cursor) from = middle + 1;
        else to = middle;
      }
    }
    return { names: sorted.slice(from, from + limit), more: from + limit < sorted.length };
  }

  /** A durable SCHEDULE record's change (live, replayed or restored); the slot it leaves, or -1. A put and a resume set the mark to their time: the rule starts again from there. */
  apply(change: ScheduleChange): number {
    let slot = this.slotOf(change.name);
    if (slot >= 0 || change.op === 'put') this.changes++;
    if (change.op === 'put') {
      if (slot < 0) {
        slot = this.#allocate(change.name);
        this.#created[slot] = change.atMs;
      }
      this.#generation[slot] = (this.#generation[slot] as number) + 1;
      this.#define(slot, change.definition);
      this.#setPaused(slot, false);
      this.#mark[slot] = change.atMs;
      this.#updated[slot] = change.atMs;
      this.wake(slot, change.atMs);
      return slot;
    }
    if (slot < 0) return -1;
    if (change.op === 'delete') {
      this.#release(slot);
      return -1;
    }
    this.#updated[slot] = change.atMs;
    if (change.op === 'pause') {
      this.#setPaused(slot, true);
      this.take(slot);
    } else {
      this.#setPaused(slot, false);
      this.#mark[slot] = change.atMs;
      this.wake(slot, change.atMs);
    }
    return slot;
  }

  /** A schedule as a checkpoint's manifest kept it (restore at open, before replay). */
  restore(name: string, definition: ScheduleDefinition, createdAtMs: number, updatedAtMs: number, paused: boolean, markMs: number): number {
    const slot = this.#allocate(name);
    this.#define(slot, definition);
    this.#created[slot] = createdAtMs;
    this.#updated[slot] = updatedAtMs;
    this.#mark[slot] = markMs;
    this.#setPaused(slot, paused);
    this.wake(slot, 0);
    return slot;
  }

  /** Raises a schedule's mark (an occurrence created, or missed ones passed over); unknown names are skipped. */
  raiseMark(name: string, markMs: number): void {
    const slot = this.slotOf(name);
    if (slot >= 0 && markMs > (this.#mark[slot] as number)) {
      this.#mark[slot] = markMs;
      this.marksMoved++;
    }
  }

  /** The marks an ADD's occurrence rows carry (replay: the ADD and the mark are one record). */
  raiseMarksOf(batch: TimerBatch): void {
    if (this.#slotOf.size === 0) return;
    const { values, offsets } = batch.keys;
    for (let row = 0; row < batch.rows; row++) {
      const from = offsets[row] as number;
      const to = offsets[row + 1] as number;
      if (!isOccurrenceKey(values, from, to)) continue;
      const parsed = parseOccurrenceKey(Buffer.from(values.buffer, values.byteOffset + from, to - from).toString('latin1'));
      if (parsed !== undefined) this.raiseMark(parsed.name, parsed.occurrenceMs);
    }
  }

  /** Puts the slot in the wake heap at `atMs` (moving it if it is there); Infinity, or a paused schedule, takes it out. */
  wake(slot: number, atMs: number): void {
    this.take(slot);
    this.#wake[slot] = atMs;
    if (atMs === Infinity || this.isPaused(slot)) return;
    const at = this.#heapSize++;
    this.#heap[at] = slot;
    this.#heapAt[slot] = at;
    this.#up(at);
  }

  /** The slot the materializer should look at first, if it is due by `nowMs`; -1 otherwise. */
  peekDue(nowMs: number): number {
    if (this.#heapSize === 0) return -1;
    const top = this.#heap[0] as number;
    return (this.#wake[top] as number) <= nowMs ? top : -1;
  }

  /** When the first schedule wakes (Infinity: none). */
  nextWakeMs(): number {
    return this.#heapSize === 0 ? Infinity : (this.#wake[this.#heap[0] as number] as number);
  }

  /** Takes the slot out of the wake heap (wake() puts it back). */
  take(slot: number): void {
    const at = this.#heapAt[slot] as number;
    if (at < 0) return;
    this.#heapAt[slot] = -1;
    const last = this.#heap[--this.#heapSize] as number;
    if (last === slot) return;
    this.#heap[at] = last;
    this.#heapAt[last] = at;
    this.#down(at);
    this.#up(this.#heapAt[last] as number);
  }

  #define(slot: number, d: ScheduleDefinition): void {
    this.#cron[slot] = d.cron;
    this.#timeZone[slot] = d.timeZone;
    this.#every[slot] = orNaN(d.everyMs);
    this.#anchor[slot] = d.anchorMs;
    this.#startAt[slot] = orNaN(d.startAtMs);
    this.#endAt[slot] = orNaN(d.endAtMs);
    this.#jitter[slot] = d.jitterMs;
    this.#flags[slot] = ((this.#flags[slot] as number) & pausedFlag) | (catchUps.indexOf(d.catchUp) << catchUpShift);
    this.#target[slot] = d.target;
    this.#queue[slot] = d.queue;
    this.#payload[slot] = Buffer.from(d.payload.buffer, d.payload.byteOffset, d.payload.byteLength).toString('latin1');
    this.#headers[slot] = d.headers;
  }

  #setPaused(slot: number, paused: boolean): void {
    if (this.isPaused(slot) === paused) return;
    this.pausedCount += paused ? 1 : -1;
    this.#flags[slot] = paused ? (this.#flags[slot] as number) | pausedFlag : (this.#flags[slot] as number) & ~pausedFlag;
  }

  #allocate(name: string): number {
    let slot = this.#free.pop();
    if (slot === undefined) {
      slot = this.#names.length;
      if (slot >= this.#capacity) this.#grow(Math.max(initialSlots, this.#capacity * 2));
    }
    this.#names[slot] = name;
    this.#slotOf.set(name, slot);
    this.#sorted = undefined;
    this.#flags[slot] = 0;
    this.#heapAt[slot] = -1;
    return slot;
  }

  #release(slot: number): void {
    this.take(slot);
    this.#setPaused(slot, false);
    this.#generation[slot] = (this.#generation[slot] as number) + 1;
    this.#slotOf.delete(this.#names[slot] as string);
    this.#sorted = undefined;
    this.#names[slot] = undefined;
    this.#target[slot] = this.#queue[slot] = this.#payload[slot] = this.#headers[slot] = '';
    this.#cron[slot] = this.#timeZone[slot] = undefined;
    this.#free.push(slot);
  }

  #grow(capacity: number): void {
    const f64 = (old: Float64Array<ArrayBuffer>): Float64Array<ArrayBuffer> => {
      const next = new Float64Array(capacity);
      next.set(old);
      return next;
    };
    this.#mark = f64(this.#mark);
    this.#wake = f64(this.#wake);
    this.#created = f64(this.#created);
    this.#updated = f64(this.#updated);
    this.#anchor = f64(this.#anchor);
    this.#startAt = f64(this.#startAt);
    this.#endAt = f64(this.#endAt);
    this.#every = f64(this.#every);
    this.#jitter = f64(this.#jitter);
    const flags = new Uint8Array(capacity);
    flags.set(this.#flags);
    this.#flags = flags;
    const generation = new Uint32Array(capacity);
    generation.set(this.#generation);
    this.#generation = generation;
    const heapAt = new Int32Array(capacity);
    heapAt.set(this.#heapAt);
    this.#heapAt = heapAt;
    const heap = new Int32Array(capacity);
    heap.set(this.#heap);
    this.#heap = heap;
    this.#capacity = capacity;
  }

  #up(at: number): void {
    const heap = this.#heap;
    const wakeAt = this.#wake;
    const slot = heap[at] as number;
    const key = wakeAt[slot] as number;
    while (at > 0) {
      const parentAt = (at - 1) >> 1;
      const parent = heap[parentAt] as number;
      if ((wakeAt[parent] as number) <= key) break;
      heap[at] = parent;
      this.#heapAt[parent] = at;
      at = parentAt;
    }
    heap[at] = slot;
    this.#heapAt[slot] = at;
  }

  #down(at: number): void {
    const heap = this.#heap;
    const wakeAt = this.#wake;
    const slot = heap[at] as number;
    const key = wakeAt[slot] as number;
    for (;;) {
      let child = 2 * at + 1;
      if (child >= this.#heapSize) break;
      if (child + 1 < this.#heapSize && (wakeAt[heap[child + 1] as number] as number) < (wakeAt[heap[child] as number] as number)) child++;
      const smaller = heap[child] as number;
      if ((wakeAt[smaller] as number) >= key) break;
      heap[at] = smaller;
      this.#heapAt[smaller] = at;
      at = child;
    }
    heap[at] = slot;
    this.#heapAt[slot] = at;
  }
}
