// Delivery outcomes for every timer of a due slice, as a dispatcher would report them.
import type { DueSlice } from '../../engine/engine.ts';
import { emptyOutcomes, type OutcomeKind } from '../../engine/records.ts';

export function outcomesFor(slice: DueSlice, kind: OutcomeKind, retryAtMs = 0, status = 200): ReturnType<typeof emptyOutcomes> {
  const outcomes = emptyOutcomes(slice.count);
  for (let i = 0; i < slice.count; i++) {
    outcomes.seqs[i] = slice.seqs[i] as number;
    outcomes.rows[i] = slice.rows[i] as number;
    outcomes.kinds[i] = kind;
    outcomes.statuses[i] = status;
    outcomes.attempts[i] = slice.attempts[i] as number;
    outcomes.retryAtMs[i] = retryAtMs;
  }
  outcomes.count = slice.count;
  return outcomes;
}
