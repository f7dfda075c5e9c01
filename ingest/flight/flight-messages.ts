// The Arrow Flight messages fermata reads and writes, from the public protocol definition
// (Flight.proto, package arrow.flight.protocol). Only the fields used are named; the readers
// skip the others, so a client of a newer protocol version still gets through.
//
//   FlightDescriptor { DescriptorType type = 1; bytes cmd = 2; repeated string path = 3; }   (UNKNOWN 0, PATH 1, CMD 2)
//   FlightData       { FlightDescriptor flight_descriptor = 1; bytes data_header = 2;
//                      bytes app_metadata = 3; bytes data_body = 1000; }
//   PutResult        { bytes app_metadata = 1; }
//   Ticket           { bytes ticket = 1; }
//   FlightEndpoint   { Ticket ticket = 1; repeated Location location = 2; … }
//   FlightInfo       { bytes schema = 1; FlightDescriptor flight_descriptor = 2;
//                      repeated FlightEndpoint endpoint = 3; int64 total_records = 4;
//                      int64 total_bytes = 5; bool ordered = 6; bytes app_metadata = 7; }
//   Action           { string type = 1; bytes body = 2; }
//   Result           { bytes body = 1; }
//   ActionType       { string type = 1; string description = 2; }
//   SchemaResult     { bytes schema = 1; }
//
// `data_header` is an Arrow IPC Message flatbuffer and `data_body` its body (ipc-assembler.ts).
import { ProtoReader, ProtoWriter, wireTypes } from './protobuf-wire.ts';

export const descriptorTypes = { unknown: 0, path: 1, cmd: 2 } as const;

export interface FlightDescriptor {
  readonly type: number;
  readonly cmd: Buffer;
  readonly path: readonly string[];
}

export interface FlightData {
  readonly descriptor: FlightDescriptor | undefined;
  readonly dataHeader: Buffer;
  readonly appMetadata: Buffer;
  readonly dataBody: Buffer;
}

export interface FlightInfo {
  /** The schema as an encapsulated IPC message (continuation, length, flatbuffer), or empty. */
  readonly schema: Uint8Array;
  readonly descriptor: FlightDescriptor;
  /** -1: unknown. */
  readonly totalRecords: number;
  readonly totalBytes: number;
  readonly appMetadata: Uint8Array;
  /** Where to DoGet the flight's data: each a Ticket's bytes (no location: this same service). */
  readonly tickets?: readonly Uint8Array[];
}

export interface FlightAction {
  readonly type: string;
  readonly body: Buffer;
}

const empty: Buffer = Buffer.alloc(0);

export function decodeFlightDescriptor(bytes: Buffer): FlightDescriptor {
  const reader = new ProtoReader(bytes);
  let type = 0;
  let cmd = empty;
  const path: string[] = [];
  while (!reader.done) {
    const { field, wireType } = reader.tag();
    if (field === 1) {
      reader.expect(field, wireType, wireTypes.varint);
      type = reader.varint();
    } else if (field === 2) {
      reader.expect(field, wireType, wireTypes.lengthDelimited);
      cmd = reader.bytes();
    } else if (field === 3) {
      reader.expect(field, wireType, wireTypes.lengthDelimited);
      path.push(reader.string());
    } else reader.skip(wireType);
  }
  return { type, cmd, path };
}

export function encodeFlightDescriptor(descriptor: FlightDescriptor): Buffer {
  return new ProtoWriter().varintField(1, descriptor.type).bytesField(2, descriptor.cmd).repeatedStringField(3, descriptor.path).finish();
}

export function decodeFlightData(bytes: Buffer): FlightData {
  const reader = new ProtoReader(bytes);
  let descriptor: FlightDescriptor | undefined;
  let dataHeader = empty;
  let appMetadata = empty;
  let dataBody = empty;
  while (!reader.done) {
    const { field, wireType } = reader.tag();
    switch (field) {
      case 1:
        reader.expect(field, wireType, wireTypes.lengthDelimited);
        descriptor = decodeFlightDescriptor(reader.bytes());
        break;
      case 2:
        reader.expect(field, wireType, wireTypes.lengthDelimited);
        dataHeader = reader.bytes();
        break;
      case 3:
        reader.expect(field, wireType, wireTypes.lengthDelimited);
        appMetadata = reader.bytes();
        break;
      case 1000:
        reader.expect(field, wireType, wireTypes.lengthDelimited);
        dataBody = reader.bytes();
        break;
      default:
        reader.skip(wireType);
    }
  }
  return { descriptor, dataHeader, appMetadata, dataBody };
}

/** FlightData as a DoPut client (tests, the benchmark) or DoGet writes it. */
export function encodeFlightData(data: { descriptor?: FlightDescriptor; dataHeader: Uint8Array; dataBody: Uint8Array; appMetadata?: Uint8Array }): Buffer {
  const writer = new ProtoWriter();
  if (data.descriptor !== undefined) writer.messageField(1, encodeFlightDescriptor(data.descriptor));
  writer.bytesField(2, data.dataHeader);
  if (data.appMetadata !== undefined) writer.bytesField(3, data.appMetadata);
  return writer.bytesField(1000, data.dataBody).finish();
}

export function encodePutResult(appMetadata: Uint8Array): Buffer {
  return new ProtoWriter().bytesField(1, appMetadata).finish();
}

export function decodePutResult(bytes: Buffer): Buffer {
  return singleBytesField(bytes);
}

/** A FlightInfo; an endpoint per ticket, with no location (DoGet on this same service). */
export function encodeFlightInfo(info: FlightInfo): Buffer {
  const writer = new ProtoWriter().bytesField(1, info.schema).messageField(2, encodeFlightDescriptor(info.descriptor));
  for (const ticket of info.tickets ?? []) writer.messageField(3, new ProtoWriter().messageField(1, encodeTicket(ticket)).finish());
  return writer
    .varintField(4, info.totalRecords)
    .varintField(5, info.totalBytes)
    .bytesField(7, info.appMetadata)
    .finish();
}

export function encodeSchemaResult(schema: Uint8Array): Buffer {
  return new ProtoWriter().bytesField(1, schema).finish();
}

export function encodeTicket(ticket: Uint8Array): Buffer {
  return new ProtoWriter().bytesField(1, ticket).finish();
}

/** A Ticket's bytes (empty when absent). */
export function decodeTicket(bytes: Buffer): Buffer {
  return singleBytesField(bytes);
}

export function encodeAction(action: FlightAction): Buffer {
  return new ProtoWriter().stringField(1, action.type).bytesField(2, action.body).finish();
}

export function decodeAction(bytes: Buffer): FlightAction {
  const reader = new ProtoReader(bytes);
  let type = '';
  let body = empty;
  while (!reader.done) {
    const { field, wireType } = reader.tag();
    if (field === 1) {
      reader.expect(field, wireType, wireTypes.lengthDelimited);
      type = reader.string();
    } else if (field === 2) {
      reader.expect(field, wireType, wireTypes.lengthDelimited);
      body = reader.bytes();
    } else reader.skip(wireType);
  }
  return { type, body };
}

export function encodeActionResult(body: Uint8Array): Buffer {
  return new ProtoWriter().bytesField(1, body).finish();
}

export function decodeActionResult(bytes: Buffer): Buffer {
  return singleBytesField(bytes);
}

export function encodeActionType(type: string, description: string): Buffer {
  return new ProtoWriter().stringField(1, type).stringField(2, description).finish();
}

/** Field 1 of a message whose one field is bytes (Ticket, Result, PutResult). */
function singleBytesField(bytes: Buffer): Buffer {
  const reader = new ProtoReader(bytes);
  let value = empty;
  while (!reader.done) {
    const { field, wireType } = reader.tag();
    if (field === 1) {
      reader.expect(field, wireType, wireTypes.lengthDelimited);
      value = reader.bytes();
    } else reader.skip(wireType);
  }
  return value;
}

/** A message this service reads only to check it is well formed (Criteria, Ticket, Action, Empty, HandshakeRequest). */
export function checkMessage(bytes: Buffer): Buffer {
  const reader = new ProtoReader(bytes);
  while (!reader.done) reader.skip(reader.tag().wireType);
  return bytes;
}
