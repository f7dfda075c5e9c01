// Which column of the file fills which timer field, and the values every row shares:
//
//   --map FIELD=COLUMN[,FIELD=COLUMN…]   the file's COLUMN fills FIELD (repeatable)
//   --set FIELD=VALUE                     every row gets VALUE for FIELD (repeatable)
//
// A column named like a field fills it without a --map (a file written for fermata needs no
// flags); a --map or --set of that field wins over the same-named column. Fields: fire_at or
// delay_ms (one of them), target (required), payload or payload_base64, headers, key, queue,
// callback, failure_callback (docs/api.md, "Timers"). Columns no field takes are left out of the
// import. Rows without a key get a derived one, `import:{file hash}:{row}`, so sending a row
// again (a retry, a --resume) never adds it twice.
//
// mapBatch turns a SourceBatch (the file's columns) into a TimerRows (the timer's columns, each
// value checked and made the type the API takes); a bad value throws an ImportError naming the
// file, row, column and value. Runs on the import's one thread, a column at a time;
// timer-arrow.ts then encodes them as the Arrow stream the import sends.
import { ImportError } from './import-error.ts';
import type { SourceBatch, SourceColumn } from './source.ts';

export const timerFields = ['fire_at', 'delay_ms', 'target', 'payload', 'payload_base64', 'headers', 'key', 'queue', 'callback', 'failure_callback'] as const;
export type TimerField = (typeof timerFields)[number];

/** Where a field's values come from: a column of the file, or one value for every row. */
export type FieldSource = { readonly column: string } | { readonly constant: string };

export interface Mapping {
  readonly fields: ReadonlyMap<TimerField, FieldSource>;
  /** Column names the mapping reads, for a message saying which the file lacks. */
  readonly columnsRead: readonly string[];
}

/** The timer columns of one batch, as the API takes them; `key` is always filled. */
export interface TimerRows {
  readonly firstRow: number;
  readonly rows: number;
  readonly endByte: number;
  /** Epoch ms, or undefined when the rows give delay_ms. */
  readonly fireAtMs: Float64Array | undefined;
  readonly delayMs: Float64Array | undefined;
  readonly target: readonly string[];
  /** Text, or bytes (payload_base64, a binary column); undefined when no field gives one. */
  readonly payload: readonly (string | Uint8Array)[] | undefined;
  /** An object of header names to values a row, null for none. */
  readonly headers: readonly (Readonly<Record<string, string>> | null)[] | undefined;
  readonly key: readonly string[];
  readonly queue: readonly (string | null)[] | undefined;
  readonly callback: readonly (string | null)[] | undefined;
  readonly failureCallback: readonly (string | null)[] | undefined;
}

function isField(name: string): name is TimerField {
  return (timerFields as readonly string[]).includes(name);
}

function splitPair(flag: string, text: string): [TimerField, string] {
  const at = text.indexOf('=');
  const field = at < 0 ? text : text.slice(0, at);
  if (at <= 0 || at === text.length - 1) throw new ImportError(`${flag} takes FIELD=${flag === '--map' ? 'COLUMN' : 'VALUE'}, not "${text}"`);
  if (!isField(field)) throw new ImportError(`${flag} ${text}: "${field}" is not a timer field; the fields are ${timerFields.join(', ')}`);
  return [field, text.slice(at + 1)];
}

/**
 * The mapping from --map and --set, with same-named columns filling the rest. `columnNames` are
 * the file's columns when its format names them up front (NDJSON: undefined, checked a row at a time).
 */
export function parseMapping(file: string, maps: readonly string[], sets: readonly string[], columnNames: readonly string[] | undefined): Mapping {
  const fields = new Map<TimerField, FieldSource>();
  for (const list of maps) {
    for (const pair of list.split(',')) {
      const [field, column] = splitPair('--map', pair.trim());
      if (fields.has(field)) throw new ImportError(`--map names ${field} twice`);
      fields.set(field, { column });
    }
  }
  for (const pair of sets) {
    const [field, constant] = splitPair('--set', pair);
    if (fields.has(field)) throw new ImportError(`${field} is given twice (by --map and --set, or two --set)`);
    fields.set(field, { constant });
  }
  const given = new Set(fields.keys());
  const excludes: Readonly<Partial<Record<TimerField, TimerField>>> = { fire_at: 'delay_ms', delay_ms: 'fire_at', payload: 'payload_base64', payload_base64: 'payload' };
  for (const field of timerFields) {
    const other = excludes[field];
    // A --map or --set of fire_at is not joined by a same-named delay_ms column (and so on).
    if (fields.has(field) || (other !== undefined && given.has(other))) continue;
    if (columnNames === undefined || columnNames.includes(field)) fields.set(field, { column: field });
  }
  for (const [field, other] of [['fire_at', 'delay_ms'], ['payload', 'payload_base64']] as const) {
    const a = fields.get(field);
    const b = fields.get(other);
    if (a !== undefined && b !== undefined && columnNames !== undefined) throw new ImportError(`${file}: gives both ${field} and ${other}; a timer takes one of them (--map or --set the one to use)`);
  }
  const columnsRead = [...fields.values()].flatMap((source) => ('column' in source ? [source.column] : []));
  if (columnNames !== undefined) {
    const missing = columnsRead.filter((column) => !columnNames.includes(column));
    if (missing.length > 0) throw new ImportError(`${file}: no column ${missing.map((c) => `"${c}"`).join(', ')}; its columns are ${columnNames.join(', ')}`);
    if (!fields.has('target')) throw new ImportError(`${file}: no target; name its column with --map target=COLUMN, or give one for every row with --set target=URL`);
    if (!fields.has('fire_at') && !fields.has('delay_ms')) throw new ImportError(`${file}: no fire time; name a column with --map fire_at=COLUMN (or delay_ms=COLUMN), or --set fire_at=TIME or --set delay_ms=N`);
  }
  return { fields, columnsRead };
}

/** Reads one field's value for row `i` of a batch: a column's, or the constant. */
interface FieldReader {
  readonly name: string;
  readonly column: SourceColumn | undefined;
  readonly constant: string | undefined;
}

function readerOf(mapping: Mapping, batch: SourceBatch, field: TimerField): FieldReader | undefined {
  const source = mapping.fields.get(field);
  if (source === undefined) return undefined;
  if ('constant' in source) return { name: `--set ${field}`, column: undefined, constant: source.constant };
  const column = batch.columns.get(source.column);
  // NDJSON: a column no row of this batch has is absent from it.
  return { name: source.column, column, constant: undefined };
}

/** The reader when the batch has values for it (a column it holds, or a --set). */
function present(reader: FieldReader | undefined): FieldReader | undefined {
  return reader !== undefined && (reader.column !== undefined || reader.constant !== undefined) ? reader : undefined;
}

function valueAt(reader: FieldReader, i: number): unknown {
  return reader.column === undefined ? (reader.constant ?? null) : (reader.column[i] ?? null);
}

const rfc3339 = /^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?([Zz]|[+-]\d{2}:\d{2})$/;

/** fire_at as epoch ms: a number or bigint of ms ≥ 10^12, a Date, a Parquet/Arrow timestamp (ms already), or RFC 3339 text. */
export function fireAtMs(value: unknown, file: string, row: number, column: string): number {
  let ms: number;
  if (typeof value === 'number') ms = value;
  else if (typeof value === 'bigint') ms = Number(value);
  else if (value instanceof Date) ms = value.getTime();
  else if (typeof value === 'string' && /^-?\d+(\.\d+)?$/.test(value.trim())) ms = Number(value);
  else if (typeof value === 'string' && rfc3339.test(value.trim())) ms = Date.parse(value.trim());
  else throw new ImportError('fire_at must be an RFC 3339 date-time (2026-12-08T09:00:00Z) or epoch milliseconds', { file, row, column, value });
  if (!Number.isFinite(ms)) throw new ImportError('fire_at is not a valid time', { file, row, column, value });
  if (ms < 1e12) throw new ImportError(`fire_at ${ms} looks like epoch seconds: give epoch milliseconds (${ms} s is ${ms * 1000} ms) or an RFC 3339 date-time`, { file, row, column, value });
  return Math.ceil(ms);
}

function delayMsOf(value: unknown, file: string, row: number, column: string): number {
  const ms = typeof value === 'bigint' ? Number(value) : typeof value === 'string' && value.trim() !== '' ? Number(value) : value;
  if (typeof ms !== 'number' || !Number.isSafeInteger(ms) || ms < 0) throw new ImportError('delay_ms must be a whole number of milliseconds, 0 or more', { file, row, column, value });
  return ms;
}

function textOf(value: unknown, field: string, file: string, row: number, column: string): string {
  if (typeof value === 'string') return value;
  if (typeof value === 'number' || typeof value === 'bigint') return String(value);
  throw new ImportError(`${field} must be text`, { file, row, column, value });
}

function payloadOf(value: unknown, file: string, row: number, column: string): string | Uint8Array {
  if (value === null) return '';
  if (typeof value === 'string' || value instanceof Uint8Array) return value;
  // An NDJSON row may carry its payload as JSON: it is delivered as that JSON's text.
  if (typeof value === 'object') return JSON.stringify(value);
  if (typeof value === 'number' || typeof value === 'boolean' || typeof value === 'bigint') return String(value);
  throw new ImportError('payload must be text or bytes', { file, row, column, value });
}

function headersOf(value: unknown, file: string, row: number, column: string): Record<string, string> | null {
  if (value === null) return null;
  let object: unknown = value;
  if (typeof value === 'string') {
    try {
      object = JSON.parse(value);
    } catch {
      throw new ImportError('headers must be a JSON object of string values ({"x-trace":"t1"})', { file, row, column, value });
    }
  }
  if (typeof object !== 'object' || object === null || Array.isArray(object) || Object.values(object).some((v) => typeof v !== 'string')) {
    throw new ImportError('headers must be a JSON object of string values ({"x-trace":"t1"})', { file, row, column, value });
  }
  return object as Record<string, string>;
}

function optionalText(reader: FieldReader | undefined, field: string, batch: SourceBatch, file: string): (string | null)[] | undefined {
  if (reader === undefined) return undefined;
  const out = new Array<string | null>(batch.rows);
  for (let i = 0; i < batch.rows; i++) {
    const value = valueAt(reader, i);
    out[i] = value === null ? null : textOf(value, field, file, batch.firstRow + i, reader.name);
  }
  return out;
}

/** The derived key of the file's row `row`: the same for the same file's same row, on every run. */
export function derivedKey(fileHash: string, row: number): string {
  return `import:${fileHash}:${row}`;
}

export function mapBatch(mapping: Mapping, batch: SourceBatch, file: string, fileHash: string): TimerRows {
  const rows = batch.rows;
  const fireAtReader = readerOf(mapping, batch, 'fire_at');
  const delayReader = readerOf(mapping, batch, 'delay_ms');
  let fireAt: Float64Array | undefined;
  let delay: Float64Array | undefined;
  if (fireAtReader !== undefined && (fireAtReader.column !== undefined || fireAtReader.constant !== undefined)) fireAt = new Float64Array(rows);
  if (delayReader !== undefined && (delayReader.column !== undefined || delayReader.constant !== undefined)) delay = new Float64Array(rows);
  for (let i = 0; i < rows; i++) {
    const row = batch.firstRow + i;
    const at = fireAtReader === undefined || fireAt === undefined ? null : valueAt(fireAtReader, i);
    const after = delayReader === undefined || delay === undefined ? null : valueAt(delayReader, i);
    // A Float64 NaN is how a Timestamp column's null arrives.
    const hasAt = at !== null && !(typeof at === 'number' && Number.isNaN(at));
    if (hasAt === (after !== null)) {
      throw new ImportError(hasAt ? 'gives both fire_at and delay_ms; a timer takes one' : 'has no fire time (fire_at or delay_ms)', { file, row, column: (fireAtReader ?? delayReader)?.name ?? 'fire_at' });
    }
    if (hasAt) (fireAt as Float64Array)[i] = fireAtMs(at, file, row, (fireAtReader as FieldReader).name);
    else (delay as Float64Array)[i] = delayMsOf(after, file, row, (delayReader as FieldReader).name);
  }
  if (fireAt !== undefined && delay !== undefined) {
    throw new ImportError('some rows of this batch give fire_at and others delay_ms; a batch takes one of the two (split the file, or give all rows the same)', { file, row: batch.firstRow });
  }

  const targetReader = readerOf(mapping, batch, 'target');
  const target = new Array<string>(rows);
  for (let i = 0; i < rows; i++) {
    const value = targetReader === undefined ? null : valueAt(targetReader, i);
    if (value === null) throw new ImportError('has no target', { file, row: batch.firstRow + i, column: targetReader?.name ?? 'target' });
    target[i] = textOf(value, 'target', file, batch.firstRow + i, (targetReader as FieldReader).name);
  }

  let payload: (string | Uint8Array)[] | undefined;
  // Either field may be read a row at a time (an NDJSON file may give payload in some rows and
  // payload_base64 in others): a row's payload is the first of the two it has.
  const payloadReader = present(readerOf(mapping, batch, 'payload'));
  const base64Reader = present(readerOf(mapping, batch, 'payload_base64'));
  if (payloadReader !== undefined || base64Reader !== undefined) {
    payload = new Array<string | Uint8Array>(rows);
    for (let i = 0; i < rows; i++) {
      const text = payloadReader === undefined ? null : valueAt(payloadReader, i);
      const base64 = text !== null || base64Reader === undefined ? null : valueAt(base64Reader, i);
      if (base64 === null) payload[i] = payloadOf(text, file, batch.firstRow + i, payloadReader?.name ?? 'payload');
      else {
        if (typeof base64 !== 'string' || !/^[A-Za-z0-9+/]*={0,2}$/.test(base64)) throw new ImportError('payload_base64 must be standard base64 text', { file, row: batch.firstRow + i, column: (base64Reader as FieldReader).name, value: base64 });
        payload[i] = Buffer.from(base64, 'base64');
      }
    }
  }

  let headers: (Record<string, string> | null)[] | undefined;
  const headersReader = readerOf(mapping, batch, 'headers');
  if (headersReader !== undefined) {
    headers = new Array<Record<string, string> | null>(rows);
    for (let i = 0; i < rows; i++) headers[i] = headersOf(valueAt(headersReader, i), file, batch.firstRow + i, headersReader.name);
  }

  const keys = optionalText(readerOf(mapping, batch, 'key'), 'key', batch, file);
  const key = new Array<string>(rows);
  for (let i = 0; i < rows; i++) key[i] = keys?.[i] ?? derivedKey(fileHash, batch.firstRow + i);

  return {
    firstRow: batch.firstRow,
    rows,
    endByte: batch.endByte,
    fireAtMs: fireAt,
    delayMs: delay,
    target,
    payload,
    headers,
    key,
    queue: optionalText(readerOf(mapping, batch, 'queue'), 'queue', batch, file),
    callback: optionalText(readerOf(mapping, batch, 'callback'), 'callback', batch, file),
    failureCallback: optionalText(readerOf(mapping, batch, 'failure_callback'), 'failure_callback', batch, file),
  };
}

/** The mapping in one canonical line (`fire_at=column:due,target=set:https://…`), as a checkpoint keeps it. */
export function mappingText(mapping: Mapping): string {
  return timerFields
    .flatMap((field) => {
      const source = mapping.fields.get(field);
      if (source === undefined) return [];
      return [`${field}=${'column' in source ? `column:${source.column}` : `set:${source.constant}`}`];
    })
    .join(',');
}

/** Rows [from, to) of a batch, as a batch of their own (a batch too large for one request is cut so). */
export function sliceTimerRows(rows: TimerRows, from: number, to: number): TimerRows {
  const cut = <T>(values: readonly T[] | undefined): T[] | undefined => values?.slice(from, to);
  return {
    firstRow: rows.firstRow + from,
    rows: to - from,
    endByte: rows.endByte,
    fireAtMs: rows.fireAtMs?.subarray(from, to),
    delayMs: rows.delayMs?.subarray(from, to),
    target: rows.target.slice(from, to),
    payload: cut(rows.payload),
    headers: cut(rows.headers),
    key: rows.key.slice(from, to),
    queue: cut(rows.queue),
    callback: cut(rows.callback),
    failureCallback: cut(rows.failureCallback),
  };
}
