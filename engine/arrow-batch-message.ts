// One Arrow IPC record batch message, written from column buffers the caller filled: the
// encapsulated form (continuation marker, metadata length, the Message flatbuffer padded to 8
// bytes, then the body), for a stream whose schema message the caller wrote once before it
// (engine/timer-export.ts). Main thread; pure.
//
//   0xffffffff | metadata length | Message{RecordBatch{length, nodes, buffers}} | pad | body
//   body: each column's buffers in schema order (validity, [offsets,] values), each padded to 8
//
// The layout is apache-arrow's writer's (VectorAssembler, RecordBatchWriter._writeMessage): a
// column without nulls has an empty validity buffer, every buffer region is its length rounded
// up to 8. Only the flatbuffer is made by apache-arrow (Message.encode, a few dozen objects a
// batch); the body goes straight from the columns into the message, one copy, where
// tableToIPC made a Table, a schema message and a join of every chunk per batch.
import { Message, BufferRegion, FieldNode, RecordBatch as RecordBatchHeader } from 'apache-arrow/ipc/metadata/message';

/** A flat column's buffers for one batch: validity (empty when no nulls), then offsets for variable-width types, then values. */
export interface ColumnBuffers {
  readonly nullCount: number;
  readonly buffers: readonly Uint8Array[];
}

const continuation = 0xffffffff;

function padded(bytes: number): number {
  return (bytes + 7) & ~7;
}

/** The record batch message of `rows` rows whose columns (in schema order, all `rows` long) are `columns`. */
export function recordBatchMessage(rows: number, columns: readonly ColumnBuffers[]): Uint8Array {
  const nodes: FieldNode[] = [];
  const regions: BufferRegion[] = [];
  let bodyBytes = 0;
  for (const column of columns) {
    nodes.push(new FieldNode(rows, column.nullCount));
    for (const buffer of column.buffers) {
      const length = padded(buffer.byteLength);
      regions.push(new BufferRegion(bodyBytes, length));
      bodyBytes += length;
    }
  }
  const metadata = Message.encode(Message.from(new RecordBatchHeader(rows, nodes, regions, null), bodyBytes));
  const prefixBytes = padded(8 + metadata.byteLength);
  // Zeroed: the padding after the flatbuffer and after each buffer.
  const message = new Uint8Array(prefixBytes + bodyBytes);
  const view = new DataView(message.buffer);
  view.setUint32(0, continuation, true);
  view.setInt32(4, prefixBytes - 8, true);
  message.set(metadata, 8);
  let at = prefixBytes;
  for (const column of columns) {
    for (const buffer of column.buffers) {
      message.set(buffer, at);
      at += padded(buffer.byteLength);
    }
  }
  return message;
}
