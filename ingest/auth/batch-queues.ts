// A queue-limited token's adds (ingest/auth/access.ts): every row's queue must be one of its
// queues. Only such tokens pay for this: a batch's queue dictionary is checked as it is (a few
// names), an Arrow body's queue column is read once more, whole. Main thread.
import { tableFromIPC } from 'apache-arrow';
import { defaultQueue } from '../../engine/batch/timer-batch.ts';
import { errorCodes, FermataError } from '../../engine/errors.ts';
import { type Caller, checkQueue } from './access.ts';

/** Throws FORBIDDEN for the first queue of `queues` (a batch's dictionary, or one timer's) that `caller` may not add to. */
export function checkAddQueues(caller: Caller, queues: Iterable<string>): void {
  if (caller.queues === undefined) return;
  for (const queue of queues) checkQueue(caller, queue);
}

/** The same for an Arrow IPC stream's rows (a null or missing queue is the default queue). */
export function checkArrowAddQueues(caller: Caller, ipc: Uint8Array): void {
  if (caller.queues === undefined) return;
  let table;
  try {
    table = tableFromIPC(ipc);
  } catch (err) {
    throw new FermataError(errorCodes.batchInvalid, `not a readable Arrow IPC stream: ${err instanceof Error ? err.message : String(err)}`, { column: '' }, err);
  }
  const column = table.getChild('queue');
  if (column === null) return checkQueue(caller, defaultQueue);
  const seen = new Set<string>();
  for (const value of column) seen.add(typeof value === 'string' ? value : defaultQueue);
  checkAddQueues(caller, seen);
}
