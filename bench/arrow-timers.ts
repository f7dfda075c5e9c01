// One Arrow IPC stream of far-future timers, built column by column, for the ingest and Flight
// benchmarks: fire_at Timestamp(ms, UTC) spread from an hour ahead, target Utf8, payload Binary.
import { Binary, Field, makeData, RecordBatch, Schema, Struct, Table, tableToIPC, Timestamp, TimeUnit, Utf8 } from 'apache-arrow';

const hourMs = 3_600_000;

export interface ArrowTimersShape {
  readonly nowMs: number;
  readonly rows: number;
  readonly payloadBytes: number;
  readonly target: string;
  /** Fire times are spread uniformly over this span, starting an hour after nowMs. */
  readonly fireSpanMs: number;
}

export function farFutureArrowStream(shape: ArrowTimersShape): Buffer {
  const { rows, payloadBytes } = shape;
  const fireAt = new BigInt64Array(rows);
  for (let row = 0; row < rows; row++) fireAt[row] = BigInt(shape.nowMs + hourMs + Math.floor(Math.random() * shape.fireSpanMs));
  const targetBytes = Buffer.from(shape.target);
  const targetOffsets = new Int32Array(rows + 1);
  const targetValues = new Uint8Array(rows * targetBytes.length);
  const payloadOffsets = new Int32Array(rows + 1);
  const payloadValues = new Uint8Array(rows * payloadBytes);
  for (let row = 0; row < rows; row++) {
    targetValues.set(targetBytes, row * targetBytes.length);
    targetOffsets[row + 1] = (row + 1) * targetBytes.length;
    payloadValues.fill(row & 0xff, row * payloadBytes, (row + 1) * payloadBytes);
    payloadOffsets[row + 1] = (row + 1) * payloadBytes;
  }
  const columns = [
    ['fire_at', makeData({ type: new Timestamp(TimeUnit.MILLISECOND, 'UTC'), length: rows, data: fireAt })],
    ['target', makeData({ type: new Utf8(), length: rows, valueOffsets: targetOffsets, data: targetValues })],
    ['payload', makeData({ type: new Binary(), length: rows, valueOffsets: payloadOffsets, data: payloadValues })],
  ] as const;
  const schema = new Schema(columns.map(([name, data]) => new Field(name, data.type, false)));
  const struct = makeData({ type: new Struct(schema.fields), length: rows, children: columns.map(([, data]) => data) });
  const ipc = tableToIPC(new Table([new RecordBatch(schema, struct)]), 'stream');
  return Buffer.from(ipc.buffer, ipc.byteOffset, ipc.byteLength);
}
