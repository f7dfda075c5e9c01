// The timer engine: the one owner of timer state, on the main thread. Every change is a WAL
// record first and a change in memory after the record is durable; reopening replays the
// log and arrives at the same state. It knows nothing of HTTP: transports call admit(),
// cancel() and get() (engine/api.ts is the public face).
//
//   admit(batch) ─► validate ─► reserve rows ─► WAL append [ADD header | Arrow batch] ─► durable
//                                                 └─► store.allocate × rows, heap.push, index.insert
//   cancel(id)   ─► index → slot ─► out of the heap (it can no longer fire) ─► WAL CANCEL ─► cancelled
//   open()       ─► Wal.open (recovery) ─► replay every record in order
import assert from 'node:assert/strict';
import { join } from 'node:path';
import { batchFromArrow } from './batch/arrow-codec.ts';
import { decodeBatch, encodeBatch } from './batch/batch-codec.ts';
import { bytesAt, type TimerBatch } from './batch/timer-batch.ts';
import { validateBatch, validateQueueName } from './batch/validate.ts';
import { errorCodes, FermataError } from './errors.ts';
import type { FileSystem } from './fs/file-system.ts';
import { decodeTimerId, encodeTimerId } from './ids.ts';
import { timerLimits, type TimerLimits, type WalLimits } from './limits.ts';
import {
  addEncodingArrowStream,
  addEncodingColumns,
  type AddEncoding,
  decodeAddBody,
  decodeOutcomes,
  encodeAddHeader,
  encodeOutcomes,
  encodeTimerRefs,
  forEachTimerRef,
  outcomeKind,
  type Outcomes,
  recordType,
} from './records.ts';
import { decodeQueueRecord, defaultQueueConfig, encodeQueueRecord, parseQueueConfig, type QueueConfig } from './queues.ts';
import { ResidentStore, type ResidentStoreOptions, timerState, type TimerStateCode } from './store/resident-store.ts';
import { SlotIndex } from './store/slot-index.ts';
import { TimerHeap } from './store/timer-heap.ts';
import { Wal, type WalLogger } from './wal/wal.ts';

/** Wall-clock time in epoch ms; injected so tests can move it (and make it jump). */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

export interface EngineOptions {
  readonly dataDir: string;
  readonly fs?: FileSystem;
  readonly clock?: Clock;
  readonly limits?: Partial<TimerLimits>;
  readonly walLimits?: Partial<WalLimits>;
  readonly store?: ResidentStoreOptions;
  readonly logger?: WalLogger;
}

export type TimerStateName = 'pending' | 'delivering' | 'retrying' | 'delivered' | 'dead' | 'cancelled';

const stateNames: Record<number, TimerStateName> = {
  [timerState.pending]: 'pending',
  [timerState.delivering]: 'delivering',
  [timerState.retrying]: 'retrying',
  [timerState.delivered]: 'delivered',
  [timerState.dead]: 'dead',
  [timerState.cancelled]: 'cancelled',
};

export interface TimerView {
  readonly id: string;
  readonly state: TimerStateName;
  /** The fire time the timer was added with. */
  readonly fireAtMs: number;
  /** When it is next due: the fire time, or its retry's time. */
  readonly dueAtMs: number;
  readonly attempts: number;
  readonly queue: string;
  readonly target: string;
  readonly lastStatus: number | null;
}

/** What admit() made durable: row i's id is idOf(i). */
export interface Admitted {
  readonly seq: number;
  readonly rows: number;
  idOf(row: number): string;
}

export type CancelOutcome = 'cancelled' | 'not-found' | 'too-late';

/**
 * Due timers handed to the dispatcher, as columns: timer i is (seqs[i], rows[i]), about to get
 * delivery attempt attempts[i] (1-based); fireAtMs[i] is its fire time (the one it was added
 * with, which its id carries; a retry is due later).
 */
export interface DueSlice {
  readonly count: number;
  readonly seqs: Float64Array;
  readonly rows: Uint32Array;
  readonly attempts: Uint32Array;
  readonly fireAtMs: Float64Array;
}

export class Engine {
  readonly #wal: Wal;
  readonly #clock: Clock;
  readonly #limits: TimerLimits;
  readonly #store: ResidentStore;
  readonly #heap: TimerHeap;
  readonly #index: SlotIndex;
  readonly #queueNames: string[] = [];
  readonly #queueIndexOf = new Map<string, number>();
  /** Configs set through setQueue(); other queues run with defaultQueueConfig. */
  readonly #queueConfigs = new Map<string, QueueConfig>();
  /** Rows admitted but not yet in the store: capacity promised to appends in flight. */
  #reservedRows = 0;
  /** Cancels whose CANCEL record is not yet durable, by slot. */
  readonly #cancelling = new Map<number, Promise<CancelOutcome>>();
  /** Told when a timer may have become the earliest due (the scheduler re-arms its timer). */
  #onDueChanged: () => void = () => undefined;

  private constructor(wal: Wal, options: EngineOptions) {
    this.#wal = wal;
    this.#clock = options.clock ?? systemClock;
    this.#limits = { ...timerLimits, ...options.limits };
    this.#store = new ResidentStore(options.store);
    this.#heap = new TimerHeap(this.#store);
    this.#index = new SlotIndex(this.#store);
  }

  static async open(options: EngineOptions): Promise<Engine> {
    const wal = await Wal.open({
      dir: join(options.dataDir, 'wal'),
      ...(options.fs === undefined ? {} : { fs: options.fs }),
      ...(options.walLimits === undefined ? {} : { limits: options.walLimits }),
      ...(options.logger === undefined ? {} : { logger: options.logger }),
    });
    const engine = new Engine(wal, options);
    try {
      for await (const record of wal.records()) engine.#replay(record.seq, record.type, record.body);
    } catch (err) {
      await wal.close();
      throw err;
    }
    return engine;
  }

  get pending(): number {
    return this.#heap.size;
  }

  get resident(): number {
    return this.#store.count;
  }

  /** The log, for readiness (poisoned?) and counters. */
  get log(): Wal {
    return this.#wal;
  }

  /** Due time of the earliest pending timer, or undefined when none is pending. */
  nextDueMs(): number | undefined {
    const slot = this.#heap.peek();
    return slot < 0 ? undefined : (this.#store.dueAt[slot] as number);
  }

  setDueChangedHook(hook: () => void): void {
    this.#onDueChanged = hook;
  }

  /**
   * Takes up to `max` timers due at `nowMs` (fire time ≤ now, earliest first) out of the heap
   * and marks them delivering. Delivering is not logged: after a crash such a timer is pending
   * again and is delivered again (at-least-once).
   */
  takeDue(nowMs: number, max: number): DueSlice {
    const store = this.#store;
    const seqs = new Float64Array(max);
    const rows = new Uint32Array(max);
    const attempts = new Uint32Array(max);
    const fireAtMs = new Float64Array(max);
    let count = 0;
    for (; count < max; count++) {
      const slot = this.#heap.peek();
      if (slot < 0 || (store.dueAt[slot] as number) > nowMs) break;
      this.#heap.pop();
      store.setState(slot, timerState.delivering);
      seqs[count] = store.logSeq[slot] as number;
      rows[count] = store.row[slot] as number;
      attempts[count] = (store.attempts[slot] as number) + 1;
      fireAtMs[count] = store.fireAt[slot] as number;
    }
    return { count, seqs: seqs.subarray(0, count), rows: rows.subarray(0, count), attempts: attempts.subarray(0, count), fireAtMs: fireAtMs.subarray(0, count) };
  }

  /** What a dispatcher needs to deliver a timer it was handed (views: copy to keep). */
  deliveryOf(seq: number, row: number): { target: string; payload: Uint8Array; headers: Uint8Array } | undefined {
    const slot = this.#index.get(seq, row);
    if (slot < 0) return undefined;
    return { target: this.#store.targetOf(slot), payload: this.#store.payloadOf(slot), headers: this.#store.headersOf(slot) };
  }

  /**
   * Records delivery outcomes: one OUTCOME record for all of them; once it is durable,
   * delivered and dead timers are final, retries go back to the heap at their retry time.
   */
  async settle(outcomes: Outcomes): Promise<void> {
    for (let i = 0; i < outcomes.count; i++) {
      const slot = this.#index.get(outcomes.seqs[i] as number, outcomes.rows[i] as number);
      assert.ok(slot >= 0 && this.#store.state[slot] === timerState.delivering, 'an outcome for a timer that is not being delivered');
    }
    await this.#wal.append(recordType.outcome, encodeOutcomes(outcomes));
    this.#applyOutcomes(outcomes);
  }

  #applyOutcomes(outcomes: Outcomes): void {
    const store = this.#store;
    let retried = false;
    for (let i = 0; i < outcomes.count; i++) {
      const slot = this.#index.get(outcomes.seqs[i] as number, outcomes.rows[i] as number);
      if (slot < 0) continue;
      this.#heap.remove(slot);
      store.setAttempts(slot, Math.min(outcomes.attempts[i] as number, 0xffff));
      store.setLastStatus(slot, outcomes.statuses[i] as number);
      const kind = outcomes.kinds[i];
      if (kind === outcomeKind.retry) {
        store.setState(slot, timerState.retrying);
        store.setDueAt(slot, outcomes.retryAtMs[i] as number);
        this.#heap.push(slot);
        retried = true;
      } else {
        store.setState(slot, kind === outcomeKind.delivered ? timerState.delivered : timerState.dead);
      }
    }
    if (retried) this.#onDueChanged();
  }

  /** Validates and durably sets a queue's config (a whole replacement: absent fields take defaults). */
  async setQueue(name: string, input: unknown): Promise<QueueConfig> {
    validateQueueName(name);
    const config = parseQueueConfig(input);
    await this.#wal.append(recordType.queue, encodeQueueRecord(name, config));
    this.#queueConfigs.set(name, config);
    this.#queueIndex(name);
    return config;
  }

  queueConfig(name: string): QueueConfig {
    return this.#queueConfigs.get(name) ?? defaultQueueConfig;
  }

  /** Every queue that was configured or has held a timer, with its config, by name. */
  queues(): Array<{ name: string; config: QueueConfig }> {
    return [...this.#queueNames].sort().map((name) => ({ name, config: this.queueConfig(name) }));
  }

  /** Admits a batch built in process or from JSON: logged in the engine's columnar form. */
  async admit(batch: TimerBatch): Promise<Admitted> {
    const acceptedAtMs = this.#clock.now();
    validateBatch(batch, this.#limits, acceptedAtMs);
    return this.#admit(batch, addEncodingColumns, encodeBatch(batch), acceptedAtMs);
  }

  /** Admits an Arrow IPC stream as it arrived; the bytes are logged whole. */
  async admitArrow(ipc: Uint8Array): Promise<Admitted> {
    const acceptedAtMs = this.#clock.now();
    const batch = batchFromArrow(ipc, acceptedAtMs);
    validateBatch(batch, this.#limits, acceptedAtMs);
    return this.#admit(batch, addEncodingArrowStream, [ipc], acceptedAtMs);
  }

  /** Logs a validated batch and puts it in memory once durable. */
  async #admit(batch: TimerBatch, encoding: AddEncoding, encoded: readonly Uint8Array[], acceptedAtMs: number): Promise<Admitted> {
    if (!this.#store.canAllocate(this.#reservedRows + batch.rows)) {
      throw new FermataError(errorCodes.capacityFull, `the resident store is full (${this.#store.count} timers)`, { rows: batch.rows });
    }
    this.#reservedRows += batch.rows;
    let seq: number;
    try {
      seq = await this.#wal.append(recordType.add, [encodeAddHeader(encoding, batch.rows, acceptedAtMs), ...encoded]);
    } finally {
      this.#reservedRows -= batch.rows;
    }
    this.#insert(batch, seq);
    const fireAtMs = batch.fireAtMs;
    return { seq, rows: batch.rows, idOf: (row) => encodeTimerId(seq, row, fireAtMs[row] as number) };
  }

  /** Cancels a timer; resolves once the cancel is durable. */
  cancel(id: string): Promise<CancelOutcome> {
    const slot = this.#slotOfId(id);
    if (slot < 0) return Promise.resolve('not-found');
    const inFlight = this.#cancelling.get(slot);
    if (inFlight !== undefined) return inFlight;
    const state = this.#store.state[slot] as TimerStateCode;
    if (state === timerState.cancelled) return Promise.resolve('cancelled');
    if (state !== timerState.pending && state !== timerState.retrying) return Promise.resolve('too-late');
    // Out of the heap now, so the timer cannot fire while its CANCEL record is being synced.
    this.#heap.remove(slot);
    const seq = this.#store.logSeq[slot] as number;
    const row = this.#store.row[slot] as number;
    const outcome = this.#wal.append(recordType.cancel, encodeTimerRefs([seq], [row])).then(
      () => {
        this.#store.setState(slot, timerState.cancelled);
        return 'cancelled' as const;
      },
      (err: unknown) => {
        this.#heap.push(slot);
        throw err;
      },
    );
    this.#cancelling.set(slot, outcome);
    const forget = (): void => void this.#cancelling.delete(slot);
    outcome.then(forget, forget);
    return outcome;
  }

  get(id: string): TimerView | undefined {
    const slot = this.#slotOfId(id);
    if (slot < 0) return undefined;
    const store = this.#store;
    const status = store.lastStatus[slot] as number;
    return {
      id,
      state: stateNames[store.state[slot] as number] as TimerStateName,
      fireAtMs: store.fireAt[slot] as number,
      dueAtMs: store.dueAt[slot] as number,
      attempts: store.attempts[slot] as number,
      queue: this.#queueNames[store.queueIndex[slot] as number] as string,
      target: store.targetOf(slot),
      lastStatus: status === 0 ? null : status,
    };
  }

  /** The payload of a resident timer (a view: copy it to keep it). */
  payloadOf(id: string): Uint8Array | undefined {
    const slot = this.#slotOfId(id);
    return slot < 0 ? undefined : this.#store.payloadOf(slot);
  }

  async close(): Promise<void> {
    await this.#wal.close();
  }

  #slotOfId(id: string): number {
    const parts = decodeTimerId(id);
    return parts === undefined ? -1 : this.#index.get(parts.seq, parts.row);
  }

  #queueIndex(name: string): number {
    let index = this.#queueIndexOf.get(name);
    if (index === undefined) {
      index = this.#queueNames.push(name) - 1;
      this.#queueIndexOf.set(name, index);
    }
    return index;
  }

  /** Puts a durable batch into memory: one slot, heap entry and index entry per row. */
  #insert(batch: TimerBatch, seq: number): void {
    const store = this.#store;
    const targets = batch.targets.map((target) => store.internTarget(target));
    const queues = batch.queues.map((queue) => this.#queueIndex(queue));
    for (let row = 0; row < batch.rows; row++) {
      const slot = store.allocateRaw(
        batch.fireAtMs[row] as number,
        seq,
        row,
        queues[batch.queueIndex[row] as number] as number,
        targets[batch.targetIndex[row] as number] as number,
        bytesAt(batch.payload, row),
        bytesAt(batch.headers, row),
      );
      assert.ok(slot >= 0, 'capacity was reserved before the append');
      this.#heap.push(slot);
      this.#index.insert(slot);
    }
    for (const target of targets) store.releaseTarget(target);
    this.#onDueChanged();
  }

  #replay(seq: number, type: number, body: Uint8Array): void {
    if (type === recordType.add) {
      const add = decodeAddBody(body);
      if (add === undefined) throw this.#badRecord(seq, 'ADD record with an unknown header');
      let batch: TimerBatch;
      try {
        batch = add.header.encoding === addEncodingArrowStream ? batchFromArrow(add.batch, add.header.acceptedAtMs) : decodeBatch(add.batch);
      } catch (err) {
        throw this.#badRecord(seq, `ADD record's batch does not decode: ${err instanceof Error ? err.message : String(err)}`);
      }
      if (batch.rows !== add.header.rows) throw this.#badRecord(seq, `ADD record says ${add.header.rows} rows, its batch has ${batch.rows}`);
      this.#insert(batch, seq);
      return;
    }
    if (type === recordType.cancel) {
      const ok = forEachTimerRef(body, (addSeq, row) => {
        const slot = this.#index.get(addSeq, row);
        if (slot < 0) return;
        this.#heap.remove(slot);
        this.#store.setState(slot, timerState.cancelled);
      });
      if (!ok) throw this.#badRecord(seq, 'CANCEL record of a length that is not a whole number of entries');
      return;
    }
    if (type === recordType.outcome) {
      const outcomes = decodeOutcomes(body);
      if (outcomes === undefined) throw this.#badRecord(seq, 'malformed OUTCOME record');
      this.#applyOutcomes(outcomes);
      return;
    }
    if (type === recordType.queue) {
      const queue = decodeQueueRecord(body);
      if (queue === undefined) throw this.#badRecord(seq, 'malformed QUEUE record');
      this.#queueConfigs.set(queue.name, queue.config);
      this.#queueIndex(queue.name);
      return;
    }
    throw this.#badRecord(seq, `unknown record type ${type}`);
  }

  #badRecord(seq: number, reason: string): FermataError {
    return new FermataError(errorCodes.walCorrupt, `WAL record ${seq}: ${reason}; refusing to start`, { seq, reason });
  }
}
