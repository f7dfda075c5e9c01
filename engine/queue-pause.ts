// Paused queues and the timers they hold, on the main thread. A paused queue (queue-registry.ts
// logs the pause and resume as QUEUE records) has no room in takeDue (hand-out.ts): its due
// timers are parked in order as a queue without room has them parked, and they wait there
// without costing a tick anything, since the scheduler looks again at once only for parked
// timers of queues that are not paused, and a resume wakes it. What is read here is for that
// decision and for stats; nothing here changes state.
//
//   parked[queue] ─ queue paused? ─yes─► held: counted by heldNow(), waits for the resume
//                               └─no──► waits for room: the scheduler keeps looking
import type { EngineState } from './state.ts';
import { timerState } from './store/resident-store.ts';

/** Paused queues and held timers, for /metrics and /v1/stats. */
export interface QueueHoldStats {
  /** Queues paused now. */
  readonly pausedQueues: number;
  /** Due timers of paused queues waiting for the resume (pending or retrying). */
  readonly held: number;
  /** Timers handed out since start that fell due while their queue was paused (counted once each time they go out). */
  readonly heldReleased: number;
}

/** Whether the queue at `queueIndex` is paused (one Set lookup; false at once when none is). */
export function isPausedAt(s: EngineState, queueIndex: number): boolean {
  return s.pausedQueues.size > 0 && s.pausedQueues.has(queueIndex);
}

/** Entries parked for paused queues (stale ones included, as parkedCount has them): O(paused queues). */
export function parkedInPausedQueues(s: EngineState): number {
  let count = 0;
  for (const queue of s.pausedQueues) {
    const parked = s.parked[queue];
    if (parked !== undefined) count += parked.handles.length - parked.head;
  }
  return count;
}

/**
 * Due timers held by a pause now: the parked entries of paused queues whose timer still waits
 * (as takeParked would judge them: not released, cancelled or handed out since, and still of
 * that queue). One pass over those entries, made only when stats are read.
 */
export function heldNow(s: EngineState): number {
  const store = s.store;
  let held = 0;
  for (const queue of s.pausedQueues) {
    const parked = s.parked[queue];
    if (parked === undefined) continue;
    for (let at = parked.head; at < parked.handles.length; at++) {
      const slot = store.slotOf(parked.handles[at] as number);
      const state = slot < 0 ? -1 : (store.state[slot] as number);
      if ((state === timerState.pending || state === timerState.retrying) && store.queueIndex[slot] === queue && !s.heap.has(slot) && !s.cancelling.has(slot)) held++;
    }
  }
  return held;
}

export function queueHoldStats(s: EngineState): QueueHoldStats {
  return { pausedQueues: s.pausedQueues.size, held: heldNow(s), heldReleased: s.heldReleased };
}
