// The cancel of one timer as the API answers it, whatever carried the request (DELETE
// /v1/timers/{id} in routes/timers.ts, the gRPC API's CancelTimer): the timer's id, state and
// revision once the CANCEL record is durable, or the HttpProblem that says why not. Main thread.
import type { Engine, RevisionCondition } from '../../engine/engine.ts';
import { httpErrorCodes, HttpProblem } from './error-map.ts';

export interface Cancelled {
  readonly id: string;
  readonly state: 'cancelled';
  /** A cancel keeps the revision: it counts PATCHes, the changes of what and when a timer delivers. */
  readonly revision: number;
}

/** Cancels timer `id` if `condition` holds; `mismatch` words a lost compare-and-set in the caller's terms, given the revision the timer is at. */
export async function cancelTimer(engine: Engine, id: string, condition: RevisionCondition, mismatch: (revision: number | undefined) => string): Promise<Cancelled> {
  const outcome = await engine.cancel(id, condition);
  if (outcome === 'cancelled') return { id, state: 'cancelled', revision: engine.get(id)?.revision ?? 1 };
  if (outcome === 'not-found') throw new HttpProblem(httpErrorCodes.notFound, `no timer ${id}`);
  if (outcome === 'revision-mismatch') throw new HttpProblem(httpErrorCodes.revisionMismatch, mismatch((await engine.lookup(id))?.revision));
  throw new HttpProblem(httpErrorCodes.tooLate, `timer ${id} is ${engine.get(id)?.state ?? 'finished'}: too late to cancel`);
}
