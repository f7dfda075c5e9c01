// The service's clocks: what "now" is for timer time (firing, backoff, Retry-After, retention,
// the loader's horizon, delay_ms, keys' decisions). `systemClock` (types.ts) is the real time;
// a ManualClock (`fermata serve --clock manual`) stands still between moves and only moves
// forward, each move logged first as a CLOCK record (engine/clock-moves.ts), so a test of "30
// days later" takes a second and a restart resumes where the clock stood.
//
// One clock for every thread: the position lives in a SharedArrayBuffer (one 64-bit integer of
// epoch ms, read and written with Atomics), which the dispatcher hands to its delivery workers;
// a worker reads it through SharedClockView, and with no buffer (the real clock) reads Date.now().
//
//   main thread: ManualClock.moveTo(ms) ─► Atomics.store(position) ─► watchers (the scheduler: look now)
//   delivery worker: SharedClockView.now() ─► Atomics.load(position)
//
// Written by the main thread only; read by any thread.
import assert from 'node:assert/strict';
import type { Clock } from './types.ts';

/** Real elapsed time (performance.now), for what must not follow a manual clock: rate buckets, memory idle times. Not epoch ms. */
export const monotonicClock: Clock = { now: () => performance.now() };

/** The clock a `fermata serve` runs on: `real` (the default) or `manual` (a test clock). */
export type ClockMode = 'real' | 'manual';

/** The farthest a manual clock may be moved: 9999-12-31T23:59:59.999Z, the last instant RFC 3339 spells with four digits. */
export const manualClockMsMax = 253_402_300_799_999;

export class ManualClock implements Clock {
  readonly #position: BigInt64Array;
  readonly #watchers = new Set<() => void>();

  /** Starts at `startMs` (whole epoch ms: the real time at a first start). */
  constructor(startMs: number) {
    assert.ok(Number.isSafeInteger(startMs) && startMs >= 0 && startMs <= manualClockMsMax, `a manual clock starts at whole epoch ms, not ${startMs}`);
    this.#position = new BigInt64Array(new SharedArrayBuffer(BigInt64Array.BYTES_PER_ELEMENT));
    this.#position[0] = BigInt(startMs);
  }

  now(): number {
    return Number(Atomics.load(this.#position, 0));
  }

  /** The memory the position lives in, for the delivery workers (SharedClockView). */
  get shared(): SharedArrayBuffer {
    return this.#position.buffer as SharedArrayBuffer;
  }

  /**
   * Puts the clock at `ms`. Forward only, except at open, when replay restores the position a
   * past life logged (`restoring`): the clock starts at the real time until then.
   */
  moveTo(ms: number, restoring = false): void {
    assert.ok(Number.isSafeInteger(ms) && ms >= 0 && ms <= manualClockMsMax, `a manual clock stands at whole epoch ms, not ${ms}`);
    assert.ok(restoring || ms >= this.now(), `a manual clock never moves backwards (${ms} < ${this.now()})`);
    Atomics.store(this.#position, 0, BigInt(ms));
    for (const watcher of this.#watchers) watcher();
  }

  /** Calls `watcher` after every move (the scheduler looks at once: its sleep was armed by the real clock); returns the unwatch. */
  watch(watcher: () => void): () => void {
    this.#watchers.add(watcher);
    return () => this.#watchers.delete(watcher);
  }
}

/** Whether `clock` is a manual clock (it has a position to log and restore). */
export function isManualClock(clock: Clock): clock is ManualClock {
  return clock instanceof ManualClock;
}

/** The shared position a delivery worker reads the clock through; undefined for the real clock. */
export function sharedClockOf(clock: Clock): SharedArrayBuffer | undefined {
  return isManualClock(clock) ? clock.shared : undefined;
}

/**
 * A delivery worker's view of the service's clock: the manual clock's position in `shared`, or
 * the real time without it. `at(realMs)` is the clock's time at a real instant just past (when a
 * request went out): itself on the real clock, the position on a manual one, which stands
 * still between moves.
 */
export class SharedClockView implements Clock {
  readonly #position: BigInt64Array | undefined;

  constructor(shared: SharedArrayBuffer | undefined) {
    this.#position = shared === undefined ? undefined : new BigInt64Array(shared);
  }

  now(): number {
    return this.#position === undefined ? Date.now() : Number(Atomics.load(this.#position, 0));
  }

  at(realMs: number): number {
    return this.#position === undefined ? realMs : Number(Atomics.load(this.#position, 0));
  }
}
