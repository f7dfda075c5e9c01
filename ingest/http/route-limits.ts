// Bounds the HTTP routes keep, beside engine/limits.ts's ingest and HTTP limits: read by the
// routes that enforce them and by the OpenAPI document that states them, so the document never
// imports a route to learn a number. Constants only.

/** Bounds of one `POST /v1/timers/stream`'s lines between read and answered. */
export const streamLimits = {
  /** Lines read and not yet answered, at most: past this the stream stops reading. */
  linesInFlightMax: 4096,
  /** Bytes of those lines, at most (a line may hold a 1 MiB payload). */
  linesBytesInFlightMax: 16 * 1024 * 1024,
} as const;

/** `GET /v1/dead?limit=`: its default and its most. */
export const deadListLimits = {
  default: 100,
  max: 1000,
} as const;

/** `GET /v1/timers`: a page's default and most timers, and the rows of an Arrow export's record batches. */
export const timerListLimits = {
  default: 100,
  max: 1000,
  exportBatchRows: 4096,
} as const;

/** `POST /v1/timers/cancel`: the most ids one request names. */
export const bulkCancelLimits = {
  idsMax: 10_000,
} as const;

/** `GET /v1/events`: streams open at once (past it: 429 `EVENT_STREAMS_FULL`), and the bytes one holds unread before it is ended. */
export const eventStreamLimits = {
  streamsMax: 64,
  unreadBytesMax: 1024 * 1024,
} as const;

/** `POST /v1/dead/retry`: the most dead timers one request redrives, and how many of their redrives are logged at once. */
export const deadRetryLimits = {
  redrivenMax: 100_000,
  redrivesAtOnce: 1000,
} as const;
