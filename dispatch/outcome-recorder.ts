// The outcome recorder: turns what a delivery worker answered for a task into outcomes, makes
// them durable as one OUTCOME record (engine.settle, group-committed with everything else), and
// counts them in the delivery stats. Main thread. A single delivery's outcome was decided by its
// worker (retry-policy.ts) and comes back in columns; an "arrow" task's one answer is decided
// here, row by row, under each row's queue policy in force now; a task that failed as a whole
// (a worker error) is retried without counting the attempt. Pulled timers' outcomes (decided by
// pull-queues.ts) are made durable and counted here too. A failed attempt's words (a worker's
// description of the error, or "HTTP 503" from the status) and time go into the record, each
// text once a record; once durable, failures are counted by kind and each dead timer is logged
// once (dead-letter-log.ts).
//
//   worker answer ─► outcomes (columns, withdrawn timers left out) ─► engine.settle ─► counts, dead lines
//        └─ latency and first attempts' lateness ─► histograms, a run of equal values at a time
//
// Nothing here frees room: the dispatcher does once the recording settles, whatever its end.
import type { Clock, Engine } from '../engine/engine.ts';
import { encodeTimerId } from '../engine/ids.ts';
import type { QueueConfig } from '../engine/queues.ts';
import { boundErrorText, deadReason, emptyOutcomes, type Outcomes, outcomeKind } from '../engine/records.ts';
import type { DeadLetterLog } from './dead-letter-log.ts';
import type { DeliveryStats } from './delivery-stats.ts';
import { failureKind, statusFailureText } from './failure-description.ts';
import { type BatchAnswer, claimState, type DeliveryResults } from './delivery-task.ts';
import { HistogramRuns } from './histogram-runs.ts';
import type { PendingTask } from './pending-task.ts';
import { decideOutcome, delivered, isSuccess } from './retry-policy.ts';

const deadReasonNames: Readonly<Record<number, string>> = {
  [deadReason.attemptsExhausted]: 'attempts_exhausted',
  [deadReason.gone]: 'gone',
  [deadReason.targetRefused]: 'target_refused',
};

/** A target's origin: its path and query may hold a secret (a token in the URL), so a log line names only this. */
function originOf(target: string): string {
  return URL.canParse(target) ? new URL(target).origin : 'unknown';
}

/** The bodies a worker kept for callbacks (by task row), by outcome; undefined when it kept none. */
function responsesByOutcome(byRow: ReadonlyArray<Uint8Array | undefined> | undefined, taskRow: Uint32Array, count: number): Array<Uint8Array | undefined> | undefined {
  if (byRow === undefined) return undefined;
  const out: Array<Uint8Array | undefined> = [];
  for (let i = 0; i < count; i++) out.push(byRow[taskRow[i] as number]);
  return out;
}

export class OutcomeRecorder {
  readonly #engine: Engine;
  readonly #clock: Clock;
  readonly #stats: DeliveryStats;
  readonly #deadLog: DeadLetterLog;

  constructor(engine: Engine, clock: Clock, stats: DeliveryStats, deadLog: DeadLetterLog) {
    this.#engine = engine;
    this.#clock = clock;
    this.#stats = stats;
    this.#deadLog = deadLog;
  }

  /**
   * Makes one task's outcomes durable: from the worker's columns, or from an Arrow batch's one
   * answer under each row's retry policy (the queue's in force now); results undefined: the task
   * failed as a whole.
   */
  async recordTask(pending: PendingTask, results: DeliveryResults | BatchAnswer | undefined): Promise<void> {
    const count = pending.count;
    const outcomes = emptyOutcomes(count);
    const nowMs = this.#clock.now();
    const stats = this.#stats;
    const latencyRuns = new HistogramRuns();
    const latenessRuns = new HistogramRuns();
    const claims = pending.claims;
    const batch = results !== undefined && 'batch' in results ? results.batch : undefined;
    const columns = batch === undefined ? (results as DeliveryResults | undefined) : undefined;
    const batchStatus = batch !== undefined && typeof batch.result === 'number' ? batch.result : 0;
    const batchDelivered = batch !== undefined && isSuccess(batch.result);
    /** By queue index: the policy an Arrow batch's failed rows are decided under. */
    const policies: Array<QueueConfig | undefined> = [];
    /** Outcome o is the task's timer taskRow[o]: withdrawn timers (cancelled) have none. */
    const taskRow = new Uint32Array(count);
    /** How outcome o's attempt failed (failureKind; none when it did not, or was not an attempt). */
    const failedAs = new Uint8Array(count);
    /** The record's error texts by their words, made at the first failure. */
    let textIndex: Map<string, number> | undefined;
    const fail = (i: number, kind: number, text: string, attemptedAtMs: number): void => {
      textIndex ??= new Map();
      let index = textIndex.get(text);
      if (index === undefined) {
        index = outcomes.errorTexts.push(boundErrorText(text));
        textIndex.set(text, index);
      }
      failedAs[i] = kind;
      outcomes.errors[i] = index;
      outcomes.attemptedAtMs[i] = attemptedAtMs;
    };
    for (let row = 0; row < count; row++) {
      if (claims !== undefined && claims[row] === claimState.withdrawn) continue;
      const i = outcomes.count++;
      taskRow[i] = row;
      const attempt = pending.attempts[row] as number;
      const queue = pending.queues[row] as number;
      outcomes.seqs[i] = pending.seqs[row] as number;
      outcomes.rows[i] = pending.rows[row] as number;
      outcomes.attempts[i] = attempt;
      if (results === undefined || claims?.[row] === claimState.refused) {
        // The task failed as a whole (a worker error): some of its requests may have been sent
        // and answered. Retry them after the queue's minimum backoff, without counting the
        // attempt, so none is dead-lettered for it. A timer refused for its partition's lease
        // deadline (cluster mode) was not sent: the same, and on a fenced log this outcome is
        // not appended, so the next owner delivers it.
        const config = this.#engine.queueConfig(this.#engine.queueNameAt(queue));
        outcomes.attempts[i] = attempt - 1;
        outcomes.kinds[i] = outcomeKind.retry;
        outcomes.retryAtMs[i] = nowMs + config.min_backoff_ms;
        continue;
      }
      let startedAtMs: number;
      let durationMs: number;
      if (batch !== undefined) {
        // One answer for every row; a 2xx needs no policy, anything else is each row's to decide.
        const decision = batchDelivered
          ? delivered
          : decideOutcome(attempt, batch.result, batch.retryAfter, (policies[queue] ??= this.#engine.queueConfig(this.#engine.queueNameAt(queue))), nowMs, Math.random(), Date.now());
        outcomes.kinds[i] = decision.kind;
        outcomes.reasons[i] = decision.reason;
        outcomes.statuses[i] = batchStatus;
        outcomes.retryAtMs[i] = 'retryAtMs' in decision ? decision.retryAtMs : 0;
        startedAtMs = batch.startedAtMs;
        durationMs = batch.durationMs;
        if (!batchDelivered) {
          const failure = batch.failure;
          fail(i, failure?.kind ?? failureKind.status, failure?.text ?? statusFailureText(batchStatus), startedAtMs);
        }
      } else {
        const answer = columns as DeliveryResults;
        outcomes.kinds[i] = answer.kinds[row] as number;
        outcomes.reasons[i] = answer.reasons[row] as number;
        outcomes.statuses[i] = answer.statuses[row] as number;
        outcomes.retryAtMs[i] = answer.retryAtMs[row] as number;
        startedAtMs = answer.startedAtMs[row] as number;
        durationMs = answer.durationMs[row] as number;
        const failedKind = answer.failureKinds[row] as number;
        if (failedKind !== failureKind.none) {
          const error = answer.errors[row] as number;
          const status = answer.statuses[row] as number;
          const text = error > 0 ? (answer.errorTexts[error - 1] as string) : status > 0 ? statusFailureText(status) : 'no answer';
          fail(i, failedKind, text, startedAtMs);
        }
      }
      const queueStats = stats.of(queue);
      latencyRuns.add(Math.max(0, durationMs), stats.latency, queueStats.latency);
      if (attempt !== 1) continue;
      // From when it fell due: a PATCHed timer's id keeps the fire time it was added with.
      const latenessMs = startedAtMs - (pending.dueAtMs[row] as number);
      // The histograms hold no negative values: an early delivery (a bug) is counted on its own, never hidden as 0.
      if (latenessMs < 0) stats.countEarlyDelivery();
      latenessRuns.add(Math.max(0, latenessMs), stats.lateness, queueStats.lateness);
    }
    latencyRuns.flush();
    latenessRuns.flush();
    if (outcomes.count === 0) return;
    await this.#engine.settle(outcomes, responsesByOutcome(columns?.responses, taskRow, outcomes.count));
    for (let i = 0; i < outcomes.count; i++) {
      const queueStats = stats.of(pending.queues[taskRow[i] as number] as number);
      const kind = outcomes.kinds[i];
      if (failedAs[i] !== failureKind.none) stats.countFailure(failedAs[i] as number);
      if (kind === outcomeKind.delivered) queueStats.delivered++;
      else if (kind === outcomeKind.retry) queueStats.retried++;
      else {
        queueStats.dead++;
        this.#logDead(outcomes, i, pending.fireAtMs[taskRow[i] as number] as number);
      }
    }
  }

  /** Outcome i, a dead timer's, as one warn line (when the dead-letter log has room this second). */
  #logDead(outcomes: Outcomes, i: number, fireAtMs: number): void {
    if (!this.#deadLog.hasRoom()) return;
    const id = encodeTimerId(outcomes.seqs[i] as number, outcomes.rows[i] as number, fireAtMs);
    const view = this.#engine.get(id);
    const error = outcomes.errors[i] as number;
    this.#deadLog.dead({
      id,
      origin: view === undefined ? 'unknown' : originOf(view.target),
      attempts: outcomes.attempts[i] as number,
      reason: deadReasonNames[outcomes.reasons[i] as number] ?? 'unknown',
      lastError: error > 0 ? (outcomes.errorTexts[error - 1] as string) : (view?.lastError ?? null),
    });
  }

  /**
   * Makes pulled timers' outcomes durable (all of one queue) and, when they were an attempt,
   * counts them and logs each death as a push death is; `fireAtMs[i]` is outcome i's fire time.
   */
  async recordPull(outcomes: Outcomes, queueIndex: number, attempted: boolean, fireAtMs: Float64Array): Promise<void> {
    await this.#engine.settle(outcomes);
    if (!attempted) return;
    const stats = this.#stats.of(queueIndex);
    for (let i = 0; i < outcomes.count; i++) {
      const kind = outcomes.kinds[i];
      if (kind === outcomeKind.delivered) stats.delivered++;
      else if (kind === outcomeKind.retry) stats.retried++;
      else {
        stats.dead++;
        this.#logDead(outcomes, i, fireAtMs[i] as number);
      }
    }
  }
}
