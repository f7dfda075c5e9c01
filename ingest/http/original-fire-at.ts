// The fire time an add answers with when its idempotency key was already known: the original
// timer's, not the one asked for. Shared by the one-timer route and the stream's lines, which
// must answer a duplicate alike. Main thread (reads the engine).
import type { Engine } from '../../engine/engine.ts';
import { decodeTimerId } from '../../engine/ids.ts';

/** The fire time of the timer a known key named (`asked`, the duplicate's own, when neither the store nor the id tells). */
export function originalFireAtMs(engine: Pick<Engine, 'get'>, id: string, asked: number): number {
  return engine.get(id)?.fireAtMs ?? decodeTimerId(id)?.fireAtMs ?? asked;
}
