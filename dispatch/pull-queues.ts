// Pull delivery ("delivery": "pull", issue 9): due timers of a pull queue wait here for an Arrow
// Flight DoGet instead of being POSTed. A DoGet leases up to its rows; the lease is settled by an
// ack (delivered), a nack or its expiry after the queue's timeout_ms (a failed attempt: retried
// with the queue's backoff, dead after max_attempts). Each settlement is one OUTCOME record made
// by the outcome recorder (engine.settle), durable before an ack is answered. Main thread.
//
//   dispatcher.deliver ─add()─► waiting, FIFO per queue ─lease()─► Lease {id, rows, deadline}
//                                                                     │ settle(ack | nack), expiry
//   scheduler.wake() ◄── roomFreed ◄── record(outcomes) durable ◄─────┘
//
// Bounded: a queue's timers waiting and leased together stay within its max_concurrent (or
// queueTimersMax); flow control's queueRoom says so to takeDue, which holds the rest back in
// the engine. A DoGet's batch is bounded in rows (batch_rows_max) and bytes (leaseBytesMax).
// At-least-once: waiting and leased timers are "delivering" in memory only; a crash or a stop
// records nothing, so they are pending in the log and delivered again after the restart.
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import type { Logger } from 'pino';
import type { Clock, DueSlice, Engine } from '../engine/engine.ts';
import type { QueueConfig } from '../engine/queues.ts';
import { emptyOutcomes, type Outcomes, outcomeKind } from '../engine/records.ts';
import { encodeArrowBatch } from './arrow-batch.ts';
import { DeliveryTaskBuilder } from './task-builder.ts';
import { attemptFailure, decideOutcome } from './retry-policy.ts';

const MiB = 1024 * 1024;

export const pullLimits = {
  /** Timers of one pull queue waiting and leased together, when its config sets no max_concurrent. */
  queueTimersMax: 100_000,
  /** Bytes of payloads, headers, keys and targets in one DoGet's batch (one timer at least, whatever its size). */
  leaseBytesMax: 16 * MiB,
  /** The longest a DoGet waits for due timers when none are waiting (its ticket's wait_ms is capped to it); once some came, it lingers up to the queue's linger_ms for its rows, within that. */
  getWaitMsMax: 20_000,
  /** How often timers waiting in a queue that no longer pulls (its config changed) are handed back. */
  sweepMs: 1_000,
} as const;

export type PullLimits = { -readonly [K in keyof typeof pullLimits]: number };

/** Schema metadata of a DoGet's Arrow stream: the lease that settles its rows, and when it expires. */
export const leaseMetadata = { lease: 'fermata.lease', expiresAtMs: 'fermata.lease_expires_at_ms', queue: 'fermata.queue' } as const;

/** Why a pull call is refused; the Flight adapter maps each code to a status (ingest/flight/status-map.ts). */
export const pullRefusalCodes = {
  queueUnknown: 'QUEUE_UNKNOWN',
  queueNotPull: 'QUEUE_NOT_PULL',
  leaseUnknown: 'LEASE_UNKNOWN',
  leaseOtherQueue: 'LEASE_OTHER_QUEUE',
  stopped: 'PULL_STOPPED',
} as const;
export type PullRefusalCode = (typeof pullRefusalCodes)[keyof typeof pullRefusalCodes];

export class PullRefusal extends Error {
  override readonly name = 'PullRefusal';
  readonly code: PullRefusalCode;

  constructor(code: PullRefusalCode, message: string) {
    super(message);
    this.code = code;
  }
}

/** What one DoGet takes: its rows as an Arrow IPC stream (dispatch/arrow-batch.ts columns). */
export interface PullBatch {
  /** Undefined when no timer was waiting (the stream then holds the schema alone). */
  readonly lease: string | undefined;
  readonly rows: number;
  readonly expiresAtMs: number | undefined;
  readonly ipc: Uint8Array;
}

export type PullSettlement = 'ack' | 'nack';

export interface SettledLease {
  readonly lease: string;
  readonly delivered: number;
  readonly retried: number;
  readonly dead: number;
}

export interface PullQueuesOptions {
  readonly engine: Engine;
  readonly clock: Clock;
  readonly logger: Logger;
  /**
   * Makes outcomes durable (the outcome recorder: engine.settle, and its counts and dead-timer
   * lines when they were an attempt). `fireAtMs[i]` is outcome i's fire time, which its id names.
   */
  readonly record: (outcomes: Outcomes, queueIndex: number, attempted: boolean, fireAtMs: Float64Array) => Promise<void>;
  /** Room was freed in a queue (the dispatcher wakes its scheduler). */
  readonly roomFreed: () => void;
  /** Draws in [0, 1) for the backoff's jitter. */
  readonly random?: () => number;
  /** Arms a lease's expiry: calls back after `ms`, unless the returned function cancels it (default: an unref'd setTimeout). */
  readonly armTimer?: (callback: () => void, ms: number) => () => void;
  readonly limits?: Partial<PullLimits>;
}

/** A queue's timers waiting for a DoGet, oldest first: columns of plain numbers, consumed from `head`. */
class QueueState {
  readonly name: string;
  /** The engine's queue index; -1 while only DoGets waiting for its first timer know it. */
  index: number;
  readonly seqs: number[] = [];
  readonly rows: number[] = [];
  readonly attempts: number[] = [];
  readonly fireAtMs: number[] = [];
  head = 0;
  leased = 0;
  /** DoGets waiting for a timer to arrive. */
  readonly waiters = new Set<() => void>();

  constructor(name: string, index: number) {
    this.name = name;
    this.index = index;
  }

  get waiting(): number {
    return this.seqs.length - this.head;
  }

  /** Drops consumed entries once they are most of the columns (amortised O(1) a timer). */
  compact(): void {
    if (this.head === this.seqs.length) {
      for (const column of [this.seqs, this.rows, this.attempts, this.fireAtMs]) column.length = 0;
      this.head = 0;
    } else if (this.head > 1024 && this.head * 2 > this.seqs.length) {
      for (const column of [this.seqs, this.rows, this.attempts, this.fireAtMs]) column.splice(0, this.head);
      this.head = 0;
    }
  }
}

interface Lease {
  readonly id: string;
  readonly queue: QueueState;
  readonly seqs: Float64Array;
  readonly rows: Uint32Array;
  readonly attempts: Uint32Array;
  readonly fireAtMs: Float64Array;
  readonly expiresAtMs: number;
  readonly disarm: () => void;
}

function armTimeout(callback: () => void, ms: number): () => void {
  const timer = setTimeout(callback, ms).unref();
  return () => clearTimeout(timer);
}

export class PullQueues {
  readonly #engine: Engine;
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #record: (outcomes: Outcomes, queueIndex: number, attempted: boolean, fireAtMs: Float64Array) => Promise<void>;
  readonly #roomFreed: () => void;
  readonly #random: () => number;
  readonly #armTimer: (callback: () => void, ms: number) => () => void;
  readonly #limits: PullLimits;
  /** By queue index, and by name for DoGet. */
  readonly #byIndex: Array<QueueState | undefined> = [];
  readonly #byName = new Map<string, QueueState>();
  readonly #leases = new Map<string, Lease>();
  readonly #sweep: NodeJS.Timeout;
  #stopped = false;

  constructor(options: PullQueuesOptions) {
    this.#engine = options.engine;
    this.#clock = options.clock;
    this.#logger = options.logger;
    this.#record = options.record;
    this.#roomFreed = options.roomFreed;
    this.#random = options.random ?? Math.random;
    this.#armTimer = options.armTimer ?? armTimeout;
    this.#limits = { ...pullLimits, ...options.limits };
    this.#sweep = setInterval(() => this.#handBackUnpulled(), this.#limits.sweepMs).unref();
  }

  /** How many more due timers the queue takes now: its bound less what waits and is leased. */
  room(queueIndex: number, config: QueueConfig): number {
    const state = this.#byIndex[queueIndex];
    const held = state === undefined ? 0 : state.waiting + state.leased;
    return (config.max_concurrent ?? this.#limits.queueTimersMax) - held;
  }

  /** Timers of `queue` waiting for a DoGet, and leased. */
  counts(queue: string): { waiting: number; leased: number } {
    const state = this.#byName.get(queue);
    return { waiting: state?.waiting ?? 0, leased: state?.leased ?? 0 };
  }

  /** Every pull queue that has had due timers, with its timers waiting and leased (for /metrics). */
  *allCounts(): IterableIterator<[string, { waiting: number; leased: number }]> {
    for (const [name, state] of this.#byName) yield [name, { waiting: state.waiting, leased: state.leased }];
  }

  /** Timer `i` of a slice the dispatcher was handed: it waits for a DoGet. */
  add(slice: DueSlice, i: number): void {
    const state = this.#stateOf(slice.queues[i] as number);
    state.seqs.push(slice.seqs[i] as number);
    state.rows.push(slice.rows[i] as number);
    state.attempts.push(slice.attempts[i] as number);
    state.fireAtMs.push(slice.fireAtMs[i] as number);
    if (state.waiters.size === 0) return;
    // Woken DoGets run after the dispatcher's whole slice is added.
    for (const wake of state.waiters) wake();
    state.waiters.clear();
  }

  /**
   * Leases up to `maxRows` waiting timers of `queue` (at most its batch_rows_max, and
   * leaseBytesMax bytes); with none waiting, waits up to `waitMs` (capped at getWaitMsMax) for
   * some (then lingers up to linger_ms for the rest), else answers an empty batch. `signal` ends
   * the wait early (the caller went away, or the service is stopping).
   */
  async lease(queue: string, maxRows: number | undefined, waitMs: number, signal?: AbortSignal): Promise<PullBatch> {
    const config = this.#pullConfig(queue);
    const rows = Math.min(maxRows ?? config.batch_rows_max, config.batch_rows_max);
    // A paused queue leases nothing: the DoGet waits as it would with none waiting (a resume's first timers wake it).
    if (this.#isPaused(queue) && waitMs > 0) await this.#waitFor(queue, Math.min(waitMs, this.#limits.getWaitMsMax), signal);
    else if ((this.#byName.get(queue)?.waiting ?? 0) === 0 && waitMs > 0) await this.#waitForRows(queue, rows, Math.min(waitMs, this.#limits.getWaitMsMax), config.linger_ms, signal);
    if (this.#stopped) throw stopped();
    // The config may have changed while it waited, and the queue been paused.
    const now = this.#pullConfig(queue);
    return this.#take(this.#byName.get(queue), now, this.#isPaused(queue) ? 0 : Math.min(rows, now.batch_rows_max));
  }

  #isPaused(queue: string): boolean {
    return this.#engine.findQueueView(queue)?.paused === true;
  }

  /**
   * Settles a lease: "ack" records its timers delivered, "nack" as a failed attempt (retried
   * with backoff, or dead after max_attempts). Resolves once the outcome is durable. `queue`,
   * when given, must be the lease's queue.
   */
  async settle(leaseId: string, how: PullSettlement, queue?: string): Promise<SettledLease> {
    if (this.#stopped) throw stopped();
    const lease = this.#leases.get(leaseId);
    if (lease === undefined) {
      throw new PullRefusal(pullRefusalCodes.leaseUnknown, `lease ${JSON.stringify(leaseId)} is unknown: it expired (its timers are delivered again) or was already settled`);
    }
    if (queue !== undefined && lease.queue.name !== queue) {
      throw new PullRefusal(pullRefusalCodes.leaseOtherQueue, `lease ${JSON.stringify(leaseId)} belongs to queue ${JSON.stringify(lease.queue.name)}, not ${JSON.stringify(queue)}`);
    }
    return this.#settle(lease, how === 'ack');
  }

  /** The queue of an open lease, undefined when it is unknown (a queue-limited token's check before settling it). */
  queueOfLease(leaseId: string): string | undefined {
    return this.#leases.get(leaseId)?.queue.name;
  }

  /** Stops: open leases and waiting timers are dropped unrecorded (pending in the log, delivered again after the restart). */
  close(): void {
    this.#stopped = true;
    clearInterval(this.#sweep);
    for (const lease of this.#leases.values()) lease.disarm();
    this.#leases.clear();
    for (const state of this.#byName.values()) {
      for (const wake of state.waiters) wake();
      state.waiters.clear();
    }
  }

  #stateOf(queueIndex: number): QueueState {
    let state = this.#byIndex[queueIndex];
    if (state !== undefined) return state;
    const name = this.#engine.queueNameAt(queueIndex);
    state = this.#byName.get(name) ?? new QueueState(name, queueIndex);
    state.index = queueIndex;
    this.#byIndex[queueIndex] = state;
    this.#byName.set(name, state);
    return state;
  }

  #pullConfig(queue: string): QueueConfig {
    if (this.#stopped) throw stopped();
    const config = this.#engine.queueConfig(queue);
    if (config.delivery === 'pull') return config;
    if (!this.#engine.queues().some((entry) => entry.name === queue)) {
      throw new PullRefusal(pullRefusalCodes.queueUnknown, `no queue ${JSON.stringify(queue)}: configure it with PUT /v1/queues/${queue} {"delivery": "pull"}`);
    }
    throw new PullRefusal(pullRefusalCodes.queueNotPull, `queue ${JSON.stringify(queue)} has "delivery": ${JSON.stringify(config.delivery)}: only a "pull" queue's timers are taken by DoGet`);
  }

  /**
   * Waits up to `waitMs` for a first timer; once one came, up to `lingerMs` more (as "arrow"
   * delivery lingers) for `rows` of them, since the dispatcher hands timers over in slices.
   */
  async #waitForRows(queue: string, rows: number, waitMs: number, lingerMs: number, signal: AbortSignal | undefined): Promise<void> {
    const startedAt = performance.now();
    await this.#waitFor(queue, waitMs, signal);
    const lingerUntil = Math.min(startedAt + waitMs, performance.now() + lingerMs);
    for (;;) {
      const left = lingerUntil - performance.now();
      const waiting = this.#byName.get(queue)?.waiting ?? 0;
      if (this.#stopped || signal?.aborted === true || waiting === 0 || waiting >= rows || left <= 0) return;
      await this.#waitFor(queue, left, signal);
    }
  }

  #waitFor(queue: string, waitMs: number, signal: AbortSignal | undefined): Promise<void> {
    const { promise, resolve } = Promise.withResolvers<void>();
    // A queue that never held a timer: its state is made by name, its index known once one arrives.
    let state = this.#byName.get(queue);
    if (state === undefined) {
      state = new QueueState(queue, -1);
      this.#byName.set(queue, state);
    }
    const waiters = state.waiters;
    const timer = setTimeout(resolve, waitMs);
    const done = (): void => {
      clearTimeout(timer);
      waiters.delete(done);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    waiters.add(done);
    signal?.addEventListener('abort', done, { once: true });
    return promise.finally(done);
  }

  #take(state: QueueState | undefined, config: QueueConfig, maxRows: number): PullBatch {
    const count = state === undefined ? 0 : Math.min(maxRows, state.waiting);
    const builder = new DeliveryTaskBuilder(count, undefined, count === 0 ? 0 : 64 * 1024);
    let bytes = 0;
    if (state !== undefined) {
      for (let taken = 0; taken < count; taken++) {
        const at = state.head;
        const seq = state.seqs[at] as number;
        const row = state.rows[at] as number;
        const delivery = this.#engine.deliveryOf(seq, row);
        assert.ok(delivery !== undefined, `timer (${seq}, ${row}) waiting for a pull is not resident`);
        const size = delivery.bytes.length + delivery.target.length * 3;
        if (taken > 0 && bytes + size > this.#limits.leaseBytesMax) break;
        bytes += size;
        const { payloadLength, headersLength } = delivery;
        const keyLength = delivery.bytes.length - payloadLength - headersLength;
        builder.add({ seq, row, target: delivery.target, bytes: delivery.bytes, bytesStart: 0, payloadLength, headersLength, keyLength, fireAtMs: state.fireAtMs[at] as number, attempt: state.attempts[at] as number, timeoutMs: config.timeout_ms, policy: config });
        state.head++;
      }
    }
    const { task } = builder.finish();
    if (state === undefined || task.count === 0) return { lease: undefined, rows: 0, expiresAtMs: undefined, ipc: encodeArrowBatch(task, new Map([[leaseMetadata.queue, state?.name ?? '']])) };
    const from = state.head - task.count;
    const id = `lease_${randomBytes(16).toString('base64url')}`;
    const expiresAtMs = this.#clock.now() + config.timeout_ms;
    const lease: Lease = {
      id,
      queue: state,
      seqs: Float64Array.from(state.seqs.slice(from, state.head)),
      rows: Uint32Array.from(state.rows.slice(from, state.head)),
      attempts: Uint32Array.from(state.attempts.slice(from, state.head)),
      fireAtMs: Float64Array.from(state.fireAtMs.slice(from, state.head)),
      expiresAtMs,
      disarm: this.#armTimer(() => this.#expire(id), config.timeout_ms),
    };
    state.leased += task.count;
    state.compact();
    this.#leases.set(id, lease);
    const metadata = new Map([
      [leaseMetadata.lease, id],
      [leaseMetadata.expiresAtMs, String(expiresAtMs)],
      [leaseMetadata.queue, state.name],
    ]);
    return { lease: id, rows: task.count, expiresAtMs, ipc: encodeArrowBatch(task, metadata) };
  }

  #expire(id: string): void {
    const lease = this.#leases.get(id);
    if (lease === undefined) return;
    this.#settle(lease, false).catch((err: unknown) => this.#logger.error({ err, lease: id }, 'an expired lease was not recorded; its timers will be delivered again'));
  }

  async #settle(lease: Lease, delivered: boolean): Promise<SettledLease> {
    this.#leases.delete(lease.id);
    lease.disarm();
    const count = lease.seqs.length;
    const config = this.#engine.queueConfig(lease.queue.name);
    const outcomes = emptyOutcomes(count);
    outcomes.count = count;
    const nowMs = this.#clock.now();
    const settled = { lease: lease.id, delivered: 0, retried: 0, dead: 0 };
    for (let i = 0; i < count; i++) {
      const attempt = lease.attempts[i] as number;
      outcomes.seqs[i] = lease.seqs[i] as number;
      outcomes.rows[i] = lease.rows[i] as number;
      outcomes.attempts[i] = attempt;
      if (delivered) {
        outcomes.kinds[i] = outcomeKind.delivered;
        settled.delivered++;
        continue;
      }
      // Not acknowledged in time, or refused by the puller: a failed attempt, as a push timeout is.
      const decision = decideOutcome(attempt, attemptFailure.timeout, undefined, config, nowMs, this.#random());
      outcomes.kinds[i] = decision.kind;
      outcomes.reasons[i] = decision.reason;
      if (decision.kind === outcomeKind.retry) {
        outcomes.retryAtMs[i] = decision.retryAtMs;
        settled.retried++;
      } else settled.dead++;
    }
    try {
      await this.#record(outcomes, lease.queue.index, true, lease.fireAtMs);
    } finally {
      lease.queue.leased -= count;
      this.#roomFreed();
    }
    return settled;
  }

  /** Waiting timers of queues whose config no longer says "pull" go back to the engine, no attempt counted. */
  #handBackUnpulled(): void {
    if (this.#stopped) return;
    for (const state of this.#byIndex) {
      if (state === undefined || state.waiting === 0 || this.#engine.queueConfig(state.name).delivery === 'pull') continue;
      const count = state.waiting;
      const outcomes = emptyOutcomes(count);
      outcomes.count = count;
      const nowMs = this.#clock.now();
      const fireAtMs = Float64Array.from(state.fireAtMs.slice(state.head, state.head + count));
      for (let i = 0; i < count; i++) {
        const at = state.head + i;
        outcomes.seqs[i] = state.seqs[at] as number;
        outcomes.rows[i] = state.rows[at] as number;
        outcomes.attempts[i] = (state.attempts[at] as number) - 1;
        outcomes.kinds[i] = outcomeKind.retry;
        outcomes.retryAtMs[i] = nowMs;
      }
      state.head += count;
      state.leased += count;
      state.compact();
      this.#record(outcomes, state.index, false, fireAtMs)
        .catch((err: unknown) => this.#logger.error({ err, queue: state.name }, 'timers of a queue that stopped pulling were not handed back; they will be delivered again after a restart'))
        .finally(() => {
          state.leased -= count;
          this.#roomFreed();
        });
    }
  }
}

function stopped(): PullRefusal {
  return new PullRefusal(pullRefusalCodes.stopped, 'the service is stopping: pull again once it is back');
}
