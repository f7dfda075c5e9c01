// The schedules in memory, on the main thread: each by name, with its definition, whether it is
// paused, its high-water mark (the last occurrence created or passed over) and when the
// materializer is next to look at it (a min-heap by that time). Changed only by durable records
// (SCHEDULE, SCHEDULE_MARK, and the occurrence keys of ADD records) and by a checkpoint's
// restore, live and in replay alike, so the mark after a restart is the one the log holds.
//
//   byName: name → Schedule ──► wake heap (wakeAtMs; heapAt = its place, -1 when out)
//   occurrence key  "schedule:{name}:{occurrence epoch ms}"  ──► markMs = max(markMs, occurrence)
import type { TimerBatch } from '../batch/timer-batch.ts';
import { isOccurrenceKey, parseOccurrenceKey } from './occurrence-key.ts';
import type { ScheduleChange, ScheduleDefinition } from './schedule-records.ts';

export class Schedule {
  readonly name: string;
  definition: ScheduleDefinition;
  paused = false;
  markMs: number;
  readonly createdAtMs: number;
  updatedAtMs: number;
  /** When the materializer next looks at it (Infinity: never, the rule has ended or it is paused). */
  wakeAtMs = 0;
  heapAt = -1;

  constructor(name: string, definition: ScheduleDefinition, atMs: number) {
    this.name = name;
    this.definition = definition;
    this.markMs = atMs;
    this.createdAtMs = atMs;
    this.updatedAtMs = atMs;
  }
}

export class ScheduleBook {
  readonly #byName = new Map<string, Schedule>();
  readonly #heap: Schedule[] = [];
  /** Occurrences created since open, by the materializer (live only), and those of them that caught up on missed ones. */
  occurrencesCreated = 0;
  catchUpCreated = 0;
  /** Pre-created occurrences found overdue after downtime or a clock step and cancelled by their catch_up. */
  catchUpCancelled = 0;
  /** Missed occurrences passed over by catch_up none or latest. */
  occurrencesSkipped = 0;
  /** Occurrences delivered since open (replayed outcomes count too: since the data directory's last checkpoint). */
  occurrencesFired = 0;

  /** Schedules paused now. */
  pausedCount = 0;

  get size(): number {
    return this.#byName.size;
  }

  get(name: string): Schedule | undefined {
    return this.#byName.get(name);
  }

  /** Every schedule, by name. */
  sortedNames(): string[] {
    return [...this.#byName.keys()].sort();
  }

  values(): IterableIterator<Schedule> {
    return this.#byName.values();
  }

  /** A durable SCHEDULE record's change (live, replayed or restored). A put and a resume set the mark to their time: the rule starts again from there. */
  apply(change: ScheduleChange): Schedule | undefined {
    const existing = this.#byName.get(change.name);
    if (change.op === 'put') {
      if (existing === undefined) {
        const schedule = new Schedule(change.name, change.definition, change.atMs);
        this.#byName.set(change.name, schedule);
        this.wake(schedule, change.atMs);
        return schedule;
      }
      existing.definition = change.definition;
      this.#setPaused(existing, false);
      existing.markMs = change.atMs;
      existing.updatedAtMs = change.atMs;
      this.wake(existing, change.atMs);
      return existing;
    }
    if (existing === undefined) return undefined;
    if (change.op === 'delete') {
      this.#setPaused(existing, false);
      this.#remove(existing);
      this.#byName.delete(change.name);
      return undefined;
    }
    existing.updatedAtMs = change.atMs;
    if (change.op === 'pause') {
      this.#setPaused(existing, true);
      this.#remove(existing);
    } else {
      this.#setPaused(existing, false);
      existing.markMs = change.atMs;
      this.wake(existing, change.atMs);
    }
    return existing;
  }

  /** A schedule as a checkpoint's manifest kept it (restore at open, before replay). */
  restore(name: string, definition: ScheduleDefinition, createdAtMs: number, updatedAtMs: number, paused: boolean, markMs: number): void {
    const schedule = new Schedule(name, definition, createdAtMs);
    schedule.updatedAtMs = updatedAtMs;
    this.#setPaused(schedule, paused);
    schedule.markMs = markMs;
    this.#byName.set(name, schedule);
    this.wake(schedule, 0);
  }

  /** Raises a schedule's mark (an occurrence created, or missed ones passed over); unknown names are skipped. */
  raiseMark(name: string, markMs: number): void {
    const schedule = this.#byName.get(name);
    if (schedule !== undefined && markMs > schedule.markMs) schedule.markMs = markMs;
  }

  /** The marks an ADD's occurrence rows carry (replay: the ADD and the mark are one record). */
  raiseMarksOf(batch: TimerBatch): void {
    if (this.#byName.size === 0) return;
    const { values, offsets } = batch.keys;
    for (let row = 0; row < batch.rows; row++) {
      const from = offsets[row] as number;
      const to = offsets[row + 1] as number;
      if (!isOccurrenceKey(values, from, to)) continue;
      const parsed = parseOccurrenceKey(Buffer.from(values.buffer, values.byteOffset + from, to - from).toString('latin1'));
      if (parsed !== undefined) this.raiseMark(parsed.name, parsed.occurrenceMs);
    }
  }

  /** Puts the schedule in the wake heap at `atMs` (moving it if it is there); Infinity takes it out. */
  wake(schedule: Schedule, atMs: number): void {
    this.#remove(schedule);
    schedule.wakeAtMs = atMs;
    if (atMs === Infinity || schedule.paused) return;
    schedule.heapAt = this.#heap.push(schedule) - 1;
    this.#up(schedule.heapAt);
  }

  /** The schedule the materializer should look at first, if it is due by `nowMs`. */
  peekDue(nowMs: number): Schedule | undefined {
    const top = this.#heap[0];
    return top !== undefined && top.wakeAtMs <= nowMs ? top : undefined;
  }

  /** When the first schedule wakes (Infinity: none). */
  nextWakeMs(): number {
    return this.#heap[0]?.wakeAtMs ?? Infinity;
  }

  /** Takes the schedule out of the wake heap (it is put back with wake()). */
  take(schedule: Schedule): void {
    this.#remove(schedule);
  }

  #setPaused(schedule: Schedule, paused: boolean): void {
    if (schedule.paused !== paused) this.pausedCount += paused ? 1 : -1;
    schedule.paused = paused;
  }

  #remove(schedule: Schedule): void {
    const at = schedule.heapAt;
    if (at < 0) return;
    schedule.heapAt = -1;
    const last = this.#heap.pop() as Schedule;
    if (last === schedule) return;
    this.#heap[at] = last;
    last.heapAt = at;
    this.#down(at);
    this.#up(last.heapAt);
  }

  #up(at: number): void {
    const heap = this.#heap;
    const item = heap[at] as Schedule;
    while (at > 0) {
      const parentAt = (at - 1) >> 1;
      const parent = heap[parentAt] as Schedule;
      if (parent.wakeAtMs <= item.wakeAtMs) break;
      heap[at] = parent;
      parent.heapAt = at;
      at = parentAt;
    }
    heap[at] = item;
    item.heapAt = at;
  }

  #down(at: number): void {
    const heap = this.#heap;
    const item = heap[at] as Schedule;
    for (;;) {
      let child = 2 * at + 1;
      if (child >= heap.length) break;
      const right = heap[child + 1];
      if (right !== undefined && right.wakeAtMs < (heap[child] as Schedule).wakeAtMs) child++;
      const smaller = heap[child] as Schedule;
      if (smaller.wakeAtMs >= item.wakeAtMs) break;
      heap[at] = smaller;
      smaller.heapAt = at;
      at = child;
    }
    heap[at] = item;
    item.heapAt = at;
  }
}
