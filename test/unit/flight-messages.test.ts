// The Flight messages (ingest/flight/flight-messages.ts) on bytes built here: what is encoded
// decodes to the same fields, bytes fields are views of the message (never copies), unknown
// fields are skipped, and every malformed message (cut at any byte, a wrong wire type, field
// number 0, random bytes) is refused with a WireError, the one error the Flight service turns
// into INVALID_ARGUMENT, never with anything else.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  checkMessage,
  decodeAction,
  decodeFlightData,
  decodeFlightDescriptor,
  decodeTicket,
  descriptorTypes,
  encodeAction,
  encodeFlightData,
  encodeFlightDescriptor,
  encodeTicket,
} from '../../ingest/flight/flight-messages.ts';
import { WireError } from '../../ingest/flight/protobuf-wire.ts';

const descriptor = { type: descriptorTypes.path, cmd: Buffer.alloc(0), path: ['timers', 'q-ü'] };
const header = Buffer.from('a flatbuffer header, as far as protobuf knows');
const body = Buffer.alloc(70_000, 7);

/** A field as protobuf writes it, for what the encoders never write. */
function varint(value: number): number[] {
  const out: number[] = [];
  let rest = value;
  while (rest >= 0x80) {
    out.push((rest % 0x80) | 0x80);
    rest = Math.floor(rest / 0x80);
  }
  out.push(rest);
  return out;
}
const field = (number: number, wireType: number, value: number[]): Buffer => Buffer.from([...varint(number * 8 + wireType), ...value]);
const lengthDelimited = (number: number, bytes: Buffer): Buffer => Buffer.concat([field(number, 2, varint(bytes.length)), bytes]);

/** Decodes, or throws only a WireError. */
function decodesOrRefuses(decode: (bytes: Buffer) => unknown, bytes: Buffer, what: string): 'decoded' | 'refused' {
  try {
    decode(bytes);
    return 'decoded';
  } catch (err) {
    assert.ok(err instanceof WireError, `${what}: ${String(err)}`);
    return 'refused';
  }
}

test('FlightData: encoded fields decode as they were, bytes as views of the message', () => {
  const message = encodeFlightData({ descriptor, dataHeader: header, dataBody: body, appMetadata: Buffer.from('meta') });
  const data = decodeFlightData(message);
  assert.deepEqual(data.descriptor, descriptor);
  assert.ok(data.dataHeader.equals(header));
  assert.ok(data.dataBody.equals(body));
  assert.equal(data.appMetadata.toString(), 'meta');
  for (const view of [data.dataHeader, data.dataBody, data.appMetadata]) assert.equal(view.buffer, message.buffer, 'a view, not a copy');
  const bare = decodeFlightData(encodeFlightData({ dataHeader: header, dataBody: Buffer.alloc(0) }));
  assert.equal(bare.descriptor, undefined);
  assert.deepEqual([bare.dataBody.length, bare.appMetadata.length], [0, 0]);
});

test('fields of other numbers, of every wire type, are skipped (a newer client may send them)', () => {
  const unknown = Buffer.concat([
    field(4, 0, varint(2 ** 40)),
    field(5, 1, [1, 2, 3, 4, 5, 6, 7, 8]),
    lengthDelimited(6, Buffer.from('later')),
    field(7, 5, [1, 2, 3, 4]),
    field(1001, 0, [0]),
  ]);
  const message = Buffer.concat([unknown, encodeFlightData({ dataHeader: header, dataBody: body }), unknown]);
  const data = decodeFlightData(message);
  assert.ok(data.dataHeader.equals(header) && data.dataBody.equals(body));
  assert.deepEqual(decodeFlightDescriptor(Buffer.concat([unknown, encodeFlightDescriptor(descriptor)])), descriptor);
  assert.equal(checkMessage(unknown), unknown);
});

test('the other messages: Ticket, Action, a descriptor of each type', () => {
  assert.equal(decodeTicket(encodeTicket(Buffer.from('pulled'))).toString(), 'pulled');
  assert.equal(decodeTicket(Buffer.alloc(0)).length, 0);
  const action = decodeAction(encodeAction({ type: 'ack', body: Buffer.from('{"lease":"l"}') }));
  assert.deepEqual([action.type, action.body.toString()], ['ack', '{"lease":"l"}']);
  const cmd = { type: descriptorTypes.cmd, cmd: Buffer.from([1, 2, 3]), path: [] };
  assert.deepEqual(decodeFlightDescriptor(encodeFlightDescriptor(cmd)), cmd);
});

test('a message cut at any byte decodes a prefix of its fields or is refused with a WireError', () => {
  const message = encodeFlightData({ descriptor, dataHeader: header, dataBody: Buffer.alloc(300, 1), appMetadata: Buffer.from('m') });
  let refused = 0;
  for (let end = 0; end < message.length; end++) if (decodesOrRefuses(decodeFlightData, message.subarray(0, end), `cut at ${end}`) === 'refused') refused++;
  assert.ok(refused > message.length / 2, `only ${refused} of ${message.length} cuts refused`);
});

test('wrong wire types, field number 0 and broken varints are refused with a WireError', () => {
  const cases: Array<[string, Buffer]> = [
    ['data_header as a varint', field(2, 0, [5])],
    ['data_body as fixed32', field(1000, 5, [0, 0, 0, 0])],
    ['the descriptor as fixed64', field(1, 1, [0, 0, 0, 0, 0, 0, 0, 0])],
    ['field number 0', field(0, 2, [0])],
    ['a length past the end', field(2, 2, varint(10))],
    ['a varint that never ends', Buffer.from([0x10, 0xff, 0xff, 0xff])],
    ['wire type 7', Buffer.from([0x0f])],
    ['wire type 6', Buffer.from([0x0e])],
    ['a fixed64 cut short', field(9, 1, [1, 2, 3])],
    ['a fixed32 cut short', field(9, 5, [1])],
  ];
  for (const [what, bytes] of cases) assert.equal(decodesOrRefuses(decodeFlightData, bytes, what), 'refused', what);
  assert.equal(decodesOrRefuses(decodeFlightDescriptor, field(1, 2, [0]), 'the descriptor type as bytes'), 'refused');
  assert.equal(decodesOrRefuses(decodeAction, field(1, 0, [1]), 'the action type as a varint'), 'refused');
  assert.equal(decodesOrRefuses(checkMessage, Buffer.from([0xff, 0xff, 0xff]), 'not protobuf'), 'refused');
});

test('random bytes: decoded or refused with a WireError, never anything else (seeded)', () => {
  let seed = 38_004;
  const random = (): number => ((seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31);
  const good = encodeFlightData({ descriptor, dataHeader: header, dataBody: Buffer.alloc(40, 2) });
  for (let round = 0; round < 2000; round++) {
    const bytes = round % 2 === 0 ? Buffer.from(good) : Buffer.from(Array.from({ length: 1 + Math.floor(random() * 40) }, () => Math.floor(random() * 256)));
    for (let flips = round % 2 === 0 ? 1 + Math.floor(random() * 4) : 0; flips > 0; flips--) bytes[Math.floor(random() * bytes.length)] = Math.floor(random() * 256);
    for (const decode of [decodeFlightData, decodeFlightDescriptor, decodeAction, decodeTicket, checkMessage]) decodesOrRefuses(decode, bytes, `round ${round}`);
  }
});
