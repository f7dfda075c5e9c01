// The bodies of SCHEDULE (12) and SCHEDULE_MARK (13) records (docs/format/engine-records.md):
// UTF-8 JSON, like QUEUE's, since schedules change rarely next to timers and a readable record
// is worth more than its bytes. Pure functions, any thread. A decoder answers undefined for a
// body it cannot read; replay turns that into WAL_CORRUPT naming the record.
//
//   SCHEDULE       {"op":"put","name","at_ms","definition":{…}} | {"op":"pause"|"resume"|"delete","name","at_ms"}
//   SCHEDULE_MARK  {"marks":[["name", mark_ms], …]}
import type { CatchUp } from './rule.ts';

/** A schedule as PUT defined it, validated (schedule-input.ts): its rule and the timer each occurrence becomes. */
export interface ScheduleDefinition {
  readonly cron?: string | undefined;
  readonly timeZone?: string | undefined;
  readonly everyMs?: number | undefined;
  /** every_ms counts from here: start_at, else the time of the PUT. */
  readonly anchorMs: number;
  readonly startAtMs?: number | undefined;
  readonly endAtMs?: number | undefined;
  readonly jitterMs: number;
  readonly catchUp: CatchUp;
  readonly target: string;
  readonly queue: string;
  readonly payload: Uint8Array;
  /** Delivery headers as the engine keeps them: JSON object text, '' for none. */
  readonly headers: string;
}

/** One SCHEDULE record's change. `atMs` is the engine's clock when it was decided. */
export type ScheduleChange =
  | { readonly op: 'put'; readonly name: string; readonly atMs: number; readonly definition: ScheduleDefinition }
  | { readonly op: 'pause' | 'resume' | 'delete'; readonly name: string; readonly atMs: number };

const encoder = new TextEncoder();
const decoder = new TextDecoder('utf-8', { fatal: true });

/** The definition as the record's (and the manifest's) JSON object. */
export function definitionJson(d: ScheduleDefinition): Record<string, unknown> {
  return {
    ...(d.cron === undefined ? {} : { cron: d.cron }),
    ...(d.timeZone === undefined ? {} : { time_zone: d.timeZone }),
    ...(d.everyMs === undefined ? {} : { every_ms: d.everyMs }),
    anchor_ms: d.anchorMs,
    ...(d.startAtMs === undefined ? {} : { start_at_ms: d.startAtMs }),
    ...(d.endAtMs === undefined ? {} : { end_at_ms: d.endAtMs }),
    jitter_ms: d.jitterMs,
    catch_up: d.catchUp,
    target: d.target,
    queue: d.queue,
    payload_base64: Buffer.from(d.payload.buffer, d.payload.byteOffset, d.payload.byteLength).toString('base64'),
    ...(d.headers === '' ? {} : { headers: JSON.parse(d.headers) as unknown }),
  };
}

export function encodeScheduleChange(change: ScheduleChange): Uint8Array {
  const { op, name, atMs } = change;
  return encoder.encode(JSON.stringify(change.op === 'put' ? { op, name, at_ms: atMs, definition: definitionJson(change.definition) } : { op, name, at_ms: atMs }));
}

const isWholeMs = (value: unknown): value is number => typeof value === 'number' && Number.isSafeInteger(value);
const optionalMs = (value: unknown): boolean => value === undefined || isWholeMs(value);
const catchUps: readonly string[] = ['latest', 'all', 'none'];

/** A definition from its JSON object, or undefined when a field is missing or of the wrong type (the rule itself is checked by compileRule). */
export function definitionFromJson(json: unknown): ScheduleDefinition | undefined {
  if (typeof json !== 'object' || json === null || Array.isArray(json)) return undefined;
  const d = json as Record<string, unknown>;
  if (d.cron !== undefined && typeof d.cron !== 'string') return undefined;
  if (d.time_zone !== undefined && typeof d.time_zone !== 'string') return undefined;
  if (!optionalMs(d.every_ms) || !isWholeMs(d.anchor_ms) || !optionalMs(d.start_at_ms) || !optionalMs(d.end_at_ms) || !isWholeMs(d.jitter_ms)) return undefined;
  if (typeof d.catch_up !== 'string' || !catchUps.includes(d.catch_up)) return undefined;
  if (typeof d.target !== 'string' || typeof d.queue !== 'string' || typeof d.payload_base64 !== 'string') return undefined;
  const headers = d.headers;
  if (headers !== undefined && (typeof headers !== 'object' || headers === null || Array.isArray(headers) || Object.values(headers).some((v) => typeof v !== 'string'))) return undefined;
  return {
    cron: d.cron as string | undefined,
    timeZone: d.time_zone as string | undefined,
    everyMs: d.every_ms as number | undefined,
    anchorMs: d.anchor_ms,
    startAtMs: d.start_at_ms as number | undefined,
    endAtMs: d.end_at_ms as number | undefined,
    jitterMs: d.jitter_ms,
    catchUp: d.catch_up as CatchUp,
    target: d.target,
    queue: d.queue,
    payload: new Uint8Array(Buffer.from(d.payload_base64, 'base64')),
    headers: headers === undefined ? '' : JSON.stringify(headers),
  };
}

function parseJson(body: Uint8Array): unknown {
  try {
    return JSON.parse(decoder.decode(body)) as unknown;
  } catch {
    return undefined;
  }
}

/** A SCHEDULE body's change, or undefined when it is malformed. */
export function decodeScheduleChange(body: Uint8Array): ScheduleChange | undefined {
  const doc = parseJson(body);
  if (typeof doc !== 'object' || doc === null) return undefined;
  const { op, name, at_ms: atMs, definition } = doc as Record<string, unknown>;
  if (typeof name !== 'string' || name === '' || !isWholeMs(atMs)) return undefined;
  if (op === 'put') {
    const decoded = definitionFromJson(definition);
    return decoded === undefined ? undefined : { op, name, atMs, definition: decoded };
  }
  if ((op === 'pause' || op === 'resume' || op === 'delete') && definition === undefined) return { op, name, atMs };
  return undefined;
}

/** A schedule's high-water mark: the last occurrence created or passed over (epoch ms). */
export interface ScheduleMark {
  readonly name: string;
  readonly markMs: number;
}

export function encodeScheduleMarks(marks: readonly ScheduleMark[]): Uint8Array {
  return encoder.encode(JSON.stringify({ marks: marks.map(({ name, markMs }) => [name, markMs]) }));
}

/** A SCHEDULE_MARK body's marks, or undefined when it is malformed. */
export function decodeScheduleMarks(body: Uint8Array): ScheduleMark[] | undefined {
  const doc = parseJson(body);
  if (typeof doc !== 'object' || doc === null || !Array.isArray((doc as { marks?: unknown }).marks)) return undefined;
  const marks: ScheduleMark[] = [];
  for (const entry of (doc as { marks: unknown[] }).marks) {
    if (!Array.isArray(entry) || entry.length !== 2 || typeof entry[0] !== 'string' || !isWholeMs(entry[1])) return undefined;
    marks.push({ name: entry[0], markMs: entry[1] });
  }
  return marks.length === 0 ? undefined : marks;
}
