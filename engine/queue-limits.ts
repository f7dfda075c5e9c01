// A queue's retention and its cap on pending timers (PUT /v1/queues/{name}: retention_ms,
// dead_retention_ms, max_pending), on the main thread. They are kept by queue index, so the
// paths that finish timers (outcomes, cancels) read one number per timer, no map and no object;
// applyQueueChange keeps them in step with the configs, live, replayed and restored
// (queue-limit-table.ts).
//
// What the cap counts: the queue's timers that are not finished, in memory (pending, retrying,
// held by a pause, being delivered: the store's counts by queue and state) and spilled to disk
// (the spill tier's counts by queue, spill/spilled-queue-counts.ts), plus the new rows of its
// admits being logged: numbers kept, no timer read. Callback timers made by a delivery's outcome, redriven
// dead timers and a schedule's occurrences are not refused by it (admission.ts says why for the
// last), though they count once they are in.
import { errorCodes, FermataError } from './errors.ts';
import type { KeyPlan } from './key-plan.ts';
import type { EngineState } from './state.ts';
import type { TimerBatch } from './batch/timer-batch.ts';
import { timerState } from './store/resident-store.ts';

/** When a delivered or cancelled timer of the queue, finished at `nowMs`, is released. */
export function finishedExpiry(s: EngineState, queueIndex: number, nowMs: number): number {
  return nowMs + (s.queueLimits.finishedMs[queueIndex] ?? s.retention.finishedMs);
}

/** When a dead timer of the queue, dead at `nowMs`, is released. */
export function deadExpiry(s: EngineState, queueIndex: number, nowMs: number): number {
  return nowMs + (s.queueLimits.deadMs[queueIndex] ?? s.retention.deadMs);
}

/** A queue's delivered-or-cancelled retention by name (a queue never named: the service's). */
export function finishedRetentionOf(s: EngineState, queue: string): number {
  const index = s.queueIndexOf.get(queue);
  return (index === undefined ? undefined : s.queueLimits.finishedMs[index]) ?? s.retention.finishedMs;
}

/** Rows an admit holds room for in capped queues, by queue index; released by releaseRoom(). */
export type QueueReservation = Map<number, number>;

/**
 * Holds room in the capped queues for a batch's new rows (its duplicates add nothing), or
 * refuses the whole batch with QUEUE_FULL if one queue would pass its cap. Undefined: no row
 * goes to a capped queue. Synchronous: called after the batch's last wait, right before its
 * record is queued, so admits in flight are counted by their reservations.
 */
export function takeRoom(s: EngineState, batch: TimerBatch, plan: KeyPlan | undefined): QueueReservation | undefined {
  const limits = s.queueLimits;
  if (limits.maxPending.size === 0) return undefined;
  let capped: Int32Array | undefined;
  for (let entry = 0; entry < batch.queues.length; entry++) {
    const index = s.queueIndexOf.get(batch.queues[entry] as string);
    if (index === undefined || !limits.maxPending.has(index)) continue;
    capped ??= new Int32Array(batch.queues.length).fill(-1);
    capped[entry] = index;
  }
  if (capped === undefined) return undefined;
  const room: QueueReservation = new Map();
  for (let row = 0; row < batch.rows; row++) {
    const index = capped[batch.queueIndex[row] as number] as number;
    if (index < 0 || (plan !== undefined && !Number.isNaN(plan.originalSeq[row]))) continue;
    room.set(index, (room.get(index) ?? 0) + 1);
  }
  for (const [index, rows] of room) {
    const max = limits.maxPending.get(index) as number;
    const pending = pendingOf(s, index) + (limits.reserved.get(index) ?? 0);
    if (pending + rows > max) {
      const queue = s.queueNames[index] as string;
      throw new FermataError(errorCodes.queueFull, `queue ${queue} holds ${pending} pending timer(s) of its max_pending ${max}: the ${rows} added would pass it (nothing was added)`, { queue, pending, max_pending: max });
    }
  }
  for (const [index, rows] of room) limits.reserved.set(index, (limits.reserved.get(index) ?? 0) + rows);
  return room;
}

/** Gives back what takeRoom() held, once the admit's rows are in the store or it failed. */
export function releaseRoom(s: EngineState, room: QueueReservation): void {
  const reserved = s.queueLimits.reserved;
  for (const [index, rows] of room) {
    const left = (reserved.get(index) as number) - rows;
    if (left === 0) reserved.delete(index);
    else reserved.set(index, left);
  }
}

/** The queue's timers that are not finished, resident and spilled, from the counts the store and the spill tier keep. */
function pendingOf(s: EngineState, index: number): number {
  const counts = s.store.queueCounts;
  const resident = counts === undefined ? 0 : counts.waiting(index) + counts.of(index, timerState.delivering);
  return resident + s.spill.queueCounts.of(index);
}
