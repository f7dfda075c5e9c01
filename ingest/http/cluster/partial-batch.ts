// A batch in cluster mode: its rows as NDJSON lines (an Arrow batch's rows are written as the
// JSON timers they are, so that every part travels and is appended the same way), cut into one
// part per partition, each part appended by its partition's owner at once, and the parts'
// answers put back in input order. When every part lands the answer is a batch's usual 201;
// when one fails, it is that part's error (503 + Retry-After for an owner gone or the database
// down) whose body also lists the rows that were accepted, since those are durable:
//
//   {"error": {"code", "message", …, "accepted": 2, "accepted_rows": [0, 2], "ids": ["…", null, "…"]}}
//
// Sending the same body again is safe: accepted keyed rows answer as duplicates, and the unkeyed
// rows of a batch spanning partitions carry derived keys (cluster/router.ts). Main thread.
import type { DuplicateRowJson } from '../../duplicate-answers.ts';
import { isoOf } from '../iso-time.ts';
import { timerLimits } from '../../../engine/limits.ts';
import { bytesAt, byteLengthAt, type TimerBatch } from '../../../engine/batch/timer-batch.ts';
import { validateBatch } from '../../../engine/batch/validate.ts';
import type { BatchSplit } from '../../../cluster/router.ts';
import { batchFromNdjson, inJsonTerms } from '../body/json-batch.ts';
import { errorAnswer, httpErrorCodes } from '../error-map.ts';
import type { ForwardAnswer } from './forwarder.ts';

/** What a part's owner answered: this node's engine's admission, or another node's HTTP answer. */
export type PartOutcome = { readonly local: PartAnswer } | { readonly remote: ForwardAnswer };

export interface PartAnswer {
  /** Cluster ids, in the part's row order. */
  readonly ids: readonly string[];
  readonly revisions: readonly number[];
  /** Rows as the part numbers them. */
  readonly duplicateRows: readonly DuplicateRowJson[];
}

/** Appends one part (an NDJSON body) in `partition`; throws what refused it. */
export type PartAdmitter = (partition: number, body: Buffer, forwarded: boolean, headers: Readonly<Record<string, string | string[] | undefined>>) => Promise<PartOutcome>;

export interface BatchAnswer {
  readonly status: number;
  readonly headers: Record<string, string>;
  readonly body: unknown;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * An NDJSON body checked as one batch (every row's fields, the batch's limits) → its rows' JSON
 * texts and keys, in row order. Rows are the body's non-blank lines, as batchFromNdjson counts them.
 */
export function ndjsonRows(body: Uint8Array, nowMs: number): { rows: string[]; keys: (string | undefined)[] } {
  const { batch, lineOfRow } = batchFromNdjson(body, nowMs);
  try {
    validateBatch(batch, timerLimits, nowMs);
  } catch (err) {
    throw inJsonTerms(err, lineOfRow);
  }
  const rows: string[] = [];
  for (const line of utf8.decode(body).split('\n')) {
    const content = line.trim();
    if (content !== '') rows.push(content);
  }
  return { rows, keys: keysOf(batch) };
}

function keysOf(batch: TimerBatch): (string | undefined)[] {
  const keys: (string | undefined)[] = [];
  for (let row = 0; row < batch.rows; row++) keys.push(byteLengthAt(batch.keys, row) === 0 ? undefined : Buffer.from(bytesAt(batch.keys, row)).toString('utf8'));
  return keys;
}

/** Each row of a checked batch (an Arrow one) as the JSON timer it is: fire_at, target, queue, and what else it has. */
export function arrowRowsAsNdjson(batch: TimerBatch): string[] {
  const rows: string[] = [];
  for (let row = 0; row < batch.rows; row++) {
    const timer: Record<string, unknown> = {
      fire_at: isoOf(batch.fireAtMs[row] as number),
      target: batch.targets[batch.targetIndex[row] as number],
      queue: batch.queues[batch.queueIndex[row] as number],
    };
    const payload = Buffer.from(bytesAt(batch.payload, row));
    if (payload.length > 0) {
      // A payload that is not UTF-8 travels as base64, which the JSON reader takes as bytes.
      const text = payload.toString('utf8');
      if (Buffer.byteLength(text) === payload.length && !text.includes('\ufffd')) timer.payload = text;
      else timer.payload_base64 = payload.toString('base64');
    }
    if (byteLengthAt(batch.headers, row) > 0) timer.headers = JSON.parse(Buffer.from(bytesAt(batch.headers, row)).toString('utf8')) as unknown;
    if (byteLengthAt(batch.keys, row) > 0) timer.key = Buffer.from(bytesAt(batch.keys, row)).toString('utf8');
    if (batch.callback !== undefined && byteLengthAt(batch.callback, row) > 0) timer.callback = Buffer.from(bytesAt(batch.callback, row)).toString('utf8');
    if (batch.failureCallback !== undefined && byteLengthAt(batch.failureCallback, row) > 0) timer.failure_callback = Buffer.from(bytesAt(batch.failureCallback, row)).toString('utf8');
    rows.push(JSON.stringify(timer));
  }
  return rows;
}

interface Part {
  readonly partition: number;
  /** Input rows, ascending. */
  readonly rows: number[];
}

/** Cuts the rows into parts by partition, appends each with `admit`, and answers for the whole batch. */
export async function admitParts(rows: readonly string[], split: BatchSplit, admit: (partition: number, body: Buffer) => Promise<PartOutcome>): Promise<BatchAnswer> {
  const byPartition = new Map<number, Part>();
  for (let row = 0; row < rows.length; row++) {
    const partition = split.partitionOfRow[row] as number;
    let part = byPartition.get(partition);
    if (part === undefined) byPartition.set(partition, (part = { partition, rows: [] }));
    part.rows.push(row);
  }
  const parts = [...byPartition.values()];
  const settled = await Promise.allSettled(
    parts.map(async (part) => {
      const lines = part.rows.map((row) => {
        const derived = split.derivedKeys?.[row];
        if (derived === undefined) return rows[row] as string;
        return JSON.stringify({ ...(JSON.parse(rows[row] as string) as Record<string, unknown>), key: derived });
      });
      return partAnswerOf(await admit(part.partition, Buffer.from(lines.join('\n') + '\n')));
    }),
  );
  const ids: (string | null)[] = new Array<string | null>(rows.length).fill(null);
  const revisions: number[] = new Array<number>(rows.length).fill(1);
  const duplicateRows: DuplicateRowJson[] = [];
  const acceptedRows: number[] = [];
  let failure: BatchAnswer | undefined;
  parts.forEach((part, i) => {
    const outcome = settled[i] as PromiseSettledResult<PartAnswer | BatchAnswer>;
    const answer = outcome.status === 'fulfilled' ? outcome.value : failureOf(outcome.reason);
    if ('status' in answer) {
      failure ??= answer;
      return;
    }
    part.rows.forEach((row, partRow) => {
      ids[row] = answer.ids[partRow] ?? null;
      revisions[row] = answer.revisions[partRow] ?? 1;
      acceptedRows.push(row);
    });
    for (const duplicate of answer.duplicateRows) duplicateRows.push({ ...duplicate, row: part.rows[duplicate.row] as number });
  });
  if (failure !== undefined) {
    acceptedRows.sort((a, b) => a - b);
    const error = (failure.body as { error: Record<string, unknown> }).error;
    return { ...failure, body: { error: { ...error, accepted: acceptedRows.length, accepted_rows: acceptedRows, ids } } };
  }
  duplicateRows.sort((a, b) => a.row - b.row);
  return { status: 201, headers: {}, body: { accepted: rows.length, duplicates: duplicateRows.length, ids, revisions, duplicate_rows: duplicateRows } };
}

/** A part's answer, or the failure it is: another node's non-201 answer as it gave it. */
function partAnswerOf(outcome: PartOutcome): PartAnswer | BatchAnswer {
  if ('local' in outcome) return outcome.local;
  const { status, headers, body } = outcome.remote;
  let json: unknown;
  try {
    json = JSON.parse(body.toString('utf8'));
  } catch {
    json = undefined;
  }
  if (status === 201 && typeof json === 'object' && json !== null && 'ids' in json) {
    const answer = json as { ids: string[]; revisions: number[]; duplicate_rows: DuplicateRowJson[] };
    return { ids: answer.ids, revisions: answer.revisions, duplicateRows: answer.duplicate_rows };
  }
  const retryAfter = headers['retry-after'];
  const error = typeof json === 'object' && json !== null && 'error' in json ? json : { error: { code: httpErrorCodes.internal, message: `the partition's owner answered ${status}` } };
  return { status, headers: typeof retryAfter === 'string' ? { 'retry-after': retryAfter } : {}, body: error };
}

/** A part refused here (or its owner out of reach): the answer error-map.ts gives that error. */
function failureOf(err: unknown): BatchAnswer {
  const answer = errorAnswer(err, undefined);
  return { status: answer.status, headers: answer.retryAfterSeconds === undefined ? {} : { 'retry-after': String(answer.retryAfterSeconds) }, body: answer.body };
}
