// A manual clock's moves (engine/clock.ts), on the main thread: each is a CLOCK record first and
// a move of the clock once the record is durable, so after a crash the clock is where the last
// acknowledged move put it. Moves run one at a time: an advance counts from the position the
// previous move left. Replay keeps the last logged position (never a lower one: that log is
// malformed), a checkpoint carries it in its manifest (spill/checkpoint.ts, spill/restore.ts),
// and open() resumes a manual clock there; a manual clock's first start logs its starting
// position (the real time then), so the next start resumes from it too. A real clock reads
// none of it: the position stays logged (and carried by checkpoints) for a later manual start.
//
//   moveClock(s, move) ─► after the previous move ─► log CLOCK [position f64] ─► durable ─► clock.moveTo ─► the scheduler looks
import { isManualClock, manualClockMsMax } from './clock.ts';
import { errorCodes, FermataError } from './errors.ts';
import { encodeClock, recordType } from './records.ts';
import type { EngineState } from './state.ts';

/** How a manual clock is to move: by some ms, or to an instant (epoch ms; forward only). */
export type ClockMove = { readonly advanceMs: number } | { readonly toMs: number };

/** Moves the manual clock once its CLOCK record is durable; resolves with the new position. */
export function moveClock(s: EngineState, move: ClockMove): Promise<number> {
  const moved = s.clockMoves.then(() => moveNow(s, move));
  s.clockMoves = moved.catch(() => undefined);
  return moved;
}

async function moveNow(s: EngineState, move: ClockMove): Promise<number> {
  const clock = s.clock;
  if (!isManualClock(clock)) throw new FermataError(errorCodes.clockInvalid, 'the service runs on the real clock (start it with --clock manual to move it)');
  const positionMs = clock.now();
  const toMs = 'advanceMs' in move ? positionMs + move.advanceMs : move.toMs;
  if (toMs < positionMs) {
    throw new FermataError(errorCodes.clockBackwards, `the clock never moves backwards: it stands at ${new Date(positionMs).toISOString()} (${positionMs}), after the ${new Date(toMs).toISOString()} asked for: set a later time (its position outlives restarts: a fresh data directory starts at the real time)`, { now_ms: positionMs });
  }
  if (toMs > manualClockMsMax) throw new FermataError(errorCodes.clockInvalid, `the clock cannot go past ${new Date(manualClockMsMax).toISOString()} (${manualClockMsMax} ms)`, { now_ms: positionMs });
  if (toMs === positionMs) return positionMs;
  // The schedules catch up first, as after downtime: nothing overdue fires before they decide.
  await s.beforeClockMove?.(toMs);
  await s.log.append(recordType.clock, encodeClock(toMs));
  s.clockPositionMs = toMs;
  clock.moveTo(toMs);
  return toMs;
}

/** Why a replayed CLOCK position cannot follow the log's last one, or undefined: positions never go down. */
export function replayedClockProblem(s: EngineState, positionMs: number): string | undefined {
  const lastMs = s.clockPositionMs;
  return lastMs !== undefined && positionMs < lastMs ? `CLOCK record moves the clock back, to ${positionMs} from ${lastMs}` : undefined;
}

/**
 * At the end of open(): a manual clock resumes at the last logged position, or logs its start
 * (the real time it was made at) when none is; a real clock is left as it is.
 */
export async function resumeClock(s: EngineState): Promise<void> {
  const clock = s.clock;
  if (!isManualClock(clock)) return;
  const loggedMs = s.clockPositionMs;
  if (loggedMs !== undefined) {
    clock.moveTo(loggedMs, true);
    return;
  }
  const startMs = clock.now();
  await s.log.append(recordType.clock, encodeClock(startMs));
  s.clockPositionMs = startMs;
}
