// The engine's WAL record types and bodies. The log itself treats bodies as opaque bytes;
// this module is the one place that gives them meaning. docs/format/engine-records.md is the
// specification; change both together.
//
//   ADD      header (24 B) , the batch: an Arrow IPC stream kept whole as it arrived, or the
//            engine's columnar form for batches that came as JSON or in process
//   CANCEL   expires-at f64 , reserved (8 B) , { ref (16 B) }     ref = seq f64 , row u32 , reserved u32
//   OUTCOME  { outcome (32 B) }    outcome = seq f64 , row u32 , kind u8 , reason u8 ,
//                                            status u16 , attempts u32 , more-rows u32 , at f64
//            (at: the retry's time for a retry; when the finished timer's record expires otherwise;
//            the entry stands for rows row … row + more-rows of the ADD, all with this outcome)
//   OUTCOME_DETAILED  entries u32 , texts u32 , { outcome (32 B) } , { detail (16 B) } , { text }
//            detail = error u32 , reserved u32 , attempted-at f64     text = length u16 , UTF-8
//            (an OUTCOME whose failed attempts say why: error n > 0 is text n − 1 of the record)
//   QUEUE    UTF-8 JSON {"name": …, "config": {…}}      (engine/queues.ts)
//   PROMOTE  watermark f64      (spilled timers due before it are resident from here on)
//   CANCEL_SPILLED  expires-at f64 , reserved (8 B) , { spilled ref (24 B) }
//            spilled ref = seq f64 , row u32 , reserved u32 , fire-at f64 (finds its spill bucket)
//   CLOCK    position f64      (a manual clock's new position, epoch ms: engine/clock-moves.ts)
//   OUTCOME_FOLLOWED  outcome-bytes u32 , reserved u32 , OUTCOME_DETAILED body , ADD body
//            (outcomes and the callbacks' follow-up timers they make, one record: engine/callbacks.ts)
//   RESCHEDULE  version u8 , changed u8 , reserved u16 , row u32 , seq f64 , bucket-at f64 ,
//            revision u32 , reserved u32 , fire-at f64 , { length u32 , bytes } per changed
//            field after fire_at (target, queue, payload, headers, callbacks run, in that order)
//   CANCEL_BULK  expires-at f64 , refs u32 , spilled refs u32 , { ref (16 B) } , { spilled ref (24 B) }
//            (one bulk cancel or queue purge: the timers it took, however many)
import assert from 'node:assert/strict';
import { deliveryLimits } from './limits.ts';
import { isCallbacksRun } from './store/callback-bytes.ts';

export const recordType = {
  add: 1,
  cancel: 2,
  outcome: 3,
  queue: 4,
  promote: 5,
  cancelSpilled: 6,
  outcomeDetailed: 7,
  clock: 10,
  outcomeFollowed: 11,
  reschedule: 8,
  cancelBulk: 9,
  schedule: 12,
  scheduleMark: 13,
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
 * An entry's rows end before this: a row of an id is 24 bits (engine/ids.ts). Decoding a record
 * stands for at most as many outcomes, so a record can never ask replay for more memory than that.
 */
const outcomeRowsEnd = 2 ** 24;

/**
 * Delivery outcomes, column by column (the dispatcher fills them; nothing per timer is an
 * object). `retryAtMs` is read for retries only; `attempts` counts the attempts made so far.
 * Logged, the same column holds each finished timer's expiry instead (the engine sets it).
 * A failed attempt may say why: `errors[i]` n > 0 names `errorTexts[n - 1]` (each text once a
 * record, at most deliveryLimits.lastErrorBytesMax bytes: boundErrorText) and `attemptedAtMs[i]`
 * is when it was made; 0 says nothing (a delivery, a redrive, a task that failed as a whole).
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
  readonly errors: Uint32Array;
  readonly attemptedAtMs: Float64Array;
  readonly errorTexts: string[];
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
    errors: new Uint32Array(capacity),
    attemptedAtMs: new Float64Array(capacity),
    errorTexts: [],
  };
}

const utf8Encoder = new TextEncoder();
const utf8Fatal = new TextDecoder('utf-8', { fatal: true });

/** `text` cut to deliveryLimits.lastErrorBytesMax UTF-8 bytes, at a character's edge (an ellipsis marks the cut). */
export function boundErrorText(text: string): string {
  const max = deliveryLimits.lastErrorBytesMax;
  if (text.length * 3 <= max) return text;
  const bytes = utf8Encoder.encode(text);
  if (bytes.length <= max) return text;
  // Back to the start of a character (continuation bytes are 10xxxxxx), leaving room for "…" (3 bytes).
  let end = max - 3;
  while (end > 0 && ((bytes[end] as number) & 0xc0) === 0x80) end--;
  return `${utf8Fatal.decode(bytes.subarray(0, end))}…`;
}

/** Whether any outcome says why its attempt failed: then it is logged as OUTCOME_DETAILED. */
export function hasErrors(outcomes: Outcomes): boolean {
  return outcomes.errorTexts.length > 0;
}

/** Whether this machine's typed arrays are little-endian, as the log's fields are. */
const littleEndian = new Uint8Array(Uint16Array.of(1).buffer)[0] === 1;

/** Whether outcome i + 1 continues outcome i's entry: the next row of the same ADD, with the same outcome. */
function continuesRun(outcomes: Outcomes, i: number): boolean {
  const { seqs, rows, kinds, reasons, statuses, attempts, retryAtMs } = outcomes;
  const next = i + 1;
  const row = rows[next] as number;
  return (
    seqs[next] === seqs[i] &&
    row === (rows[i] as number) + 1 &&
    row < outcomeRowsEnd &&
    kinds[next] === kinds[i] &&
    reasons[next] === reasons[i] &&
    statuses[next] === statuses[i] &&
    attempts[next] === attempts[i] &&
    Object.is(retryAtMs[next], retryAtMs[i])
  );
}

/** Whether outcome i + 1 continues outcome i's entry of an OUTCOME_DETAILED record: the same error too. */
function continuesDetailedRun(outcomes: Outcomes, i: number): boolean {
  return continuesRun(outcomes, i) && outcomes.errors[i + 1] === outcomes.errors[i] && Object.is(outcomes.attemptedAtMs[i + 1], outcomes.attemptedAtMs[i]);
}

/** Where each entry starts: entry e covers outcomes starts[e] … starts[e + 1] - 1. */
function entryStarts(outcomes: Outcomes, continues: (outcomes: Outcomes, i: number) => boolean): { starts: Uint32Array; entries: number } {
  const count = outcomes.count;
  const starts = new Uint32Array(count + 1);
  let entries = 0;
  for (let i = 0; i < count; i++) {
    starts[entries++] = i;
    while (i + 1 < count && continues(outcomes, i)) i++;
  }
  starts[entries] = count;
  return { starts, entries };
}

/**
 * The OUTCOME body: 32 bytes an entry, little-endian (docs/format/engine-records.md). Outcomes
 * of consecutive rows of one ADD that are the same (a delivered Arrow batch: 10,000 rows, one
 * answer, one settle time) share an entry, so such a batch logs 32 bytes, not 320 KB. Written
 * through typed arrays over the body where the machine is little-endian, else a DataView.
 */
export function encodeOutcomes(outcomes: Outcomes): Uint8Array {
  const { starts, entries } = entryStarts(outcomes, continuesRun);
  const bytes = new Uint8Array(entries * outcomeEntryBytes);
  if (!littleEndian) return encodeOutcomesPortably(outcomes, starts, entries, new DataView(bytes.buffer), 0);
  // Entry e: f64[4e] seq, u32[8e + 2] row, bytes 32e + 12 and 13 kind and reason, u16[16e + 7]
  // status, u32[8e + 4] attempts, u32[8e + 5] more rows, f64[4e + 3] retry time or expiry.
  const f64 = new Float64Array(bytes.buffer);
  const u32 = new Uint32Array(bytes.buffer);
  const u16 = new Uint16Array(bytes.buffer);
  const { seqs, rows, kinds, reasons, statuses, attempts, retryAtMs } = outcomes;
  for (let e = 0; e < entries; e++) {
    const i = starts[e] as number;
    f64[4 * e] = seqs[i] as number;
    u32[8 * e + 2] = rows[i] as number;
    bytes[32 * e + 12] = kinds[i] as number;
    bytes[32 * e + 13] = reasons[i] as number;
    u16[16 * e + 7] = statuses[i] as number;
    u32[8 * e + 4] = attempts[i] as number;
    u32[8 * e + 5] = (starts[e + 1] as number) - i - 1;
    f64[4 * e + 3] = retryAtMs[i] as number;
  }
  return bytes;
}

function encodeOutcomesPortably(outcomes: Outcomes, starts: Uint32Array, entries: number, view: DataView, offset: number): Uint8Array {
  for (let e = 0; e < entries; e++) {
    const i = starts[e] as number;
    const at = offset + e * outcomeEntryBytes;
    view.setFloat64(at, outcomes.seqs[i] as number, true);
    view.setUint32(at + 8, outcomes.rows[i] as number, true);
    view.setUint8(at + 12, outcomes.kinds[i] as number);
    view.setUint8(at + 13, outcomes.reasons[i] as number);
    view.setUint16(at + 14, outcomes.statuses[i] as number, true);
    view.setUint32(at + 16, outcomes.attempts[i] as number, true);
    view.setUint32(at + 20, (starts[e + 1] as number) - i - 1, true);
    view.setFloat64(at + 24, outcomes.retryAtMs[i] as number, true);
  }
  return new Uint8Array(view.buffer, view.byteOffset, view.byteLength);
}

export const detailedHeaderBytes = 8;
export const outcomeDetailBytes = 16;

/**
 * The OUTCOME_DETAILED body (docs/format/engine-records.md): the same 32-byte entries, runs
 * split where the error differs, then a detail per entry (its error and attempt time) and the
 * record's error texts, each once. Written only when some attempt failed, so a record of
 * deliveries stays a plain OUTCOME of 32 bytes a run. Through a DataView: failures are few.
 */
export function encodeOutcomesDetailed(outcomes: Outcomes): Uint8Array {
  const { starts, entries } = entryStarts(outcomes, continuesDetailedRun);
  const texts = outcomes.errorTexts.map((text) => utf8Encoder.encode(text));
  const textBytes = texts.reduce((sum, text) => sum + 2 + text.length, 0);
  const detailsAt = detailedHeaderBytes + entries * outcomeEntryBytes;
  const textsAt = detailsAt + entries * outcomeDetailBytes;
  const bytes = new Uint8Array(textsAt + textBytes);
  const view = new DataView(bytes.buffer);
  view.setUint32(0, entries, true);
  view.setUint32(4, texts.length, true);
  encodeOutcomesPortably(outcomes, starts, entries, view, detailedHeaderBytes);
  for (let e = 0; e < entries; e++) {
    const i = starts[e] as number;
    const error = outcomes.errors[i] as number;
    if (!(error <= texts.length)) assert.fail(`outcome error ${error} names no text`);
    view.setUint32(detailsAt + e * outcomeDetailBytes, error, true);
    view.setFloat64(detailsAt + e * outcomeDetailBytes + 8, error === 0 ? 0 : (outcomes.attemptedAtMs[i] as number), true);
  }
  let at = textsAt;
  for (const text of texts) {
    if (!(text.length <= 0xffff)) assert.fail('an error text longer than a u16');
    view.setUint16(at, text.length, true);
    bytes.set(text, at + 2);
    at += 2 + text.length;
  }
  return bytes;
}

/** The record an outcome batch is logged as: OUTCOME, or OUTCOME_DETAILED when some attempt says why it failed. */
export function encodeOutcomeRecord(outcomes: Outcomes): { type: number; body: Uint8Array } {
  return hasErrors(outcomes) ? { type: recordType.outcomeDetailed, body: encodeOutcomesDetailed(outcomes) } : { type: recordType.outcome, body: encodeOutcomes(outcomes) };
}

/**
 * The outcomes in an OUTCOME body, one per row (an entry's run spelled out), or undefined if it
 * is malformed: a length that is not whole entries, a kind out of range, a run of rows past the
 * last row an id can name, or more outcomes in all than that.
 */
export function decodeOutcomes(body: Uint8Array): Outcomes | undefined {
  if (body.length % outcomeEntryBytes !== 0) return undefined;
  const entries = body.length / outcomeEntryBytes;
  const view = new DataView(body.buffer, body.byteOffset, body.byteLength);
  let count = 0;
  for (let e = 0; e < entries; e++) {
    const at = e * outcomeEntryBytes;
    const kind = view.getUint8(at + 12);
    const row = view.getUint32(at + 8, true);
    const moreRows = view.getUint32(at + 20, true);
    if (kind < outcomeKind.delivered || kind > outcomeKind.dead || (moreRows > 0 && row + moreRows >= outcomeRowsEnd)) return undefined;
    count += moreRows + 1;
    if (count > outcomeRowsEnd) return undefined;
  }
  const outcomes = emptyOutcomes(count);
  let i = 0;
  for (let e = 0; e < entries; e++) {
    const at = e * outcomeEntryBytes;
    const seq = view.getFloat64(at, true);
    const row = view.getUint32(at + 8, true);
    const kind = view.getUint8(at + 12);
    const reason = view.getUint8(at + 13);
    const status = view.getUint16(at + 14, true);
    const attempts = view.getUint32(at + 16, true);
    const rows = view.getUint32(at + 20, true) + 1;
    const retryAtMs = view.getFloat64(at + 24, true);
    outcomes.seqs.fill(seq, i, i + rows);
    for (let r = 0; r < rows; r++) outcomes.rows[i + r] = row + r;
    outcomes.kinds.fill(kind, i, i + rows);
    outcomes.reasons.fill(reason, i, i + rows);
    outcomes.statuses.fill(status, i, i + rows);
    outcomes.attempts.fill(attempts, i, i + rows);
    outcomes.retryAtMs.fill(retryAtMs, i, i + rows);
    i += rows;
  }
  outcomes.count = count;
  return outcomes;
}

/**
 * The outcomes of an OUTCOME_DETAILED body, one per row, with their errors; undefined if it is
 * malformed: the entries' part as decodeOutcomes refuses it, a detail naming no text, a text
 * that runs past the body or is not UTF-8, or bytes left over.
 */
export function decodeOutcomesDetailed(body: Uint8Array): Outcomes | undefined {
  if (body.length < detailedHeaderBytes) return undefined;
  const view = new DataView(body.buffer, body.byteOffset, body.byteLength);
  const entries = view.getUint32(0, true);
  const textCount = view.getUint32(4, true);
  const detailsAt = detailedHeaderBytes + entries * outcomeEntryBytes;
  const textsAt = detailsAt + entries * outcomeDetailBytes;
  if (textsAt + textCount * 2 > body.length) return undefined;
  const outcomes = decodeOutcomes(body.subarray(detailedHeaderBytes, detailsAt));
  if (outcomes === undefined) return undefined;
  let at = textsAt;
  for (let t = 0; t < textCount; t++) {
    if (at + 2 > body.length) return undefined;
    const length = view.getUint16(at, true);
    if (at + 2 + length > body.length) return undefined;
    try {
      outcomes.errorTexts.push(utf8Fatal.decode(body.subarray(at + 2, at + 2 + length)));
    } catch {
      return undefined;
    }
    at += 2 + length;
  }
  if (at !== body.length) return undefined;
  let i = 0;
  for (let e = 0; e < entries; e++) {
    const rows = view.getUint32(detailedHeaderBytes + e * outcomeEntryBytes + 20, true) + 1;
    const error = view.getUint32(detailsAt + e * outcomeDetailBytes, true);
    const attemptedAtMs = view.getFloat64(detailsAt + e * outcomeDetailBytes + 8, true);
    if (error > textCount || (error > 0 && !Number.isFinite(attemptedAtMs))) return undefined;
    outcomes.errors.fill(error, i, i + rows);
    outcomes.attemptedAtMs.fill(attemptedAtMs, i, i + rows);
    i += rows;
  }
  return outcomes;
}

export const addHeaderBytes = 24;
export const addFormatVersion = 1;
export const addEncodingArrowStream = 1;
/** The engine's own columnar form (engine/batch/batch-codec.ts), for batches that did not arrive as Arrow. */
export const addEncodingColumns = 2;
/** As addEncodingColumns, with the callback and failure-callback columns after the keys: a batch with callbacks. */
export const addEncodingColumnsWithCallbacks = 3;
export type AddEncoding = typeof addEncodingArrowStream | typeof addEncodingColumns | typeof addEncodingColumnsWithCallbacks;
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
  if (view.getUint8(0) !== addFormatVersion || (encoding !== addEncodingArrowStream && encoding !== addEncodingColumns && encoding !== addEncodingColumnsWithCallbacks) || view.getUint16(2, true) !== 0) {
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

export const clockBodyBytes = 8;

/** The body of CLOCK: a manual clock's new position (whole epoch ms). */
export function encodeClock(positionMs: number): Uint8Array {
  const bytes = new Uint8Array(clockBodyBytes);
  new DataView(bytes.buffer).setFloat64(0, positionMs, true);
  return bytes;
}

/** The position a CLOCK body holds; undefined when it is malformed (not 8 bytes, or not whole epoch ms). */
export function decodeClock(body: Uint8Array): number | undefined {
  if (body.length !== clockBodyBytes) return undefined;
  const positionMs = new DataView(body.buffer, body.byteOffset, body.byteLength).getFloat64(0, true);
  return Number.isSafeInteger(positionMs) && positionMs >= 0 ? positionMs : undefined;
}

export const outcomeFollowedHeaderBytes = 8;

/**
 * The OUTCOME_FOLLOWED body (docs/format/engine-records.md): the outcomes as an OUTCOME_DETAILED
 * body, then the follow-up timers they make as an ADD body (its header, then the batch in
 * encoding 2), in one record so that no crash keeps the one without the other. Parts to append
 * in order: the header with the outcomes, then the ADD body's parts as they are.
 */
export function encodeOutcomeFollowed(outcomes: Outcomes, addBody: readonly Uint8Array[]): Uint8Array[] {
  const detailed = encodeOutcomesDetailed(outcomes);
  const head = new Uint8Array(outcomeFollowedHeaderBytes + detailed.length);
  new DataView(head.buffer).setUint32(0, detailed.length, true);
  head.set(detailed, outcomeFollowedHeaderBytes);
  return [head, ...addBody];
}

/** The outcomes and the ADD body of an OUTCOME_FOLLOWED body, or undefined when it is malformed. */
export function decodeOutcomeFollowed(body: Uint8Array): { outcomes: Outcomes; add: Uint8Array } | undefined {
  if (body.length < outcomeFollowedHeaderBytes) return undefined;
  const view = new DataView(body.buffer, body.byteOffset, outcomeFollowedHeaderBytes);
  const outcomeBytes = view.getUint32(0, true);
  if (view.getUint32(4, true) !== 0 || outcomeFollowedHeaderBytes + outcomeBytes > body.length) return undefined;
  const outcomes = decodeOutcomesDetailed(body.subarray(outcomeFollowedHeaderBytes, outcomeFollowedHeaderBytes + outcomeBytes));
  if (outcomes === undefined) return undefined;
  return { outcomes, add: body.subarray(outcomeFollowedHeaderBytes + outcomeBytes) };
}

// ---- RESCHEDULE (8): one PATCH of one timer ----

export const rescheduleFormatVersion = 1;
export const rescheduleFixedBytes = 40;

/** The bits of a RESCHEDULE's `changed` byte: which fields the PATCH set. */
export const rescheduleChanged = { fireAt: 1, target: 2, queue: 4, payload: 8, headers: 16, callbacks: 32 } as const;
const rescheduleChangedAll = 63;

/**
 * One PATCH as logged: the timer (seq, row and the fire time that names its spill bucket, which
 * finds it on disk when it is spilled: its id's, or the one an earlier PATCH gave it), its revision after the change, the fire time after it (absolute,
 * so replay is exact; the timer's current one when fire_at did not change) and each changed
 * field's new value.
 */
export interface RescheduleRecord {
  readonly seq: number;
  readonly row: number;
  readonly bucketAtMs: number;
  readonly revision: number;
  /** rescheduleChanged bits. */
  readonly changed: number;
  readonly fireAtMs: number;
  readonly target?: string;
  readonly queue?: string;
  readonly payload?: Uint8Array;
  /** The engine's header bytes (JSON object text; empty: none). */
  readonly headers?: Uint8Array;
  /** The timer's whole callbacks run after the change (engine/store/callback-bytes.ts; empty: neither URL). */
  readonly callbacks?: Uint8Array;
}

export function encodeReschedule(record: RescheduleRecord): Uint8Array {
  const { changed } = record;
  assert.ok(changed > 0 && (changed & ~rescheduleChangedAll) === 0, 'a RESCHEDULE changes at least one known field');
  assert.ok(Number.isSafeInteger(record.revision) && record.revision >= 2 && record.revision <= 0xffffffff, 'a RESCHEDULE revision is 2 or more');
  const parts: Uint8Array[] = [];
  const field = (bit: number, value: Uint8Array | string | undefined): void => {
    if ((changed & bit) === 0) return;
    assert.ok(value !== undefined, 'a changed field has its value');
    parts.push(typeof value === 'string' ? utf8Encoder.encode(value) : value);
  };
  field(rescheduleChanged.target, record.target);
  field(rescheduleChanged.queue, record.queue);
  field(rescheduleChanged.payload, record.payload);
  field(rescheduleChanged.headers, record.headers);
  field(rescheduleChanged.callbacks, record.callbacks);
  let length = rescheduleFixedBytes;
  for (const part of parts) length += 4 + part.length;
  const bytes = new Uint8Array(length);
  const view = new DataView(bytes.buffer);
  view.setUint8(0, rescheduleFormatVersion);
  view.setUint8(1, changed);
  view.setUint32(4, record.row, true);
  view.setFloat64(8, record.seq, true);
  view.setFloat64(16, record.bucketAtMs, true);
  view.setUint32(24, record.revision, true);
  view.setFloat64(32, record.fireAtMs, true);
  let at = rescheduleFixedBytes;
  for (const part of parts) {
    view.setUint32(at, part.length, true);
    bytes.set(part, at + 4);
    at += 4 + part.length;
  }
  return bytes;
}

export const cancelBulkHeaderBytes = 16;

/** The timers one bulk cancel took: refs of resident timers, and spilled refs with the fire time that finds their bucket. */
export interface BulkCancel {
  readonly expiresAtMs: number;
  readonly seqs: Float64Array;
  readonly rows: Uint32Array;
  readonly spilledSeqs: Float64Array;
  readonly spilledRows: Uint32Array;
  readonly spilledFireAtMs: Float64Array;
}

/** The body of CANCEL_BULK (docs/format/engine-records.md). */
export function encodeCancelBulk(cancel: BulkCancel): Uint8Array {
  const refs = cancel.seqs.length;
  const spilled = cancel.spilledSeqs.length;
  assert.ok(cancel.rows.length === refs && cancel.spilledRows.length === spilled && cancel.spilledFireAtMs.length === spilled, 'a ref is a whole ref');
  const bytes = new Uint8Array(cancelBulkHeaderBytes + refs * timerRefBytes + spilled * spilledRefBytes);
  const view = new DataView(bytes.buffer);
  view.setFloat64(0, cancel.expiresAtMs, true);
  view.setUint32(8, refs, true);
  view.setUint32(12, spilled, true);
  let at = cancelBulkHeaderBytes;
  for (let i = 0; i < refs; i++, at += timerRefBytes) {
    view.setFloat64(at, cancel.seqs[i] as number, true);
    view.setUint32(at + 8, cancel.rows[i] as number, true);
  }
  for (let i = 0; i < spilled; i++, at += spilledRefBytes) {
    view.setFloat64(at, cancel.spilledSeqs[i] as number, true);
    view.setUint32(at + 8, cancel.spilledRows[i] as number, true);
    view.setFloat64(at + 16, cancel.spilledFireAtMs[i] as number, true);
  }
  return bytes;
}

/** A RESCHEDULE body's record, or undefined if it is malformed. Its byte fields are views of `body`. */
export function decodeReschedule(body: Uint8Array): RescheduleRecord | undefined {
  if (body.length < rescheduleFixedBytes) return undefined;
  const view = new DataView(body.buffer, body.byteOffset, body.byteLength);
  const changed = view.getUint8(1);
  if (view.getUint8(0) !== rescheduleFormatVersion || view.getUint16(2, true) !== 0 || view.getUint32(28, true) !== 0) return undefined;
  if (changed === 0 || (changed & ~rescheduleChangedAll) !== 0) return undefined;
  const seq = view.getFloat64(8, true);
  const bucketAtMs = view.getFloat64(16, true);
  const revision = view.getUint32(24, true);
  const fireAtMs = view.getFloat64(32, true);
  if (!Number.isSafeInteger(seq) || seq < 1 || !Number.isFinite(bucketAtMs) || !Number.isFinite(fireAtMs) || revision < 2) return undefined;
  let at = rescheduleFixedBytes;
  const next = (bit: number): Uint8Array | undefined | null => {
    if ((changed & bit) === 0) return undefined;
    if (at + 4 > body.length) return null;
    const length = view.getUint32(at, true);
    if (at + 4 + length > body.length) return null;
    const bytes = body.subarray(at + 4, at + 4 + length);
    at += 4 + length;
    return bytes;
  };
  const target = next(rescheduleChanged.target);
  const queue = next(rescheduleChanged.queue);
  const payload = next(rescheduleChanged.payload);
  const headers = next(rescheduleChanged.headers);
  const callbacks = next(rescheduleChanged.callbacks);
  if (target === null || queue === null || payload === null || headers === null || callbacks === null || at !== body.length) return undefined;
  if (callbacks !== undefined && !isCallbacksRun(callbacks)) return undefined;
  const record: { -readonly [K in keyof RescheduleRecord]: RescheduleRecord[K] } = { seq, row: view.getUint32(4, true), bucketAtMs, revision, changed, fireAtMs };
  try {
    if (target !== undefined) record.target = utf8Fatal.decode(target);
    if (queue !== undefined) record.queue = utf8Fatal.decode(queue);
  } catch {
    return undefined;
  }
  if (payload !== undefined) record.payload = payload;
  if (headers !== undefined) record.headers = headers;
  if (callbacks !== undefined) record.callbacks = callbacks;
  return record;
}

/** The timers of a CANCEL_BULK body, or undefined if it is malformed. */
export function decodeCancelBulk(body: Uint8Array): BulkCancel | undefined {
  if (body.length < cancelBulkHeaderBytes) return undefined;
  const view = new DataView(body.buffer, body.byteOffset, body.byteLength);
  const expiresAtMs = view.getFloat64(0, true);
  const refs = view.getUint32(8, true);
  const spilled = view.getUint32(12, true);
  if (!Number.isFinite(expiresAtMs) || body.length !== cancelBulkHeaderBytes + refs * timerRefBytes + spilled * spilledRefBytes) return undefined;
  const cancel = {
    expiresAtMs,
    seqs: new Float64Array(refs),
    rows: new Uint32Array(refs),
    spilledSeqs: new Float64Array(spilled),
    spilledRows: new Uint32Array(spilled),
    spilledFireAtMs: new Float64Array(spilled),
  };
  let at = cancelBulkHeaderBytes;
  for (let i = 0; i < refs; i++, at += timerRefBytes) {
    if (view.getUint32(at + 12, true) !== 0) return undefined;
    cancel.seqs[i] = view.getFloat64(at, true);
    cancel.rows[i] = view.getUint32(at + 8, true);
  }
  for (let i = 0; i < spilled; i++, at += spilledRefBytes) {
    if (view.getUint32(at + 12, true) !== 0) return undefined;
    cancel.spilledSeqs[i] = view.getFloat64(at, true);
    cancel.spilledRows[i] = view.getUint32(at + 8, true);
    cancel.spilledFireAtMs[i] = view.getFloat64(at + 16, true);
    if (!Number.isFinite(cancel.spilledFireAtMs[i] as number)) return undefined;
  }
  return cancel;
}
