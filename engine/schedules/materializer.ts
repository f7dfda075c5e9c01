// Occurrence creation, on the main thread: a schedule's occurrences become ordinary timers,
// keyed `schedule:{name}:{occurrence epoch ms}`, firing at rule.fireAt(occurrence), created
// ahead of time in batches through the normal admit path (one ADD record a batch). Time is the
// engine's clock (a manual test clock drives it: every move wakes it).
//
// What is created ahead: every occurrence due within `scheduleLimits.createAheadMs` (two
// minutes), and always the next one, however far: a schedule has its next occurrence on record
// at all times, so a restart or a slow minute never misses one, and an hourly schedule holds
// one pending timer rather than an hour's worth.
//
// Exactly once: an occurrence's ADD carries its schedule's high-water mark in its key (replay
// raises the mark from it, engine/admission.ts insertBatch), so the mark and the timers it
// covers become durable in one record; a checkpoint carries the marks in its manifest. An
// occurrence is created only past the mark.
//
// Missed occurrences (their instant passed before they were created: downtime, a clock step)
// follow the schedule's catch_up: `latest` creates the most recent once, `all` each one, `none`
// none (the mark passes over them, logged as a SCHEDULE_MARK record). Pre-created occurrences
// found overdue after downtime or before a manual clock step follow it too (settleOverdue).
//
//   wake heap ─► due schedules ─► [SCHEDULE_MARK of passed-over ones] ─► ADD of the occurrences ─► marks up ─► next wake
import { setImmediate as nextTurn } from 'node:timers/promises';
import { batchFromSpecs, type TimerSpec } from '../batch/timer-batch.ts';
import { admitOccurrences } from '../admission.ts';
import { bulkCancel } from '../bulk-cancel.ts';
import { isManualClock } from '../clock.ts';
import { scheduleLimits } from '../limits.ts';
import { encodeScheduleMarks, type ScheduleMark } from './schedule-records.ts';
import { recordType } from '../records.ts';
import type { EngineState } from '../state.ts';
import { decodeCursor, listTimers, queryStart } from '../timer-query.ts';
import { occurrenceKey, occurrenceKeyPrefix, parseOccurrenceKey } from './occurrence-key.ts';
import { compileRule, type ScheduleRule } from './rule.ts';
import type { ScheduleBook } from './schedule-book.ts';
import type { ScheduleDefinition } from './schedule-records.ts';

/** The rule of a schedule's definition, compiled when it is needed (a compiled rule is not kept: a million schedules would hold a million). */
export function ruleOf(name: string, d: ScheduleDefinition): ScheduleRule {
  return compileRule({ name, cron: d.cron, timeZone: d.timeZone, everyMs: d.everyMs, anchorMs: d.anchorMs, startAtMs: d.startAtMs, endAtMs: d.endAtMs, jitterMs: d.jitterMs });
}

/** One schedule's part of a batch: its new mark and when it next wakes. */
interface Planned {
  readonly slot: number;
  /** The slot's generation when planned: a put or delete since makes the plan stale. */
  readonly generation: number;
  readonly markMs: number;
  readonly wakeAtMs: number;
}

const encoder = new TextEncoder();

export class Materializer {
  readonly #s: EngineState;
  /** Schedules with a change in flight (schedules.ts): passed over until it is done (it wakes them again). */
  readonly changing = new Set<string>();
  /** The run under way (one at a time): a change waits for it, as it may hold the schedule. */
  #running: Promise<void> = Promise.resolve();
  #timer: NodeJS.Timeout | undefined;
  #unwatch: (() => void) | undefined;
  #stopped = false;

  constructor(s: EngineState) {
    this.#s = s;
  }

  /** At open: overdue occurrences settled and missed ones caught up to the clock, then the loop runs. */
  async start(): Promise<void> {
    const nowMs = this.#s.clock.now();
    await this.exclusive(async () => {
      await this.#settleOverdue(nowMs);
      await this.#createDue(nowMs);
    });
    const clock = this.#s.clock;
    if (isManualClock(clock)) this.#unwatch = clock.watch(() => this.kick());
    this.#s.beforeClockMove = (toMs) =>
      this.exclusive(async () => {
        await this.#settleOverdue(toMs);
        await this.#createDue(toMs);
      });
    this.#arm();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#unwatch?.();
    this.#s.beforeClockMove = undefined;
    await this.#running;
  }

  /** Runs `work` alone among the materializer's runs; what it throws is the caller's. */
  exclusive(work: () => Promise<void>): Promise<void> {
    const run = this.#running.then(work);
    this.#running = run.catch(() => undefined);
    return run;
  }

  /** The run under way has finished (a change of a schedule waits for it before it decides). */
  settled(): Promise<void> {
    return this.#running;
  }

  /** Looks again soon (a schedule woke, the clock moved). */
  kick(): void {
    if (this.#stopped) return;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    this.#timer = setTimeout(() => this.#tick(), 0);
    this.#timer.unref();
  }

  #tick(): void {
    this.#timer = undefined;
    if (this.#stopped) return;
    // Failures (a full store, a poisoned log) are retried at the next wake: the marks did not move.
    void this.exclusive(() => this.#createDue(this.#s.clock.now())).catch(() => undefined).finally(() => this.#arm());
  }

  #arm(): void {
    if (this.#stopped) return;
    if (this.#timer !== undefined) clearTimeout(this.#timer);
    const nextMs = this.#s.schedules.nextWakeMs();
    if (nextMs === Infinity) return;
    // Capped: the real clock may step, and the first schedule's wake is then not the first due.
    // At least wakeCoalesceMs: the schedules due meanwhile go into one batch.
    const delayMs = Math.min(Math.max(nextMs - this.#s.clock.now(), scheduleLimits.wakeCoalesceMs), scheduleLimits.sleepMsMax);
    this.#timer = setTimeout(() => this.#tick(), delayMs);
    this.#timer.unref();
  }

  /**
   * Creates the occurrences of every schedule due by `nowMs`, a batch at a time, a turn of the
   * event loop between batches: a batch looks at schedulesPerTurnMax schedules at most, as at
   * open every schedule is due and most of them have their next occurrence already.
   */
  async #createDue(nowMs: number): Promise<void> {
    const book = this.#s.schedules;
    for (let first = true; !this.#stopped && book.peekDue(nowMs) >= 0; first = false) {
      if (!first) await nextTurn();
      const specs: TimerSpec[] = [];
      const planned: Planned[] = [];
      const passedOver: ScheduleMark[] = [];
      let caughtUp = 0;
      let looked = 0;
      for (let slot = book.peekDue(nowMs); slot >= 0 && specs.length < scheduleLimits.batchRowsMax && looked < scheduleLimits.schedulesPerTurnMax; slot = book.peekDue(nowMs), looked++) {
        book.take(slot);
        // A change in flight wakes it again once it is done.
        if (this.changing.has(book.nameOf(slot))) continue;
        caughtUp += plan(book, slot, nowMs, specs, planned, passedOver);
      }
      if (passedOver.length > 0) {
        await this.#s.log.append(recordType.scheduleMark, encodeScheduleMarks(passedOver));
        for (const { name, markMs } of passedOver) book.raiseMark(name, markMs);
        book.occurrencesSkipped += passedOver.length;
      }
      if (specs.length > 0) {
        try {
          await admitOccurrences(this.#s, batchFromSpecs(specs));
        } catch (err) {
          for (const { slot, generation } of planned) if (book.generationOf(slot) === generation && !this.changing.has(book.nameOf(slot))) book.wake(slot, this.#s.clock.now() + scheduleLimits.retryAfterMs);
          throw err;
        }
        book.occurrencesCreated += specs.length;
        book.catchUpCreated += caughtUp;
      }
      for (const { slot, generation, markMs, wakeAtMs } of planned) {
        // The ADD raised the mark already (insertBatch); a schedule changed meanwhile is woken by its change.
        if (book.generationOf(slot) !== generation || this.changing.has(book.nameOf(slot))) continue;
        book.raiseMark(book.nameOf(slot), markMs);
        book.wake(slot, wakeAtMs);
      }
    }
  }

  /**
   * Pre-created occurrences due before `nowMs` that have not gone out (after downtime, or before
   * a manual clock steps over them) follow their schedule's catch_up: `none` cancels them,
   * `latest` keeps the latest of them unless a later one was missed altogether, `all` keeps
   * them. Occurrences a user patched are left as they are.
   */
  async #settleOverdue(nowMs: number): Promise<void> {
    const s = this.#s;
    const book = s.schedules;
    if (book.size === 0) return;
    const overdue = new Map<number, { ids: string[]; occurrences: number[] }>();
    const filter = { keyPrefix: encoder.encode(occurrenceKeyPrefix), state: 'pending' as const, dueBeforeMs: nowMs };
    for (let after = queryStart; ; ) {
      const page = await listTimers(s, filter, scheduleLimits.pageRows, after);
      for (const timer of page.timers) {
        const parsed = timer.key === null ? undefined : parseOccurrenceKey(timer.key);
        const slot = parsed === undefined ? -1 : book.slotOf(parsed.name);
        if (parsed === undefined || slot < 0 || timer.revision !== 1 || timer.attempts !== 0 || this.changing.has(parsed.name)) continue;
        let entry = overdue.get(slot);
        if (entry === undefined) overdue.set(slot, (entry = { ids: [], occurrences: [] }));
        entry.ids.push(timer.id);
        entry.occurrences.push(parsed.occurrenceMs);
      }
      const cursor = page.nextCursor === null ? undefined : decodeCursor(page.nextCursor);
      if (cursor === undefined) break;
      after = cursor;
    }
    const cancel: string[] = [];
    for (const [slot, { ids, occurrences }] of overdue) {
      const catchUp = book.catchUpOf(slot);
      if (catchUp === 'all') continue;
      let keep = -1;
      if (catchUp === 'latest' && ruleOf(book.nameOf(slot), book.definitionOf(slot)).latestIn(book.markOf(slot), nowMs - 1) === undefined) {
        keep = occurrences.indexOf(Math.max(...occurrences));
      }
      for (let i = 0; i < ids.length; i++) if (i !== keep) cancel.push(ids[i] as string);
    }
    for (let from = 0; from < cancel.length; from += s.limits.bulkCancelTimersMax) {
      const { cancelled } = await bulkCancel(s, { ids: cancel.slice(from, from + s.limits.bulkCancelTimersMax) });
      book.catchUpCancelled += cancelled;
    }
  }
}

/**
 * Plans one schedule due by `nowMs`: its missed occurrences by its catch_up, then the ones due
 * within the window ahead and at least its next one. Appends its timers to `specs`, its new
 * mark and wake to `planned`, a passed-over mark to `passedOver`; returns how many of its
 * timers catch up on missed occurrences.
 */
function plan(book: ScheduleBook, slot: number, nowMs: number, specs: TimerSpec[], planned: Planned[], passedOver: ScheduleMark[]): number {
  const name = book.nameOf(slot);
  const generation = book.generationOf(slot);
  const d = book.definitionOf(slot);
  const rule = ruleOf(name, d);
  const headers = d.headers === '' ? undefined : (JSON.parse(d.headers) as Record<string, string>);
  const add = (occurrenceMs: number): void => {
    specs.push({ fireAtMs: rule.fireAt(occurrenceMs), target: d.target, queue: d.queue, payload: d.payload, key: occurrenceKey(name, occurrenceMs), ...(headers === undefined ? {} : { headers }) });
  };
  let markMs = book.markOf(slot);
  let caughtUp = 0;
  const first = rule.after(markMs, 1)[0];
  if (first !== undefined && first < nowMs) {
    if (d.catchUp === 'all') {
      for (const occurrenceMs of rule.after(markMs, scheduleLimits.occurrencesPerWakeMax)) {
        if (occurrenceMs >= nowMs) break;
        add(occurrenceMs);
        markMs = occurrenceMs;
        caughtUp++;
      }
      if (caughtUp === scheduleLimits.occurrencesPerWakeMax) {
        // More missed than one wake creates: the rest at the next, at once.
        planned.push({ slot, generation, markMs, wakeAtMs: nowMs });
        return caughtUp;
      }
    } else {
      const latestMs = rule.latestIn(markMs, nowMs - 1) as number;
      if (d.catchUp === 'latest') {
        add(latestMs);
        caughtUp = 1;
      } else passedOver.push({ name, markMs: latestMs });
      markMs = latestMs;
    }
  }
  // Ahead: what falls within the window, and at least one occurrence to come.
  let ahead = markMs > nowMs;
  let created = caughtUp;
  for (let more = true; more && created < scheduleLimits.occurrencesPerWakeMax; ) {
    const next = rule.after(markMs, scheduleLimits.aheadChunk);
    if (next.length === 0) break;
    for (const occurrenceMs of next) {
      if (ahead && occurrenceMs > nowMs + scheduleLimits.createAheadMs) {
        more = false;
        break;
      }
      add(occurrenceMs);
      markMs = occurrenceMs;
      created++;
      ahead = true;
    }
  }
  // The next wake: when the last one created falls due (so that another is on record), or
  // when the next one comes within the window, whichever is first; never, past the rule's end.
  const nextMs = rule.after(markMs, 1)[0];
  const wakeAtMs = nextMs === undefined ? Infinity : Math.max(nowMs, Math.min(markMs, nextMs - scheduleLimits.createAheadMs));
  planned.push({ slot, generation, markMs, wakeAtMs });
  return caughtUp;
}
