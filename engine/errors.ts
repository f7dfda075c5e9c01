// Coded errors: conditions a caller can meet and act on (a full queue, a poisoned log, a
// corrupt file). Bugs are assertions (node:assert) and crash loudly instead. Every code is
// stable: clients, logs and the HTTP status map (one place, in ingest/) key on it.

export const errorCodes = {
  walPoisoned: 'WAL_POISONED',
  /** Another owner took the log over (cluster mode: the partition moved): this engine stops as on a poison. */
  logFenced: 'LOG_FENCED',
  walQueueFull: 'WAL_QUEUE_FULL',
  walClosed: 'WAL_CLOSED',
  walCorrupt: 'WAL_CORRUPT',
  spillCorrupt: 'SPILL_CORRUPT',
  walRecordTooLarge: 'WAL_RECORD_TOO_LARGE',
  dataDirLocked: 'DATA_DIR_LOCKED',
  diskFull: 'DISK_FULL',
  batchInvalid: 'BATCH_INVALID',
  capacityFull: 'CAPACITY_FULL',
  queueInvalid: 'QUEUE_INVALID',
  /** A delete of a queue that still has timers waiting (pending, retrying or being delivered): details.pending counts them. */
  queueNotEmpty: 'QUEUE_NOT_EMPTY',
  /** A delete of the default queue, which always exists. */
  queueProtected: 'QUEUE_PROTECTED',
  unauthorized: 'UNAUTHORIZED',
  /** A known token without the scope (details.scope) or the queue (details.queue) the request needs. */
  forbidden: 'FORBIDDEN',
  /** A reload whose config file or environment cannot be applied: nothing changed; the message says why. */
  reloadFailed: 'RELOAD_FAILED',
  targetRefused: 'TARGET_REFUSED',
  /** A manual clock asked to move to a time before its position: it never moves backwards. */
  clockBackwards: 'CLOCK_BACKWARDS',
  /** A manual clock asked to move past the latest time it can show, or moved on a service whose clock is the real one. */
  clockInvalid: 'CLOCK_INVALID',
  /** A schedule's rule that cannot be compiled (cron, time_zone, every_ms, start_at/end_at, jitter_ms): details.field names which. */
  scheduleInvalid: 'SCHEDULE_INVALID',
  /** The cluster database is unreachable (cluster mode): nothing was appended; try again. */
  logUnavailable: 'LOG_UNAVAILABLE',
  /** The cluster database's schema is not the version this build runs on (older: migrate it; newer: upgrade fermata). */
  clusterSchemaMismatch: 'CLUSTER_SCHEMA_MISMATCH',
  /** Cluster mode: the partition a request names has no owner that can take it now (moving, or its owner out of reach); try again. */
  partitionMoving: 'PARTITION_MOVING',
  /** Cluster mode: a route whose state is per engine (queues, schedules) and has no cluster-wide form yet. */
  clusterUnsupported: 'CLUSTER_UNSUPPORTED',
  /** A data file (or a record in one) written in a format version newer than this build reads: details name the file, the version found and the one known (engine/format-version.ts). */
  formatTooNew: 'FORMAT_TOO_NEW',
  /** An add that would take a queue past its max_pending: nothing of the batch was added; details name the queue, its pending count and cap. */
  queueFull: 'QUEUE_FULL',
} as const;

export type ErrorCode = (typeof errorCodes)[keyof typeof errorCodes];

export interface ErrorDetails {
  readonly file?: string;
  readonly offset?: number;
  readonly [key: string]: unknown;
}

export class FermataError extends Error {
  readonly code: ErrorCode;
  readonly details: ErrorDetails;

  constructor(code: ErrorCode, message: string, details: ErrorDetails = {}, cause?: unknown) {
    super(message, cause === undefined ? undefined : { cause });
    this.name = 'FermataError';
    this.code = code;
    this.details = details;
  }
}

export function isFermataError(err: unknown, code?: ErrorCode): err is FermataError {
  return err instanceof FermataError && (code === undefined || err.code === code);
}

/** The errno-style code of a file-system error (`ENOENT`, `ENOSPC`, …), if it has one. */
export function systemErrorCode(err: unknown): string | undefined {
  if (typeof err !== 'object' || err === null || !('code' in err)) return undefined;
  const code = (err as { code: unknown }).code;
  return typeof code === 'string' ? code : undefined;
}
