// The answer to a one-timer JSON add once it is durable, whatever carried the request: fastify's
// POST /v1/timers route (routes/timers.ts) and the raw HTTP/2 stream's (h2-single-add.ts) both
// build it here, so the two cannot answer differently. A refusal is answered by error-map.ts
// for both. Main thread.
//
//   new timer       201 {"id","fire_at","revision":1,"duplicate":false}
//   known key       200 {"id","fire_at","revision","duplicate":true,"state","differs"}   (the original's fire time and revision)
import type { DifferingField, DuplicateAnswer, TimerStateName } from '../../engine/engine.ts';
import { differsAsAsked, gaveDelayMs } from '../duplicate-answers.ts';
import { isoOf } from './iso-time.ts';

export type SingleAddBody =
  | { readonly id: string; readonly fire_at: string; readonly revision: 1; readonly duplicate: false }
  | { readonly id: string; readonly fire_at: string; readonly revision: number; readonly duplicate: true; readonly state: TimerStateName; readonly differs: readonly DifferingField[] };

export interface SingleAddAnswer {
  readonly status: 200 | 201;
  readonly body: SingleAddBody;
}

/**
 * The answer to an admitted timer: `id` and `original` as the admit coalescer gave them,
 * `fireAtMs` the one asked for, `value` the parsed JSON body (whether it gave delay_ms decides
 * whether a duplicate's fire time is compared).
 */
export function singleAddAnswer(id: string, original: DuplicateAnswer | undefined, fireAtMs: number, value: unknown): SingleAddAnswer {
  if (original === undefined) return { status: 201, body: { id, fire_at: isoOf(fireAtMs), revision: 1, duplicate: false } };
  const fireAt = isoOf(original.fireAtMs);
  return { status: 200, body: { id, fire_at: fireAt, revision: original.revision, duplicate: true, state: original.state, differs: differsAsAsked(original, gaveDelayMs(value)) } };
}
