// Queue configuration: the retry policy and flow limits a queue's timers are delivered under
// (docs/api.md, PUT /v1/queues/{name}). A config is data, validated here, logged as a QUEUE
// record and replayed like every other change. A queue never configured uses the defaults.
import { errorCodes, FermataError } from './errors.ts';
import { timerLimits } from './limits.ts';

export interface QueueConfig {
  /** Attempts before a timer is dead (the first delivery counts). */
  readonly max_attempts: number;
  readonly min_backoff_ms: number;
  readonly max_backoff_ms: number;
  /** How many times the backoff doubles before it grows linearly. */
  readonly max_doublings: number;
  /** Deliveries per second at most; null = no limit. */
  readonly rate_per_s: number | null;
  /** Deliveries in flight at most; null = no limit ("pull": due timers buffered and leased at most; null = the dispatcher's default bound). */
  readonly max_concurrent: number | null;
  /** How long one delivery attempt waits for the answer's head before it counts as failed ("pull": how long a lease lasts unacknowledged). */
  readonly timeout_ms: number;
  /**
   * "request": one POST per timer to its target; "arrow": due timers POSTed as Arrow record
   * batches to `sink`; "pull": due timers wait for a Flight DoGet, which leases them until acked.
   */
  readonly delivery: DeliveryMode;
  /** Where "arrow" delivery POSTs its batches (an absolute http(s) URL); not used by "request" and "pull". */
  readonly sink: string | null;
  /** Rows in one Arrow batch at most ("arrow" delivery; "pull": rows one DoGet leases at most). */
  readonly batch_rows_max: number;
  /** How long due timers wait for more to fill an Arrow batch ("arrow" delivery). */
  readonly linger_ms: number;
  /** How long a delivered or cancelled timer (and its key) is kept; null = the service's retention (24 h unless configured). */
  readonly retention_ms: number | null;
  /** How long a dead timer (and its key) is kept; null = the service's dead retention (7 days unless configured). */
  readonly dead_retention_ms: number | null;
  /** Timers waiting or being delivered at most (queue-limits.ts says which are counted); an add past it is QUEUE_FULL. null = no cap. */
  readonly max_pending: number | null;
}

export const deliveryModes = ['request', 'arrow', 'pull'] as const;
export type DeliveryMode = (typeof deliveryModes)[number];

export const defaultQueueConfig: QueueConfig = {
  max_attempts: 20,
  min_backoff_ms: 1_000,
  max_backoff_ms: 3_600_000,
  max_doublings: 16,
  rate_per_s: null,
  max_concurrent: null,
  timeout_ms: 30_000,
  delivery: 'request',
  sink: null,
  batch_rows_max: 10_000,
  linger_ms: 50,
  retention_ms: null,
  dead_retention_ms: null,
  max_pending: null,
};

const fieldLimits = {
  max_attempts: { min: 1, max: 1_000 },
  min_backoff_ms: { min: 0, max: 30 * 24 * 3_600_000 },
  max_backoff_ms: { min: 0, max: 30 * 24 * 3_600_000 },
  max_doublings: { min: 0, max: 62 },
  rate_per_s: { min: 1, max: 10_000_000 },
  max_concurrent: { min: 1, max: 1_000_000 },
  timeout_ms: { min: 1, max: 600_000 },
  batch_rows_max: { min: 1, max: 100_000 },
  linger_ms: { min: 0, max: 60_000 },
  retention_ms: { min: 1, max: timerLimits.horizonMsMax },
  dead_retention_ms: { min: 1, max: timerLimits.horizonMsMax },
  max_pending: { min: 1, max: 1_000_000_000 },
} as const;

/** Fields that are not whole numbers, checked on their own. */
const otherFields = ['delivery', 'sink'] as const;
/** Bytes of a sink URL at most (as a target's). */
const sinkBytesMax = 2048;

type Field = keyof typeof fieldLimits;
const fields = Object.keys(fieldLimits) as Field[];
const knownFields: readonly string[] = [...fields, ...otherFields];
const nullable = new Set<Field>(['rate_per_s', 'max_concurrent', 'retention_ms', 'dead_retention_ms', 'max_pending']);
/**
 * Fields a QUEUE record leaves out while they are null (their default): a build from before them
 * refuses a config naming a field it does not know, so a queue that does not use them stays
 * readable by it (docs/format/engine-records.md, "QUEUE (4)").
 */
const omittedWhileNull = ['retention_ms', 'dead_retention_ms', 'max_pending'] as const;

function invalid(message: string, field: string): FermataError {
  return new FermataError(errorCodes.queueInvalid, message, { field });
}

/**
 * A complete config from a client's JSON object: absent fields take their defaults, unknown
 * fields and values out of range are refused naming the field.
 */
export function parseQueueConfig(input: unknown): QueueConfig {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) throw invalid('a queue config must be a JSON object', '');
  const given = input as Record<string, unknown>;
  for (const key of Object.keys(given)) {
    if (!knownFields.includes(key)) throw invalid(`unknown field ${key} (known: ${knownFields.join(', ')})`, key);
  }
  const config: Record<string, number | string | null> = { ...defaultQueueConfig };
  if (given.delivery !== undefined) {
    if (!(deliveryModes as readonly unknown[]).includes(given.delivery)) throw invalid(`delivery must be one of ${deliveryModes.map((mode) => JSON.stringify(mode)).join(', ')}`, 'delivery');
    config.delivery = given.delivery as DeliveryMode;
  }
  if (given.sink !== undefined) config.sink = parseSink(given.sink);
  for (const field of fields) {
    const value = given[field];
    if (value === undefined) continue;
    if (value === null && nullable.has(field)) {
      config[field] = null;
      continue;
    }
    const { min, max } = fieldLimits[field];
    if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
      throw invalid(`${field} must be a whole number from ${min} to ${max}${nullable.has(field) ? ', or null for no limit' : ''}`, field);
    }
    config[field] = value;
  }
  const parsed = config as unknown as QueueConfig;
  if (parsed.max_backoff_ms < parsed.min_backoff_ms) throw invalid('max_backoff_ms must not be below min_backoff_ms', 'max_backoff_ms');
  if (parsed.delivery === 'arrow' && parsed.sink === null) throw invalid('"arrow" delivery needs a sink: the URL its batches are POSTed to', 'sink');
  return parsed;
}

function parseSink(value: unknown): string | null {
  if (value === null) return null;
  if (typeof value !== 'string' || Buffer.byteLength(value) > sinkBytesMax) throw invalid(`sink must be an absolute http(s) URL of at most ${sinkBytesMax} bytes, or null`, 'sink');
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw invalid('sink must be an absolute http(s) URL, or null', 'sink');
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') throw invalid('sink must be an http or https URL', 'sink');
  if (url.username !== '' || url.password !== '') throw invalid('sink must not carry credentials', 'sink');
  return value;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true });

/**
 * A QUEUE record's change (docs/format/engine-records.md, "QUEUE (4)"): a queue's whole config,
 * its delete, or its pause (`paused` true) or resume (false).
 */
export type QueueChange =
  | { readonly kind: 'config'; readonly name: string; readonly config: QueueConfig }
  | { readonly kind: 'deleted'; readonly name: string }
  | { readonly kind: 'paused'; readonly name: string; readonly paused: boolean };

/**
 * The body of a QUEUE record: UTF-8 JSON `{"name": …, "config": {…}}`, `{"name": …,
 * "deleted": true}` for a delete, `{"name": …, "paused": true|false}` for a pause or resume
 * (rare, so JSON is fine).
 */
export function encodeQueueRecord(name: string, config: QueueConfig): Uint8Array {
  return encoder.encode(JSON.stringify({ name, config: storedConfig(config) }));
}

/** A config as a QUEUE record or a manifest keeps it: the fields of omittedWhileNull left out while null. */
export function storedConfig(config: QueueConfig): Partial<QueueConfig> {
  const stored: Record<string, unknown> = { ...config };
  for (const field of omittedWhileNull) if (stored[field] === null) delete stored[field];
  return stored as Partial<QueueConfig>;
}

export function encodeQueueDeleted(name: string): Uint8Array {
  return encoder.encode(JSON.stringify({ name, deleted: true }));
}

export function encodeQueuePaused(name: string, paused: boolean): Uint8Array {
  return encoder.encode(JSON.stringify({ name, paused }));
}

/**
 * A QUEUE record's change, or undefined when malformed: no string name; `deleted` with a
 * `config`; `paused` that is not a boolean, or beside `config` or `deleted`; a config the API
 * would refuse.
 */
export function decodeQueueRecord(body: Uint8Array): QueueChange | undefined {
  try {
    const value = JSON.parse(decoder.decode(body)) as { name?: unknown; config?: unknown; deleted?: unknown; paused?: unknown };
    const name = value.name;
    if (typeof name !== 'string') return undefined;
    if (value.paused !== undefined) {
      const alone = value.config === undefined && value.deleted === undefined;
      return alone && typeof value.paused === 'boolean' ? { kind: 'paused', name, paused: value.paused } : undefined;
    }
    if (value.deleted === true) return value.config === undefined ? { kind: 'deleted', name } : undefined;
    return { kind: 'config', name, config: parseQueueConfig(value.config) };
  } catch {
    return undefined;
  }
}
