// The JSON views of a timer that routes answer with: the timer view (GET /v1/timers/{id}) and a
// dead timer (an entry of GET /v1/dead). Each is a response schema, which fastify validates and
// serializes the answer by, and the function that fills it from the engine's view. A field is
// defined once, its schema beside its value, and a view lists its fields in the order they are
// written, so a field both views show is one definition, and a field added to a view is one
// entry here. The OpenAPI document describes the same fields for users (routes/openapi*.ts).
// Any thread.
import { isUtf8 } from 'node:buffer';
import type { DeadTimer, TimerHeaders, TimerView } from '../../engine/types.ts';
import { isoOf } from './iso-time.ts';

type JsonValue = string | number | null | TimerHeaders;

interface ViewField<V> {
  readonly schema: object;
  readonly of: (view: V) => JsonValue;
}

/** What the engine tells of any timer, under the names both views share. */
type AnyTimer = Pick<TimerView & DeadTimer, 'id' | 'revision' | 'queue' | 'target' | 'fireAtMs' | 'attempts' | 'lastStatus' | 'lastError' | 'lastAttemptAtMs' | 'headers' | 'payload' | 'createdAtMs'>;

const isoOrNull = (ms: number | null): string | null => (ms === null ? null : isoOf(ms));

const textOf = (bytes: Uint8Array): Buffer => Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);

/** The payload as text when it is UTF-8 (what an add's `payload` takes), else null. */
const payloadText = (bytes: Uint8Array): string | null => (isUtf8(bytes) ? textOf(bytes).toString('utf8') : null);

/** The payload as base64 when it is not UTF-8 (what an add's `payload_base64` takes), else null. */
const payloadBase64 = (bytes: Uint8Array): string | null => (isUtf8(bytes) ? null : textOf(bytes).toString('base64'));

/** The fields any view of a timer may show. */
const timerFields = {
  id: { schema: { type: 'string' }, of: (timer) => timer.id },
  revision: { schema: { type: 'integer', minimum: 1 }, of: (timer) => timer.revision },
  queue: { schema: { type: 'string' }, of: (timer) => timer.queue },
  target: { schema: { type: 'string' }, of: (timer) => timer.target },
  fire_at: { schema: { type: 'string' }, of: (timer) => isoOf(timer.fireAtMs) },
  attempts: { schema: { type: 'integer' }, of: (timer) => timer.attempts },
  last_status: { schema: { type: ['integer', 'null'] }, of: (timer) => timer.lastStatus },
  last_error: { schema: { type: ['string', 'null'] }, of: (timer) => timer.lastError },
  last_attempt_at: { schema: { type: ['string', 'null'] }, of: (timer) => isoOrNull(timer.lastAttemptAtMs) },
  headers: { schema: { type: 'object', additionalProperties: { type: 'string' } }, of: (timer) => timer.headers },
  // Exactly one of the two is a string, the other null: either can be sent back to an add as it is.
  payload: { schema: { type: ['string', 'null'] }, of: (timer) => payloadText(timer.payload) },
  payload_base64: { schema: { type: ['string', 'null'] }, of: (timer) => payloadBase64(timer.payload) },
  created_at: { schema: { type: ['string', 'null'] }, of: (timer) => isoOrNull(timer.createdAtMs) },
} as const satisfies Record<string, ViewField<AnyTimer>>;

/** Fields only a live timer's view shows. */
const liveFields = {
  state: { schema: { type: 'string' }, of: (timer) => timer.state },
  key: { schema: { type: ['string', 'null'] }, of: (timer) => timer.key },
  next_attempt_at: { schema: { type: ['string', 'null'] }, of: (timer) => isoOrNull(timer.nextAttemptAtMs) },
  callback: { schema: { type: ['string', 'null'] }, of: (timer) => timer.callback },
  failure_callback: { schema: { type: ['string', 'null'] }, of: (timer) => timer.failureCallback },
} as const satisfies Record<string, ViewField<TimerView>>;

/** Fields only a dead timer's entry shows. */
const deadFields = {
  reason: { schema: { type: 'string', enum: ['attempts_exhausted', 'gone', 'target_refused', 'unknown'] }, of: (timer) => timer.reason },
} as const satisfies Record<string, ViewField<DeadTimer>>;

export interface View<V> {
  /** The response schema: every field required, no other allowed. */
  readonly schema: { readonly type: 'object'; readonly properties: Record<string, object>; readonly required: readonly string[]; readonly additionalProperties: false };
  /** The answer's object for one timer. */
  json(view: V): Record<string, JsonValue>;
}

/** A view of `names` from `fields`, in that order. */
function view<V, F extends Record<string, ViewField<V>>>(fields: F, names: ReadonlyArray<keyof F & string>): View<V> {
  const chosen = names.map((name) => [name, fields[name] as ViewField<V>] as const);
  return {
    schema: { type: 'object', properties: Object.fromEntries(chosen.map(([name, field]) => [name, field.schema])), required: names, additionalProperties: false },
    json(timer: V): Record<string, JsonValue> {
      const out: Record<string, JsonValue> = {};
      for (const [name, field] of chosen) out[name] = field.of(timer);
      return out;
    },
  };
}

/** GET /v1/timers/{id}. */
export const timerView = view<TimerView, typeof timerFields & typeof liveFields>({ ...timerFields, ...liveFields }, [
  'id',
  'state',
  'revision',
  'fire_at',
  'attempts',
  'queue',
  'key',
  'last_status',
  'last_error',
  'last_attempt_at',
  'next_attempt_at',
  'callback',
  'failure_callback',
  'target',
  'headers',
  'payload',
  'payload_base64',
  'created_at',
]);

/** An entry of GET /v1/dead. */
export const deadTimerView = view<DeadTimer, typeof timerFields & typeof deadFields>({ ...timerFields, ...deadFields }, [
  'id',
  'revision',
  'queue',
  'target',
  'fire_at',
  'attempts',
  'last_status',
  'reason',
  'last_error',
  'last_attempt_at',
  'headers',
  'payload',
  'payload_base64',
  'created_at',
]);
