// Checks a TimerBatch against the API's rules and limits before anything is logged: a batch
// is accepted whole or refused whole, and a refusal names the column and the row. Distinct
// targets and queues are checked once each (they are dictionaries), the rest row by row over
// the typed columns.
import { errorCodes, FermataError } from '../errors.ts';
import { ingestLimits, timerLimits, type TimerLimits } from '../limits.ts';
import { callbackBytesMax } from '../store/callback-bytes.ts';
import { residentHeadersBytesMax, residentKeyBytesMax } from '../store/resident-store.ts';
import { byteLengthAt, bytesAt, type TimerBatch } from './timer-batch.ts';
import { isOccurrenceKey, occurrenceKeyPrefix } from '../schedules/occurrence-key.ts';

const queueNamePattern = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;
const headerNamePattern = /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/;
/** Headers fermata sets itself on every delivery: a timer may not override them. */
const reservedHeaders = new Set(['host', 'content-length', 'transfer-encoding', 'connection', 'idempotency-key', 'fermata-timer-id', 'fermata-attempt', 'fermata-fire-at', 'webhook-id', 'webhook-timestamp', 'webhook-signature', 'fermata-callback-for']);
const utf8 = new TextDecoder('utf-8', { fatal: true });
/** Hop-by-hop headers: meaningful for one connection only, and refused by HTTP/2 (RFC 9113 §8.2.2). */
const connectionHeaders = new Set(['keep-alive', 'proxy-connection', 'upgrade', 'te', 'http2-settings']);
const fieldValuePattern = /^[\t\x20-\x7e]*$/;
/**
 * Targets and queue names already found well-formed (the checks that do not depend on
 * limits): a service sees the same few again and again, and parsing a URL per admit costs
 * more than the rest of a one-timer admit's checks. Cleared whenever it reaches this size.
 */
const knownGoodEntriesMax = 4096;
const wellFormedTargets = new Set<string>();
const wellFormedQueueNames = new Set<string>();

function remember(known: Set<string>, value: string): void {
  if (known.size >= knownGoodEntriesMax) known.clear();
  known.add(value);
}

function refuse(message: string, column: string, row?: number): FermataError {
  return new FermataError(errorCodes.batchInvalid, message, row === undefined ? { column } : { column, row });
}

/** The first row whose dictionary column holds entry `entry` (for naming it in an error). */
function firstRowWith(index: Int32Array, entry: number): number {
  const row = index.indexOf(entry);
  return row < 0 ? 0 : row;
}

/** At most 3 UTF-8 bytes per UTF-16 code unit: a string this short is within `bytesMax` without counting. */
function withinBytes(text: string, bytesMax: number): boolean {
  return text.length * 3 <= bytesMax || Buffer.byteLength(text) <= bytesMax;
}

function checkTargets(batch: TimerBatch, limits: TimerLimits): void {
  for (let i = 0; i < batch.targets.length; i++) {
    const target = batch.targets[i] as string;
    if (!withinBytes(target, limits.targetBytesMax)) {
      const row = firstRowWith(batch.targetIndex, i);
      throw refuse(`target longer than ${limits.targetBytesMax} bytes in row ${row}`, 'target', row);
    }
    if (wellFormedTargets.has(target)) continue;
    const url = URL.parse(target);
    if (url === null || (url.protocol !== 'http:' && url.protocol !== 'https:')) {
      const row = firstRowWith(batch.targetIndex, i);
      throw refuse(`target must be an absolute http(s) URL in row ${row}`, 'target', row);
    }
    if (url.username !== '' || url.password !== '') {
      const row = firstRowWith(batch.targetIndex, i);
      throw refuse(`target must not carry credentials in row ${row}`, 'target', row);
    }
    remember(wellFormedTargets, target);
  }
}

const callbackColumns = [
  ['callback', 'callback'],
  ['failure_callback', 'failureCallback'],
] as const;

/**
 * Callback URLs follow the target rules (an absolute http(s) URL, no credentials, within the
 * target's length), row by row: they are few and mostly distinct. Only whitespace and control
 * characters are refused besides, which URL parsing would silently drop.
 */
function checkCallbacks(batch: TimerBatch, limits: TimerLimits): void {
  // A limit set above what the store's length column holds is capped there.
  const bytesMax = Math.min(limits.targetBytesMax, callbackBytesMax);
  for (const [column, field] of callbackColumns) {
    const urls = batch[field];
    if (urls === undefined) continue;
    for (let row = 0; row < batch.rows; row++) {
      const length = byteLengthAt(urls, row);
      if (length === 0) continue;
      if (length > bytesMax) throw refuse(`${column} longer than ${bytesMax} bytes in row ${row}`, column, row);
      let url: string;
      try {
        url = utf8.decode(bytesAt(urls, row));
      } catch {
        throw refuse(`${column} must be UTF-8 in row ${row}`, column, row);
      }
      if (wellFormedTargets.has(url)) continue;
      const parsed = URL.parse(url);
      if (parsed === null || (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') || /[\s\x00-\x1f\x7f]/.test(url)) {
        throw refuse(`${column} must be an absolute http(s) URL in row ${row}`, column, row);
      }
      if (parsed.username !== '' || parsed.password !== '') throw refuse(`${column} must not carry credentials in row ${row}`, column, row);
      remember(wellFormedTargets, url);
    }
  }
}

function queueNameOk(name: string, limits: TimerLimits): boolean {
  // The pattern admits ASCII only, so a name that matches has as many bytes as characters.
  if (name.length > limits.queueNameBytesMax) return false;
  if (wellFormedQueueNames.has(name)) return true;
  if (!queueNamePattern.test(name)) return false;
  remember(wellFormedQueueNames, name);
  return true;
}

const queueNameRule = (limits: TimerLimits): string => `1–${limits.queueNameBytesMax} characters of A–Z, a–z, 0–9, '.', '_', '-'`;

function checkQueues(batch: TimerBatch, limits: TimerLimits): void {
  for (let i = 0; i < batch.queues.length; i++) {
    if (queueNameOk(batch.queues[i] as string, limits)) continue;
    const row = firstRowWith(batch.queueIndex, i);
    throw refuse(`queue must be ${queueNameRule(limits)} in row ${row}`, 'queue', row);
  }
}

/**
 * What is wrong with a client's numeric `fire_at` (a JSON number, an Arrow Int64 value), or
 * undefined when it is plausible epoch ms. Below ingestLimits.fireAtEpochMsMin it is almost
 * surely epoch seconds, which taken as ms would fall in 1970 and be delivered at once. Its
 * callers add where the value was (row, line); a batch replayed from the log is not held to it.
 */
export function secondsLikeFireAt(value: number): string | undefined {
  if (!(value < ingestLimits.fireAtEpochMsMin)) return undefined;
  const asMs = value > 0 && Number.isSafeInteger(value * 1000) ? ` (${value} s is ${value * 1000} ms)` : '';
  return `fire_at ${value} looks like epoch seconds: a number is taken as epoch ms and must be at least 10^12 (2001-09-09); multiply seconds by 1000${asMs}, or give an RFC 3339 date-time`;
}

/** A queue name outside a batch (PUT /v1/queues/{name}). */
export function validateQueueName(name: string, limits: TimerLimits = timerLimits): void {
  if (!queueNameOk(name, limits)) throw new FermataError(errorCodes.queueInvalid, `queue name must be ${queueNameRule(limits)}`, { field: 'name' });
}

function checkHeaders(batch: TimerBatch, row: number, limits: TimerLimits): void {
  const length = byteLengthAt(batch.headers, row);
  if (length === 0) return;
  // Limits set above what the store's length columns hold are capped there.
  const headersBytesMax = Math.min(limits.headersBytesMax, residentHeadersBytesMax);
  if (length > headersBytesMax) throw refuse(`headers longer than ${headersBytesMax} bytes in row ${row}`, 'headers', row);
  let parsed: unknown;
  try {
    parsed = JSON.parse(utf8.decode(bytesAt(batch.headers, row)));
  } catch {
    throw refuse(`headers must be a JSON object in row ${row}`, 'headers', row);
  }
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw refuse(`headers must be a JSON object in row ${row}`, 'headers', row);
  const entries = Object.entries(parsed);
  if (entries.length > limits.headerCountMax) throw refuse(`more than ${limits.headerCountMax} headers in row ${row}`, 'headers', row);
  const seen = new Set<string>();
  for (const [name, value] of entries) {
    if (!headerNamePattern.test(name)) throw refuse(`header name ${JSON.stringify(name)} is not a valid token in row ${row}`, 'headers', row);
    const lower = name.toLowerCase();
    if (reservedHeaders.has(lower)) throw refuse(`header ${name} is set by fermata and cannot be given in row ${row}`, 'headers', row);
    if (connectionHeaders.has(lower)) throw refuse(`header ${name} is connection-specific (HTTP/2 forbids it) and cannot be given in row ${row}`, 'headers', row);
    if (seen.has(lower)) throw refuse(`header ${name} is given twice (names are case-insensitive) in row ${row}`, 'headers', row);
    seen.add(lower);
    // Delivered as an HTTP field value: visible ASCII, spaces and tabs (HTTP/1.1 refuses other bytes, HTTP/2 would mangle them).
    if (typeof value !== 'string' || !fieldValuePattern.test(value)) throw refuse(`header ${name} must be a string of visible ASCII, spaces and tabs in row ${row}`, 'headers', row);
  }
}

/** `occurrenceKeysAllowed`: the batch is a schedule's occurrences (engine/schedules/materializer.ts), whose keys alone may begin with `schedule:`. */
export function validateBatch(batch: TimerBatch, limits: TimerLimits, nowMs: number, occurrenceKeysAllowed = false): void {
  if (batch.rows === 0) throw refuse('a batch needs at least one timer', 'fire_at');
  if (batch.rows > limits.rowsPerBatchMax) throw refuse(`a batch holds at most ${limits.rowsPerBatchMax} timers, this one ${batch.rows}`, 'fire_at');
  checkTargets(batch, limits);
  checkQueues(batch, limits);
  if (batch.callback !== undefined || batch.failureCallback !== undefined) checkCallbacks(batch, limits);
  const latest = nowMs + limits.horizonMsMax;
  const keyBytesMax = Math.min(limits.keyBytesMax, residentKeyBytesMax);
  for (let row = 0; row < batch.rows; row++) {
    const fireAt = batch.fireAtMs[row] as number;
    if (!Number.isInteger(fireAt) || fireAt < 0) throw refuse(`fire_at must be a whole number of epoch ms ≥ 0 in row ${row}`, 'fire_at', row);
    if (fireAt > latest) throw refuse(`fire_at is more than ${limits.horizonMsMax} ms ahead in row ${row}`, 'fire_at', row);
    // Codecs build consistent dictionaries; an in-process caller's batch is checked too, before it is logged.
    const target = batch.targetIndex[row] as number;
    if (!(target >= 0 && target < batch.targets.length)) throw refuse(`target index out of range in row ${row}`, 'target', row);
    const queue = batch.queueIndex[row] as number;
    if (!(queue >= 0 && queue < batch.queues.length)) throw refuse(`queue index out of range in row ${row}`, 'queue', row);
    if (byteLengthAt(batch.payload, row) > limits.payloadBytesMax) throw refuse(`payload longer than ${limits.payloadBytesMax} bytes in row ${row}`, 'payload', row);
    if (byteLengthAt(batch.keys, row) > keyBytesMax) throw refuse(`key longer than ${keyBytesMax} bytes in row ${row}`, 'key', row);
    if (!occurrenceKeysAllowed && isOccurrenceKey(batch.keys.values, batch.keys.offsets[row] as number, batch.keys.offsets[row + 1] as number)) {
      throw refuse(`keys beginning with "${occurrenceKeyPrefix}" are reserved for the occurrences of schedules, in row ${row}`, 'key', row);
    }
    checkHeaders(batch, row, limits);
  }
}
