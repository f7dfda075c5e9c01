// GET /v1/limits: the bounds a client sizes its requests by (body sizes, rows a batch, lines a
// stream holds unanswered, a page's most), read from the modules that enforce them, so a client
// that splits at these numbers is never refused for size. Constants, answered from memory;
// main thread. The OpenAPI document states the same schema (openapi.ts imports it).
import { ingestLimits, timerLimits, walLimits } from '../../../engine/limits.ts';
import { bulkCancelLimits, deadListLimits, streamLimits, timerListLimits } from '../route-limits.ts';
import type { HttpServer } from '../types.ts';

const count = { type: 'integer', minimum: 1 } as const;

/** The answer's fields, each a limit with its unit in its name. */
export const limitsSchema = {
  type: 'object',
  properties: {
    json_body_bytes_max: { ...count, description: 'Largest `application/json` body (one timer, a queue config, a PATCH).' },
    batch_body_bytes_max: { ...count, description: 'Largest NDJSON or Arrow body of `POST /v1/timers`.' },
    batch_logged_bytes_max: { ...count, description: 'Largest batch as logged (one log record): an Arrow body is logged as it came, an NDJSON one as Arrow.' },
    batch_rows_max: { ...count, description: 'Timers one batch holds at most.' },
    payload_bytes_max: { ...count, description: 'Bytes of one timer\'s payload.' },
    key_bytes_max: { ...count, description: 'Bytes of an idempotency key.' },
    headers_count_max: { ...count, description: 'Extra delivery headers one timer carries.' },
    headers_bytes_max: { ...count, description: 'Bytes of one timer\'s headers as JSON.' },
    target_bytes_max: { ...count, description: 'Bytes of a target (or callback) URL.' },
    stream_lines_in_flight_max: { ...count, description: 'Lines of `POST /v1/timers/stream` read and not yet answered; past it the stream stops reading.' },
    stream_bytes_in_flight_max: { ...count, description: 'Bytes of those lines.' },
    list_limit_max: { ...count, description: 'Largest `limit` of `GET /v1/timers` and `GET /v1/dead`.' },
    bulk_cancel_ids_max: { ...count, description: '`ids` one `POST /v1/timers/cancel` names at most.' },
  },
  required: [
    'json_body_bytes_max',
    'batch_body_bytes_max',
    'batch_logged_bytes_max',
    'batch_rows_max',
    'payload_bytes_max',
    'key_bytes_max',
    'headers_count_max',
    'headers_bytes_max',
    'target_bytes_max',
    'stream_lines_in_flight_max',
    'stream_bytes_in_flight_max',
    'list_limit_max',
    'bulk_cancel_ids_max',
  ],
  additionalProperties: false,
} as const;

/** The answer, built once: the limits are the modules' constants. */
export const serviceLimits = {
  json_body_bytes_max: ingestLimits.jsonBodyBytesMax,
  batch_body_bytes_max: ingestLimits.bodyBytesMax,
  batch_logged_bytes_max: walLimits.recordBodyBytesMax,
  batch_rows_max: timerLimits.rowsPerBatchMax,
  payload_bytes_max: timerLimits.payloadBytesMax,
  key_bytes_max: timerLimits.keyBytesMax,
  headers_count_max: timerLimits.headerCountMax,
  headers_bytes_max: timerLimits.headersBytesMax,
  target_bytes_max: timerLimits.targetBytesMax,
  stream_lines_in_flight_max: streamLimits.linesInFlightMax,
  stream_bytes_in_flight_max: streamLimits.linesBytesInFlightMax,
  list_limit_max: Math.min(timerListLimits.max, deadListLimits.max),
  bulk_cancel_ids_max: bulkCancelLimits.idsMax,
} as const satisfies Record<(typeof limitsSchema.required)[number], number>;

export async function limitsRoutes(app: HttpServer): Promise<void> {
  app.get('/v1/limits', { schema: { response: { 200: limitsSchema } } }, limits);
}

function limits(): typeof serviceLimits {
  return serviceLimits;
}
