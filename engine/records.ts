// The engine's WAL record types and bodies. The log itself treats bodies as opaque bytes;
// this module is the one place that gives them meaning. docs/format/engine-records.md is the
// specification; change both together.
//
//   ADD      header (24 B) , the batch: an Arrow IPC stream kept whole as it arrived, or the
//            engine's columnar form for batches that came as JSON or in process
//   CANCEL   expires-at f64 , reserved (8 B) , { ref (16 B) }     ref = seq f64 , row u32 , reserved u32
//   OUTCOME  { outcome (32 B) }    outcome = seq f64 , row u32 , kind u8 , reason u8 ,
//                                            status u16 , attempts u32 , reserved u32 , at f64
//            (at: the retry's time for a retry; when the finished timer's record expires otherwise)
//   QUEUE    UTF-8 JSON {"name": …, "config": {…}}      (engine/queues.ts)
//   PROMOTE  watermark f64      (spilled timers due before it are resident from here on)
//   CANCEL_SPILLED  expires-at f64 , reserved (8 B) , { spilled ref (24 B) }
//            spilled ref = seq f64 , row u32 , reserved u32 , fire-at f64 (finds its spill bucket)
import assert from 'node:assert/strict';

export const recordType = {
  add: 1,
  cancel: 2,
  outcome: 3,
  queue: 4,
  promote: 5,
  cancelSpilled: 6,
} as const;

/** What one delivery attempt came to. */
export const outcomeKind = {
  delivered: 1,
  retry: 2,
  dead: 3,
} as const;
export type OutcomeKind = (typeof outcomeKind)[keyof typeof outcomeKind];

/** Why a timer is dead (the `reason` byte of a dead outcome; 0 for the other kinds). */
export const deadReason = {
  none: 0,
  attemptsExhausted: 1,
  gone: 2,
  targetRefused: 3,
} as const;
export type DeadReason = (typeof deadReason)[keyof typeof deadReason];

export const outcomeEntryBytes = 32;

/**
 * Delivery outcomes, column by column (the dispatcher fills them; nothing per timer is an
 * object). `retryAtMs` is read for retries only; `attempts` counts the attempts made so far.
 * Logged, the same column holds each finished timer's expiry instead (the engine sets it).
 */
export interface Outcomes {
  readonly count: number;
  readonly seqs: Float64Array;
  readonly rows: Uint32Array;
  readonly kinds: Uint8Array;
  readonly reasons: Uint8Array;
  readonly statuses: Uint16Array;
  readonly attempts: Uint32Array;
  readonly retryAtMs: Float64Array;
}

export function emptyOutcomes(capacity: number): Outcomes & { count: number } {
  return {
    count: 0,
    seqs: new Float64Array(capacity),
    rows: new Uint32Array(capacity),
    kinds: new Uint8Array(capacity),
    reasons: new Uint8Array(capacity),
    statuses: new Uint16Array(capacity),
    attempts: new Uint32Array(capacity),
    retryAtMs: new Float64Array(capacity),
  };
}

/** Whether this machine's typed arrays are little-endian, as the log's fields are. */
const littleEndian = new Uint8Array(Uint16Array.of(1).buffer)[0] === 1;

/**
 * The OUTCOME body: 32 bytes an outcome, little-endian (docs/format/engine-records.md). Written through
 * typed arrays over the body where the machine is little-endian (a delivered Arrow batch logs
 * 10,000 at once: DataView calls were 5% of the dispatch path's main thread), else a DataView.
 */
export function encodeOutcomes(outcomes: Outcomes): Uint8Array {
  const count = outcomes.count;
  const bytes = new Uint8Array(count * outcomeEntryBytes);
  if (!littleEndian) return encodeOutcomesPortably(outcomes, bytes);
  // Entry i: f64[4i] seq, u32[8i + 2] row, bytes 32i + 12 and 13 kind and reason, u16[16i + 7]
  // status, u32[8i + 4] attempts, u32[8i + 5] zero, f64[4i + 3] retry time or expiry.
  const f64 = new Float64Array(bytes.buffer);
  const u32 = new Uint32Array(bytes.buffer);
  const u16 = new Uint16Array(bytes.buffer);
  const { seqs, rows, kinds, reasons, statuses, attempts, retryAtMs } = outcomes;
  for (let i = 0; i < count; i++) {
    f64[4 * i] = seqs[i] as number;
    u32[8 * i + 2] = rows[i] as number;
    bytes[32 * i + 12] = kinds[i] as number;
    bytes[32 * i + 13] = reasons[i] as number;
    u16[16 * i + 7] = statuses[i] as number;
    u32[8 * i + 4] = attempts[i] as number;
    f64[4 * i + 3] = retryAtMs[i] as number;
  }
  return bytes;
}

function encodeOutcomesPortably(outcomes: Outcomes, bytes: Uint8Array): Uint8Array {
  const view = new DataView(bytes.buffer);
  for (let i = 0; i < outcomes.count; i++) {
    const at = i * outcomeEntryBytes;
    view.setFloat64(at, outcomes.seqs[i] as number, true);
    view.setUint32(at + 8, outcomes.rows[i] as number, true);
    view.setUint8(at + 12, outcomes.kinds[i] as number);
    view.setUint8(at + 13, outcomes.reasons[i] as number);
    view.setUint16(at + 14, outcomes.statuses[i] as number, true);
    view.setUint32(at + 16, outcomes.attempts[i] as number, true);
    view.setFloat64(at + 24, outcomes.retryAtMs[i] as number, true);
  }
  return bytes;
}

/** The outcomes in an OUTCOME body, or undefined if it is malformed. */
export function decodeOutcomes(body: Uint8Array): Outcomes | undefined {
  if (body.length % outcomeEntryBytes !== 0) return undefined;
  const outcomes = emptyOutcomes(body.length / outcomeEntryBytes);
  const view = new DataView(body.buffer, body.byteOffset, body.byteLength);
  for (let i = 0; i < outcomes.seqs.length; i++) {
    const at = i * outcomeEntryBytes;
    const kind = view.getUint8(at + 12);
    if (kind < outcomeKind.delivered || kind > outcomeKind.dead || view.getUint32(at + 20, true) !== 0) return undefined;
    outcomes.seqs[i] = view.getFloat64(at, true);
    outcomes.rows[i] = view.getUint32(at + 8, true);
    outcomes.kinds[i] = kind;
    outcomes.reasons[i] = view.getUint8(at + 13);
    outcomes.statuses[i] = view.getUint16(at + 14, true);
    outcomes.attempts[i] = view.getUint32(at + 16, true);
    outcomes.retryAtMs[i] = view.getFloat64(at + 24, true);
  }
  outcomes.count = outcomes.seqs.length;
  return outcomes;
}

export const addHeaderBytes = 24;
export const addFormatVersion = 1;
export const addEncodingArrowStream = 1;
/** The engine's own columnar form (engine/batch/batch-codec.ts), for batches that did not arrive as Arrow. */
export const addEncodingColumns = 2;
export type AddEncoding = typeof addEncodingArrowStream | typeof addEncodingColumns;
export const timerRefBytes = 16;

export interface AddHeader {
  readonly encoding: AddEncoding;
  readonly rows: number;
  /** Server wall clock when the batch was accepted: the origin of its delay_ms values. */
  readonly acceptedAtMs: number;
  /**
   * The time its idempotency keys were decided at: a finished timer whose record expired by
   * then no longer holds its key. Replay decides at the same time, so it decides the same.
   */
  readonly decidedAtMs: number;
}

export function encodeAddHeader(encoding: AddEncoding, rows: number, acceptedAtMs: number, decidedAtMs: number): Uint8Array {
  assert.ok(rows >>> 0 === rows, 'rows must be a u32');
  const bytes = new Uint8Array(addHeaderBytes);
  const view = new DataView(bytes.buffer);
  view.setUint8(0, addFormatVersion);
  view.setUint8(1, encoding);
  view.setUint32(4, rows, true);
  view.setFloat64(8, acceptedAtMs, true);
  view.setFloat64(16, decidedAtMs, true);
  return bytes;
}

/** The header and the batch bytes of an ADD body; undefined if the header is not one this version writes. */
export function decodeAddBody(body: Uint8Array): { header: AddHeader; batch: Uint8Array } | undefined {
  if (body.length < addHeaderBytes) return undefined;
  const view = new DataView(body.buffer, body.byteOffset, addHeaderBytes);
  const encoding = view.getUint8(1);
  if (view.getUint8(0) !== addFormatVersion || (encoding !== addEncodingArrowStream && encoding !== addEncodingColumns) || view.getUint16(2, true) !== 0) {
    return undefined;
  }
  const acceptedAtMs = view.getFloat64(8, true);
  const decidedAtMs = view.getFloat64(16, true);
  if (!Number.isFinite(acceptedAtMs) || !Number.isFinite(decidedAtMs)) return undefined;
  return { header: { encoding, rows: view.getUint32(4, true), acceptedAtMs, decidedAtMs }, batch: body.subarray(addHeaderBytes) };
}

export const cancelHeaderBytes = 16;

/** The body of CANCEL: when the cancelled timers' records expire, then the timers, named by (ADD sequence, row). */
export function encodeCancel(expiresAtMs: number, seqs: readonly number[], rows: readonly number[]): Uint8Array {
  assert.equal(seqs.length, rows.length);
  const bytes = new Uint8Array(cancelHeaderBytes + seqs.length * timerRefBytes);
  const view = new DataView(bytes.buffer);
  view.setFloat64(0, expiresAtMs, true);
  for (let i = 0; i < seqs.length; i++) {
    view.setFloat64(cancelHeaderBytes + i * timerRefBytes, seqs[i] as number, true);
    view.setUint32(cancelHeaderBytes + i * timerRefBytes + 8, rows[i] as number, true);
  }
  return bytes;
}

/** Visits the timers of a CANCEL body with its expiry; false if the body is malformed. */
export function forEachCancelled(body: Uint8Array, visit: (seq: number, row: number, expiresAtMs: number) => void): boolean {
  if (body.length < cancelHeaderBytes || (body.length - cancelHeaderBytes) % timerRefBytes !== 0) return false;
  const view = new DataView(body.buffer, body.byteOffset, body.byteLength);
  const expiresAtMs = view.getFloat64(0, true);
  if (!Number.isFinite(expiresAtMs)) return false;
  for (let at = cancelHeaderBytes; at < body.length; at += timerRefBytes) visit(view.getFloat64(at, true), view.getUint32(at + 8, true), expiresAtMs);
  return true;
}

export const spilledRefBytes = 24;

/** The body of CANCEL_SPILLED: like CANCEL, each timer with its fire time, which names the spill bucket holding it. */
export function encodeCancelSpilled(expiresAtMs: number, seq: number, row: number, fireAtMs: number): Uint8Array {
  const bytes = new Uint8Array(cancelHeaderBytes + spilledRefBytes);
  const view = new DataView(bytes.buffer);
  view.setFloat64(0, expiresAtMs, true);
  view.setFloat64(cancelHeaderBytes, seq, true);
  view.setUint32(cancelHeaderBytes + 8, row, true);
  view.setFloat64(cancelHeaderBytes + 16, fireAtMs, true);
  return bytes;
}

export interface SpilledCancel {
  readonly expiresAtMs: number;
  readonly seqs: Float64Array;
  readonly rows: Uint32Array;
  readonly fireAtMs: Float64Array;
}

/** The timers of a CANCEL_SPILLED body, or undefined if it is malformed. */
export function decodeCancelSpilled(body: Uint8Array): SpilledCancel | undefined {
  if (body.length < cancelHeaderBytes + spilledRefBytes || (body.length - cancelHeaderBytes) % spilledRefBytes !== 0) return undefined;
  const view = new DataView(body.buffer, body.byteOffset, body.byteLength);
  const expiresAtMs = view.getFloat64(0, true);
  if (!Number.isFinite(expiresAtMs)) return undefined;
  const count = (body.length - cancelHeaderBytes) / spilledRefBytes;
  const cancel = { expiresAtMs, seqs: new Float64Array(count), rows: new Uint32Array(count), fireAtMs: new Float64Array(count) };
  for (let i = 0; i < count; i++) {
    const at = cancelHeaderBytes + i * spilledRefBytes;
    cancel.seqs[i] = view.getFloat64(at, true);
    cancel.rows[i] = view.getUint32(at + 8, true);
    cancel.fireAtMs[i] = view.getFloat64(at + 16, true);
    if (!Number.isFinite(cancel.fireAtMs[i] as number)) return undefined;
  }
  return cancel;
}

export const promoteBodyBytes = 8;

/** The body of PROMOTE: the new watermark (epoch ms). */
export function encodePromote(watermarkMs: number): Uint8Array {
  const bytes = new Uint8Array(promoteBodyBytes);
  new DataView(bytes.buffer).setFloat64(0, watermarkMs, true);
  return bytes;
}

export function decodePromote(body: Uint8Array): number | undefined {
  if (body.length !== promoteBodyBytes) return undefined;
  const watermarkMs = new DataView(body.buffer, body.byteOffset, body.byteLength).getFloat64(0, true);
  return Number.isFinite(watermarkMs) ? watermarkMs : undefined;
}
