// JSON and NDJSON bodies → TimerBatch: the row-oriented edge of ingest. Checks here are the
// JSON-shaped ones (unknown fields, types, RFC 3339 syntax, base64, fire_at vs delay_ms); the
// rules every transport shares (URL, queue name, sizes, horizon, header names) stay in
// engine/batch/validate.ts, which runs in admit() and names the row and column. For NDJSON a
// row is not a line (blank lines are skipped), so lineOfRow lets an error from either place
// name both.
//
// Errors are FermataError BATCH_INVALID with details { field, row?, line? }: `field` is the
// JSON field name (Arrow's `column`), `row` is 0-based among the timers, `line` 1-based in the body.
import { batchFromSpecs, type TimerBatch, type TimerSpec } from '../../../engine/batch/timer-batch.ts';
import { secondsLikeFireAt } from '../../../engine/batch/validate.ts';
import { errorCodes, FermataError, isFermataError } from '../../../engine/errors.ts';
import { type TraceHeaders, withTrace } from '../../../engine/trace-context.ts';
import { ndjsonLineProblem } from './json-hints.ts';
import { gaveDelayMs } from '../../duplicate-answers.ts';

const timerFields = ['fire_at', 'delay_ms', 'target', 'payload', 'payload_base64', 'headers', 'key', 'queue', 'callback', 'failure_callback'] as const;
const knownFields: ReadonlySet<string> = new Set(timerFields);

/** Where a timer sits in its body: undefined for a single JSON timer. */
interface RowPlace {
  readonly row: number;
  readonly line: number;
}

function refuse(problem: string, field: string, place: RowPlace | undefined): FermataError {
  if (place === undefined) return new FermataError(errorCodes.batchInvalid, problem, { field });
  return new FermataError(errorCodes.batchInvalid, `${problem} in row ${place.row} (line ${place.line})`, { field, row: place.row, line: place.line });
}

// RFC 3339 §5.6 date-time (also its lowercase `t`/`z` and the space separator §5.6 allows).
const rfc3339 = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:[Zz]|([+-])(\d{2}):(\d{2}))$/;
const daysInMonth = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

/**
 * Epoch ms of an RFC 3339 date-time, or undefined if the text is not one. A fraction finer
 * than a millisecond rounds up: a timer must never fire before its time.
 */
export function parseRfc3339(text: string): number | undefined {
  const match = rfc3339.exec(text);
  if (match === null) return undefined;
  const [year, month, day, hour, minute, second] = match.slice(1, 7).map(Number) as [number, number, number, number, number, number];
  const isLeapYear = year % 4 === 0 && (year % 100 !== 0 || year % 400 === 0);
  const monthDays = month === 2 && !isLeapYear ? 28 : daysInMonth[month - 1];
  // Second 60 is a leap second; Date.UTC carries it into the next minute (late, never early).
  if (monthDays === undefined || day < 1 || day > monthDays || hour > 23 || minute > 59 || second > 60) return undefined;
  const fraction = match[7] ?? '';
  const subMs = /[1-9]/.test(fraction.slice(3)) ? 1 : 0;
  const ms = Number(fraction.slice(0, 3).padEnd(3, '0')) + subMs;
  let offsetMinutes = 0;
  if (match[8] !== undefined) {
    const offsetHour = Number(match[9]);
    const offsetMinute = Number(match[10]);
    if (offsetHour > 23 || offsetMinute > 59) return undefined;
    offsetMinutes = (match[8] === '-' ? -1 : 1) * (offsetHour * 60 + offsetMinute);
  }
  const date = new Date(0);
  // setUTCFullYear, not Date.UTC: Date.UTC reads years 0–99 as 1900–1999.
  date.setUTCFullYear(year, month - 1, day);
  date.setUTCHours(hour, minute, second, ms);
  return date.getTime() - offsetMinutes * 60_000;
}

const base64Pattern = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}(?:==)?|[A-Za-z0-9+/]{3}=?)?$/;

type Mutable<T> = { -readonly [K in keyof T]: T[K] };

const isAbsent = (value: unknown): boolean => value === undefined || value === null;

function fireAtOf(fields: Record<string, unknown>, nowMs: number, place: RowPlace | undefined): number {
  const fireAt = fields.fire_at;
  const delay = fields.delay_ms;
  if (isAbsent(fireAt) && isAbsent(delay)) throw refuse('one of fire_at and delay_ms is required', 'fire_at', place);
  if (!isAbsent(fireAt) && !isAbsent(delay)) throw refuse('give fire_at or delay_ms, not both', 'delay_ms', place);
  if (!isAbsent(delay)) {
    if (typeof delay !== 'number' || !Number.isSafeInteger(delay) || delay < 0) throw refuse('delay_ms must be a whole number of ms ≥ 0', 'delay_ms', place);
    return nowMs + delay;
  }
  if (typeof fireAt === 'number') {
    const secondsLike = secondsLikeFireAt(fireAt);
    if (secondsLike !== undefined) throw refuse(secondsLike, 'fire_at', place);
    return fireAt;
  }
  if (typeof fireAt === 'string') {
    const ms = parseRfc3339(fireAt);
    if (ms === undefined) throw refuse(`fire_at ${JSON.stringify(fireAt)} is not an RFC 3339 date-time (such as 2030-01-31T09:00:00Z)`, 'fire_at', place);
    return ms;
  }
  throw refuse('fire_at must be an RFC 3339 date-time string or a number of epoch ms', 'fire_at', place);
}

function optionalString(fields: Record<string, unknown>, field: string, place: RowPlace | undefined): string | undefined {
  const value = fields[field];
  if (isAbsent(value)) return undefined;
  if (typeof value !== 'string') throw refuse(`${field} must be a string`, field, place);
  return value;
}

function payloadOf(fields: Record<string, unknown>, place: RowPlace | undefined): Uint8Array | string | undefined {
  const text = optionalString(fields, 'payload', place);
  const base64 = optionalString(fields, 'payload_base64', place);
  if (base64 === undefined) return text;
  if (text !== undefined) throw refuse('give payload or payload_base64, not both', 'payload_base64', place);
  if (!base64Pattern.test(base64)) throw refuse('payload_base64 must be standard base64 (A–Z, a–z, 0–9, +, /, = padding)', 'payload_base64', place);
  return Buffer.from(base64, 'base64');
}

function headersOf(fields: Record<string, unknown>, place: RowPlace | undefined): Record<string, string> | undefined {
  const headers = fields.headers;
  if (isAbsent(headers)) return undefined;
  if (typeof headers !== 'object' || Array.isArray(headers)) throw refuse('headers must be an object of string → string', 'headers', place);
  for (const [name, value] of Object.entries(headers as object)) {
    if (typeof value !== 'string') throw refuse(`header ${JSON.stringify(name)} must have a string value`, 'headers', place);
  }
  return headers as Record<string, string>;
}

/** `callback` and `failure_callback` into the spec (their URL rules are validate.ts's). */
function callbacksOf(fields: Record<string, unknown>, spec: Mutable<TimerSpec>, place: RowPlace | undefined): void {
  const callback = optionalString(fields, 'callback', place);
  const failureCallback = optionalString(fields, 'failure_callback', place);
  if (callback === '') throw refuse('callback must not be empty (leave it out for none)', 'callback', place);
  if (failureCallback === '') throw refuse('failure_callback must not be empty (leave it out for none)', 'failure_callback', place);
  if (callback !== undefined) spec.callback = callback;
  if (failureCallback !== undefined) spec.failureCallback = failureCallback;
}

/** One timer object → a TimerSpec; `place` is its row and line in an NDJSON body. */
function specOf(value: unknown, nowMs: number, place: RowPlace | undefined): TimerSpec {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    const hint = Array.isArray(value) && place === undefined ? ' (to add several at once, send one a line as application/x-ndjson)' : '';
    throw refuse(`a timer must be a JSON object${hint}`, '', place);
  }
  const fields = value as Record<string, unknown>;
  for (const name in fields) {
    if (!knownFields.has(name)) throw refuse(`unknown field ${JSON.stringify(name)} (known: ${timerFields.join(', ')})`, name, place);
  }
  const target = fields.target;
  if (isAbsent(target)) throw refuse('target is required', 'target', place);
  if (typeof target !== 'string') throw refuse('target must be a string', 'target', place);
  const key = optionalString(fields, 'key', place);
  if (key === '') throw refuse('key must not be empty (leave it out for none)', 'key', place);
  const queue = optionalString(fields, 'queue', place);
  const payload = payloadOf(fields, place);
  const headers = headersOf(fields, place);
  // Built field by field: this runs once per single add, and spreads of `{}` cost an object each.
  const spec: Mutable<TimerSpec> = { fireAtMs: fireAtOf(fields, nowMs, place), target };
  if (payload !== undefined) spec.payload = payload;
  if (headers !== undefined) spec.headers = headers;
  if (key !== undefined) spec.key = key;
  if (queue !== undefined) spec.queue = queue;
  // Read only when given: a timer without callbacks (nearly all) pays one property test for both.
  if (fields.callback !== undefined || fields.failure_callback !== undefined) callbacksOf(fields, spec, place);
  return spec;
}

/** A parsed application/json body holding one timer → its TimerSpec (for the admit coalescer). `nowMs` anchors delay_ms. */
export function specFromJsonTimer(value: unknown, nowMs: number): TimerSpec {
  return specOf(value, nowMs, undefined);
}

export interface NdjsonBatch {
  readonly batch: TimerBatch;
  /** The 1-based body line each row came from. */
  readonly lineOfRow: Int32Array;
  /** 1 where the row gave delay_ms rather than fire_at (a duplicate's answer compares fire_at only when it was given). */
  readonly delayRows: Uint8Array;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/** An application/x-ndjson body (one timer object a line, blank lines skipped) → one batch; `trace` goes to each row without a traceparent of its own. */
export function batchFromNdjson(body: Uint8Array, nowMs: number, trace?: TraceHeaders): NdjsonBatch {
  let text: string;
  try {
    text = utf8.decode(body);
  } catch {
    throw new FermataError(errorCodes.batchInvalid, 'the NDJSON body is not valid UTF-8', { field: '' });
  }
  const specs: TimerSpec[] = [];
  const lines: number[] = [];
  const delays: number[] = [];
  let line = 0;
  for (let start = 0; start <= text.length; ) {
    let end = text.indexOf('\n', start);
    if (end < 0) end = text.length;
    line++;
    const content = text.slice(start, end).trim();
    start = end + 1;
    if (content === '') continue;
    const place = { row: specs.length, line };
    let value: unknown;
    try {
      value = JSON.parse(content);
    } catch (err) {
      throw refuse(ndjsonLineProblem(content, err), '', place);
    }
    specs.push(withTrace(specOf(value, nowMs, place), trace));
    lines.push(line);
    delays.push(gaveDelayMs(value) ? 1 : 0);
  }
  if (specs.length === 0) throw new FermataError(errorCodes.batchInvalid, 'the NDJSON body holds no timer: send one JSON object a line', { field: '' });
  return { batch: batchFromSpecs(specs), lineOfRow: Int32Array.from(lines), delayRows: Uint8Array.from(delays) };
}

/** How admit() ends the message of a refusal that names a row: " in row 3" or " (row 3)". */
const rowSuffix = / in row \d+$| \(row \d+\)$/;

/**
 * Restates an admit() refusal of a JSON-built batch (BATCH_INVALID, TARGET_REFUSED: they name
 * an Arrow-style column and row) in the client's terms: the column is the field, and an NDJSON
 * row also gets its line (a single timer drops the "row 0" it never sent). Other errors pass
 * through unchanged.
 */
export function inJsonTerms(err: unknown, lineOfRow: Int32Array | undefined): unknown {
  if (!isFermataError(err, errorCodes.batchInvalid) && !isFermataError(err, errorCodes.targetRefused)) return err;
  const field = typeof err.details.column === 'string' ? err.details.column : '';
  const row = err.details.row;
  if (typeof row !== 'number') return new FermataError(err.code, err.message, { field }, err);
  if (lineOfRow === undefined) return new FermataError(err.code, err.message.replace(rowSuffix, ''), { field }, err);
  const line = lineOfRow[row] ?? 0;
  return new FermataError(err.code, `${err.message} (line ${line})`, { field, row, line }, err);
}
