// Decoding the FlightData messages a DoPut receives, in one process: with fermata's own
// protobuf reader (ingest/flight/protobuf-wire.ts, through decodeFlightData), and with
// protobufjs's Reader (the library gRPC already carries) wrapped in the checks fermata would
// have to add to refuse what its own reader refuses (field number 0, a string cut short by the
// message's end) and to turn the library's errors into the WireError the service answers
// INVALID_ARGUMENT; a third run, protobufjs's Reader without those checks, shows what the
// library costs by itself. All return the bytes fields as views of the message, so the cost
// is the per-message work (tags, lengths, the result object), not the body size. The record
// for the choice is docs/decisions/0011-flight-protobuf-reader.md.
//
//   node bench/flight-decode.ts [--quick]
//
// The messages: the first of a call (descriptor, schema) and record batches of 1, 100 and
// 10,000 timers (128-byte payloads, the `flight` suite's shape). Each reader decodes each
// message in rounds, the readers alternating (A B C, C B A, A B C…) so that a drift of the
// machine hits all; the figure is the median round's ns of CPU time per message. Prints one
// JSON figure a line:
//
//   {"suite":"flight_decode","name":"flight_decode.batch10000.protobufjs.ns","value":110.8,"unit":"ns"}
import assert from 'node:assert/strict';
import { createRequire } from 'node:module';
import { Binary, Table, tableToIPC, TimestampMillisecond, Utf8, vectorFromArray } from 'apache-arrow';
import protobuf, { type Reader } from 'protobufjs/minimal.js';
import { flightDataOf, timersDescriptor } from '../ingest/flight/flight-client.ts';
import { decodeFlightData, descriptorTypes, type FlightData, type FlightDescriptor } from '../ingest/flight/flight-messages.ts';
import { WireError, wireTypes } from '../ingest/flight/protobuf-wire.ts';

const suite = 'flight_decode';
const quick = process.argv.includes('--quick');
const rounds = quick ? 7 : 21;
const decodesPerRound = quick ? 50_000 : 100_000;
const payloadBytes = 128;
const target = 'https://example.com/hook';

const empty: Buffer = Buffer.alloc(0);

/** decodeFlightData over protobufjs's Reader: the same fields and checks, the same WireError on malformed bytes. */
function decodeFlightDataProtobufjs(bytes: Buffer): FlightData {
  try {
    return readFlightData(protobuf.Reader.create(bytes));
  } catch (err) {
    throw wireErrorOf(err);
  }
}

function readFlightData(reader: Reader): FlightData {
  let descriptor: FlightDescriptor | undefined;
  let dataHeader = empty;
  let appMetadata = empty;
  let dataBody = empty;
  while (reader.pos < reader.len) {
    const tag = readTag(reader);
    const field = tag >>> 3;
    const wireType = tag & 7;
    switch (field) {
      case 1:
        expectWireType(field, wireType, wireTypes.lengthDelimited);
        descriptor = readFlightDescriptor(protobuf.Reader.create(readBytes(reader)));
        break;
      case 2:
        expectWireType(field, wireType, wireTypes.lengthDelimited);
        dataHeader = readBytes(reader);
        break;
      case 3:
        expectWireType(field, wireType, wireTypes.lengthDelimited);
        appMetadata = readBytes(reader);
        break;
      case 1000:
        expectWireType(field, wireType, wireTypes.lengthDelimited);
        dataBody = readBytes(reader);
        break;
      default:
        reader.skipType(wireType);
    }
  }
  return { descriptor, dataHeader, appMetadata, dataBody };
}

function readFlightDescriptor(reader: Reader): FlightDescriptor {
  let type = 0;
  let cmd = empty;
  const path: string[] = [];
  while (reader.pos < reader.len) {
    const tag = readTag(reader);
    const field = tag >>> 3;
    const wireType = tag & 7;
    if (field === 1) {
      expectWireType(field, wireType, wireTypes.varint);
      type = reader.uint32();
    } else if (field === 2) {
      expectWireType(field, wireType, wireTypes.lengthDelimited);
      cmd = readBytes(reader);
    } else if (field === 3) {
      expectWireType(field, wireType, wireTypes.lengthDelimited);
      path.push(readString(reader));
    } else reader.skipType(wireType);
  }
  return { type, cmd, path };
}

/**
 * The same loop with protobufjs's Reader alone, without the checks above: what the library
 * costs by itself (it would let field 0 through, cut a string short, and throw RangeErrors).
 */
function decodeFlightDataProtobufjsBare(bytes: Buffer): FlightData {
  const reader = protobuf.Reader.create(bytes);
  let descriptor: FlightDescriptor | undefined;
  let dataHeader = empty;
  let appMetadata = empty;
  let dataBody = empty;
  while (reader.pos < reader.len) {
    const tag = reader.uint32();
    switch (tag >>> 3) {
      case 1:
        descriptor = readFlightDescriptor(protobuf.Reader.create(reader.bytes() as Buffer));
        break;
      case 2:
        dataHeader = reader.bytes() as Buffer;
        break;
      case 3:
        appMetadata = reader.bytes() as Buffer;
        break;
      case 1000:
        dataBody = reader.bytes() as Buffer;
        break;
      default:
        reader.skipType(tag & 7);
    }
  }
  return { descriptor, dataHeader, appMetadata, dataBody };
}

/** The next field's tag; field number 0 is refused (protobufjs reads it as any other). */
function readTag(reader: Reader): number {
  const tag = reader.uint32();
  if (tag >>> 3 === 0) throw new WireError(`field number 0 at byte ${reader.pos}`);
  return tag;
}

/** A Buffer's reader returns Buffers (a subarray, or an empty Buffer); its type says Uint8Array. */
function readBytes(reader: Reader): Buffer {
  return reader.bytes() as Buffer;
}

/** Bounds-checked like bytes: protobufjs's string() on a Buffer cuts a string at the message's end instead of refusing it. */
function readString(reader: Reader): string {
  return readBytes(reader).toString('utf8');
}

function expectWireType(field: number, wireType: number, wanted: number): void {
  if (wireType !== wanted) throw new WireError(`field ${field} has wire type ${wireType}, not ${wanted}`);
}

/** protobufjs's errors for malformed bytes (RangeError past the end, Error for a bad wire type) as a WireError; a bug's TypeError as it is. */
function wireErrorOf(err: unknown): unknown {
  if (err instanceof WireError) return err;
  if (err instanceof RangeError || (err instanceof Error && err.constructor === Error)) return new WireError(err.message);
  return err;
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
  ['protobufjs_bare', decodeFlightDataProtobufjsBare],
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
  for (let r = 0; r < rounds; r++) {
    // Which reader goes first alternates too: a round pays for the garbage the one before it left.
    for (const [reader, decode] of r % 2 === 0 ? readers : [...readers].reverse()) times.get(reader)?.push(round(decode, message));
  }
  const medians = new Map([...times].map(([reader, values]) => [reader, median(values)]));
  figures.push({ suite, name: `${suite}.${name}.bytes`, value: message.length, unit: 'B' });
  for (const [reader, ns] of medians) figures.push({ suite, name: `${suite}.${name}.${reader}.ns`, value: Math.round(ns * 10) / 10, unit: 'ns' });
  const handwritten = medians.get('handwritten') ?? Number.NaN;
  for (const [reader, ns] of medians) {
    if (reader !== 'handwritten') figures.push({ suite, name: `${suite}.${name}.${reader}_over_handwritten`, value: Math.round((ns / handwritten) * 1000) / 1000, unit: 'ratio' });
  }
}
for (const figure of figures) process.stdout.write(`${JSON.stringify(figure)}\n`);
