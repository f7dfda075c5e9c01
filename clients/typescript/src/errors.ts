// The errors the client throws. FermataError carries what the server said (its stable `code`,
// the HTTP status, and where known the `field`, Arrow `column`, batch `row`, NDJSON `line`),
// so callers branch on `code`, never on a message. Codes the client itself gives, for
// conditions the server did not answer, are listed in `clientErrorCodes`.

/** The `error` object of the server's error answer, `{"error": {"code", "message", …}}`. */
export interface ErrorBody {
  readonly code: string;
  readonly message: string;
  readonly field?: string;
  readonly column?: string;
  readonly row?: number;
  readonly line?: number;
  readonly pending?: number;
  readonly [extra: string]: unknown;
}

/** Codes the client gives itself (the server's codes are in docs/api.md). */
export const clientErrorCodes = {
  /** The answer was not the JSON error shape (a proxy's page, a cut body): `status` says what came. */
  unexpectedAnswer: 'UNEXPECTED_ANSWER',
  /**
   * An add stream ended (the connection broke) before this line was answered: the timer may or
   * may not have been added. A timer with a `key` can be added again safely.
   */
  streamEnded: 'STREAM_ENDED',
  /** The connection failed or closed before an answer came. */
  connectionFailed: 'CONNECTION_FAILED',
} as const;

export class FermataError extends Error {
  /** The server's stable error code (`BATCH_INVALID`, `NOT_FOUND`, …) or one of `clientErrorCodes`. */
  readonly code: string;
  /** The HTTP status (or a stream line's `status`); 0 when no answer came. */
  readonly status: number;
  readonly field: string | undefined;
  readonly column: string | undefined;
  /** 0-based row of a batch (for `addMany`, the row of the rows given to it). */
  readonly row: number | undefined;
  /** 1-based line of an NDJSON body. */
  readonly line: number | undefined;
  /** Seconds the server asked to wait before trying again (`Retry-After`), when it did. */
  readonly retryAfterS: number | undefined;
  /** The server's whole `error` object, with any fields beyond the common ones. */
  readonly body: ErrorBody;

  constructor(status: number, body: ErrorBody, retryAfterS?: number, options?: ErrorOptions) {
    super(body.message, options);
    this.name = 'FermataError';
    this.code = body.code;
    this.status = status;
    this.field = body.field;
    this.column = body.column;
    this.row = body.row;
    this.line = body.line;
    this.retryAfterS = retryAfterS;
    this.body = body;
  }

  /** The same error with `row` moved by `offset` (a batch's row within the rows `addMany` was given). */
  shiftedBy(offset: number): FermataError {
    if (this.row === undefined || offset === 0) return this;
    return new FermataError(this.status, { ...this.body, row: this.row + offset }, this.retryAfterS, { cause: this });
  }
}

/** The error a non-2xx answer's body describes; a body not in the error shape becomes UNEXPECTED_ANSWER. */
export function errorFromAnswer(status: number, body: Uint8Array, retryAfterS: number | undefined): FermataError {
  const text = Buffer.from(body).toString('utf8');
  try {
    const parsed = JSON.parse(text) as { error?: unknown };
    const error = parsed.error;
    if (typeof error === 'object' && error !== null && typeof (error as ErrorBody).code === 'string') {
      const shaped = error as ErrorBody;
      return new FermataError(status, { ...shaped, message: typeof shaped.message === 'string' ? shaped.message : shaped.code }, retryAfterS);
    }
  } catch {
    // not JSON: described below
  }
  return new FermataError(status, { code: clientErrorCodes.unexpectedAnswer, message: `HTTP ${status}: ${text.slice(0, 200)}` }, retryAfterS);
}
