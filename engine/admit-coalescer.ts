// One-timer admits that arrive in the same event-loop turn share one ADD record: one batch
// encode, one key plan, one WAL append and one store insert for all of them, instead of one
// each. Main thread only (it wraps the Engine, which is).
//
//   admitOne(b1) ─► engine.validate(b1) ─┐           (a bad timer is refused here, alone)
//   admitOne(b2) ─► engine.validate(b2) ─┼─► pending ─► flush (setImmediate, or at rowsMax /
//   admitOne(b3) ─► …                   ─┘              bytesMax) ─► mergeBatches ─► engine.admit
//                                                          └─► caller i: idOf(i), isDuplicate(i)
//
// Semantics equal separate admits in call order: rows keep that order in the merged batch, so
// of two timers with one idempotency key the later is the duplicate (the engine deduplicates
// within a batch); every caller resolves only once the merged record is durable; an engine
// error for the record (poisoned log, full store, full log queue) rejects every caller with
// it. Should the merged batch fail validation although each timer passed alone (the clock
// moved between the two checks), each timer is admitted alone instead.
import { stringBytesOf, type TimerBatch } from './batch/timer-batch.ts';
import { mergeBatches } from './batch/merge-batches.ts';
import type { Admitted, Engine } from './engine.ts';
import { errorCodes, isFermataError } from './errors.ts';
import { coalesceLimits } from './limits.ts';

/** What admitOne resolves with: the timer's id (the original's, for a duplicate key). */
export interface AdmittedOne {
  readonly id: string;
  readonly duplicate: boolean;
}

/**
 * When a turn's admits are flushed. `immediate` (setImmediate) runs after the poll phase has
 * handled every socket that was readable, so requests read in one turn share a record;
 * `microtask` flushes when the current callback's microtasks drain (in-process callers only).
 */
export type CoalesceFlush = 'immediate' | 'microtask';

export interface AdmitCoalescerOptions {
  readonly flush?: CoalesceFlush;
  readonly rowsMax?: number;
  readonly bytesMax?: number;
}

interface Waiter {
  readonly resolve: (admitted: AdmittedOne) => void;
  readonly reject: (err: unknown) => void;
}


/** The merged batch was refused as a whole although each timer passed alone: retry them one by one. */
const refusedAsBatch = (err: unknown): boolean => isFermataError(err, errorCodes.batchInvalid) || isFermataError(err, errorCodes.targetRefused);

function answerAll(admitted: Admitted, waiters: readonly Waiter[]): void {
  for (let row = 0; row < waiters.length; row++) (waiters[row] as Waiter).resolve({ id: admitted.idOf(row), duplicate: admitted.isDuplicate(row) });
}

export class AdmitCoalescer {
  readonly #engine: Engine;
  readonly #flushMode: CoalesceFlush;
  readonly #rowsMax: number;
  readonly #bytesMax: number;
  #batches: TimerBatch[] = [];
  #waiters: Waiter[] = [];
  #bytes = 0;
  /** A flush is scheduled; it takes whatever is pending then (rows past a rowsMax flush too). */
  #scheduled = false;

  constructor(engine: Engine, options: AdmitCoalescerOptions = {}) {
    this.#engine = engine;
    this.#flushMode = options.flush ?? 'immediate';
    this.#rowsMax = options.rowsMax ?? coalesceLimits.rowsMax;
    this.#bytesMax = options.bytesMax ?? coalesceLimits.bytesMax;
  }

  /**
   * Admits a one-row batch; resolves once it is durable. The caller must not change the
   * batch until then (it is copied when its turn's record is built).
   */
  admitOne(batch: TimerBatch): Promise<AdmittedOne> {
    if (batch.rows !== 1) return Promise.reject(new RangeError(`admitOne takes a one-timer batch, not ${batch.rows} rows`));
    try {
      this.#engine.validate(batch);
    } catch (err) {
      return Promise.reject(err);
    }
    const bytes = stringBytesOf(batch);
    if (this.#batches.length > 0 && this.#bytes + bytes > this.#bytesMax) this.#flush();
    const { promise, resolve, reject } = Promise.withResolvers<AdmittedOne>();
    this.#batches.push(batch);
    this.#waiters.push({ resolve, reject });
    this.#bytes += bytes;
    if (this.#batches.length >= this.#rowsMax) this.#flush();
    else if (!this.#scheduled) this.#schedule();
    return promise;
  }

  #schedule(): void {
    this.#scheduled = true;
    const flush = (): void => {
      this.#scheduled = false;
      this.#flush();
    };
    if (this.#flushMode === 'microtask') queueMicrotask(flush);
    else setImmediate(flush);
  }

  #flush(): void {
    const batches = this.#batches;
    const waiters = this.#waiters;
    this.#batches = [];
    this.#waiters = [];
    this.#bytes = 0;
    if (batches.length === 0) return;
    if (batches.length === 1) {
      this.#admitAlone(batches[0] as TimerBatch, waiters[0] as Waiter);
      return;
    }
    this.#engine.admit(mergeBatches(batches)).then(
      (admitted) => answerAll(admitted, waiters),
      (err: unknown) => {
        if (!refusedAsBatch(err)) {
          for (const waiter of waiters) waiter.reject(err);
          return;
        }
        for (let i = 0; i < batches.length; i++) this.#admitAlone(batches[i] as TimerBatch, waiters[i] as Waiter);
      },
    );
  }

  #admitAlone(batch: TimerBatch, waiter: Waiter): void {
    this.#engine.admit(batch).then((admitted) => answerAll(admitted, [waiter]), waiter.reject);
  }
}
