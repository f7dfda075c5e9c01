// Spilled timers counted by queue, so that a queue's pending (GET /v1/queues) and its
// max_pending cap count its timers on disk as well as those in memory, without reading a run.
// Main thread, held by the spill tier (spilled-timers.ts) and kept by the engine where a timer
// crosses the watermark, at which point its queue is at hand:
//
//   +1  a checkpoint evicts a spilled timer from memory (its slot names its queue; checkpoint.ts)
//   −1  a spilled timer comes back into memory: promoted, or cancelled, patched or purged, once
//       that record is durable, and when it is replayed (the run row names its queue; restore.ts
//       insertRunRow, which every such path goes through)
//
// A spilled timer whose cancel is still being logged is tombstoned (the spill tier's count drops
// at once) but still counted here until its record is durable: its queue's pending falls when the
// cancel is acknowledged. The checkpoint writes the counts as of its sequence into the manifest
// (`spilledQueues`); a manifest without them (older) has them counted from its runs at open
// (restore.ts).
//
//   counts: Float64Array [queue 0][queue 1]…   by the engine's queue index
import assert from 'node:assert/strict';

export class SpilledQueueCounts {
  #counts = new Float64Array(16);

  /** Counts `delta` spilled timers of queue `queueIndex`. */
  add(queueIndex: number, delta: number): void {
    if (queueIndex >= this.#counts.length) {
      const grown = new Float64Array(Math.max(this.#counts.length * 2, queueIndex + 1));
      grown.set(this.#counts);
      this.#counts = grown;
    }
    const count = (this.#counts[queueIndex] as number) + delta;
    // The message is built only when it fails: this runs once per timer evicted or promoted.
    if (count < 0) assert.fail(`queue ${queueIndex} would count ${count} spilled timers`);
    this.#counts[queueIndex] = count;
  }

  /** Spilled timers of the queue (0 for a queue never counted). */
  of(queueIndex: number): number {
    return this.#counts[queueIndex] ?? 0;
  }

  /** Forgets every count (before a checkpoint's are restored at open). */
  clear(): void {
    this.#counts.fill(0);
  }
}
