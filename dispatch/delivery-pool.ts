// The delivery workers: a piscina pool of worker threads running delivery-worker.ts, each given
// the same config when it starts (the target guard's allow-list, the signing secrets, the origin
// clients' limits). Main thread. A task goes out with its buffers transferred, never copied; a
// worker posts on its parent port once its code has loaded (ready() waits for all of them), and
// hands an "arrow" task's buffers back once the task's body is encoded, for later tasks.
// warmUp() asks every worker at once, on a BroadcastChannel of this pool's, to run its delivery
// path against a loopback server this thread runs meanwhile (warm-up-target.ts) and open
// sessions to the origins named (dispatch/delivery-warm-up.ts), and waits for each to say it is
// done. reconfigure() sends a reload's allow-list and signing secrets the same way,
// on a channel of its own, and waits for every worker to have them; a worker started later in
// place of one that died is sent the latest again when it has loaded.
import { randomUUID } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { BroadcastChannel } from 'node:worker_threads';
import { Piscina } from 'piscina';
import type { DispatchLimits } from '../engine/limits.ts';
import { startWarmUpTarget, type WarmUpTarget } from './warm-up-target.ts';
import { type BatchAnswer, type DeliveryResults, type DeliveryTask, isSpareBuffersMessage, type RefusedTask, isWarmedUpMessage, type WarmUpRequest, workerLoadedMessage } from './delivery-task.ts';
import type { DeliveryWorkerData } from './delivery-worker.ts';
import { type DeliveryAccess, isReconfiguredMessage, type ReconfigureRequest, signersOf } from './signing-config.ts';
import { TargetGuard } from './target-guard.ts';
import type { TaskBuffers } from './task-builder.ts';

// The worker's module beside this one: the TypeScript source, or in the bundle that `npm ci`
// builds (bin/bundle.js) the worker's entry, which the bundle puts beside its chunks.
const deliveryWorkerUrl = new URL(import.meta.url.endsWith('.ts') ? './delivery-worker.ts' : './delivery-worker.mjs', import.meta.url).href;

export interface DeliveryPoolOptions {
  readonly threads: number;
  readonly allow: readonly string[];
  readonly allowLoopback: boolean;
  readonly signingSecrets: readonly string[];
  /** Queues with their own signing secrets (dispatch/signing-config.ts). */
  readonly queueSigningSecrets?: Readonly<Record<string, readonly string[]>> | undefined;
  readonly ca: string | undefined;
  /** A manual clock's shared position (engine/clock.ts), for the workers' retry times; undefined: the real clock. */
  readonly clock?: SharedArrayBuffer | undefined;
  readonly limits: DispatchLimits;
  /** Keeps the buffers workers hand back (the dispatcher's BufferPool). */
  readonly spareBuffers: Pick<TaskBuffers, 'give'>;
  /** Cluster mode: the partitions' local lease deadlines (cluster/lease-deadline.ts), which the workers ask before each send. */
  readonly leaseDeadlines?: SharedArrayBuffer | undefined;
}

/** What a warm-up came to, over all workers. */
export interface WarmUpReport {
  /** Workers that said they are warm (all, unless warmUpAnswerWaitMs passed first). */
  readonly workers: number;
  readonly sessionsOpened: number;
  /** A line for each session that could not be opened, or warm-up that failed. */
  readonly failures: readonly string[];
}

export class DeliveryPool {
  readonly #pool: Piscina;
  readonly #warmUpChannel = `fermata.delivery-warm-up.${randomUUID()}`;
  readonly #reconfigureChannel = `fermata.delivery-reconfigure.${randomUUID()}`;
  /** Where reloads' settings go to the workers: open for the pool's life (unreferenced), closed by destroy(). */
  readonly #reconfigures: BroadcastChannel;
  /** The reconfiguration under way: its answers so far, and what settles it once every worker has answered. */
  #reconfiguring: { id: number; answers: number; failures: string[]; done: () => void } | undefined;
  #reconfigureIds = 0;
  /** Reconfigurations one after another. */
  #reconfigured: Promise<unknown> = Promise.resolve();
  /** The latest reload's settings, for workers started after it. */
  #reloaded: DeliveryAccess | undefined;
  readonly #limits: DispatchLimits;
  /** The warm-up under way: its answers so far, and what resolves it once every worker has answered. */
  #warming: { answers: number; sessionsOpened: number; failures: string[]; asked: boolean; done: () => void } | undefined;
  /** Warm-ups one after another: a second waits for the first. */
  #warmUps: Promise<unknown> = Promise.resolve();
  /** Workers that have loaded their code (they post workerLoadedMessage); #loaded resolves with the time the last one took. */
  #workersLoaded = 0;
  readonly #loaded = Promise.withResolvers<number>();
  readonly #createdAtMs = performance.now();

  constructor(options: DeliveryPoolOptions) {
    const { threads, allow, allowLoopback, signingSecrets, limits } = options;
    const access: DeliveryAccess = { allow, signingSecrets, queueSigningSecrets: options.queueSigningSecrets ?? {} };
    // Configuration errors surface here, at start-up, not in a worker thread later.
    new TargetGuard({ allow, allowLoopback });
    signersOf(access);
    const workerData: DeliveryWorkerData = {
      access,
      allowLoopback,
      reconfigureChannel: this.#reconfigureChannel,
      sessionIdleMsMax: limits.sessionIdleMsMax,
      connectTimeoutMs: limits.connectTimeoutMs,
      requestsPerOriginMax: limits.requestsPerOriginMax,
      socketsPerOriginMax: limits.socketsPerOriginMax,
      ...(options.ca === undefined ? {} : { ca: options.ca }),
      ...(options.clock === undefined ? {} : { clock: options.clock }),
      ...(options.leaseDeadlines === undefined ? {} : { leaseDeadlines: options.leaseDeadlines }),
      warmUpChannel: this.#warmUpChannel,
    };
    this.#limits = limits;
    this.#reconfigures = new BroadcastChannel(this.#reconfigureChannel);
    this.#reconfigures.unref();
    this.#pool = new Piscina({
      filename: deliveryWorkerUrl,
      minThreads: threads,
      maxThreads: threads,
      // Workers wait on their message port, not in Atomics.wait: an idle worker's event loop
      // keeps running, so its HTTP/2 sessions answer PINGs and stay warm.
      atomics: 'disabled',
      // A task is mostly waiting on the network: many run at once on one worker.
      concurrentTasksPerWorker: Math.ceil(limits.requestsInFlightMax / limits.timersPerTaskMax / threads) + 1,
      workerData,
      // Short scavenges: a worker's loop stalls for each, and timers due meanwhile go out late.
      resourceLimits: { maxYoungGenerationSizeMb: limits.workerYoungGenerationMb },
    });
    const spareBuffers = options.spareBuffers;
    this.#pool.on('message', (message: unknown) => {
      if (message === workerLoadedMessage) {
        if (++this.#workersLoaded === threads) this.#loaded.resolve(performance.now() - this.#createdAtMs);
        // A worker piscina started in place of one that died has the settings of the start: a reload's are sent again.
        else if (this.#workersLoaded > threads && this.#reloaded !== undefined) this.#broadcast(this.#reloaded);
      }
      else if (isSpareBuffersMessage(message)) for (const buffer of message.buffers) spareBuffers.give(buffer);
      else if (isWarmedUpMessage(message) && this.#warming !== undefined) {
        const warming = this.#warming;
        warming.sessionsOpened += message.sessionsOpened;
        warming.failures.push(...message.failures);
        if (++warming.answers === threads) warming.done();
      } else if (isReconfiguredMessage(message) && this.#reconfiguring?.id === message.id) {
        const reconfiguring = this.#reconfiguring;
        if (message.failure !== undefined) reconfiguring.failures.push(message.failure);
        if (++reconfiguring.answers === threads) reconfiguring.done();
      }
    });
  }

  get threads(): number {
    return this.#pool.threads.length;
  }

  /**
   * Resolves, with the milliseconds it took, once every worker has loaded its code. Tasks run
   * before then wait in the pool for it; a worker that fails to load rejects it.
   */
  ready(): Promise<number> {
    if (this.#workersLoaded >= this.#pool.threads.length) return this.#loaded.promise;
    const { promise, resolve, reject } = Promise.withResolvers<number>();
    // The wait keeps the process alive (piscina's workers do not), as a warm-up's does.
    const keepAlive = setInterval(() => undefined, 60_000);
    const onError = (err: unknown): void => {
      clearInterval(keepAlive);
      reject(err);
    };
    this.#pool.once('error', onError);
    void this.#loaded.promise.then((ms) => {
      clearInterval(keepAlive);
      this.#pool.off('error', onError);
      resolve(ms);
    });
    return promise;
  }

  /**
   * Once every worker has loaded, has each run its delivery path against the warm-up target
   * (the first time) and open an HTTP/2 session to each of `origins` (scheme://host:port),
   * waiting warmUpConnectWaitMs for them at most; resolves once all have said so, or after
   * warmUpAnswerWaitMs (a worker that never answers costs speed, not a start).
   */
  warmUp(origins: readonly string[]): Promise<WarmUpReport> {
    const next = this.#warmUps.then(() => this.#warmUpNow(origins));
    this.#warmUps = next.catch(() => undefined);
    return next;
  }

  async #warmUpNow(origins: readonly string[]): Promise<WarmUpReport> {
    const { promise, resolve } = Promise.withResolvers<void>();
    const warming = { answers: 0, sessionsOpened: 0, failures: [] as string[], asked: false, done: resolve };
    this.#warming = warming;
    // The timer keeps the process alive meanwhile (piscina's workers do not); destroy() ends the wait.
    const timer = setTimeout(resolve, this.#limits.warmUpAnswerWaitMs);
    const channel = new BroadcastChannel(this.#warmUpChannel);
    channel.unref();
    let target: WarmUpTarget | undefined;
    try {
      const loaded = await Promise.race([this.ready().then(() => true), promise.then(() => false)]);
      if (loaded) {
        target = await startWarmUpTarget();
        const request: WarmUpRequest = { exerciseTarget: target.url, origins, connectWaitMs: this.#limits.warmUpConnectWaitMs };
        channel.postMessage(request);
        warming.asked = true;
        await promise;
      }
    } finally {
      target?.close();
      clearTimeout(timer);
      channel.close();
      this.#warming = undefined;
    }
    return { workers: warming.answers, sessionsOpened: warming.sessionsOpened, failures: warming.failures };
  }

  /**
   * Puts new delivery settings (allow-list, signing secrets) in force in every worker; resolves
   * once all have them. Rejects when a worker refused them (it keeps its old ones) or did not
   * answer within warmUpAnswerWaitMs.
   */
  reconfigure(access: DeliveryAccess): Promise<void> {
    const next = this.#reconfigured.then(() => this.#reconfigureNow(access));
    this.#reconfigured = next.catch(() => undefined);
    return next;
  }

  async #reconfigureNow(access: DeliveryAccess): Promise<void> {
    await this.ready();
    const { promise, resolve } = Promise.withResolvers<void>();
    const reconfiguring = { id: ++this.#reconfigureIds, answers: 0, failures: [] as string[], done: resolve };
    this.#reconfiguring = reconfiguring;
    const timer = setTimeout(resolve, this.#limits.warmUpAnswerWaitMs);
    try {
      this.#broadcast(access, reconfiguring.id);
      await promise;
    } finally {
      clearTimeout(timer);
      this.#reconfiguring = undefined;
    }
    if (reconfiguring.failures.length > 0) throw new Error(`a delivery worker refused the settings: ${reconfiguring.failures[0]}`);
    this.#reloaded = access;
    if (reconfiguring.answers < this.#pool.threads.length) throw new Error(`${this.#pool.threads.length - reconfiguring.answers} delivery workers did not answer within ${this.#limits.warmUpAnswerWaitMs} ms`);
  }

  /** Sends new settings to every worker; their answers count toward the reconfiguration `id` names (none: nobody waits). */
  #broadcast(access: DeliveryAccess, id = 0): void {
    const request: ReconfigureRequest = { id, access };
    this.#reconfigures.postMessage(request);
  }

  /** Sends `task` to a worker, `transfer` (its buffers) moved with it; resolves with the worker's answer. */
  run(task: DeliveryTask, transfer: ArrayBuffer[]): Promise<DeliveryResults | BatchAnswer | RefusedTask> {
    // piscina takes an array (it refuses anything else); its typings infer postMessage's options object.
    const transferList = transfer as unknown as NonNullable<Parameters<Piscina['run']>[1]>['transferList'];
    return this.#pool.run(task, { transferList }) as Promise<DeliveryResults | BatchAnswer | RefusedTask>;
  }

  /**
   * Stops the workers; tasks still running reject. A warm-up that has not asked the workers yet
   * is over at once; one they are running is waited for (warmUpAnswerWaitMs at most): a worker
   * thread terminated while its warm-up's loopback HTTP/2 server and sessions are open aborts the
   * whole process (SIGABRT, seen on a SIGTERM soon after "listening"). Workers still loading
   * their code are waited for too (as long at most): one terminated inside a module load trips
   * an assertion in Node's module loader, which also aborts the process.
   */
  async destroy(): Promise<void> {
    const warming = this.#warming;
    if (warming !== undefined && !warming.asked) warming.done();
    await this.#warmUps;
    await this.#loadedOrGaveUp();
    this.#reconfigures.close();
    await this.#pool.destroy();
  }

  /** Resolves once every worker has loaded, one failed to, or warmUpAnswerWaitMs passed. */
  async #loadedOrGaveUp(): Promise<void> {
    const waiting = new AbortController();
    const gaveUp = sleep(this.#limits.warmUpAnswerWaitMs, undefined, { signal: waiting.signal }).catch(() => undefined);
    await Promise.race([this.ready().catch(() => undefined), gaveUp]);
    waiting.abort();
  }
}
