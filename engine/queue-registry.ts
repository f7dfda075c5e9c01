// The queue registry, on the main thread: every queue that was configured or has held a timer,
// by name and by index (a timer's queue is a Uint16 index into the names). setQueue() and
// deleteQueue() log a QUEUE record and apply it once durable; replay and a checkpoint's
// restore apply theirs the same way (applyQueueConfig). A deleted queue keeps its index (a
// retained finished timer may still name it) but loses its config and leaves the list until
// a timer names it again.
import { defaultQueue } from './batch/timer-batch.ts';
import { validateQueueName } from './batch/validate.ts';
import { errorCodes, FermataError } from './errors.ts';
import { defaultQueueConfig, encodeQueueDeleted, encodeQueueRecord, parseQueueConfig, type QueueConfig } from './queues.ts';
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
  applyQueueConfig(s, name, config);
  return config;
}

/**
 * A queue's config, durable already (set, deleted, replayed or restored): it replaces the one
 * before; null deletes the queue.
 */
export function applyQueueConfig(s: EngineState, name: string, config: QueueConfig | null): void {
  s.queueIndex(name);
  if (config === null) {
    s.queueConfigs.delete(name);
    s.deletedQueues.add(name);
    return;
  }
  s.queueConfigs.set(name, config);
  s.deletedQueues.delete(name);
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

/** Every queue that was configured or has held a timer (and was not deleted since), with its config, by name. */
export function listQueues(s: EngineState): Array<{ name: string; config: QueueConfig }> {
  return s.queueNames
    .filter((name) => !s.deletedQueues.has(name))
    .sort()
    .map((name) => ({ name, config: queueConfig(s, name) }));
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
  const resident = waitingResident(s, name);
  const pending = resident + (s.spilledPending() > 0 ? await s.spill.pendingIn(name) : 0);
  if (pending > 0) {
    throw new FermataError(errorCodes.queueNotEmpty, `queue ${name} has ${pending} timer(s) waiting: cancel them or let them finish first`, { queue: name, pending });
  }
  await s.log.append(recordType.queue, encodeQueueDeleted(name));
  applyQueueConfig(s, name, null);
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
