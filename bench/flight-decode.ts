// Decoding the FlightData messages a DoPut receives, two ways, in one process: fermata's own
// protobuf reader (ingest/flight/protobuf-wire.ts, through decodeFlightData) and protobufjs's
// Reader driven by the same field loop. Both return the bytes fields as views of the message,
// so the cost is the per-message work (tags, lengths, the result object), not the body size.
// The record for the choice is docs/decisions/0011-flight-protobuf-reader.md.
//
//   node bench/flight-decode.ts [--quick]
//
// The messages: the first of a call (descriptor, schema) and record batches of 1, 100 and
// 10,000 timers (128-byte payloads, the `flight` suite's shape). Each reader decodes each
// message in rounds, the two alternating (A, B, A, B…) so that a drift of the machine hits
// both; the figure is the median round's ns of CPU time per message. Prints one JSON figure a line:
//
//   {"suite":"flight_decode","name":"flight_decode.batch10000.protobufjs.ns","value":80.1,"unit":"ns"}
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { Binary, Table, tableToIPC, TimestampMillisecond, Utf8, vectorFromArray } from 'apache-arrow';
import protobuf from 'protobufjs/minimal.js';
import { flightDataOf, timersDescriptor } from '../ingest/flight/flight-client.ts';
import { decodeFlightData, descriptorTypes, type FlightData, type FlightDescriptor } from '../ingest/flight/flight-messages.ts';

const suite = 'flight_decode';
const quick = process.argv.includes('--quick');
const rounds = quick ? 7 : 21;
const decodesPerRound = quick ? 50_000 : 100_000;
const payloadBytes = 128;
const target = 'https://example.com/hook';

const lengthDelimited = 2;
const varint = 0;
const empty: Buffer = Buffer.alloc(0);

/** decodeFlightData's loop over protobufjs's Reader: same fields, same wire-type checks, unknown fields skipped. */
function decodeFlightDataProtobufjs(bytes: Buffer): FlightData {
  const reader = protobuf.Reader.create(bytes);
  let descriptor: FlightDescriptor | undefined;
  let dataHeader = empty;
  let appMetadata = empty;
  let dataBody = empty;
  while (reader.pos < reader.len) {
    const tag = reader.uint32();
    const field = tag >>> 3;
    const wireType = tag & 7;
    switch (field) {
      case 1:
        expect(field, wireType, lengthDelimited);
        descriptor = decodeDescriptorProtobufjs(reader.bytes() as Buffer);
        break;
      case 2:
        expect(field, wireType, lengthDelimited);
        dataHeader = reader.bytes() as Buffer;
        break;
      case 3:
        expect(field, wireType, lengthDelimited);
        appMetadata = reader.bytes() as Buffer;
        break;
      case 1000:
        expect(field, wireType, lengthDelimited);
        dataBody = reader.bytes() as Buffer;
        break;
      default:
        reader.skipType(wireType);
    }
  }
  return { descriptor, dataHeader, appMetadata, dataBody };
}

function decodeDescriptorProtobufjs(bytes: Buffer): FlightDescriptor {
  const reader = protobuf.Reader.create(bytes);
  let type = 0;
  let cmd = empty;
  const path: string[] = [];
  while (reader.pos < reader.len) {
    const tag = reader.uint32();
    const field = tag >>> 3;
    const wireType = tag & 7;
    if (field === 1) {
      expect(field, wireType, varint);
      type = reader.uint32();
    } else if (field === 2) {
      expect(field, wireType, lengthDelimited);
      cmd = reader.bytes() as Buffer;
    } else if (field === 3) {
      expect(field, wireType, lengthDelimited);
      path.push(reader.string());
    } else reader.skipType(wireType);
  }
  return { type, cmd, path };
}

function expect(field: number, wireType: number, wanted: number): void {
  if (wireType !== wanted) throw new Error(`field ${field} has wire type ${wireType}, not ${wanted}`);
}

/** An Arrow IPC stream of `rows` timers: fire_at (Timestamp ms), target (Utf8), payload (Binary). */
function timersStream(rows: number): Uint8Array {
  const nowMs = Date.now();
  const payload = new Uint8Array(payloadBytes).fill(0x78);
  return tableToIPC(
    new Table({
      fire_at: vectorFromArray(Array.from({ length: rows }, (_, row) => nowMs + 3_600_000 + row), new TimestampMillisecond()),
      target: vectorFromArray(Array.from({ length: rows }, () => target), new Utf8()),
      payload: vectorFromArray(Array.from({ length: rows }, () => payload), new Binary()),
    }),
    'stream',
  );
}

/** The messages of one DoPut of a `rows`-timer batch: [descriptor + schema, record batch]. */
function putMessages(rows: number): [Buffer, Buffer] {
  const messages = flightDataOf(timersDescriptor(), [timersStream(rows)]);
  assert.equal(messages.length, 2, 'a schema and one record batch');
  const [first, batch] = messages;
  assert.ok(first !== undefined && batch !== undefined);
  return [first, batch];
}

type Decode = (bytes: Buffer) => FlightData;

/**
 * ns per decode of `message`, over one round, in this process's CPU time: on a machine shared
 * with other work the wall clock also counts the time the process waited for a core.
 */
function round(decode: Decode, message: Buffer): number {
  let sink = 0;
  const start = process.cpuUsage();
  for (let i = 0; i < decodesPerRound; i++) sink += decode(message).dataHeader.length;
  const used = process.cpuUsage(start);
  assert.ok(sink > 0);
  return ((used.user + used.system) * 1e3) / decodesPerRound;
}

const median = (values: readonly number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
};

/** Both readers see the same fields, as views of the same bytes. */
function assertSameDecoding(message: Buffer): void {
  const ours = decodeFlightData(message);
  const theirs = decodeFlightDataProtobufjs(message);
  assert.deepEqual(theirs.descriptor, ours.descriptor);
  for (const field of ['dataHeader', 'appMetadata', 'dataBody'] as const) {
    assert.ok(theirs[field].equals(ours[field]), field);
    if (ours[field].length > 0) assert.ok(theirs[field].buffer === message.buffer && theirs[field].byteOffset === ours[field].byteOffset, `${field} is a view`);
  }
  assert.equal(ours.descriptor === undefined || ours.descriptor.type === descriptorTypes.path, true);
}

const readers: ReadonlyArray<readonly [string, Decode]> = [
  ['handwritten', decodeFlightData],
  ['protobufjs', decodeFlightDataProtobufjs],
];

const [schemaMessage] = putMessages(1);
const messages: ReadonlyArray<readonly [string, Buffer]> = [
  ['schema', schemaMessage],
  ['batch1', putMessages(1)[1]],
  ['batch100', putMessages(100)[1]],
  ['batch10000', putMessages(10_000)[1]],
];

const figures: object[] = [{ suite, name: `${suite}.meta`, value: 0, unit: 'info', node: process.version, protobufjs: (createRequire(import.meta.url)('protobufjs/package.json') as { version: string }).version, rounds, decodesPerRound }];
// Both readers see every kind of message before anything is measured, as on a server (where a
// DoPut's first message carries the descriptor and the others do not): the JIT settles on that.
for (const [, message] of messages) assertSameDecoding(message);
for (const [, decode] of readers) for (const [, message] of messages) round(decode, message);
for (const [name, message] of messages) {
  const times = new Map<string, number[]>(readers.map(([reader]) => [reader, []]));
  for (let r = 0; r < rounds; r++) for (const [reader, decode] of readers) times.get(reader)?.push(round(decode, message));
  const medians = new Map([...times].map(([reader, values]) => [reader, median(values)]));
  figures.push({ suite, name: `${suite}.${name}.bytes`, value: message.length, unit: 'B' });
  for (const [reader, ns] of medians) figures.push({ suite, name: `${suite}.${name}.${reader}.ns`, value: Math.round(ns * 10) / 10, unit: 'ns' });
  const ratio = (medians.get('protobufjs') ?? Number.NaN) / (medians.get('handwritten') ?? Number.NaN);
  figures.push({ suite, name: `${suite}.${name}.protobufjs_over_handwritten`, value: Math.round(ratio * 1000) / 1000, unit: 'ratio' });
}
for (const figure of figures) process.stdout.write(`${JSON.stringify(figure)}\n`);
