// The queue registry, on the main thread: every queue that was configured or has held a timer,
// by name and by index (a timer's queue is a Uint16 index into the names). setQueue() logs a
// QUEUE record and applies it once durable; replay and a checkpoint's restore apply theirs the
// same way (applyQueueConfig).
import { validateQueueName } from './batch/validate.ts';
import { errorCodes, FermataError } from './errors.ts';
import { defaultQueueConfig, encodeQueueRecord, parseQueueConfig, type QueueConfig } from './queues.ts';
import { recordType } from './records.ts';
import type { EngineState } from './state.ts';

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

/** A queue's config, durable already (set, replayed or restored): it replaces the one before. */
export function applyQueueConfig(s: EngineState, name: string, config: QueueConfig): void {
  s.queueConfigs.set(name, config);
  s.queueIndex(name);
}

export function queueConfig(s: EngineState, name: string): QueueConfig {
  return s.queueConfigs.get(name) ?? defaultQueueConfig;
}

/** Every queue that was configured or has held a timer, with its config, by name. */
export function listQueues(s: EngineState): Array<{ name: string; config: QueueConfig }> {
  return [...s.queueNames].sort().map((name) => ({ name, config: queueConfig(s, name) }));
}
