// Arrow streams for tests: a TimerBatch written in the schema a typical Arrow client sends
// (Timestamp ms fire times, dictionary-encoded targets and queues, Binary payloads).
import { Binary, type Data, type DataType, Dictionary, Field, Int32, makeData, makeVector, RecordBatch, Schema, Struct, Table, tableToIPC, Timestamp, TimeUnit, Utf8 } from 'apache-arrow';
import type { TimerBatch } from '../../engine/batch/timer-batch.ts';

function stringsData(strings: readonly string[]): Data<Utf8> {
  const encoder = new TextEncoder();
  const parts = strings.map((s) => encoder.encode(s));
  const offsets = new Int32Array(parts.length + 1);
  for (let i = 0; i < parts.length; i++) offsets[i + 1] = (offsets[i] as number) + (parts[i] as Uint8Array).length;
  const values = new Uint8Array(offsets[parts.length] as number);
  for (let i = 0; i < parts.length; i++) values.set(parts[i] as Uint8Array, offsets[i] as number);
  return makeData({ type: new Utf8(), length: parts.length, valueOffsets: offsets, data: values });
}

const utf8Dictionary = (): Dictionary<Utf8, Int32> => new Dictionary(new Utf8(), new Int32());

export function batchToArrow(batch: TimerBatch): Uint8Array {
  const rows = batch.rows;
  const columns = [
    ['fire_at', makeData({ type: new Timestamp(TimeUnit.MILLISECOND, 'UTC'), length: rows, data: BigInt64Array.from(batch.fireAtMs, (ms) => BigInt(ms)) })],
    ['target', makeData({ type: utf8Dictionary(), length: rows, data: batch.targetIndex, dictionary: makeVector(stringsData(batch.targets)) })],
    ['queue', makeData({ type: utf8Dictionary(), length: rows, data: batch.queueIndex, dictionary: makeVector(stringsData(batch.queues)) })],
    ['payload', makeData({ type: new Binary(), length: rows, valueOffsets: batch.payload.offsets, data: batch.payload.values })],
    ['headers', makeData({ type: new Utf8(), length: rows, valueOffsets: batch.headers.offsets, data: batch.headers.values })],
    ['key', makeData({ type: new Utf8(), length: rows, valueOffsets: batch.keys.offsets, data: batch.keys.values })],
  ] as const;
  const schema = new Schema(columns.map(([name, data]) => new Field(name, data.type, false)));
  const struct = makeData({ type: new Struct(schema.fields), length: rows, children: columns.map(([, data]) => data as Data<DataType>) });
  return tableToIPC(new Table([new RecordBatch(schema, struct)]), 'stream');
}
