// /v1/schedules: recurring timers (engine/schedules/). PUT /{name} creates or replaces a
// schedule once its SCHEDULE record is durable and answers it with its next five occurrences;
// GET lists them by name (cursor, limit ≤ 1000), GET /{name} answers one, DELETE /{name}
// deletes one, POST /{name}/pause and /resume hold and release it (404 unknown). The timer
// fields (target, payload or payload_base64, headers, queue) are read and checked as a timer's
// are (BATCH_INVALID, TARGET_REFUSED naming the field); the rule's fields here and in
// compileRule (SCHEDULE_INVALID naming the field). Main thread.
import { isUtf8 as isUtf8Buffer } from 'node:buffer';
import { batchFromSpecs } from '../../../engine/batch/timer-batch.ts';
import { errorCodes, FermataError } from '../../../engine/errors.ts';
import type { Engine, ScheduleInput, ScheduleView } from '../../../engine/engine.ts';
import { scheduleLimits } from '../../../engine/limits.ts';
import type { CatchUp } from '../../../engine/schedules/rule.ts';
import { inJsonTerms, parseRfc3339, specFromJsonTimer } from '../body/json-batch.ts';
import { httpErrorCodes, HttpProblem } from '../error-map.ts';
import { isoOf } from '../iso-time.ts';
import type { HttpServer, RoutesOptions } from '../types.ts';

const ruleFields = ['cron', 'time_zone', 'every_ms', 'start_at', 'end_at', 'jitter_ms', 'catch_up'] as const;
const timerFields = ['target', 'payload', 'payload_base64', 'headers', 'queue'] as const;
const knownFields = new Set<string>([...ruleFields, ...timerFields]);

const nextSchema = {
  type: 'object',
  properties: { occurrence: { type: 'string', format: 'date-time' }, fire_at: { type: 'string', format: 'date-time' } },
  required: ['occurrence', 'fire_at'],
  additionalProperties: false,
} as const;

export const scheduleSchema = {
  type: 'object',
  properties: {
    name: { type: 'string' },
    cron: { type: 'string' },
    time_zone: { type: 'string' },
    every_ms: { type: 'integer' },
    start_at: { type: 'string', format: 'date-time' },
    end_at: { type: 'string', format: 'date-time' },
    jitter_ms: { type: 'integer' },
    catch_up: { type: 'string', enum: ['latest', 'all', 'none'] },
    target: { type: 'string' },
    queue: { type: 'string' },
    payload: { type: ['string', 'null'] },
    payload_base64: { type: ['string', 'null'] },
    headers: { type: 'object', additionalProperties: { type: 'string' } },
    paused: { type: 'boolean' },
    created_at: { type: 'string', format: 'date-time' },
    updated_at: { type: 'string', format: 'date-time' },
    next: { type: 'array', items: nextSchema },
  },
  required: ['name', 'jitter_ms', 'catch_up', 'target', 'queue', 'payload', 'payload_base64', 'headers', 'paused', 'created_at', 'updated_at', 'next'],
  additionalProperties: false,
} as const;

export const scheduleListSchema = {
  type: 'object',
  properties: { schedules: { type: 'array', items: scheduleSchema }, next_cursor: { type: ['string', 'null'] } },
  required: ['schedules', 'next_cursor'],
  additionalProperties: false,
} as const;

export const scheduleDeletedSchema = {
  type: 'object',
  properties: { name: { type: 'string' }, deleted: { type: 'boolean' } },
  required: ['name', 'deleted'],
  additionalProperties: false,
} as const;

const refuse = (message: string, field: string): FermataError => new FermataError(errorCodes.scheduleInvalid, message, { field });

const noSuchSchedule = (name: string): HttpProblem => new HttpProblem(httpErrorCodes.notFound, `no schedule ${name}`);

function optionalString(fields: Record<string, unknown>, field: string): string | undefined {
  const value = fields[field];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') throw refuse(`${field} must be a string`, field);
  return value;
}

function optionalInteger(fields: Record<string, unknown>, field: string): number | undefined {
  const value = fields[field];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value < 0) throw refuse(`${field} must be a whole number ≥ 0, not ${JSON.stringify(value)}`, field);
  return value;
}

/** start_at / end_at: an RFC 3339 date-time or epoch ms ≥ 10^12, as a timer's fire_at. */
function optionalInstant(fields: Record<string, unknown>, field: string): number | undefined {
  const value = fields[field];
  if (value === undefined || value === null) return undefined;
  const ms = typeof value === 'string' ? parseRfc3339(value) : typeof value === 'number' && Number.isSafeInteger(value) && value >= 1e12 ? value : undefined;
  if (ms === undefined) throw refuse(`${field} must be an RFC 3339 date-time or whole epoch ms ≥ 10^12, not ${JSON.stringify(value)}`, field);
  return ms;
}

/** A PUT body → what the engine takes; the timer fields checked as an add checks them. */
export function scheduleInputOf(body: unknown, check: (spec: ReturnType<typeof specFromJsonTimer>) => void): ScheduleInput {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw refuse('the body must be a JSON object: {"every_ms": 60000, "target": "https://…"} or {"cron": "0 9 * * MON-FRI", "time_zone": "Europe/Berlin", "target": "https://…"}', '');
  const fields = body as Record<string, unknown>;
  for (const name in fields) if (!knownFields.has(name)) throw refuse(`unknown field ${JSON.stringify(name)} (known: ${[...knownFields].join(', ')})`, name);
  const catchUp = optionalString(fields, 'catch_up');
  if (catchUp !== undefined && catchUp !== 'latest' && catchUp !== 'all' && catchUp !== 'none') throw refuse(`catch_up must be "latest", "all" or "none", not ${JSON.stringify(catchUp)}`, 'catch_up');
  const timer: Record<string, unknown> = { delay_ms: 0 };
  for (const field of timerFields) if (fields[field] !== undefined) timer[field] = fields[field];
  let spec: ReturnType<typeof specFromJsonTimer>;
  try {
    spec = specFromJsonTimer(timer, 0);
    check(spec);
  } catch (err) {
    throw inJsonTerms(err, undefined);
  }
  const payload = spec.payload === undefined ? new Uint8Array(0) : typeof spec.payload === 'string' ? new TextEncoder().encode(spec.payload) : spec.payload;
  return {
    cron: optionalString(fields, 'cron'),
    timeZone: optionalString(fields, 'time_zone'),
    everyMs: optionalInteger(fields, 'every_ms'),
    startAtMs: optionalInstant(fields, 'start_at'),
    endAtMs: optionalInstant(fields, 'end_at'),
    jitterMs: optionalInteger(fields, 'jitter_ms'),
    catchUp: catchUp as CatchUp | undefined,
    target: spec.target,
    queue: spec.queue ?? 'default',
    payload,
    headers: spec.headers === undefined ? '' : JSON.stringify(spec.headers),
  };
}

const isUtf8 = (bytes: Uint8Array): boolean => isUtf8Buffer(bytes);

/** A schedule as the API answers it. */
export function scheduleBody(view: ScheduleView): Record<string, unknown> {
  const d = view.definition;
  const payload = Buffer.from(d.payload.buffer, d.payload.byteOffset, d.payload.byteLength);
  return {
    name: view.name,
    ...(d.cron === undefined ? {} : { cron: d.cron, time_zone: d.timeZone ?? 'UTC' }),
    ...(d.everyMs === undefined ? {} : { every_ms: d.everyMs }),
    ...(d.startAtMs === undefined ? {} : { start_at: isoOf(d.startAtMs) }),
    ...(d.endAtMs === undefined ? {} : { end_at: isoOf(d.endAtMs) }),
    jitter_ms: d.jitterMs,
    catch_up: d.catchUp,
    target: d.target,
    queue: d.queue,
    payload: isUtf8(payload) ? payload.toString('utf8') : null,
    payload_base64: isUtf8(payload) ? null : payload.toString('base64'),
    headers: d.headers === '' ? {} : (JSON.parse(d.headers) as Record<string, string>),
    paused: view.paused,
    created_at: isoOf(view.createdAtMs),
    updated_at: isoOf(view.updatedAtMs),
    next: view.next.map(({ occurrenceMs, fireAtMs }) => ({ occurrence: isoOf(occurrenceMs), fire_at: isoOf(fireAtMs) })),
  };
}

export interface NameParams {
  readonly name: string;
}

export interface ScheduleListQuery {
  readonly limit?: number;
  readonly cursor?: string;
}

export const scheduleListQuerySchema = {
  type: 'object',
  properties: { limit: { type: 'integer', minimum: 1, maximum: scheduleLimits.listLimitMax }, cursor: { type: 'string', minLength: 1 } },
  additionalProperties: false,
} as const;

/** A page of schedules as the API answers it. */
export interface ScheduleListBody {
  readonly schedules: Record<string, unknown>[];
  readonly next_cursor: string | null;
}

/**
 * What each route does on the engine that holds the schedule: the single node's routes below call
 * these on its engine, cluster mode's (cluster/schedule-routes.ts) on the engine of the name's
 * partition, here or at its owner.
 */
export const scheduleActions = {
  async put(engine: Engine, name: string, body: unknown): Promise<Record<string, unknown>> {
    const input = scheduleInputOf(body, (spec) => engine.validate(batchFromSpecs([spec])));
    return scheduleBody(await engine.putSchedule(name, input));
  },
  get(engine: Engine, name: string): Record<string, unknown> {
    const view = engine.schedule(name);
    if (view === undefined) throw noSuchSchedule(name);
    return scheduleBody(view);
  },
  async delete(engine: Engine, name: string): Promise<{ name: string; deleted: boolean }> {
    if (!(await engine.deleteSchedule(name))) throw noSuchSchedule(name);
    return { name, deleted: true };
  },
  async setPaused(engine: Engine, name: string, paused: boolean): Promise<Record<string, unknown>> {
    const view = await engine.setSchedulePaused(name, paused);
    if (view === undefined) throw noSuchSchedule(name);
    return scheduleBody(view);
  },
  list(engine: Engine, limit: number, cursor: string | undefined): ScheduleListBody {
    const page = engine.listSchedules(limit, cursor);
    return { schedules: page.schedules.map(scheduleBody), next_cursor: page.nextCursor };
  },
};

/** POST /v1/schedules/{name}/pause and /resume: whether each pauses. */
export const pauseActions = [
  ['pause', true],
  ['resume', false],
] as const;

export async function schedulesRoutes(app: HttpServer, { engine }: RoutesOptions): Promise<void> {
  app.put<{ Params: NameParams; Body: unknown }>('/v1/schedules/:name', { schema: { response: { 200: scheduleSchema } } }, async (request) => scheduleActions.put(engine, request.params.name, request.body));

  app.get<{ Querystring: ScheduleListQuery }>('/v1/schedules', { schema: { querystring: scheduleListQuerySchema, response: { 200: scheduleListSchema } } }, async (request) =>
    scheduleActions.list(engine, request.query.limit ?? scheduleLimits.listLimitDefault, request.query.cursor),
  );

  app.get<{ Params: NameParams }>('/v1/schedules/:name', { schema: { response: { 200: scheduleSchema } } }, async (request) => scheduleActions.get(engine, request.params.name));

  app.delete<{ Params: NameParams }>('/v1/schedules/:name', { schema: { response: { 200: scheduleDeletedSchema } } }, async (request) => scheduleActions.delete(engine, request.params.name));

  for (const [action, paused] of pauseActions) {
    app.post<{ Params: NameParams }>(`/v1/schedules/:name/${action}`, { schema: { response: { 200: scheduleSchema } } }, async (request) => scheduleActions.setPaused(engine, request.params.name, paused));
  }
}
