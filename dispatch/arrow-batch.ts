// "arrow" delivery's body: the timers of one task as one Arrow IPC stream (a schema and one
// record batch), for data pipelines that take due timers in bulk. Built column by column
// from the task's buffers: values are copied into one buffer per column, with no object per row.
//
//   id        Utf8                       the timer's id
//   fire_at   Timestamp(ms, UTC)         its fire time
//   attempt   Uint32                     this delivery attempt, 1-based
//   target    Utf8                       the target it was added with
//   key       Utf8, null when none       its idempotency key
//   payload   Binary                     its payload, byte for byte
//   headers   Utf8 (JSON), null if none  its headers
import { createHash } from 'node:crypto';
import { Binary, makeData, makeVector, Table, tableToIPC, Timestamp, TimeUnit, Uint32, Utf8 } from 'apache-arrow';
import { idLength } from '../engine/ids.ts';
import { byteFields, type DeliveryTask, metaFields, taskField as field } from './delivery-task.ts';

export const arrowBatchMediaType = 'application/vnd.apache.arrow.stream';

interface VariableWidth {
  readonly length: number;
  readonly valueOffsets: Int32Array;
  readonly data: Uint8Array;
  readonly nullBitmap?: Uint8Array;
  readonly nullCount?: number;
}

/** The task's byte buffer as a Buffer (no copy), for Buffer#copy: native, and no view object per value. */
function bytesBuffer(task: DeliveryTask): Buffer {
  return Buffer.from(task.bytes.buffer, task.bytes.byteOffset, task.bytes.byteLength);
}

/**
 * One task field as the buffers of an Arrow variable-width column; empty values are null when
 * `emptyIsNull`. Lengths and copies come from the task's offsets, with no view per value.
 */
function column(task: DeliveryTask, which: number, emptyIsNull: boolean): VariableWidth {
  const { count, offsets: taskOffsets } = task;
  const offsets = new Int32Array(count + 1);
  let size = 0;
  for (let at = 0; at < count; at++) {
    const index = at * byteFields + which;
    size += (taskOffsets[index + 1] as number) - (taskOffsets[index] as number);
  }
  const values = Buffer.allocUnsafe(size);
  const source = bytesBuffer(task);
  const validity = emptyIsNull ? new Uint8Array((count + 7) >> 3) : undefined;
  let nulls = 0;
  let used = 0;
  for (let at = 0; at < count; at++) {
    const index = at * byteFields + which;
    const start = taskOffsets[index] as number;
    const end = taskOffsets[index + 1] as number;
    // Buffer#copy is native and makes no view object (a subarray per value made the GC a tenth of the worker's time).
    if (end > start) used += source.copy(values, used, start, end);
    offsets[at + 1] = used;
    if (validity === undefined) continue;
    if (end > start) validity[at >> 3] = (validity[at >> 3] as number) | (1 << (at & 7));
    else nulls++;
  }
  return { length: count, valueOffsets: offsets, data: values, ...(validity === undefined ? {} : { nullBitmap: validity, nullCount: nulls }) };
}

/** The task's timers as an Arrow IPC stream (attempt numbers and fire times from its meta), with `metadata` on its schema. */
export function encodeArrowBatch(task: DeliveryTask, metadata?: ReadonlyMap<string, string>): Uint8Array {
  const count = task.count;
  const fireAt = new BigInt64Array(count);
  const attempt = new Uint32Array(count);
  for (let at = 0; at < count; at++) {
    fireAt[at] = BigInt(task.meta[at * metaFields] as number);
    attempt[at] = task.meta[at * metaFields + 1] as number;
  }
  const table = new Table({
    id: makeVector(makeData({ type: new Utf8(), ...column(task, field.id, false) })),
    fire_at: makeVector(makeData({ type: new Timestamp(TimeUnit.MILLISECOND, 'UTC'), length: count, data: fireAt })),
    attempt: makeVector(makeData({ type: new Uint32(), length: count, data: attempt })),
    target: makeVector(makeData({ type: new Utf8(), ...column(task, field.target, false) })),
    key: makeVector(makeData({ type: new Utf8(), ...column(task, field.key, true) })),
    payload: makeVector(makeData({ type: new Binary(), ...column(task, field.payload, false) })),
    headers: makeVector(makeData({ type: new Utf8(), ...column(task, field.headers, true) })),
  });
  if (metadata !== undefined) for (const [name, value] of metadata) table.schema.metadata.set(name, value);
  return tableToIPC(table, 'stream');
}

/**
 * The batch's idempotency key (and webhook id): a digest of its timers' ids, the same when the
 * same batch is sent again, so a sink can tell a resent batch from a new one. A retry may regroup timers into other batches:
 * dedupe on each row's `id` for exactly-once effects.
 */
export function arrowBatchKey(task: DeliveryTask): string {
  // The ids side by side, hashed in one update: the same digest as one update per id.
  const ids = Buffer.allocUnsafe(task.count * idLength);
  const source = bytesBuffer(task);
  for (let at = 0; at < task.count; at++) {
    const start = task.offsets[at * byteFields + field.id] as number;
    source.copy(ids, at * idLength, start, start + idLength);
  }
  return `batch_${createHash('sha256').update(ids).digest('base64url').slice(0, 32)}`;
}
