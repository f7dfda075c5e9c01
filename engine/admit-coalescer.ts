// One-timer admits that arrive in the same event-loop turn share one ADD record: one batch
// built from all of their specs, one validation (each distinct target parsed and checked once),
// one key plan, one WAL append and one store insert for all of them, instead of one each. Main
// thread only (it wraps the Engine, which is).
//
//   admitOne(s1) ─┐
//   admitOne(s2) ─┼─► pending ─► flush (setImmediate, or at rowsMax / bytesMax)
//   admitOne(s3) ─┘      ─► batchFromSpecs(all) ─► engine.admit ─► caller i: idOf(i), isDuplicate(i)
//                            └─ refused (BATCH_INVALID, TARGET_REFUSED): each spec checked alone;
//                               the bad ones refused alone, the rest admitted together
//
// A record flushed full (rowsMax or bytesMax) is logged at once when the log is idle, not after
// the turn: its write is under way while the turn's other admits gather (coalesceLimits.rowsMax
// says why).
//
// Semantics equal separate admits in call order: rows keep that order in the batch, so of two
// timers with one idempotency key the later is the duplicate (the engine deduplicates within a
// batch); every caller resolves only once the record is durable; an engine error for the
// record (poisoned log, full store, full log queue) rejects every caller with it; a queue at its
// max_pending (QUEUE_FULL) has each timer admitted alone instead, so only its own are refused. A timer is
// checked when its turn's batch is, and a refusal names it as a one-timer admit would (row 0).
// Should the good timers' batch be refused once more (the clock moved between the checks),
// each is admitted alone instead.
import { batchFromSpecs, type TimerBatch, type TimerSpec } from './batch/timer-batch.ts';
import type { Admitted, DuplicateAnswer, Engine } from './engine.ts';
import { errorCodes, isFermataError } from './errors.ts';
import { coalesceLimits } from './limits.ts';

/** What admitOne resolves with: the timer's id (the original's, for a duplicate key, with what it is now). */
export interface AdmittedOne {
  readonly id: string;
  readonly duplicate: boolean;
  readonly original: DuplicateAnswer | undefined;
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

/** A full record's admit: written at once when the log is idle (coalesceLimits.rowsMax says why). */
const startNow = { startNow: true } as const;

/** UTF-8 takes at most 3 bytes for each UTF-16 code unit. */
const utf8BytesPerUnitMax = 3;

/**
 * At least the bytes a timer adds to its record's payload, header and key columns (headers as
 * their JSON): strings counted at their longest UTF-8, without encoding them, and without
 * trusting an in-process caller's values to be strings.
 */
export function specBytes(spec: TimerSpec): number {
  const { payload, key, headers } = spec;
  let units = typeof payload === 'string' ? payload.length : 0;
  if (typeof key === 'string') units += key.length;
  if (headers !== undefined) for (const name in headers) units += name.length + String(headers[name]).length + 6;
  return utf8BytesPerUnitMax * units + (payload instanceof Uint8Array ? payload.length : 0);
}

/**
 * Who hears how one timer's admit ended (admitOneTo): a caller with an object of its own per
 * timer answers there, without a promise and its closures per timer.
 */
export interface AdmitWaiter {
  /** Durable: the timer's id (the original's, when `duplicate`; `original` then says what it is now). */
  admitted(id: string, duplicate: boolean, original: DuplicateAnswer | undefined): void;
  /** Not admitted: the error engine.admit would give for the timer alone, or the record's. */
  refused(err: unknown): void;
}

type Waiter = AdmitWaiter;


/** The batch was refused for what a timer holds (not for the state of the engine): check each alone. */
const refusedAsBatch = (err: unknown): boolean => isFermataError(err, errorCodes.batchInvalid) || isFermataError(err, errorCodes.targetRefused);

function answerAll(admitted: Admitted, waiters: readonly Waiter[]): void {
  for (let row = 0; row < waiters.length; row++) (waiters[row] as Waiter).admitted(admitted.idOf(row), admitted.isDuplicate(row), admitted.duplicateOf(row));
}

export class AdmitCoalescer {
  readonly #engine: Engine;
  readonly #flushMode: CoalesceFlush;
  readonly #rowsMax: number;
  readonly #bytesMax: number;
  #specs: TimerSpec[] = [];
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
   * Admits one timer; resolves once it is durable, rejects as engine.admit would for it alone.
   * The caller must not change the spec (or its payload's bytes) until then.
   */
  admitOne(spec: TimerSpec): Promise<AdmittedOne> {
    const { promise, resolve, reject } = Promise.withResolvers<AdmittedOne>();
    this.admitOneTo(spec, { admitted: (id, duplicate, original) => resolve({ id, duplicate, original }), refused: reject });
    return promise;
  }

  /** admitOne, answered on `waiter` (exactly one of its methods is called, once, never synchronously). */
  admitOneTo(spec: TimerSpec, waiter: AdmitWaiter): void {
    const bytes = specBytes(spec);
    if (this.#specs.length > 0 && this.#bytes + bytes > this.#bytesMax) this.#flush(true);
    this.#specs.push(spec);
    this.#waiters.push(waiter);
    this.#bytes += bytes;
    if (this.#specs.length >= this.#rowsMax) this.#flush(true);
    else if (!this.#scheduled) this.#schedule();
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

  /** `full`: the record reached rowsMax or bytesMax, and is logged at once when the log is idle (see rowsMax in limits.ts). */
  #flush(full = false): void {
    const specs = this.#specs;
    const waiters = this.#waiters;
    this.#specs = [];
    this.#waiters = [];
    this.#bytes = 0;
    if (specs.length === 0) return;
    this.#admitTogether(specs, waiters, () => this.#admitGoodOnes(specs, waiters), full);
  }

  /**
   * One record for all of `specs`, each waiter answered with its row; an engine error for the
   * record refuses them all, except a refusal for what a timer holds, which goes to `onRefused`.
   */
  #admitTogether(specs: readonly TimerSpec[], waiters: readonly Waiter[], onRefused: () => void, full = false): void {
    let batch: TimerBatch;
    try {
      batch = batchFromSpecs(specs);
    } catch {
      // A spec the batch cannot be built from (an in-process caller's): each is tried alone,
      // later (a waiter never hears back within the admitOne call that queued it).
      queueMicrotask(onRefused);
      return;
    }
    this.#engine.admit(batch, full ? startNow : undefined).then(
      (admitted) => answerAll(admitted, waiters),
      (err: unknown) => {
        if (refusedAsBatch(err)) onRefused();
        // A queue at its max_pending refuses what its own timers would pass it, not the others' timers: each alone, in order.
        else if (isFermataError(err, errorCodes.queueFull) && waiters.length > 1) for (let i = 0; i < specs.length; i++) this.#admitAlone(specs[i] as TimerSpec, waiters[i] as Waiter);
        else for (const waiter of waiters) waiter.refused(err);
      },
    );
  }

  /** After a refusal of the whole: each timer checked alone, the bad refused, the rest admitted together (or, refused again, each alone). */
  #admitGoodOnes(specs: readonly TimerSpec[], waiters: readonly Waiter[]): void {
    const good: TimerSpec[] = [];
    const goodWaiters: Waiter[] = [];
    for (let i = 0; i < specs.length; i++) {
      const spec = specs[i] as TimerSpec;
      try {
        this.#engine.validate(batchFromSpecs([spec]));
      } catch (err) {
        (waiters[i] as Waiter).refused(err);
        continue;
      }
      good.push(spec);
      goodWaiters.push(waiters[i] as Waiter);
    }
    if (good.length === 0) return;
    this.#admitTogether(good, goodWaiters, () => {
      for (let i = 0; i < good.length; i++) this.#admitAlone(good[i] as TimerSpec, goodWaiters[i] as Waiter);
    });
  }

  #admitAlone(spec: TimerSpec, waiter: Waiter): void {
    this.#engine.admit(batchFromSpecs([spec])).then(
      (admitted) => answerAll(admitted, [waiter]),
      (err: unknown) => waiter.refused(err),
    );
  }
}
