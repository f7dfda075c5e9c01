// The queue registry, on the main thread: every queue that was configured or has held a timer,
// by name and by index (a timer's queue is a Uint16 index into the names). setQueue(),
// deleteQueue() and setQueuePaused() log a QUEUE record and apply it once durable; replay and a
// checkpoint's restore apply theirs the same way (applyQueueChange). A deleted queue keeps its
// index (a retained finished timer may still name it) but loses its config and its pause and
// leaves the list until a timer names it again. A pause is kept apart from the config: a PUT
// does not resume a queue.
import { defaultQueue } from './batch/timer-batch.ts';
import { validateQueueName } from './batch/validate.ts';
import { errorCodes, FermataError } from './errors.ts';
import { defaultQueueConfig, encodeQueueDeleted, encodeQueuePaused, encodeQueueRecord, parseQueueConfig, type QueueChange, type QueueConfig, storedConfig } from './queues.ts';
import { recordType } from './records.ts';
import type { EngineState } from './state.ts';
import { timerState } from './store/resident-store.ts';

/** Validates and durably sets a queue's config (a whole replacement: absent fields take defaults). */
export async function setQueue(s: EngineState, name: string, input: unknown): Promise<QueueConfig> {
  validateQueueName(name);
  const config = parseQueueConfig(input);
  const refusal = config.sink === null ? undefined : s.checkTarget?.(config.sink);
  if (refusal !== undefined) throw new FermataError(errorCodes.targetRefused, `sink: ${refusal}`, { field: 'sink' });
  await s.log.append(recordType.queue, encodeQueueRecord(name, config));
  applyQueueChange(s, { kind: 'config', name, config });
  return config;
}

/**
 * A QUEUE record's change, durable already (set, deleted, paused or resumed; live, replayed or
 * restored): a config replaces the one before; a delete drops the config and the pause; a pause
 * of a deleted queue (logged while its delete was) changes nothing.
 */
export function applyQueueChange(s: EngineState, change: QueueChange): void {
  const { name } = change;
  const index = s.queueIndex(name);
  if (change.kind === 'config') {
    s.queueConfigs.set(name, change.config);
    s.queueLimits.apply(index, change.config);
    s.deletedQueues.delete(name);
  } else if (change.kind === 'deleted') {
    s.queueConfigs.delete(name);
    s.queueLimits.apply(index, undefined);
    s.deletedQueues.add(name);
    s.pausedQueues.delete(index);
  } else if (!s.deletedQueues.has(name)) {
    if (change.paused) s.pausedQueues.add(index);
    else s.pausedQueues.delete(index);
  }
}

/** A timer named the queue: a deleted queue is listed again (with the defaults). */
export function queueNamed(s: EngineState, name: string): void {
  if (s.deletedQueues.size > 0) s.deletedQueues.delete(name);
}

export function queueConfig(s: EngineState, name: string): QueueConfig {
  return s.queueConfigs.get(name) ?? defaultQueueConfig;
}

/** Whether GET and DELETE know the queue: the default one, or one configured or named by a timer and not deleted since. */
function isKnown(s: EngineState, name: string): boolean {
  return name === defaultQueue || (s.queueIndexOf.has(name) && !s.deletedQueues.has(name));
}

/** A known queue's config (undefined: no such queue). */
export function findQueue(s: EngineState, name: string): QueueConfig | undefined {
  return isKnown(s, name) ? queueConfig(s, name) : undefined;
}

/** A queue as GET shows it: its config and whether it is paused. */
export interface QueueView {
  readonly name: string;
  readonly config: QueueConfig;
  readonly paused: boolean;
}

function viewOf(s: EngineState, name: string): QueueView {
  const index = s.queueIndexOf.get(name);
  return { name, config: queueConfig(s, name), paused: index !== undefined && s.pausedQueues.has(index) };
}

/** A known queue's view (undefined: no such queue). */
export function findQueueView(s: EngineState, name: string): QueueView | undefined {
  return isKnown(s, name) ? viewOf(s, name) : undefined;
}

/** Every queue that was configured or has held a timer (and was not deleted since), with its config and pause, by name. */
export function listQueues(s: EngineState): QueueView[] {
  return s.queueNames
    .filter((name) => !s.deletedQueues.has(name))
    .sort()
    .map((name) => viewOf(s, name));
}

/**
 * Pauses (true) or resumes (false) a known queue durably; undefined: no such queue (or it was
 * deleted while the change was logged). A change to the state the queue is in already, or will
 * be in once the changes being logged are durable, logs nothing and answers once they are: so
 * the log holds the changes in the order they were asked for. A resume wakes the scheduler:
 * the held timers go out within the queue's room and rate as any due timers do (hand-out counts
 * them as released after a hold).
 */
export async function setQueuePaused(s: EngineState, name: string, paused: boolean): Promise<QueueView | undefined> {
  const known = findQueueView(s, name);
  if (known === undefined) return undefined;
  const inFlight = s.pauseChangesInFlight.get(name);
  if ((inFlight?.paused ?? known.paused) === paused) {
    // The same change is being logged: answer once it is applied, or fail as it did.
    const failure = inFlight === undefined ? undefined : await inFlight.settled;
    if (failure !== undefined) throw failure;
    // As that change left it (a later one may be applied by now, and answers for itself).
    const view = findQueueView(s, name);
    return view === undefined ? undefined : { ...view, paused };
  }
  const { promise: settled, resolve: settle } = Promise.withResolvers<unknown>();
  const change = { paused, settled };
  s.pauseChangesInFlight.set(name, change);
  try {
    await s.log.append(recordType.queue, encodeQueuePaused(name, paused));
    applyQueueChange(s, { kind: 'paused', name, paused });
    settle(undefined);
  } catch (err) {
    settle(err);
    throw err;
  } finally {
    if (s.pauseChangesInFlight.get(name) === change) s.pauseChangesInFlight.delete(name);
  }
  const view = findQueueView(s, name);
  if (!paused && view !== undefined) {
    const now = s.clock.now();
    s.queueResumedAtMs[s.queueIndex(name)] = now;
    s.resumedAtMsMax = Math.max(s.resumedAtMsMax, now);
    s.onDueChanged();
  }
  return view;
}

/**
 * The queue changes a checkpoint's manifest keeps, in the QUEUE record's JSON form (read back
 * the way replay reads them): every config in force, then a pause for every paused queue.
 */
export function queueRecordsInForce(s: EngineState): Array<{ name: string; config?: Partial<QueueConfig>; paused?: true }> {
  const configs = [...s.queueConfigs].map(([name, config]) => ({ name, config: storedConfig(config) }));
  const pauses = [...s.pausedQueues].map((index) => ({ name: s.queueNames[index] as string, paused: true as const }));
  return [...configs, ...pauses];
}

/**
 * Deletes a queue durably (false: no such queue): its config is gone, now and after a restart.
 * Refused while timers wait in it (QUEUE_NOT_EMPTY, counting them, in memory and on disk) and
 * for the default queue (QUEUE_PROTECTED). A timer added while the delete is being logged is
 * delivered under the defaults.
 */
export async function deleteQueue(s: EngineState, name: string): Promise<boolean> {
  if (name === defaultQueue) throw new FermataError(errorCodes.queueProtected, `the ${defaultQueue} queue cannot be deleted (PUT sets its config)`, { queue: name });
  if (!isKnown(s, name)) return false;
  const index = s.queueIndexOf.get(name);
  // Its spilled timers from the counts kept (spill/spilled-queue-counts.ts), no run read.
  const pending = waitingResident(s, name) + (index === undefined ? 0 : s.spill.queueCounts.of(index));
  if (pending > 0) {
    throw new FermataError(errorCodes.queueNotEmpty, `queue ${name} has ${pending} timer(s) waiting: cancel them or let them finish first`, { queue: name, pending });
  }
  await s.log.append(recordType.queue, encodeQueueDeleted(name));
  applyQueueChange(s, { kind: 'deleted', name });
  return true;
}

/** Resident timers of the queue that are not finished: one pass over the store's columns (a delete is rare). */
function waitingResident(s: EngineState, name: string): number {
  const index = s.queueIndexOf.get(name);
  if (index === undefined) return 0;
  const { state, queueIndex, capacity } = s.store;
  let count = 0;
  for (let slot = 0; slot < capacity; slot++) {
    const code = state[slot] as number;
    if (queueIndex[slot] === index && (code === timerState.pending || code === timerState.delivering || code === timerState.retrying)) count++;
  }
  return count;
}
