// ArrayBuffers for "arrow" delivery tasks, kept for the next task once a worker hands them back.
// An Arrow batch task of 10,000 timers is a few MiB of columns, built on the main thread and
// transferred to a worker: fresh memory each time, and fresh pages cost 0.1–1.9 ms a MiB on the
// machines measured (more under transparent huge pages, which fault and zero 2 MiB at a time).
// A worker is done with a batch task's buffers once its body is encoded (the body is a copy), so
// it transfers them back with the outcomes and the dispatcher builds later tasks in them.
//
// A task takes the smallest free buffer that holds what it asks for and is at most twice that
// (a queue's batches ask for much the same sizes each time), else a new one, not zeroed: a task
// writes every byte it reads (its columns' offsets say which). The pool holds at most bytesMax,
// and lets go of everything once no buffer has been taken for idleMs: a burst's buffers serve
// the next burst, and an idle service does not keep them. Main thread: the dispatcher owns the
// pool; workers only hand buffers back, by message.
import { type Clock } from '../engine/engine.ts';

/** New buffers are whole pages. */
const pageBytes = 4096;

export interface BufferPoolOptions {
  /** Bytes the free list holds at most; a buffer given back past it is dropped. */
  readonly bytesMax: number;
  /** After this long with no take(), the free list is emptied. */
  readonly idleMs: number;
  readonly clock: Clock;
}

export class BufferPool {
  readonly #options: BufferPoolOptions;
  readonly #free: ArrayBuffer[] = [];
  #bytes = 0;
  #takenAtMs = 0;
  #idleTimer: NodeJS.Timeout | undefined;

  constructor(options: BufferPoolOptions) {
    this.#options = options;
  }

  /** Bytes held in the free list. */
  get bytes(): number {
    return this.#bytes;
  }

  /**
   * A buffer of at least `bytes`: the smallest free one no more than twice that (its old contents
   * left in it), or a new one of whole pages (not zeroed).
   */
  take(bytes: number): ArrayBuffer {
    this.#takenAtMs = this.#options.clock.now();
    let best = -1;
    for (let i = 0; i < this.#free.length; i++) {
      const size = (this.#free[i] as ArrayBuffer).byteLength;
      if (size >= bytes && size <= 2 * bytes && (best < 0 || size < (this.#free[best] as ArrayBuffer).byteLength)) best = i;
    }
    if (best < 0) return Buffer.allocUnsafeSlow(Math.ceil(bytes / pageBytes) * pageBytes).buffer as ArrayBuffer;
    const buffer = this.#free[best] as ArrayBuffer;
    this.#free[best] = this.#free[this.#free.length - 1] as ArrayBuffer;
    this.#free.pop();
    this.#bytes -= buffer.byteLength;
    return buffer;
  }

  /** Keeps `buffer` for a later take(), when there is room (empty and detached ones are dropped). */
  give(buffer: ArrayBuffer): void {
    const size = buffer.byteLength;
    if (buffer.detached || size === 0 || this.#bytes + size > this.#options.bytesMax) return;
    this.#free.push(buffer);
    this.#bytes += size;
    this.#armIdle();
  }

  /** Lets go of every free buffer. */
  clear(): void {
    this.#free.length = 0;
    this.#bytes = 0;
    if (this.#idleTimer !== undefined) clearTimeout(this.#idleTimer);
    this.#idleTimer = undefined;
  }

  #armIdle(): void {
    if (this.#idleTimer !== undefined) return;
    const check = (): void => {
      this.#idleTimer = undefined;
      if (this.#bytes === 0) return;
      const idleForMs = this.#options.clock.now() - this.#takenAtMs;
      if (idleForMs >= this.#options.idleMs) this.clear();
      else this.#idleTimer = setTimeout(check, this.#options.idleMs - idleForMs).unref();
    };
    this.#idleTimer = setTimeout(check, this.#options.idleMs).unref();
  }
}
