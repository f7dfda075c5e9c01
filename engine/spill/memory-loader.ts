// The memory-aware loader: keeps the resident window (timers in memory) inside the memory
// budget and ahead of the clock. Main thread; one step at a time, on an interval (tests call
// step() with an injected clock).
//
//   now ──── lead ────┤ W (watermark) ─────────────────────────────► due time
//   resident: due before W          spilled: pending, due at or after W, on disk
//
// Each step, in order:
// 1. promote: W must stay more than promoteLeadMs ahead of now, so a bucket is in memory well
//    before its first timer is due (loading never makes a timer late);
// 2. spill: past the budget, or past demoteAboveSlotShare of the store's slot limit (a count:
//    adds past it are refused), a checkpoint lowers W to the furthest bucket start whose
//    earlier pending timers fit demoteToShare of the budget, and of the limit (never closer
//    than the lead);
// 3. far future: once adds and deliveries have been quiet for a few steps, timers due past
//    the far horizon (the bucket holding now + farHorizonMs) spill whatever the budget, so
//    that a service with memory to spare does not spend it on timers due in weeks; never
//    during a burst of adds or deliveries, whose main thread a checkpoint would take, nor
//    with a delivery due within farSpillDueClearMs, which it would make late;
// 4. checkpoint: once the log has grown past checkpointWalBytes and past the resident timers'
//    bytes (what a checkpoint rewrites), a checkpoint that keeps W, so the log's covered
//    segments go and the tail admitted past W leaves memory.
import { monotonicClock } from '../clock.ts';
import type { Clock, Engine } from '../engine.ts';
import { memoryLimits, type MemoryLimits } from '../limits.ts';
import type { MemoryBudget } from '../memory-budget.ts';

export interface LoaderLogger {
  info(details: object, message: string): void;
  warn(details: object, message: string): void;
}

export interface MemoryLoaderOptions {
  /** The budget, or how to read it: read again at each step, so a cgroup limit lowered at run time spills at once. */
  readonly budget: MemoryBudget | (() => MemoryBudget);
  readonly clock: Clock;
  /** Times the idle trims (memory, not timers): real time by default, whatever `clock` does (a manual clock may stand still for hours). */
  readonly trimClock?: Clock;
  readonly limits?: Partial<MemoryLimits>;
  readonly logger?: LoaderLogger;
  /**
   * Collects the garbage and hands freed memory back to the kernel, asked for after a large spill
   * (collectAfterSpilledRows): `thorough` after a far-future spill, when no delivery is due
   * within farSpillDueClearMs (a longer pause is harmless then); returns figures for the log.
   * None when absent.
   */
  readonly returnMemory?: ((thorough: boolean) => Readonly<Record<string, number>> | void) | undefined;
  /**
   * Hands memory the allocator holds free back to the kernel (no collection), asked for on
   * quiet steps at most every idleTrimIntervalMs. None when absent.
   */
  readonly trimMemory?: (() => void) | undefined;
}

/** What one step did. */
export interface LoaderStep {
  readonly promotedTo?: number;
  readonly promoted?: number;
  readonly spilledTo?: number;
  readonly spilled?: number;
  /** The spill was of the far future, on a quiet step, not for the budget. */
  readonly farFuture?: boolean;
  readonly checkpointed?: boolean;
  /** Memory held free was handed back to the kernel (trimMemory). */
  readonly trimmed?: boolean;
}

export class MemoryLoader {
  readonly #engine: Engine;
  readonly #readBudget: () => MemoryBudget;
  #budget: MemoryBudget;
  readonly #clock: Clock;
  readonly #trimClock: Clock;
  readonly #limits: MemoryLimits;
  readonly #logger: LoaderLogger | undefined;
  readonly #returnMemory: ((thorough: boolean) => Readonly<Record<string, number>> | void) | undefined;
  readonly #trimMemory: (() => void) | undefined;
  /** When memory was last handed back (trimClock ms): a trim on quiet steps waits idleTrimIntervalMs past it. */
  #trimmedAtMs = -Infinity;
  #interval: NodeJS.Timeout | undefined;
  #running: Promise<unknown> | undefined;
  /** Timers added and settled (engine.rowsInserted + outcomesApplied) at the last step, and how many steps in a row saw few. */
  #workAtStep: number;
  #quietSteps = 0;
  /** engine.rowsInserted when the far future was last weighed and found not worth a spill: nothing new, nothing to weigh. */
  #rowsAtFarLook = -1;

  constructor(engine: Engine, options: MemoryLoaderOptions) {
    this.#engine = engine;
    const budget = options.budget;
    this.#readBudget = typeof budget === 'function' ? budget : () => budget;
    this.#budget = this.#readBudget();
    this.#clock = options.clock;
    this.#trimClock = options.trimClock ?? monotonicClock;
    this.#limits = { ...memoryLimits, ...options.limits };
    this.#logger = options.logger;
    this.#returnMemory = options.returnMemory;
    this.#trimMemory = options.trimMemory;
    const stats = engine.stats();
    this.#workAtStep = stats.rowsInserted + stats.outcomesApplied;
    engine.setMemoryBudget(this.#budget.bytes);
  }

  get budgetBytes(): number {
    return this.#budget.bytes;
  }

  start(): void {
    if (this.#interval !== undefined) return;
    this.#interval = setInterval(() => {
      if (this.#running !== undefined) return;
      this.#running = this.step()
        .catch((err: unknown) => this.#logger?.warn({ err }, 'memory loader step failed; trying again on the next'))
        .finally(() => {
          this.#running = undefined;
        });
    }, this.#limits.loaderIntervalMs);
    this.#interval.unref();
  }

  async stop(): Promise<void> {
    clearInterval(this.#interval);
    this.#interval = undefined;
    await this.#running;
  }

  /** One look at the clock, memory and the log, and what it calls for. */
  async step(): Promise<LoaderStep> {
    const engine = this.#engine;
    this.#budget = this.#readBudget();
    engine.setMemoryBudget(this.#budget.bytes);
    const width = engine.bucketWidthMs;
    const now = this.#clock.now();
    const step: { -readonly [K in keyof LoaderStep]: LoaderStep[K] } = {};
    const stats = engine.stats();
    const work = stats.rowsInserted + stats.outcomesApplied;
    this.#quietSteps = work - this.#workAtStep <= this.#limits.farSpillQuietRowsMax ? this.#quietSteps + 1 : 0;
    this.#workAtStep = work;
    // 1. Promote what falls due within the lead: the bucket holding now + lead, and all before it.
    const neededMs = Math.floor((now + this.#limits.promoteLeadMs) / width) * width + width;
    if (stats.spill.watermarkMs < neededMs) {
      step.promoted = await engine.promote(neededMs);
      step.promotedTo = neededMs;
    }
    // 2. Spill when over budget, or when the resident timers near the store's slot limit.
    const budget = this.#budget.bytes;
    const targetBytes = this.#spillTargetBytes(budget);
    const spill = targetBytes === undefined ? undefined : await this.#watermarkFitting(targetBytes, neededMs);
    // Over budget with nothing that could spill (the near future, finished timers): a
    // checkpoint would only rewrite memory to disk, so wait for the window to drain.
    if (spill !== undefined && spill.spillableBytes > 0) return { ...step, ...(await this.#spill(spill.watermarkMs, false)) };
    // 3. The far future goes to disk once the service is quiet.
    const far = await this.#farSpill(now, neededMs);
    if (far !== undefined) return { ...step, ...(await this.#spill(far.watermarkMs, true)) };
    // 4. Keep the log bounded, without rewriting the resident timers more often than the log grows by as much.
    if (engine.log.bytesToReplay > Math.max(this.#limits.checkpointWalBytes, engine.residentBytes() * this.#limits.checkpointWalPerResidentByte)) {
      await engine.checkpoint();
      step.checkpointed = true;
    }
    // 5. While quiet, what was freed since goes back to the kernel now and then.
    if (this.#trimMemory !== undefined && this.#quietSteps >= this.#limits.farSpillQuietSteps && this.#trimClock.now() - this.#trimmedAtMs >= this.#limits.idleTrimIntervalMs) {
      this.#trimMemory();
      this.#trimmedAtMs = this.#trimClock.now();
      step.trimmed = true;
    }
    return step;
  }

  /**
   * A checkpoint at `watermarkMs`, logged; after a large one, the garbage it left (the timers'
   * copies, the checkpoint's buffers) is collected at once and the memory freed handed back.
   */
  async #spill(watermarkMs: number, farFuture: boolean): Promise<LoaderStep> {
    const engine = this.#engine;
    const report = await engine.checkpoint(watermarkMs);
    const stats = engine.stats();
    const details = { watermarkMs: report.watermarkMs, spilled: report.spilledRows, residentBytes: engine.residentBytes(), budget: this.#budget.bytes, resident: stats.resident, residentMax: stats.residentMax, residentShrunkTo: report.residentShrunkTo };
    this.#logger?.info(details, farFuture ? 'far-future timers spilled to disk' : 'resident window spilled to disk');
    if (this.#returnMemory !== undefined && report.spilledRows >= this.#limits.collectAfterSpilledRows) {
      const figures = this.#returnMemory(farFuture) ?? {};
      this.#trimmedAtMs = this.#trimClock.now();
      this.#logger?.info({ spilled: report.spilledRows, ...roundedFigures(figures) }, 'collected the garbage of a spill and returned freed memory');
    }
    return { spilledTo: report.watermarkMs, spilled: report.spilledRows, checkpointed: true, ...(farFuture ? { farFuture } : {}) };
  }

  /**
   * The watermark of a far-future spill, when one is due: adds and deliveries quiet for
   * farSpillQuietSteps, no delivery due within farSpillDueClearMs, timers put in memory since
   * the last look that found none worth it, and enough bytes due past the far horizon (and past
   * the watermark, where admits beyond it wait for a checkpoint) to be worth rewriting the
   * timers that stay.
   */
  async #farSpill(now: number, floorMs: number): Promise<{ watermarkMs: number } | undefined> {
    const limits = this.#limits;
    const engine = this.#engine;
    if (!Number.isFinite(limits.farHorizonMs) || this.#quietSteps < limits.farSpillQuietSteps) return undefined;
    const nextDueMs = engine.nextDeliveryDueMs();
    if (nextDueMs !== undefined && nextDueMs < now + limits.farSpillDueClearMs) return undefined;
    const rows = engine.stats().rowsInserted;
    if (rows === this.#rowsAtFarLook) return undefined;
    const width = engine.bucketWidthMs;
    const farMs = Math.max(floorMs, Math.floor((now + limits.farHorizonMs) / width) * width + width);
    const watermarkMs = Math.min(farMs, engine.stats().spill.watermarkMs);
    const byBucket = await engine.spillableBytesByBucket();
    let farBytes = 0;
    for (const [startMs, bytes] of byBucket) if (startMs >= watermarkMs) farBytes += bytes;
    const keptBytes = engine.residentBytes() - farBytes;
    if (farBytes < Math.max(limits.farSpillBytesMin, keptBytes * limits.farSpillPerKeptByte)) {
      this.#rowsAtFarLook = rows;
      return undefined;
    }
    // A spill that fails is tried again at the next quiet step.
    return { watermarkMs };
  }

  /**
   * What the resident timers should be brought down to, in bytes, or undefined when no spill is
   * due: over the budget, demoteToShare of it; near the slot limit, the bytes of demoteToShare
   * of the limit's timers (at the resident timers' mean size), if that is less.
   */
  #spillTargetBytes(budget: number): number | undefined {
    const engine = this.#engine;
    const residentBytes = engine.residentBytes();
    const overBudget = residentBytes > budget * this.#limits.demoteAboveShare;
    const { resident, residentMax } = engine.stats();
    const nearSlotLimit = resident > residentMax * this.#limits.demoteAboveSlotShare;
    if (!overBudget && !nearSlotLimit) return undefined;
    const budgetTarget = budget * this.#limits.demoteToShare;
    if (!nearSlotLimit) return budgetTarget;
    const slotTarget = (residentBytes / resident) * residentMax * this.#limits.demoteToShare;
    return Math.min(budgetTarget, slotTarget);
  }

  /**
   * The furthest bucket start (at least `floorMs`) such that the spillable timers due before it,
   * with everything that cannot spill, take no more than `targetBytes`; and the bytes of the
   * resident timers due at or past it (what a checkpoint there would spill).
   */
  async #watermarkFitting(targetBytes: number, floorMs: number): Promise<{ watermarkMs: number; spillableBytes: number }> {
    const engine = this.#engine;
    const byBucket = await engine.spillableBytesByBucket();
    let spillable = 0;
    for (const bytes of byBucket.values()) spillable += bytes;
    let kept = engine.residentBytes() - spillable;
    const starts = [...byBucket.keys()].sort((a, b) => a - b);
    let watermarkMs = floorMs;
    for (const startMs of starts) {
      if (startMs < floorMs) {
        kept += byBucket.get(startMs) as number;
        continue;
      }
      const bytes = byBucket.get(startMs) as number;
      if (kept + bytes > targetBytes) break;
      kept += bytes;
      watermarkMs = startMs + engine.bucketWidthMs;
    }
    let spillableBytes = 0;
    for (const startMs of starts) if (startMs >= watermarkMs) spillableBytes += byBucket.get(startMs) as number;
    return { watermarkMs, spillableBytes };
  }
}

function roundedFigures(figures: Readonly<Record<string, number>>): Record<string, number> {
  return Object.fromEntries(Object.entries(figures).map(([name, value]) => [name, Math.round(value)]));
}
