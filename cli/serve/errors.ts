// The two ways `fermata serve` fails, kept apart as the exit codes keep them: a bad command line
// or config file is a `UsageError` (stderr, exit 2, before anything opens), and so is a port
// another process holds (cli/serve/listeners.ts, `PortInUseError`: one line, exit 2); a condition
// met while starting (a corrupt WAL, a locked directory) is logged as fatal (exit 1).
// Main thread only.
import type { Logger } from 'pino';
import { isFermataError } from '../../engine/errors.ts';

/** A bad command line or config file: the message names the source and the problem. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

/**
 * Coded conditions (a corrupt WAL, a locked directory) log their message, code and details
 * (file, offset, lock holder); anything else its stack. Details stay nested: a lock holder's
 * `pid` must not be read as this process's.
 */
export function logStartFailure(logger: Logger, err: unknown, context: string): void {
  if (isFermataError(err)) logger.fatal({ code: err.code, details: err.details }, err.message);
  else logger.fatal({ err }, `${context}: ${messageOf(err)}`);
}

export function messageOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
