// The one place error codes become HTTP statuses. Every error the HTTP API answers has this body:
//
//   {"error": {"code": "BATCH_INVALID", "message": "target must be …", "field": "target", "row": 1, "line": 2}}
//
// `code` is stable (clients key on it): a FermataError's own code, one of httpErrorCodes below
// for conditions only HTTP has, or INTERNAL for a bug (logged, its text never sent). `field`
// names a JSON field, `column` an Arrow column, `row` is 0-based among the timers of a batch,
// `line` 1-based in an NDJSON body; each appears only when known. Overload answers carry
// `Retry-After`; nothing here ever turns an error into a 2xx.
import { type ErrorCode, errorCodes, isFermataError } from '../../engine/errors.ts';
import { ingestLimits } from '../../engine/limits.ts';

/** Conditions of the HTTP layer itself (fastify's own errors are restated as these). */
export const httpErrorCodes = {
  notFound: 'NOT_FOUND',
  /** A path no route serves (NOT_FOUND is a resource, such as a timer, that a route does not find). */
  routeNotFound: 'ROUTE_NOT_FOUND',
  /** A path some route serves, with a method none of them takes: the answer's `Allow` lists those it takes. */
  methodNotAllowed: 'METHOD_NOT_ALLOWED',
  tooLate: 'TOO_LATE',
  /** A redrive or discard of a timer that is not dead. */
  notDead: 'NOT_DEAD',
  unsupportedMediaType: 'UNSUPPORTED_MEDIA_TYPE',
  bodyTooLarge: 'BODY_TOO_LARGE',
  /** Malformed or empty JSON, a body that does not match its Content-Length. */
  bodyInvalid: 'BODY_INVALID',
  /** A request that fails a route's schema (params, querystring), a URL that does not decode, malformed HTTP/1.1. */
  requestInvalid: 'REQUEST_INVALID',
  /** An HTTP/1.1 header block larger than the server reads. */
  headersTooLarge: 'HEADERS_TOO_LARGE',
  /** An HTTP/1.1 request that did not arrive whole within the server's request timeout. */
  requestTimeout: 'REQUEST_TIMEOUT',
  internal: 'INTERNAL',
  /** A PATCH whose If-Match names none of the timer's revision (compare-and-set lost). */
  revisionMismatch: 'REVISION_MISMATCH',
  /** A PATCH of a timer that is no longer pending or retrying (delivering, delivered, dead, cancelled). */
  timerNotPending: 'TIMER_NOT_PENDING',
  /** GET /v1/events with as many streams open as the service keeps (route-limits.ts). */
  eventStreamsFull: 'EVENT_STREAMS_FULL',
} as const;

export type HttpErrorCode = (typeof httpErrorCodes)[keyof typeof httpErrorCodes];

/** Keyed by every code: a code added to errors.ts fails the typecheck here until it has a status. */
const statusOf: Record<ErrorCode | HttpErrorCode, number> = {
  [errorCodes.batchInvalid]: 400,
  [errorCodes.queueInvalid]: 400,
  [errorCodes.queueNotEmpty]: 409,
  [errorCodes.queueProtected]: 409,
  [errorCodes.clockBackwards]: 409,
  [errorCodes.clockInvalid]: 400,
  [errorCodes.scheduleInvalid]: 400,
  // A literal target address the SSRF guard refuses, found when the timer is added.
  [errorCodes.targetRefused]: 400,
  [errorCodes.capacityFull]: 503,
  [errorCodes.walQueueFull]: 429,
  // A queue at its max_pending: a delivery or a cancel frees a place.
  [errorCodes.queueFull]: 429,
  // 507 instead when the poison's cause is ENOSPC (below).
  [errorCodes.walPoisoned]: 503,
  // Another node owns the partition's log now: this one no longer answers for it.
  [errorCodes.logFenced]: 503,
  [errorCodes.walRecordTooLarge]: 413,
  // The service is stopping: another instance (or this one after its restart) will take it.
  [errorCodes.walClosed]: 503,
  [errorCodes.diskFull]: 507,
  [errorCodes.unauthorized]: 401,
  [errorCodes.forbidden]: 403,
  // The request was fine; the settings it asked to apply are not: the old ones stay.
  [errorCodes.reloadFailed]: 422,
  // Start-up conditions; met by a request they are a bug.
  [errorCodes.walCorrupt]: 500,
  [errorCodes.dataDirLocked]: 500,
  // A spill file that fails its checks: at start-up it refuses to start; met by a lookup, the disk is damaged.
  [errorCodes.spillCorrupt]: 500,
  [errorCodes.formatTooNew]: 500,
  [httpErrorCodes.notFound]: 404,
  [httpErrorCodes.routeNotFound]: 404,
  [httpErrorCodes.methodNotAllowed]: 405,
  [httpErrorCodes.tooLate]: 409,
  [httpErrorCodes.notDead]: 409,
  [httpErrorCodes.unsupportedMediaType]: 415,
  [httpErrorCodes.bodyTooLarge]: 413,
  [httpErrorCodes.bodyInvalid]: 400,
  [httpErrorCodes.requestInvalid]: 400,
  [httpErrorCodes.headersTooLarge]: 431,
  [httpErrorCodes.requestTimeout]: 408,
  [httpErrorCodes.internal]: 500,
  [httpErrorCodes.revisionMismatch]: 412,
  [httpErrorCodes.timerNotPending]: 409,
  [httpErrorCodes.eventStreamsFull]: 429,
  // The cluster database cannot be reached: nothing was appended, a retry may land.
  [errorCodes.logUnavailable]: 503,
  // A start-up condition of cluster mode; met by a request it is a bug.
  [errorCodes.clusterSchemaMismatch]: 500,
  // A partition between owners, or its owner out of reach from the node asked: nothing was done there.
  [errorCodes.partitionMoving]: 503,
  // Cluster mode: queues and schedules are per engine; their cluster-wide form is not built.
  [errorCodes.clusterUnsupported]: 501,
};

/** Seconds a client should wait before trying again, for the conditions that pass by themselves. */
const retryAfterSecondsOf: Partial<Record<ErrorCode, number>> = {
  [errorCodes.capacityFull]: 1,
  [errorCodes.walQueueFull]: 1,
  [errorCodes.queueFull]: 1,
  [errorCodes.walClosed]: 1,
  // `fermata serve` opens the data directory again at once (recovery re-reads the disk).
  [errorCodes.walPoisoned]: 1,
  // Free space is read again each second; an operator (or a compaction) may free some.
  [errorCodes.diskFull]: 5,
  // The client reconnects at once; a PostgreSQL failover takes seconds.
  [errorCodes.logUnavailable]: 2,
  // A lapsed lease is taken over within seconds; a clean handover within one.
  [errorCodes.partitionMoving]: 1,
  // The partition's new owner has it already (the router forwards the retry there).
  [errorCodes.logFenced]: 1,
};

export interface ErrorBody {
  readonly error: {
    readonly code: string;
    readonly message: string;
    readonly field?: string;
    readonly column?: string;
    readonly row?: number;
    readonly line?: number;
    readonly pending?: number;
    readonly scope?: string;
    readonly queue?: string;
  };
}

export interface ErrorAnswer {
  readonly status: number;
  readonly retryAfterSeconds: number | undefined;
  readonly body: ErrorBody;
  /** A bug or an unknown failure: the caller logs `err` with its stack. */
  readonly unexpected: boolean;
}

/** A condition the HTTP layer finds itself (an unknown id, a cancel too late, …): routes throw it. */
export class HttpProblem extends Error {
  readonly code: HttpErrorCode;
  /** The parameter or body field at fault, when there is one. */
  readonly field: string | undefined;

  constructor(code: HttpErrorCode, message: string, field?: string) {
    super(message);
    this.name = 'HttpProblem';
    this.code = code;
    this.field = field;
  }
}

function httpError(code: HttpErrorCode, message: string): ErrorAnswer {
  return { status: statusOf[code], retryAfterSeconds: undefined, body: { error: { code, message } }, unexpected: code === httpErrorCodes.internal };
}

const mediaTypeHint =
  'fermata takes application/json; POST /v1/timers also takes application/x-ndjson and application/vnd.apache.arrow.stream';

/** Fastify's own client errors, restated with fermata's codes; undefined for any other error. */
function fastifyAnswer(err: { code?: unknown; statusCode?: unknown; message: string }, contentType: string | undefined): ErrorAnswer | undefined {
  switch (err.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return httpError(httpErrorCodes.unsupportedMediaType, `Content-Type ${JSON.stringify(contentType ?? '')} is not supported: ${mediaTypeHint}`);
    case 'FST_ERR_CTP_BODY_TOO_LARGE': {
      const json = contentType !== undefined && /^\s*application\/json\b/i.test(contentType);
      const limit = json ? ingestLimits.jsonBodyBytesMax : ingestLimits.bodyBytesMax;
      return httpError(httpErrorCodes.bodyTooLarge, `the request body is larger than ${limit} bytes, the limit for ${json ? 'application/json' : 'this content type'}`);
    }
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return httpError(httpErrorCodes.bodyInvalid, err.message);
    case 'FST_ERR_VALIDATION':
      return httpError(httpErrorCodes.requestInvalid, err.message);
  }
  // Any other client error fastify raises (a stream aborted mid-body, …): its status, our shape.
  if (typeof err.statusCode === 'number' && err.statusCode >= 400 && err.statusCode < 500) {
    return { status: err.statusCode, retryAfterSeconds: undefined, body: { error: { code: httpErrorCodes.requestInvalid, message: err.message } }, unexpected: false };
  }
  return undefined;
}

/**
 * The answer to an HTTP/1.1 request node's parser refused before any route saw it (fastify's
 * clientErrorHandler: a malformed request line or header, a header block too large, a request
 * too slow), written by the server straight to the socket; `errno` is the parser's code.
 */
export function clientErrorAnswer(errno: string | undefined): ErrorAnswer {
  if (errno === 'HPE_HEADER_OVERFLOW') return httpError(httpErrorCodes.headersTooLarge, 'the request\'s header block is larger than the server reads');
  if (errno === 'ERR_HTTP_REQUEST_TIMEOUT') return httpError(httpErrorCodes.requestTimeout, 'the request did not arrive whole within the server\'s request timeout');
  return httpError(httpErrorCodes.requestInvalid, `not a well-formed HTTP/1.1 request (${errno ?? 'unknown parser error'})`);
}

const nonEmptyString = (value: unknown): value is string => typeof value === 'string' && value !== '';
const wholeNumber = (value: unknown): value is number => typeof value === 'number' && Number.isSafeInteger(value);

/** A refusal another node gave (cluster mode: a partition's owner answering a forwarded request), answered as it came. */
export class RelayedRefusal extends Error {
  readonly status: number;
  readonly retryAfterSeconds: number | undefined;
  readonly body: ErrorBody;

  constructor(status: number, retryAfterSeconds: number | undefined, body: ErrorBody) {
    super(body.error.message);
    this.status = status;
    this.retryAfterSeconds = retryAfterSeconds;
    this.body = body;
  }
}

/** The answer to any error a route threw; `contentType` is the request's (for 413/415 wording). */
export function errorAnswer(err: unknown, contentType: string | undefined): ErrorAnswer {
  if (err instanceof RelayedRefusal) return { status: err.status, retryAfterSeconds: err.retryAfterSeconds, body: err.body, unexpected: false };
  if (isFermataError(err)) {
    const { details } = err;
    const poisonedByFullDisk = err.code === errorCodes.walPoisoned && details.cause === 'ENOSPC';
    const status = poisonedByFullDisk ? 507 : statusOf[err.code];
    return {
      status,
      retryAfterSeconds: retryAfterSecondsOf[err.code],
      body: {
        error: {
          code: err.code,
          message: err.message,
          ...(nonEmptyString(details.field) ? { field: details.field } : {}),
          ...(nonEmptyString(details.column) ? { column: details.column } : {}),
          ...(wholeNumber(details.row) ? { row: details.row } : {}),
          ...(wholeNumber(details.line) ? { line: details.line } : {}),
          // A queue delete refused while timers wait in it, or an add past a queue's cap: how many.
          ...(wholeNumber(details.pending) ? { pending: details.pending } : {}),
          // A FORBIDDEN answer: the scope or the queue the token lacks.
          ...(err.code === errorCodes.forbidden && nonEmptyString(details.scope) ? { scope: details.scope } : {}),
          ...(err.code === errorCodes.forbidden && nonEmptyString(details.queue) ? { queue: details.queue } : {}),
          // A QUEUE_FULL answer: the queue at its cap (its count is `pending`).
          ...(err.code === errorCodes.queueFull && nonEmptyString(details.queue) ? { queue: details.queue } : {}),
        },
      },
      unexpected: status === 500,
    };
  }
  if (err instanceof HttpProblem) {
    const answer = httpError(err.code, err.message);
    return err.field === undefined ? answer : { ...answer, body: { error: { ...answer.body.error, field: err.field } } };
  }
  if (err instanceof Error) {
    const answer = fastifyAnswer(err as Error & { code?: unknown; statusCode?: unknown }, contentType);
    if (answer !== undefined) return answer;
  }
  return httpError(httpErrorCodes.internal, 'internal error (logged on the server)');
}
