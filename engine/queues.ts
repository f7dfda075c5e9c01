// Queue configuration: the retry policy and flow limits a queue's timers are delivered under
// (DESIGN.md, PUT /v1/queues/{name}). A config is data, validated here, logged as a QUEUE
// record and replayed like every other change. A queue never configured uses the defaults.
import { errorCodes, FermataError } from './errors.ts';

export interface QueueConfig {
  /** Attempts before a timer is dead (the first delivery counts). */
  readonly max_attempts: number;
  readonly min_backoff_ms: number;
  readonly max_backoff_ms: number;
  /** How many times the backoff doubles before it grows linearly. */
  readonly max_doublings: number;
  /** Deliveries per second at most; null = no limit. */
  readonly rate_per_s: number | null;
  /** Deliveries in flight at most; null = no limit. */
  readonly max_concurrent: number | null;
  /** How long one delivery attempt waits for the answer's head before it counts as failed. */
  readonly timeout_ms: number;
}

export const defaultQueueConfig: QueueConfig = {
  max_attempts: 20,
  min_backoff_ms: 1_000,
  max_backoff_ms: 3_600_000,
  max_doublings: 16,
  rate_per_s: null,
  max_concurrent: null,
  timeout_ms: 30_000,
};

const fieldLimits = {
  max_attempts: { min: 1, max: 1_000 },
  min_backoff_ms: { min: 0, max: 30 * 24 * 3_600_000 },
  max_backoff_ms: { min: 0, max: 30 * 24 * 3_600_000 },
  max_doublings: { min: 0, max: 62 },
  rate_per_s: { min: 1, max: 10_000_000 },
  max_concurrent: { min: 1, max: 1_000_000 },
  timeout_ms: { min: 1, max: 600_000 },
} as const;

type Field = keyof typeof fieldLimits;
const fields = Object.keys(fieldLimits) as Field[];
const nullable = new Set<Field>(['rate_per_s', 'max_concurrent']);

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
    if (!(fields as string[]).includes(key)) throw invalid(`unknown field ${key} (known: ${fields.join(', ')})`, key);
  }
  const config: Record<string, number | null> = { ...defaultQueueConfig };
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
  return parsed;
}

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true });

/** The body of a QUEUE record: UTF-8 JSON `{"name": …, "config": {…}}` (rare, so JSON is fine). */
export function encodeQueueRecord(name: string, config: QueueConfig): Uint8Array {
  return encoder.encode(JSON.stringify({ name, config }));
}

export function decodeQueueRecord(body: Uint8Array): { name: string; config: QueueConfig } | undefined {
  try {
    const value = JSON.parse(decoder.decode(body)) as { name?: unknown; config?: unknown };
    if (typeof value.name !== 'string') return undefined;
    return { name: value.name, config: parseQueueConfig(value.config) };
  } catch {
    return undefined;
  }
}
