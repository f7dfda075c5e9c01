// The dispatcher: the engine's DispatchPort, on the main thread. It hands due timers to a
// piscina pool of delivery workers in tasks of many timers (single deliveries of "request"
// queues; one Arrow batch of an "arrow" queue's timers, gathered for up to linger_ms), and frees
// the room they took once their outcomes are durable. Its parts, all on this thread:
//
//   scheduler.ts         when to look: takes due timers within the room and hands them here
//   flow-control.ts      how many: room in all and per queue (max_concurrent, rate_per_s); the
//                        engine holds back a queue without room, so a slow or failing target
//                        never delays another queue's timers
//   pending-task.ts      a task being built and sent, and the timers it holds
//   delivery-pool.ts     the worker threads the tasks go to (delivery-worker.ts runs in each)
//   outcome-recorder.ts  a worker's answer → one OUTCOME record (engine.settle, group-committed)
//   delivery-stats.ts    outcome counts and lateness/latency histograms, for /metrics
//
//   scheduler ─takeDue(room, queueRoom)─► deliver(slice) ─► tasks of ≤ timersPerTaskMax
//        ▲                                                     │ piscina (transferred buffers)
//        └── wake() ◄── room freed ◄── recorder: engine.settle ◄┘ outcomes as columns
//
// "pull" queues' timers are not sent: they wait in PullQueues (pull-queues.ts) for an Arrow
// Flight DoGet, and their leases' outcomes come back through the same recorder.
//
// At-least-once: a timer is "delivering" in memory only; a crash before its outcome is durable
// leaves it pending in the log, and it is delivered again after the restart.
import { availableParallelism } from 'node:os';
import type { Histogram } from 'hdr-histogram-js';
import type { Logger } from 'pino';
import type { Clock, DueSlice, Engine, TakeAhead } from '../engine/engine.ts';
import { monotonicClock, sharedClockOf } from '../engine/clock.ts';
import { deliveryLimits, dispatchLimits, type DispatchLimits } from '../engine/limits.ts';
import { defaultQueueConfig, type QueueConfig } from '../engine/queues.ts';
import { BufferPool } from './buffer-pool.ts';
import { DeadLetterLog } from './dead-letter-log.ts';
import { DeliveryStats, type QueueDeliveryStats } from './delivery-stats.ts';
import { DeliveryPool } from './delivery-pool.ts';
import { claimState } from './delivery-task.ts';
import { FlowControl } from './flow-control.ts';
import { HistogramRuns } from './histogram-runs.ts';
import { OutcomeRecorder } from './outcome-recorder.ts';
import { PendingTask } from './pending-task.ts';
import { type PullLimits, PullQueues } from './pull-queues.ts';
import { Scheduler } from './scheduler.ts';
import { freshBuffers, type TaskTimer } from './task-builder.ts';
import { type DeliveryAccess, signerIndexes } from './signing-config.ts';

export interface DispatcherOptions {
  readonly engine: Engine;
  readonly clock: Clock;
  readonly logger: Logger;
  /** Delivery worker threads; default: all cores but the main thread's, at least one. */
  readonly threads?: number;
  /** Target origins and CIDRs let through the SSRF guard. */
  readonly allow?: readonly string[];
  /** Loopback targets allowed (the server sets this when it listens on loopback itself). */
  readonly allowLoopback?: boolean;
  /** Standard Webhooks secrets (`whsec_…`); each signs every delivery of a queue without its own. */
  readonly signingSecrets?: readonly string[];
  /** Queues with their own signing secrets, by name (dispatch/signing-config.ts). */
  readonly queueSigningSecrets?: Readonly<Record<string, readonly string[]>>;
  /** Extra CA certificates (PEM text) trusted for https targets. */
  readonly ca?: string;
  readonly limits?: Partial<DispatchLimits>;
  readonly pullLimits?: Partial<PullLimits>;
  /**
   * Cluster mode: the node's delivery workers and their buffers, shared by the dispatchers of
   * every partition it owns (worker threads are per process, not per partition). The owner
   * made them and destroys them; threads, allow, allowLoopback, signingSecrets and ca are
   * theirs then. Absent: this dispatcher makes its own and destroys them on close.
   */
  readonly shared?: SharedDelivery;
  /** Cluster mode: the engine's partition, named on every task for the workers' lease check. */
  readonly partition?: number;
  /** Cluster mode: false while the partition's local lease deadline has passed; no timer is taken then. */
  readonly leaseHeld?: () => boolean;
}

/** A delivery pool and the buffer pool its workers hand "arrow" buffers back to, for several dispatchers. */
export interface SharedDelivery {
  readonly workers: DeliveryPool;
  readonly buffers: BufferPool;
}

/** A new task's payload column is this much larger than its timers of the average size would take: most tasks then never grow it. */
const taskBytesSlack = 1.25;
/** The payload column of the first task, before any timer's size is known: it grows by doubling. */
const firstTaskPayloadBytesInitial = 64 * 1024;
const noBytes = new Uint8Array(0);
const leaseAlwaysHeld = (): boolean => true;

/** The buffers "arrow" tasks are built in, kept between tasks (for one dispatcher, or a node's shared delivery). */
export function newBufferPool(limits: DispatchLimits): BufferPool {
  // Memory, not timers: kept by the real, monotonic clock whatever the injected one does.
  return new BufferPool({ bytesMax: limits.taskBuffersPooledBytesMax, idleMs: limits.taskBuffersIdleMs, clock: { now: () => performance.now() } });
}

export class Dispatcher {
  readonly #engine: Engine;
  readonly #clock: Clock;
  readonly #logger: Logger;
  readonly #deadLog: DeadLetterLog;
  readonly #limits: DispatchLimits;
  readonly #workers: DeliveryPool;
  readonly #scheduler: Scheduler;
  readonly #pull: PullQueues;
  readonly #flow: FlowControl;
  readonly #tasks = new Set<Promise<void>>();
  /** Tasks of single deliveries at a worker that has not answered yet: their unsent timers can be withdrawn. */
  readonly #held = new Set<PendingTask>();
  /** Buffers of "arrow" tasks, back from the workers, for the next ones. */
  readonly #buffers: BufferPool;
  /** The timer #add hands to a task builder, filled again each time. */
  readonly #timer: { -readonly [K in keyof TaskTimer]-?: TaskTimer[K] } = {
    seq: 0,
    row: 0,
    target: '',
    bytes: noBytes,
    bytesStart: 0,
    payloadLength: 0,
    headersLength: 0,
    keyLength: 0,
    responseBytesMax: 0,
    fireAtMs: 0,
    notBeforeMs: 0,
    attempt: 0,
    timeoutMs: 0,
    policy: defaultQueueConfig,
    signer: 0,
  };
  /** Queue name → signer index (dispatch/signing-config.ts), and its lookups by queue index, made at first use. */
  #signerIndexes: ReadonlyMap<string, number>;
  #signerOfQueue: number[] = [];
  /** "arrow" queues' batches still filling, by queue index. */
  readonly #lingering = new Map<number, { task: PendingTask; timer: NodeJS.Timeout }>();
  readonly #stats: DeliveryStats;
  readonly #recorder: OutcomeRecorder;
  readonly #ownsWorkers: boolean;
  readonly #partition: number | undefined;
  readonly #leaseHeld: () => boolean;
  #stopped = false;
  #warm = false;
  /** "request" queues' timers are taken up to takeAheadMs before they are due: a worker holds each until its time. */
  readonly takeAhead: TakeAhead;

  constructor(options: DispatcherOptions) {
    this.#engine = options.engine;
    this.#clock = options.clock;
    this.#logger = options.logger;
    this.#limits = { ...dispatchLimits, ...options.limits };
    this.#stats = new DeliveryStats(this.#engine);
    this.#deadLog = new DeadLetterLog(this.#logger, deliveryLimits.deadLogLinesPerSecondMax);
    this.#recorder = new OutcomeRecorder(this.#engine, this.#clock, this.#stats, this.#deadLog);
    this.#ownsWorkers = options.shared === undefined;
    this.#partition = options.partition;
    this.#leaseHeld = options.leaseHeld ?? leaseAlwaysHeld;
    this.#buffers = options.shared?.buffers ?? newBufferPool(this.#limits);
    this.#workers = options.shared?.workers ?? new DeliveryPool({
      threads: options.threads ?? Math.max(1, availableParallelism() - 1),
      allow: options.allow ?? [],
      allowLoopback: options.allowLoopback ?? false,
      signingSecrets: options.signingSecrets ?? [],
      queueSigningSecrets: options.queueSigningSecrets,
      ca: options.ca,
      clock: sharedClockOf(this.#clock),
      limits: this.#limits,
      spareBuffers: this.#buffers,
    });
    this.#signerIndexes = signerIndexes({ allow: [], signingSecrets: [], queueSigningSecrets: options.queueSigningSecrets ?? {} });
    this.takeAhead = { ms: this.#limits.takeAheadMs, queue: (queue) => this.#engine.queueConfig(this.#engine.queueNameAt(queue)).delivery === 'request' };
    this.#scheduler = new Scheduler(this.#engine, this, this.#clock);
    this.#pull = new PullQueues({
      engine: this.#engine,
      clock: this.#clock,
      logger: this.#logger,
      record: (outcomes, queueIndex, attempted, fireAtMs) => this.#recorder.recordPull(outcomes, queueIndex, attempted, fireAtMs),
      roomFreed: () => this.#scheduler.wake(),
      ...(options.pullLimits === undefined ? {} : { limits: options.pullLimits }),
    });
    this.#flow = new FlowControl(this.#engine, monotonicClock, this.#limits, this.#pull); // rate buckets count real time, whatever the clock
  }

  /**
   * A reload's delivery settings (cli/serve/reload.ts): every worker has them before the timers
   * taken next are told their queue's signer index (signing-config.ts). A cluster node, whose
   * dispatchers share the workers, reconfigures them once and then tells each dispatcher
   * (useSigners).
   */
  async reconfigure(access: DeliveryAccess): Promise<void> {
    await this.#workers.reconfigure(access);
    this.useSigners(access);
  }

  /** The signer index each queue's timers are told from now on, for workers that already have `access`. */
  useSigners(access: DeliveryAccess): void {
    this.#signerIndexes = signerIndexes(access);
    this.#signerOfQueue = [];
  }

  /** The signer index of queue `queue` (an index), looked up by name once per queue. */
  #signerOf(queue: number): number {
    let signer = this.#signerOfQueue[queue];
    if (signer === undefined) {
      signer = this.#signerIndexes.get(this.#engine.queueNameAt(queue)) ?? 0;
      this.#signerOfQueue[queue] = signer;
    }
    return signer;
  }

  /** "pull" queues' due timers, for the Flight service's DoGet and DoAction. */
  get pull(): PullQueues {
    return this.#pull;
  }

  /**
   * Resolves, with the milliseconds it took, once every worker has loaded its code. Timers
   * handed out before then wait in the pool for it; a worker that fails to load rejects it.
   */
  ready(): Promise<number> {
    return this.#workers.ready();
  }

  /** Whether warmUp() has run: a service's /readyz is red until then. */
  get warm(): boolean {
    return this.#warm;
  }

  /**
   * The origins deliveries go to soon: those of resident timers due within warmUpHorizonMs
   * (overdue ones included), and when there are any, the sinks of "arrow" queues;
   * warmUpOriginsMax at most.
   */
  originsDueSoon(): string[] {
    const limits = this.#limits;
    const targets = this.#engine.targetsDueBefore(this.#clock.now() + limits.warmUpHorizonMs, limits.warmUpTimersMax);
    if (targets.length === 0) return [];
    const sinks = this.#engine.queues().flatMap(({ config }) => (config.delivery === 'arrow' && config.sink !== null ? [config.sink] : []));
    const origins = new Set<string>();
    for (const target of [...sinks, ...targets]) {
      if (origins.size >= limits.warmUpOriginsMax) break;
      const url = URL.parse(target);
      if (url !== null && (url.protocol === 'http:' || url.protocol === 'https:')) origins.add(url.origin);
    }
    return [...origins];
  }

  /**
   * Warms the delivery workers up once they have loaded: each runs its delivery path against the
   * pool's loopback warm-up server and opens HTTP/2 sessions to `origins` (by default originsDueSoon()), so
   * that the first timers after a start go out on time. Resolves once done; what failed is
   * logged (it costs the first deliveries time, not their outcome), and `warm` is true from then on.
   */
  async warmUp(origins: readonly string[] = this.originsDueSoon()): Promise<void> {
    const startedAtMs = performance.now();
    try {
      const report = await this.#workers.warmUp(origins);
      const failed = report.failures.length;
      if (failed > 0) this.#logger.warn({ failed, first: report.failures.slice(0, 3) }, 'warm-up: some sessions could not be opened ahead; their first deliveries connect');
      this.#logger.info({ ms: Math.round(performance.now() - startedAtMs), workers: report.workers, origins: origins.length, sessionsOpened: report.sessionsOpened }, 'delivery workers warm');
    } catch (err) {
      this.#logger.warn({ err }, 'the delivery warm-up failed; deliveries go on, the first ones slower');
    }
    this.#warm = true;
  }

  /** Starts releasing due timers. */
  start(): void {
    this.#scheduler.start();
  }

  get inFlight(): number {
    return this.#flow.inFlight;
  }

  get inFlightBytes(): number {
    return this.#flow.inFlightBytes;
  }

  /** Bytes of "arrow" tasks' buffers kept for later tasks. */
  get pooledBytes(): number {
    return this.#buffers.bytes;
  }

  /** First attempts that started before their fire time by the worker's clock (must stay 0). */
  get earlyDeliveries(): number {
    return this.#stats.earlyDeliveries;
  }

  /** Delivery start − fire time of first attempts, in ms (DeliveryStats.lateness). */
  get lateness(): Histogram {
    return this.#stats.lateness;
  }

  /** Release − fire time of first attempts, in ms (DeliveryStats.releaseLateness). */
  get releaseLateness(): Histogram {
    return this.#stats.releaseLateness;
  }

  /** Request sent → answer's head (or failure), in ms. */
  get latency(): Histogram {
    return this.#stats.latency;
  }

  get threads(): number {
    return this.#workers.threads;
  }

  /** Counts by queue name since start. */
  stats(): ReadonlyMap<string, Readonly<QueueDeliveryStats>> {
    return this.#stats.byQueue();
  }

  /** Failed attempts since start, by kind (DeliveryStats.failuresByKind). */
  failuresByKind(): Array<[string, number]> {
    return this.#stats.failuresByKind();
  }

  room(): number {
    // A poisoned log records no outcome: delivering now would only re-send after the restart.
    // A lapsed lease: another node may own the partition (the workers would refuse the sends).
    if (this.#stopped || this.#engine.log.poisoned !== undefined || !this.#leaseHeld()) return 0;
    return this.#flow.room();
  }

  queueRoom(queueIndex: number): number {
    return this.#flow.queueRoom(queueIndex);
  }

  /**
   * Takes back a timer a worker holds but has not sent (waiting for its time, or for its turn):
   * true when it is withdrawn and will not be sent. Cancels of handed-out timers only, so a
   * search of the tasks in flight is fine.
   */
  withdraw(seq: number, row: number): boolean {
    for (const pending of this.#held) {
      const claims = pending.claims;
      if (claims === undefined) continue;
      for (let i = 0; i < pending.count; i++) {
        if (pending.seqs[i] === seq && pending.rows[i] === row) return Atomics.compareExchange(claims, i, claimState.held, claimState.withdrawn) === claimState.held;
      }
    }
    return false;
  }

  deliver(slice: DueSlice): void {
    const engine = this.#engine;
    const flow = this.#flow;
    const releaseLateness = this.#stats.releaseLateness;
    const releasedAtMs = this.#clock.now();
    // Workers hold a timer until Date.now() reaches its due time: an injected clock's times are translated.
    const workerClockOffsetMs = releasedAtMs - Date.now();
    let task: PendingTask | undefined;
    let pulled = 0;
    let requests = 0;
    const releaseRuns = new HistogramRuns();
    // By queue index: a slice holds timers of a few queues, and a lookup by name per timer showed in profiles.
    const configs: Array<QueueConfig | undefined> = [];
    for (let i = 0; i < slice.count; i++) {
      const queue = slice.queues[i] as number;
      const config = (configs[queue] ??= engine.queueConfig(engine.queueNameAt(queue)));
      if (config.rate_per_s !== null) flow.tokenSpent(queue);
      // Pulled timers hold no worker or bytes: they count against their queue's pull bound only.
      if (config.delivery === 'pull') {
        this.#pull.add(slice, i);
        pulled++;
        continue;
      }
      if (slice.attempts[i] === 1) releaseRuns.add(Math.max(0, releasedAtMs - (slice.dueAtMs[i] as number)), releaseLateness);
      flow.deliveryStarted(queue);
      if (config.delivery === 'arrow') {
        this.#addToArrowBatch(slice, i, config, workerClockOffsetMs);
        continue;
      }
      task ??= this.#newTask(Math.min(this.#limits.timersPerTaskMax, slice.count - i), undefined);
      this.#add(task, slice, i, config, workerClockOffsetMs);
      requests++;
      if (task.count === this.#limits.timersPerTaskMax) {
        this.#run(task);
        task = undefined;
      }
    }
    releaseRuns.flush();
    if (task !== undefined) this.#run(task);
    // The builders read the store's bytes until flushed: batches that linger are, before anything
    // can change those bytes; and the last timer's slab is not held past this turn.
    for (const lingering of this.#lingering.values()) lingering.task.builder.flush();
    this.#timer.bytes = noBytes;
    flow.started(slice.count - pulled, requests);
  }

  /** Stops taking due timers, sends what lingers, waits (bounded) for deliveries in flight to be recorded, stops the workers. */
  async close(): Promise<void> {
    this.#stopped = true;
    this.#scheduler.stop();
    this.#pull.close();
    this.#deadLog.close();
    for (const queue of [...this.#lingering.keys()]) this.#flushArrowBatch(queue);
    const drained = Promise.allSettled([...this.#tasks]);
    const timeout = new Promise<void>((resolve) => setTimeout(resolve, this.#limits.drainTimeoutMs).unref());
    await Promise.race([drained, timeout]);
    if (!this.#ownsWorkers) return;
    await this.#workers.destroy();
    this.#buffers.clear();
  }

  #add(task: PendingTask, slice: DueSlice, i: number, config: QueueConfig, workerClockOffsetMs: number): void {
    const seq = slice.seqs[i] as number;
    const row = slice.rows[i] as number;
    const fireAtMs = slice.fireAtMs[i] as number;
    // One object filled again for every timer, not one made per timer; its bytes are the store's
    // arena, which the builder reads until deliver() flushes it.
    const timer = this.#timer;
    if (!this.#engine.deliveryInto(seq, row, timer)) throw new Error(`timer (${seq}, ${row}) handed out for delivery is not resident`);
    timer.seq = seq;
    timer.row = row;
    timer.fireAtMs = fireAtMs;
    timer.notBeforeMs = (slice.dueAtMs[i] as number) - workerClockOffsetMs;
    timer.attempt = slice.attempts[i] as number;
    timer.timeoutMs = config.timeout_ms;
    timer.policy = config;
    timer.signer = this.#signerOf(slice.queues[i] as number);
    task.add(slice, i, timer);
  }

  /**
   * "arrow" delivery: due timers of the queue gather into one batch until it holds
   * batch_rows_max rows or the first of them has waited linger_ms, then go as one task.
   */
  #addToArrowBatch(slice: DueSlice, i: number, config: QueueConfig, workerClockOffsetMs: number): void {
    const queue = slice.queues[i] as number;
    let lingering = this.#lingering.get(queue);
    if (lingering === undefined) {
      const task = this.#newTask(config.batch_rows_max, config.sink ?? undefined);
      const timer = setTimeout(() => this.#flushArrowBatch(queue), config.linger_ms);
      lingering = { task, timer };
      this.#lingering.set(queue, lingering);
    }
    this.#add(lingering.task, slice, i, config, workerClockOffsetMs);
    // Full by its own size: the queue's batch_rows_max may have changed while it filled.
    if (lingering.task.count >= Math.min(lingering.task.capacity, config.batch_rows_max)) this.#flushArrowBatch(queue);
  }

  #flushArrowBatch(queue: number): void {
    const lingering = this.#lingering.get(queue);
    if (lingering === undefined) return;
    this.#lingering.delete(queue);
    clearTimeout(lingering.timer);
    this.#run(lingering.task);
  }

  /** A task for up to `capacity` timers, its payload column sized for that many payloads of the average size lately (so it rarely grows). */
  #newTask(capacity: number, sink: string | undefined): PendingTask {
    const payloadBytesPerTimer = this.#flow.payloadBytesPerTimer;
    const payloadBytesInitial =
      payloadBytesPerTimer === undefined ? firstTaskPayloadBytesInitial : Math.min(this.#limits.taskBytesInitialMax, Math.ceil(capacity * payloadBytesPerTimer * taskBytesSlack));
    // Single deliveries' bodies are views of their task's payload column, which a request timed
    // out may still be writing after the task is done: only "arrow" tasks' buffers come back.
    return new PendingTask(capacity, sink, payloadBytesInitial, sink === undefined ? freshBuffers : this.#buffers);
  }

  #run(pending: PendingTask): void {
    const usedBytes = pending.builder.usedBytes;
    const payloadBytes = pending.builder.payloadBytes;
    // The task holds its buffers whole (room left in them included): that is what is in flight.
    const finished = pending.builder.finish();
    let { task, heldBytes: taskBytes } = finished;
    // Single deliveries can be withdrawn until sent; an Arrow batch goes whole.
    if (task.sink === undefined) {
      pending.claims = new Int32Array(new SharedArrayBuffer(task.count * Int32Array.BYTES_PER_ELEMENT));
      task = { ...task, claims: pending.claims };
      taskBytes += pending.claims.byteLength;
      this.#held.add(pending);
    }
    if (this.#partition !== undefined) task = { ...task, partition: this.#partition };
    // Counted until the answer, though an "arrow" task's buffers come back once its body is
    // encoded: the body, a copy as large, is held by the worker until then.
    this.#flow.taskSent(taskBytes, pending.count, usedBytes, payloadBytes);
    const done = this.#workers
      .run(task, finished.transfer)
      .then(
        (results) => {
          this.#held.delete(pending);
          // An "arrow" batch refused for its partition's lease: not sent, retried as a failed task is.
          return this.#recorder.recordTask(pending, 'refused' in results ? undefined : results);
        },
        (err: unknown) => {
          this.#held.delete(pending);
          // Stopping (the pool was destroyed under it): nothing is recorded, and the timers are
          // delivered again after the restart, as any delivery cut short by a stop is.
          if (this.#stopped) return;
          this.#logger.error({ err, timers: pending.count }, 'a delivery task failed; its timers are retried without counting an attempt');
          return this.#recorder.recordTask(pending, undefined);
        },
      )
      .catch((err: unknown) => this.#logger.error({ err, timers: pending.count }, 'delivery outcomes were not recorded; the timers will be delivered again'))
      .finally(() => {
        this.#tasks.delete(done);
        this.#flow.taskDone(pending.queues, pending.count, task.sink === undefined, taskBytes);
        if (task.sink !== undefined) pending.release(this.#buffers);
        this.#scheduler.wake();
      });
    this.#tasks.add(done);
  }
}
