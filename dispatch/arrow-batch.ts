// "arrow" delivery's body: the timers of one task as one Arrow IPC stream (a schema and one
// record batch), for data pipelines that take due timers in bulk. The task's byte columns are
// Arrow's variable-width layout already (dispatch/delivery-task.ts): the record batch is made of
// them as they are, with no copy and no object per row; the one copy is the IPC stream's.
// Pure: a delivery worker encodes "arrow" tasks, the main thread a pull DoGet's batch.
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
import { defaultQueueConfig } from '../engine/queues.ts';
import { type DeliveryTask, metaFields, taskColumn, taskField as field, taskIdColumn } from './delivery-task.ts';
import { DeliveryTaskBuilder } from './task-builder.ts';

export const arrowBatchMediaType = 'application/vnd.apache.arrow.stream';

interface VariableWidth {
  readonly length: number;
  readonly valueOffsets: Int32Array;
  readonly data: Uint8Array;
  readonly nullBitmap?: Uint8Array;
  readonly nullCount?: number;
}

const twoTo32 = 2 ** 32;
const littleEndian = new Uint8Array(Uint16Array.of(1).buffer)[0] === 1;

/** One task field as an Arrow variable-width column (views of the task's buffers); empty values are null when `emptyIsNull`. */
function column(task: DeliveryTask, which: number, emptyIsNull: boolean): VariableWidth {
  const count = task.count;
  const { offsets, values } = taskColumn(task, which);
  if (!emptyIsNull) return { length: count, valueOffsets: offsets, data: values };
  const validity = new Uint8Array((count + 7) >> 3);
  let nulls = 0;
  for (let at = 0; at < count; at++) {
    if ((offsets[at + 1] as number) > (offsets[at] as number)) validity[at >> 3] = (validity[at >> 3] as number) | (1 << (at & 7));
    else nulls++;
  }
  return { length: count, valueOffsets: offsets, data: values, nullBitmap: validity, nullCount: nulls };
}

/** The task's fire times as Int64 milliseconds, written as two 32-bit halves each (no BigInt per row). */
function fireTimes(task: DeliveryTask): BigInt64Array {
  const count = task.count;
  const fireAt = new BigInt64Array(count);
  // Low half first: a little-endian machine's layout (a big-endian one takes the BigInt way).
  const halves = new Int32Array(fireAt.buffer);
  for (let at = 0; at < count; at++) {
    const ms = task.meta[at * metaFields] as number;
    if (littleEndian && Number.isSafeInteger(ms) && ms >= 0) {
      halves[2 * at] = ms % twoTo32 | 0;
      halves[2 * at + 1] = Math.floor(ms / twoTo32);
    } else fireAt[at] = BigInt(Math.trunc(ms));
  }
  return fireAt;
}

/** The task's id column, written once for its body and its batch key. */
const idColumns = new WeakMap<DeliveryTask, { offsets: Int32Array; values: Uint8Array }>();

function ids(task: DeliveryTask): { offsets: Int32Array; values: Uint8Array } {
  let column = idColumns.get(task);
  if (column === undefined) {
    column = taskIdColumn(task);
    idColumns.set(task, column);
  }
  return column;
}

/** The task's timers as an Arrow IPC stream (ids, attempt numbers and fire times from its meta), with `metadata` on its schema. */
export function encodeArrowBatch(task: DeliveryTask, metadata?: ReadonlyMap<string, string>): Uint8Array {
  const count = task.count;
  const id = ids(task);
  const attempt = new Uint32Array(count);
  for (let at = 0; at < count; at++) attempt[at] = task.meta[at * metaFields + 1] as number;
  const table = new Table({
    id: makeVector(makeData({ type: new Utf8(), length: count, valueOffsets: id.offsets, data: id.values })),
    fire_at: makeVector(makeData({ type: new Timestamp(TimeUnit.MILLISECOND, 'UTC'), length: count, data: fireTimes(task) })),
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
  // The id column holds the ids side by side: hashed in one update, the same digest as one update per id.
  return `batch_${createHash('sha256').update(ids(task).values).digest('base64url').slice(0, 32)}`;
}

/**
 * Encodes a made-up task of 1,024 timers a few times, sending nothing, and returns the last
 * body. A delivery worker calls it before it reports loaded: a fresh thread's first encode
 * compiles apache-arrow's code and this module's, and the first batches after a start (a
 * restart finds every overdue timer due at once) waited for it. In the dispatch bench's first
 * Arrow drain, the first 10,000-row batch took 43 ms to encode, 4.6 ms after this warm-up,
 * which takes some 15 ms.
 */
export function warmUpArrowEncoder(): Uint8Array {
  const rows = 1024;
  const target = 'http://warm-up.invalid/';
  const payload = new Uint8Array(128);
  let body: Uint8Array = new Uint8Array(0);
  for (let round = 1; round <= 4; round++) {
    const builder = new DeliveryTaskBuilder(rows, target);
    const fireAtMs = Date.now();
    for (let row = 0; row < rows; row++) {
      builder.add({ seq: round, row, target, bytes: payload, bytesStart: 0, payloadLength: payload.length, headersLength: 0, keyLength: 0, fireAtMs, attempt: 1, timeoutMs: defaultQueueConfig.timeout_ms, policy: defaultQueueConfig });
    }
    const { task } = builder.finish();
    body = encodeArrowBatch(task);
    arrowBatchKey(task);
  }
  return body;
}
