// Request bodies for `POST /v1/timers`, built once before a load runs so the client spends
// its time sending, not encoding: a pool of variants, each a whole body, that the load
// generator sends in turn. Fire times are either relative (`delay_ms`, drawn uniformly from a
// window, so the server anchors them to when it accepted the request and a pool of bodies
// never goes stale) or absolute (`fire_at`: one instant for "all due at T" runs, or one a row
// for a schedule).
//
//   json     {"delay_ms":…,"target":"…","payload":"…"}           one timer a request
//   ndjson   the same object, one a line                        `rows` timers a request
//   arrow    delay_ms Int64 | fire_at Timestamp(ms), target Dictionary<Utf8>, payload Binary
//
// Payloads are printable ASCII, so the JSON and Arrow forms carry the same bytes. Used on the
// main thread of the bench command and of the compare suite.
import assert from 'node:assert/strict';
import { Binary, type Data, type DataType, Dictionary, Field, Int32, Int64, makeData, makeVector, RecordBatch, Schema, Struct, Table, tableToIPC, Timestamp, TimeUnit, Utf8 } from 'apache-arrow';

export type BodyMode = 'json' | 'ndjson' | 'arrow';

export const bodyModes: readonly BodyMode[] = ['json', 'ndjson', 'arrow'];

/** A window of delays after acceptance (uniform; min = max for one fixed delay), one absolute fire time, or one a row (epoch ms). */
export type FireTimes =
  | { readonly kind: 'delay'; readonly minMs: number; readonly maxMs: number }
  | { readonly kind: 'at'; readonly atMs: number }
  | { readonly kind: 'each'; readonly atMs: readonly number[] };

export interface BodySpec {
  readonly mode: BodyMode;
  /** Timers a request: 1 for json; the length of the list for fire times one a row. */
  readonly rows: number;
  readonly payloadBytes: number;
  readonly target: string;
  readonly fire: FireTimes;
}

export interface RequestBody {
  readonly bytes: Uint8Array;
  readonly rows: number;
  readonly contentType: string;
}

const contentTypes: Readonly<Record<BodyMode, string>> = {
  json: 'application/json',
  ndjson: 'application/x-ndjson',
  arrow: 'application/vnd.apache.arrow.stream',
};

/** Distinct fire times a pool aims for across its variants (bodies are reused in turn). */
const poolTimersTarget = 16_384;
/** Arrow bodies cost a schema and a table each to build: fewer of them when they are small. */
const arrowVariantsMax = 256;

/** How many different bodies a pool holds: one when every fire time is the same. */
export function poolVariants(spec: BodySpec): number {
  if (spec.fire.kind !== 'delay' || spec.fire.minMs === spec.fire.maxMs) return 1;
  const variants = Math.ceil(poolTimersTarget / spec.rows);
  return spec.mode === 'arrow' ? Math.min(arrowVariantsMax, variants) : variants;
}

export function buildBodies(spec: BodySpec, random: () => number = Math.random): RequestBody[] {
  return Array.from({ length: poolVariants(spec) }, () => buildBody(spec, random));
}

export function buildBody(spec: BodySpec, random: () => number = Math.random): RequestBody {
  assert.ok(spec.fire.kind !== 'each' || spec.fire.atMs.length === spec.rows, 'one fire time a row');
  assert.ok(spec.mode !== 'json' || spec.rows === 1, 'json carries one timer');
  const payload = payloadText(spec.payloadBytes);
  const fireValues = Array.from({ length: spec.rows }, (_, row) => fireValue(spec.fire, row, random));
  const contentType = contentTypes[spec.mode];
  if (spec.mode === 'arrow') return { bytes: arrowBody(spec, fireValues, payload), rows: spec.rows, contentType };
  const field = spec.fire.kind === 'delay' ? 'delay_ms' : 'fire_at';
  const line = (value: number): string => JSON.stringify({ [field]: value, target: spec.target, payload });
  const text = spec.mode === 'json' ? line(fireValues[0] as number) : fireValues.map((value) => line(value) + '\n').join('');
  return { bytes: Buffer.from(text), rows: spec.rows, contentType };
}

function fireValue(fire: FireTimes, row: number, random: () => number): number {
  if (fire.kind === 'at') return fire.atMs;
  if (fire.kind === 'each') return fire.atMs[row] as number;
  return fire.minMs + Math.floor(random() * (fire.maxMs - fire.minMs + 1));
}

/** `bytes` printable ASCII characters (a repeated marker, so a delivered body is recognisable). */
export function payloadText(bytes: number): string {
  return 'fermata-bench:'.repeat(Math.ceil(bytes / 14)).slice(0, bytes);
}

function arrowBody(spec: BodySpec, fireValues: readonly number[], payload: string): Uint8Array {
  const rows = spec.rows;
  const fireData = BigInt64Array.from(fireValues, (value) => BigInt(value));
  const fireColumn: [string, Data<DataType>] =
    spec.fire.kind === 'delay'
      ? ['delay_ms', makeData({ type: new Int64(), length: rows, data: fireData })]
      : ['fire_at', makeData({ type: new Timestamp(TimeUnit.MILLISECOND, 'UTC'), length: rows, data: fireData })];

  const targetBytes = Buffer.from(spec.target);
  const targets = makeVector(makeData({ type: new Utf8(), length: 1, valueOffsets: Int32Array.of(0, targetBytes.length), data: targetBytes }));
  const payloadBytes = Buffer.from(payload);
  const payloadValues = new Uint8Array(rows * payloadBytes.length);
  for (let row = 0; row < rows; row++) payloadValues.set(payloadBytes, row * payloadBytes.length);
  const columns: [string, Data<DataType>][] = [
    fireColumn,
    ['target', makeData({ type: new Dictionary(new Utf8(), new Int32()), length: rows, data: new Int32Array(rows), dictionary: targets })],
    ['payload', makeData({ type: new Binary(), length: rows, valueOffsets: Int32Array.from({ length: rows + 1 }, (_, row) => row * payloadBytes.length), data: payloadValues })],
  ];
  const schema = new Schema(columns.map(([name, data]) => new Field(name, data.type, false)));
  const struct = makeData({ type: new Struct(schema.fields), length: rows, children: columns.map(([, data]) => data) });
  return tableToIPC(new Table([new RecordBatch(schema, struct)]), 'stream');
}
