// The scheduler: releases due timers to the dispatcher. Main thread; one timer armed at a time.
// The dispatcher builds and drives it; the engine knows nothing of it (it only calls the hooks
// the scheduler sets on it: due times changed, withdraw a handed-out timer).
//
//   sleep until min(next due, sleepMsMax) ─► tick: take ≤ min(slice, room, tokens) timers with
//   fire time ≤ wall clock ─► dispatcher ─► setImmediate (yield) if more are due, else sleep
//
// Never early: a timer is taken only when the wall clock (the injected Clock) has reached its
// fire time, checked at the moment it is taken; timers armed by setTimeout only decide when to
// look. A port with `takeAhead` (the dispatcher) takes its timers up to that lead before their
// time and holds each until the wall clock reaches it, where it sends. A clock that jumps back
// makes the scheduler wait longer; one that jumps forward makes timers due. Sleeps are capped so
// a jump is noticed within sleepMsMax; a clock that tells of its jumps (a manual clock's moves,
// Clock.watch) gets a look at once. The release rate's tokens count real time (rateClock), which
// a manual clock standing still would never refill.
import type { Clock, DueSlice, Engine, TakeAhead, Withdraw } from '../engine/engine.ts';
import { monotonicClock } from '../engine/clock.ts';
import { schedulerLimits, type SchedulerLimits } from '../engine/limits.ts';

/** Where due timers go (the dispatcher implements it; tests use a double). */
export interface DispatchPort {
  /** How many more timers the dispatcher takes now (its in-flight room). */
  room(): number;
  /** How many more timers of one queue it takes now (absent: no limit per queue). */
  queueRoom?(queueIndex: number): number;
  deliver(slice: DueSlice): void;
  /** Timers the port takes before they are due (it holds each until its time); absent: only due ones. */
  readonly takeAhead?: TakeAhead;
  /** Gives back a timer it holds but has not sent (a cancel); true: it will not be sent. */
  withdraw?(seq: number, row: number): boolean;
}

const refuseWithdraw: Withdraw = () => false;

/** How soon to look again when due timers wait for dispatcher room or rate tokens. */
const heldBackWaitMs = 5;

export class Scheduler {
  readonly #engine: Engine;
  readonly #port: DispatchPort;
  readonly #clock: Clock;
  readonly #rateClock: Clock;
  readonly #limits: SchedulerLimits;
  #tokens: number;
  #tokensAtMs: number;
  #timer: NodeJS.Timeout | NodeJS.Immediate | undefined;
  #armedForMs = Infinity;
  #running = false;
  readonly #queueRoom: ((queueIndex: number) => number) | undefined;
  readonly #ahead: TakeAhead | undefined;
  readonly #withdraw: Withdraw | undefined;
  #unwatchClock: (() => void) | undefined;

  /** `rateClock` times the release rate's tokens: real time, whatever `clock` does (tests pass their own). */
  constructor(engine: Engine, port: DispatchPort, clock: Clock, limits: Partial<SchedulerLimits> = {}, rateClock: Clock = monotonicClock) {
    this.#engine = engine;
    this.#port = port;
    this.#clock = clock;
    this.#limits = { ...schedulerLimits, ...limits };
    this.#tokens = this.#limits.sliceTimersMax;
    this.#rateClock = rateClock;
    this.#tokensAtMs = rateClock.now();
    this.#queueRoom = port.queueRoom?.bind(port);
    this.#ahead = port.takeAhead;
    this.#withdraw = port.withdraw?.bind(port);
  }

  start(): void {
    this.#running = true;
    this.#engine.setDueChangedHook(() => this.#rearmIfEarlier());
    this.#engine.setWithdrawHook(this.#withdraw ?? refuseWithdraw);
    this.#unwatchClock = this.#clock.watch?.(this.#clockMoved);
    this.#loop();
  }

  stop(): void {
    this.#running = false;
    this.#disarm();
    this.#unwatchClock?.();
    this.#engine.setDueChangedHook(() => undefined);
    this.#engine.setWithdrawHook(refuseWithdraw);
  }

  /** Looks at once: the dispatcher calls it when it has room again. */
  wake(): void {
    if (!this.#running || this.#armedForMs <= this.#clock.now()) return;
    this.#disarm();
    this.#timer = setImmediate(this.#loop);
    this.#armedForMs = this.#clock.now();
  }

  /** One pass: hands over what is due now, within the slice, room and rate limits; returns how many. */
  tick(): number {
    const now = this.#clock.now();
    this.#refill(this.#rateClock.now());
    const max = Math.min(this.#limits.sliceTimersMax, this.#port.room(), Math.floor(this.#tokens));
    if (max <= 0) return 0;
    const slice = this.#engine.takeDue(now, max, this.#queueRoom, this.#ahead);
    if (slice.count === 0) return 0;
    this.#tokens -= slice.count;
    this.#port.deliver(slice);
    return slice.count;
  }

  #refill(now: number): void {
    const elapsedMs = Math.max(0, now - this.#tokensAtMs);
    this.#tokensAtMs = now;
    this.#tokens = Math.min(this.#limits.releasePerSecondMax, this.#tokens + (elapsedMs * this.#limits.releasePerSecondMax) / 1000);
  }

  readonly #loop = (): void => {
    this.#timer = undefined;
    this.#armedForMs = Infinity;
    if (!this.#running) return;
    const released = this.tick();
    // The dispatcher may have called wake() from deliver(): that armed the next look already.
    if (this.#timer !== undefined) return;
    const now = this.#clock.now();
    const next = this.#engine.nextDueMs();
    if (next === undefined) return; // nothing pending: an admit wakes the loop
    const aheadMs = this.#ahead?.ms ?? 0;
    if (next <= now + aheadMs && released > 0) {
      this.#timer = setImmediate(this.#loop); // more due: yield to the event loop, then go on
      this.#armedForMs = now;
      return;
    }
    // Not due yet, or due but held back by room or rate (or within the lead, yet not taken ahead:
    // a queue whose timers wait for their time here): look again later (or on wake()).
    let waitMs: number;
    if (next <= now) waitMs = heldBackWaitMs;
    else if (next - aheadMs > now) waitMs = Math.min(next - aheadMs - now, this.#limits.sleepMsMax);
    else waitMs = Math.min(next - now, heldBackWaitMs);
    this.#timer = setTimeout(this.#loop, waitMs);
    this.#armedForMs = now + waitMs;
  };

  /** The clock jumped: what the armed sleep waits for (by the real time) may be due now. */
  readonly #clockMoved = (): void => {
    if (!this.#running) return;
    this.#disarm();
    this.#timer = setImmediate(this.#loop);
    this.#armedForMs = this.#clock.now();
  };

  #rearmIfEarlier(): void {
    const next = this.#engine.nextDueMs();
    if (next !== undefined && next - (this.#ahead?.ms ?? 0) < this.#armedForMs) this.wake();
  }

  #disarm(): void {
    if (this.#timer === undefined) return;
    clearTimeout(this.#timer as NodeJS.Timeout);
    clearImmediate(this.#timer as NodeJS.Immediate);
    this.#timer = undefined;
    this.#armedForMs = Infinity;
  }
}
