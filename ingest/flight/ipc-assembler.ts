// A DoPut stream's FlightData messages → one Arrow IPC stream per record batch, in the form
// engine.admitArrow takes (the same bytes an HTTP client would POST for that batch alone):
//
//   FlightData: schema ─ [dictionary batch]… ─ record batch ─ [dictionary batch]… ─ record batch …
//                 │            │ (kept: the latest per id, plus its deltas)        │
//                 ▼            ▼                                                   ▼
//   IPC stream:  schema frame ─ dictionary frames in force ─ record batch frame ─ end-of-stream
//
// A frame is 0xFFFFFFFF, the int32 length of the flatbuffer padded to 8, the flatbuffer, zero
// padding, then the body. Flight's data_header is that flatbuffer without the prefix; the few
// fields read here are checked by engine/batch/arrow-message.ts (forged counts give a
// BATCH_INVALID error, never a crash or an unbounded allocation). The schema and the batches themselves are checked by the
// engine's Arrow reader, which reads what is assembled here.
//
// One assembler per DoPut call, on the main thread.
import { errorCodes, FermataError } from '../../engine/errors.ts';
import { headerTypes, messageFacts } from '../../engine/batch/arrow-message.ts';
import type { FlightData } from './flight-messages.ts';

const continuation = 0xffffffff;

function malformed(message: string): FermataError {
  return new FermataError(errorCodes.batchInvalid, `malformed Flight stream: ${message}`, { column: '' });
}

const endOfStream = Buffer.from([0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0]);

/** The body length a Message flatbuffer announces (a client splitting an IPC stream into FlightData needs it). */
export function messageBodyLength(header: Buffer): number {
  return messageFacts(header, malformed).bodyLength;
}

export interface IpcMessage {
  readonly header: Buffer;
  readonly body: Buffer;
}

/** The messages of an IPC stream written by apache-arrow, in order, without the end-of-stream marker (views, no copies). */
export function splitIpcMessages(stream: Uint8Array): IpcMessage[] {
  const bytes = Buffer.from(stream.buffer, stream.byteOffset, stream.byteLength);
  const messages: IpcMessage[] = [];
  let at = 0;
  while (at + 8 <= bytes.length) {
    const length = bytes.readInt32LE(at + 4);
    if (length === 0) break;
    const header = bytes.subarray(at + 8, at + 8 + length);
    const bodyLength = messageBodyLength(header);
    messages.push({ header, body: bytes.subarray(at + 8 + length, at + 8 + length + bodyLength) });
    at += 8 + length + bodyLength;
  }
  return messages;
}

/** One encapsulated IPC message: prefix, flatbuffer padded to 8, body. */
function frame(header: Buffer, body: Buffer): Buffer[] {
  const padded = header.length + ((8 - (header.length % 8)) % 8);
  const prefix = Buffer.allocUnsafe(8);
  prefix.writeUInt32LE(continuation, 0);
  prefix.writeInt32LE(padded, 4);
  return [prefix, header, Buffer.alloc(padded - header.length), body];
}

export class IpcAssembler {
  #schema: Buffer[] | undefined;
  /** Per dictionary id: the latest replacement's frame, then the deltas sent after it. */
  readonly #dictionaries = new Map<bigint, Buffer[]>();
  #batches = 0;

  /** Record batches assembled so far (the index of the next one). */
  get batches(): number {
    return this.#batches;
  }

  /** The schema message as an IPC stream of its own (prefix, flatbuffer, end-of-stream): what a schema reader takes. */
  get schemaStream(): Buffer | undefined {
    return this.#schema === undefined ? undefined : Buffer.concat([...this.#schema, endOfStream]);
  }

  /** Takes the next FlightData; returns the IPC stream of a record batch when this message completes one. */
  push(data: FlightData): Buffer | undefined {
    // Flight allows a message of app_metadata alone; fermata has no use for it.
    if (data.dataHeader.length === 0) return undefined;
    const facts = messageFacts(data.dataHeader, malformed);
    if (data.dataBody.length < facts.bodyLength) {
      throw malformed(`a message announces a body of ${facts.bodyLength} bytes but data_body has ${data.dataBody.length}`);
    }
    const messageFrame = frame(data.dataHeader, data.dataBody.subarray(0, facts.bodyLength));
    if (facts.headerType === headerTypes.schema) {
      if (this.#schema !== undefined) throw malformed('a second schema message in one DoPut stream');
      this.#schema = messageFrame;
      return undefined;
    }
    if (this.#schema === undefined) throw malformed('the first message of a DoPut stream must be the schema');
    if (facts.headerType === headerTypes.dictionaryBatch) {
      const frames = facts.isDelta ? (this.#dictionaries.get(facts.dictionaryId) ?? []) : [];
      frames.push(...messageFrame);
      this.#dictionaries.set(facts.dictionaryId, frames);
      return undefined;
    }
    if (facts.headerType !== headerTypes.recordBatch) throw malformed(`message type ${facts.headerType} is not a schema, dictionary batch or record batch`);
    this.#batches++;
    const parts = [...this.#schema];
    for (const frames of this.#dictionaries.values()) parts.push(...frames);
    parts.push(...messageFrame, endOfStream);
    return Buffer.concat(parts);
  }
}
