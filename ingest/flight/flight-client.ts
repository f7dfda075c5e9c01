// A minimal Flight DoPut client on @grpc/grpc-js, for the benchmark and the tests that must send
// what pyarrow never would (malformed messages). It splits an Arrow IPC stream into FlightData
// (schema first, with the descriptor; then each dictionary and record batch message) and reads
// the PutResults. Not part of the service; production clients use their own Flight library.
import { credentials, type ClientDuplexStream, Metadata, makeGenericClientConstructor, type ServiceError } from '@grpc/grpc-js';
import { descriptorTypes, decodePutResult, encodeFlightData, type FlightDescriptor } from './flight-messages.ts';
import { flightLimits, flightServiceDefinition } from './flight-service.ts';
import { messageBodyLength } from './ipc-assembler.ts';
import { idsHeader } from './put-result.ts';

export interface IpcMessage {
  readonly header: Buffer;
  readonly body: Buffer;
}

/** The messages of an IPC stream, in order, without the end-of-stream marker. */
export function ipcMessages(stream: Uint8Array): IpcMessage[] {
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

export const timersDescriptor = (queue?: string): FlightDescriptor => ({ type: descriptorTypes.path, cmd: Buffer.alloc(0), path: queue === undefined ? ['timers'] : ['timers', queue] });

/** The FlightData messages of one DoPut: the first carries the descriptor. */
export function flightDataOf(descriptor: FlightDescriptor, streams: readonly Uint8Array[]): Buffer[] {
  const out: Buffer[] = [];
  streams.forEach((stream, index) => {
    for (const [i, message] of ipcMessages(stream).entries()) {
      // Every stream repeats the schema; a DoPut sends it once.
      if (i === 0 && index > 0) continue;
      out.push(encodeFlightData({ ...(out.length === 0 ? { descriptor } : {}), dataHeader: message.header, dataBody: message.body }));
    }
  });
  return out;
}

export interface PutOutcome {
  /** app_metadata of each PutResult, in order. */
  readonly results: Buffer[];
  /** The call's error status, if it ended with one. */
  readonly error: ServiceError | undefined;
}

const FlightClient = makeGenericClientConstructor(flightServiceDefinition, 'FlightService');

export class FlightTestClient {
  readonly #client: InstanceType<typeof FlightClient>;
  readonly #token: string | undefined;
  readonly #ids: boolean;

  /** `ids`: ask for every row's id in the PutResults (the fermata-ids header). */
  constructor(address: string, options: { token?: string; ids?: boolean } = {}) {
    this.#client = new FlightClient(address.replace(/^grpc\+tcp:\/\//, ''), credentials.createInsecure(), {
      'grpc.max_receive_message_length': flightLimits.messageBytesMax,
      'grpc.max_send_message_length': flightLimits.messageBytesMax,
    });
    this.#token = options.token;
    this.#ids = options.ids === true;
  }

  /** A DoPut call to drive by hand: write FlightData bytes, read PutResult bytes (decodePutResult). */
  putCall(): ClientDuplexStream<Buffer, Buffer> {
    const metadata = new Metadata();
    if (this.#token !== undefined) metadata.set('authorization', `Bearer ${this.#token}`);
    if (this.#ids) metadata.set(idsHeader.name, idsHeader.value);
    return (this.#client as unknown as { DoPut(metadata: Metadata): ClientDuplexStream<Buffer, Buffer> }).DoPut(metadata);
  }

  /** Sends the messages (raw FlightData bytes), half-closes, and collects the PutResults until the status. */
  async doPut(messages: readonly Buffer[]): Promise<PutOutcome> {
    const call = this.putCall();
    const results: Buffer[] = [];
    const ended = new Promise<ServiceError | undefined>((resolve) => {
      call.on('data', (message: Buffer) => results.push(decodePutResult(message)));
      call.on('error', (err: ServiceError) => resolve(err));
      call.on('status', (status: { code: number }) => {
        if (status.code === 0) resolve(undefined);
      });
    });
    let finished = false;
    void ended.then(() => (finished = true));
    for (const message of messages) {
      // A call the server ended early takes no more: stop writing rather than wait for a drain.
      if (finished) break;
      if (!call.write(message)) await Promise.race([new Promise<void>((resolve) => call.once('drain', resolve)), ended]);
    }
    call.end();
    return { results, error: await ended };
  }

  close(): void {
    this.#client.close();
  }
}
