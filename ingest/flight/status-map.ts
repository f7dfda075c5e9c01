// The one place fermata's error codes become gRPC status codes for the Flight service (the
// HTTP adapter's counterpart is ingest/http/error-map.ts). pyarrow.flight raises them as
// ArrowInvalid (INVALID_ARGUMENT), FlightUnauthenticatedError, FlightUnavailableError,
// ArrowNotImplementedError (UNIMPLEMENTED) and FlightServerError (the rest). The details text
// starts with the stable code and carries the Arrow column and 0-based row, and the record
// batch's 0-based index in the stream, when known; the same facts go in trailing metadata
// (fermata-code, fermata-column, fermata-row, fermata-batch) for clients that read it.
// Pull delivery's refusals (dispatch/pull-queues.ts) map here too, and on a cluster node the
// error answers of the node's front (relayedFailure): an engine's code as here, another by its
// HTTP status; a batch that failed in part (a partition's owner gone) names the rows that were
// accepted, in the text and in fermata-accepted / fermata-accepted-rows.
import { Metadata, status } from '@grpc/grpc-js';
import { type PullRefusal, type PullRefusalCode, pullRefusalCodes } from '../../dispatch/pull-queues.ts';
import { type ErrorCode, errorCodes, isFermataError } from '../../engine/errors.ts';
import type { RelayedRefusal } from '../http/error-map.ts';

/** Keyed by every code: a code added to errors.ts fails the typecheck here until it has a status. fermata.v1.Timers (ingest/grpc/status-map.ts) answers by it too. */
export const statusOf: Record<ErrorCode, status> = {
  [errorCodes.batchInvalid]: status.INVALID_ARGUMENT,
  [errorCodes.queueInvalid]: status.INVALID_ARGUMENT,
  // Queue deletes are HTTP only; gRPC's own word for a state that refuses the call, should Flight meet them.
  [errorCodes.queueNotEmpty]: status.FAILED_PRECONDITION,
  [errorCodes.queueProtected]: status.FAILED_PRECONDITION,
  [errorCodes.targetRefused]: status.INVALID_ARGUMENT,
  // The test clock is HTTP only (POST /v1/clock); gRPC's words for them, should Flight meet them.
  [errorCodes.clockBackwards]: status.FAILED_PRECONDITION,
  [errorCodes.clockInvalid]: status.INVALID_ARGUMENT,
  [errorCodes.scheduleInvalid]: status.INVALID_ARGUMENT,
  // A batch too large for one log record: the client must split it, so not retryable as is.
  [errorCodes.walRecordTooLarge]: status.INVALID_ARGUMENT,
  // Overload that passes by itself: retry after a second.
  [errorCodes.capacityFull]: status.RESOURCE_EXHAUSTED,
  [errorCodes.walQueueFull]: status.RESOURCE_EXHAUSTED,
  // A queue at its max_pending (PUT /v1/queues/{name}): a delivery or a cancel frees a place.
  [errorCodes.queueFull]: status.RESOURCE_EXHAUSTED,
  [errorCodes.diskFull]: status.RESOURCE_EXHAUSTED,
  // The log stopped acknowledging (a failed write or fsync; another node owns it now), or the service is stopping.
  [errorCodes.walPoisoned]: status.UNAVAILABLE,
  [errorCodes.logFenced]: status.UNAVAILABLE,
  [errorCodes.walClosed]: status.UNAVAILABLE,
  [errorCodes.unauthorized]: status.UNAUTHENTICATED,
  [errorCodes.forbidden]: status.PERMISSION_DENIED,
  // Reload is HTTP only (POST /v1/admin/reload); gRPC's word for it, should Flight meet it.
  [errorCodes.reloadFailed]: status.FAILED_PRECONDITION,
  // Start-up conditions or a damaged disk: met by a call, they are a bug or need an operator.
  [errorCodes.walCorrupt]: status.INTERNAL,
  [errorCodes.dataDirLocked]: status.INTERNAL,
  [errorCodes.spillCorrupt]: status.INTERNAL,
  [errorCodes.formatTooNew]: status.INTERNAL,
  // Cluster mode: the database is out of reach (nothing appended), or its schema is not this build's.
  [errorCodes.logUnavailable]: status.UNAVAILABLE,
  [errorCodes.partitionMoving]: status.UNAVAILABLE,
  [errorCodes.clusterSchemaMismatch]: status.INTERNAL,
  [errorCodes.clusterUnsupported]: status.UNIMPLEMENTED,
};

const pullStatusOf: Record<PullRefusalCode, status> = {
  [pullRefusalCodes.queueUnknown]: status.NOT_FOUND,
  [pullRefusalCodes.queueNotPull]: status.INVALID_ARGUMENT,
  // An expired or settled lease: its timers are delivered again, the ack came too late.
  [pullRefusalCodes.leaseUnknown]: status.NOT_FOUND,
  [pullRefusalCodes.leaseOtherQueue]: status.INVALID_ARGUMENT,
  [pullRefusalCodes.stopped]: status.UNAVAILABLE,
};

const retryHint: Partial<Record<ErrorCode, string>> = {
  [errorCodes.capacityFull]: ' (retry in 1 s)',
  [errorCodes.walQueueFull]: ' (retry in 1 s)',
  [errorCodes.queueFull]: ' (retry in 1 s)',
  [errorCodes.walClosed]: ' (the service is stopping; retry against it once restarted)',
};

/** A call's end status: thrown by handlers, sent by grpc-js as the status (code, details, trailing metadata). */
export class FlightFailure extends Error {
  override readonly name = 'FlightFailure';
  readonly code: status;
  readonly details: string;
  readonly metadata: Metadata;
  /** A bug or unknown failure: the caller logs it with its stack. */
  readonly unexpected: boolean;

  constructor(code: status, details: string, metadata = new Metadata(), unexpected = false) {
    super(details);
    this.code = code;
    this.details = details;
    this.metadata = metadata;
    this.unexpected = unexpected;
  }
}

/** The status for `err`, met while handling record batch `batch` of a DoPut (undefined elsewhere). */
export function flightFailure(err: unknown, batch?: number): FlightFailure {
  const metadata = new Metadata();
  if (batch !== undefined) metadata.set('fermata-batch', String(batch));
  const inBatch = batch === undefined ? '' : ` (record batch ${batch} of the stream)`;
  if (!isFermataError(err)) return new FlightFailure(status.INTERNAL, 'INTERNAL: internal error (logged on the server)', metadata, true);
  metadata.set('fermata-code', err.code);
  const { column, row } = err.details;
  if (typeof column === 'string' && column !== '') metadata.set('fermata-column', column);
  if (typeof row === 'number') metadata.set('fermata-row', String(row));
  const code = statusOf[err.code];
  return new FlightFailure(code, `${err.code}: ${err.message}${inBatch}${retryHint[err.code] ?? ''}`, metadata, code === status.INTERNAL);
}

/** The status for a pull call's refusal, its code first in the text and in fermata-code. */
export function pullFailure(refusal: PullRefusal): FlightFailure {
  const metadata = new Metadata();
  metadata.set('fermata-code', refusal.code);
  return new FlightFailure(pullStatusOf[refusal.code], `${refusal.code}: ${refusal.message}`, metadata);
}

/** An HTTP status as the gRPC status that says the same, for the front's own codes (engine codes go by statusOf). */
const statusOfHttp: Readonly<Record<number, status>> = {
  400: status.INVALID_ARGUMENT,
  401: status.UNAUTHENTICATED,
  403: status.PERMISSION_DENIED,
  404: status.NOT_FOUND,
  409: status.FAILED_PRECONDITION,
  412: status.FAILED_PRECONDITION,
  413: status.RESOURCE_EXHAUSTED,
  415: status.INVALID_ARGUMENT,
  429: status.RESOURCE_EXHAUSTED,
  501: status.UNIMPLEMENTED,
  503: status.UNAVAILABLE,
  507: status.RESOURCE_EXHAUSTED,
};

/** The accepted rows named in a failure's text at most; past it the text gives the first ones and the count. */
const acceptedRowsNamedMax = 200;

/**
 * The status for an error answer of a cluster node's front (cluster-flight-timers.ts), met while
 * handling record batch `batch` of a DoPut: the text, trailing metadata and retry hint as for the
 * same error on one node. A batch whose rows spanned partitions and failed in part (its body
 * lists `accepted_rows`) also says which rows are durable: sending the batch again is safe.
 */
export function relayedFailure(refusal: RelayedRefusal, batch?: number): FlightFailure {
  const { error } = refusal.body;
  const code = statusOf[error.code as ErrorCode] ?? statusOfHttp[refusal.status] ?? status.INTERNAL;
  const metadata = new Metadata();
  if (batch !== undefined) metadata.set('fermata-batch', String(batch));
  metadata.set('fermata-code', error.code);
  if (error.column !== undefined && error.column !== '') metadata.set('fermata-column', error.column);
  if (error.row !== undefined) metadata.set('fermata-row', String(error.row));
  const inBatch = batch === undefined ? '' : ` (record batch ${batch} of the stream)`;
  const retry = refusal.retryAfterSeconds === undefined ? '' : ` (retry in ${refusal.retryAfterSeconds} s)`;
  const accepted = (error as { accepted_rows?: unknown }).accepted_rows;
  let partial = '';
  if (Array.isArray(accepted)) {
    const rows = accepted.filter((row): row is number => typeof row === 'number');
    const named = rows.slice(0, acceptedRowsNamedMax).join(', ');
    metadata.set('fermata-accepted', String(rows.length));
    if (rows.length <= acceptedRowsNamedMax) metadata.set('fermata-accepted-rows', named);
    const list = rows.length === 0 ? '' : rows.length <= acceptedRowsNamedMax ? `: rows ${named}` : `, the first of them rows ${named}, …`;
    partial = `; ${rows.length} of the batch's rows were accepted and are durable${list}; sending the batch again is safe (the accepted rows answer as duplicates)`;
  }
  // The front logged what it did not expect; this is its answer, not a new failure.
  return new FlightFailure(code, `${error.code}: ${error.message}${inBatch}${retry}${partial}`, metadata);
}
