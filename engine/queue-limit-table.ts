// A queue's retention and pending cap by queue index (engine/queue-limits.ts reads them), on the
// main thread: held by EngineState, kept in step with the queue configs by applyQueueChange.
// Arrays by index, so the paths that finish timers read one number per timer, no map or object.
import type { QueueConfig } from './queues.ts';

export class QueueLimits {
  /** By queue index: a delivered or cancelled timer's retention (undefined: the service's). */
  readonly finishedMs: Array<number | undefined> = [];
  /** By queue index: a dead timer's retention (undefined: the service's). */
  readonly deadMs: Array<number | undefined> = [];
  /** Capped queues' max_pending, by queue index. */
  readonly maxPending = new Map<number, number>();
  /** New rows of admits being logged, by capped queue index. */
  readonly reserved = new Map<number, number>();

  /** Takes a queue's config (a delete: the defaults) as it is applied. */
  apply(index: number, config: QueueConfig | undefined): void {
    this.finishedMs[index] = config?.retention_ms ?? undefined;
    this.deadMs[index] = config?.dead_retention_ms ?? undefined;
    const max = config?.max_pending ?? null;
    if (max === null) this.maxPending.delete(index);
    else this.maxPending.set(index, max);
  }
}
