// Live timers counted by queue and state, for GET /v1/queues (each queue's waiting and in-flight
// timers): kept by the store's setters (resident-store.ts) alongside the due counts, so reading
// a queue's counts reads two numbers instead of scanning its timers. Resident timers only: the
// spill tier holds pending timers of every queue, counted in /v1/stats as spilled.
//
//   counts: Float64Array [queue 0: free pending delivering retrying delivered dead cancelled ·] [queue 1: …] …
//
// Main thread, with the store.
import { timerState } from './timer-state.ts';

/** States a queue's row holds (timerState's codes, 0 to 6), rounded up to a power of two. */
const stride = 8;

export class QueueStateCounts {
  #counts = new Float64Array(16 * stride);

  /** Counts `delta` timers of queue `queueIndex` in state `state`. */
  add(queueIndex: number, state: number, delta: number): void {
    const at = queueIndex * stride + state;
    if (at >= this.#counts.length) {
      const grown = new Float64Array(Math.max(this.#counts.length * 2, (queueIndex + 1) * stride));
      grown.set(this.#counts);
      this.#counts = grown;
    }
    this.#counts[at] = (this.#counts[at] as number) + delta;
  }

  /**
   * Counts one timer in state `state` for each of a batch's rows rows[i] (row i when `rows` is
   * undefined), i < count, of queue queueIndexOf[batchQueues[row]]: a batch of one queue (the
   * common case) is one add.
   */
  addRows(queueIndexOf: readonly number[], batchQueues: Int32Array, rows: Int32Array | undefined, count: number, state: number): void {
    if (queueIndexOf.length === 1) {
      this.add(queueIndexOf[0] as number, state, count);
      return;
    }
    for (let i = 0; i < count; i++) this.add(queueIndexOf[batchQueues[rows === undefined ? i : (rows[i] as number)] as number] as number, state, 1);
  }

  /** Timers of the queue in the state (0 for a queue never counted). */
  of(queueIndex: number, state: number): number {
    return this.#counts[queueIndex * stride + state] ?? 0;
  }

  /** Pending and retrying timers of the queue (held ones are pending). */
  waiting(queueIndex: number): number {
    return this.of(queueIndex, timerState.pending) + this.of(queueIndex, timerState.retrying);
  }
}
