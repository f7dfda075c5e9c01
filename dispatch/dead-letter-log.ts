// The warn line of a timer that dies: once, when its dead outcome is durable (the outcome
// recorder calls it), with its id, target origin, attempts, reason and last error. A target that
// goes down takes many timers with it, so at most deliveryLimits.deadLogLinesPerSecondMax lines
// are written a second; the rest of that second are counted, and one summary line says how many
// were not logged when the second is over. Main thread.
//
//   dead(…) ─► room this second? ─► warn line
//                  └─ no ─► skipped++ ─► at the second's end: one "not logged" line
import type { Logger } from 'pino';

export interface DeadTimerLine {
  readonly id: string;
  /** The target's origin (scheme://host:port): the path and query may carry secrets. */
  readonly origin: string;
  readonly attempts: number;
  readonly reason: string;
  readonly lastError: string | null;
}

const windowMs = 1000;

export class DeadLetterLog {
  readonly #logger: Logger;
  readonly #linesPerSecondMax: number;
  /** A monotonic clock: the window must not stretch or shrink when the wall clock steps. */
  readonly #now: () => number;
  #windowStartMs = -Infinity;
  #logged = 0;
  #skipped = 0;
  #summary: NodeJS.Timeout | undefined;

  constructor(logger: Logger, linesPerSecondMax: number, now: () => number = () => performance.now()) {
    this.#logger = logger;
    this.#linesPerSecondMax = linesPerSecondMax;
    this.#now = now;
  }

  /** Whether a line written now would be logged (else it is counted): ask before building one. */
  hasRoom(): boolean {
    const nowMs = this.#now();
    if (nowMs - this.#windowStartMs >= windowMs) {
      this.#flushSkipped();
      this.#windowStartMs = nowMs;
      this.#logged = 0;
    }
    if (this.#logged < this.#linesPerSecondMax) return true;
    this.#skipped++;
    this.#summary ??= setTimeout(() => this.#flushSkipped(), Math.max(0, this.#windowStartMs + windowMs - nowMs)).unref();
    return false;
  }

  /** Logs one dead timer (after hasRoom() said yes). */
  dead(line: DeadTimerLine): void {
    this.#logged++;
    this.#logger.warn({ id: line.id, target: line.origin, attempts: line.attempts, reason: line.reason, last_error: line.lastError }, 'timer dead: no more delivery attempts');
  }

  /** Writes the summary of the lines not logged, if any (also when the service stops). */
  close(): void {
    this.#flushSkipped();
  }

  #flushSkipped(): void {
    if (this.#summary !== undefined) clearTimeout(this.#summary);
    this.#summary = undefined;
    if (this.#skipped === 0) return;
    this.#logger.warn({ not_logged: this.#skipped }, `${this.#skipped} more timers died and were not logged (at most ${this.#linesPerSecondMax} lines a second)`);
    this.#skipped = 0;
  }
}
