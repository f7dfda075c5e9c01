// /v1/clock: the test clock of a `fermata serve --clock manual` (engine/clock.ts). GET reads it;
// POST moves it forward, by `advance_ms` or to `set` (RFC 3339 or epoch ms), once the move's
// CLOCK record is durable, and answers the clock as it then stands; timers the move made due
// fire at once (the scheduler watches the clock). With the real clock both routes answer 404
// ROUTE_NOT_FOUND, as a path no route serves does: a hook of this scope answers before the
// body is read, so a real-clock service says nothing else about them. Main thread.
import { isManualClock, manualClockMsMax } from '../../../engine/clock.ts';
import { errorCodes, FermataError } from '../../../engine/errors.ts';
import type { ClockMove } from '../../../engine/clock-moves.ts';
import { timerLimits } from '../../../engine/limits.ts';
import { parseRfc3339 } from '../body/json-batch.ts';
import { httpErrorCodes, HttpProblem } from '../error-map.ts';
import { isoOf } from '../iso-time.ts';
import type { HttpServer, RoutesOptions } from '../types.ts';

/** The longest one advance may be: as far ahead as a timer may be set (10 years). */
export const clockAdvanceMsMax = timerLimits.horizonMsMax;

export const clockSchema = {
  type: 'object',
  properties: {
    now: { type: 'string', format: 'date-time' },
    now_ms: { type: 'integer' },
    mode: { type: 'string', enum: ['manual'] },
  },
  required: ['now', 'now_ms', 'mode'],
  additionalProperties: false,
} as const;

function clockView(nowMs: number): { now: string; now_ms: number; mode: 'manual' } {
  return { now: isoOf(nowMs), now_ms: nowMs, mode: 'manual' };
}

function refuse(message: string, field: string): FermataError {
  return new FermataError(errorCodes.clockInvalid, message, { field });
}

/** The move a POST body asks for: exactly one of `advance_ms` and `set`; a FermataError (400) naming the field otherwise. */
export function clockMoveOf(body: unknown): ClockMove {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw refuse('the body must be a JSON object: {"advance_ms": N} or {"set": "2030-01-31T09:00:00Z"}', '');
  const fields = body as Record<string, unknown>;
  const unknown = Object.keys(fields).find((field) => field !== 'advance_ms' && field !== 'set');
  if (unknown !== undefined) throw refuse(`unknown field ${JSON.stringify(unknown)}: give advance_ms or set`, unknown);
  const { advance_ms: advance, set } = fields;
  if (advance === undefined && set === undefined) throw refuse('give advance_ms (ms to move forward) or set (the time to move to)', 'advance_ms');
  if (advance !== undefined && set !== undefined) throw refuse('give advance_ms or set, not both', 'set');
  if (advance !== undefined) {
    if (typeof advance !== 'number' || !Number.isSafeInteger(advance) || advance < 1 || advance > clockAdvanceMsMax) {
      throw refuse(`advance_ms must be a whole number of ms from 1 to ${clockAdvanceMsMax} (10 years), not ${JSON.stringify(advance)}`, 'advance_ms');
    }
    return { advanceMs: advance };
  }
  if (typeof set === 'string') {
    const ms = parseRfc3339(set);
    if (ms === undefined || ms > manualClockMsMax) throw refuse(`set ${JSON.stringify(set)} is not an RFC 3339 date-time up to year 9999 (such as 2030-01-31T09:00:00Z)`, 'set');
    return { toMs: ms };
  }
  if (typeof set === 'number' && Number.isSafeInteger(set) && set > 0 && set < 1e12 && set * 1000 <= manualClockMsMax) {
    throw refuse(`set ${set} looks like epoch seconds: the clock takes epoch ms (multiply by 1000: ${set * 1000}) or an RFC 3339 date-time`, 'set');
  }
  if (typeof set !== 'number' || !Number.isSafeInteger(set) || set < 1e12 || set > manualClockMsMax) {
    throw refuse(`set must be an RFC 3339 date-time or whole epoch ms from 10^12 to ${manualClockMsMax}, not ${JSON.stringify(set)}`, 'set');
  }
  return { toMs: set };
}

export async function clockRoutes(app: HttpServer, { engine }: RoutesOptions): Promise<void> {
  app.addHook('onRequest', async (request) => {
    if (!isManualClock(engine.clock)) throw new HttpProblem(httpErrorCodes.routeNotFound, `no route serves ${request.url}: the test clock needs fermata serve --clock manual`);
  });

  app.get('/v1/clock', { schema: { response: { 200: clockSchema } } }, async () => clockView(engine.clock.now()));

  app.post<{ Body: unknown }>('/v1/clock', { schema: { response: { 200: clockSchema } } }, async (request) => clockView(await engine.moveClock(clockMoveOf(request.body))));
}
