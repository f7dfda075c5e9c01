// A minimal Flight client on @grpc/grpc-js, for the benchmark and the tests that must send what
// pyarrow never would (malformed messages). DoPut splits an Arrow IPC stream into FlightData
// (schema first, with the descriptor; then each dictionary and record batch message) and reads
// the PutResults; DoGet and DoAction collect their answers raw. Not part of the service;
// production clients use their own Flight library.
import { credentials, type ClientDuplexStream, type ClientReadableStream, Metadata, makeGenericClientConstructor, type ServiceError } from '@grpc/grpc-js';
import { decodeActionResult, decodeFlightData, descriptorTypes, decodePutResult, encodeAction, encodeFlightData, encodeTicket, type FlightData, type FlightDescriptor } from './flight-messages.ts';
import { flightLimits, flightServiceDefinition } from './flight-service.ts';
import { splitIpcMessages } from './ipc-assembler.ts';
import { idsHeader } from './put-result.ts';

/** The messages of an IPC stream, in order, without the end-of-stream marker. */
export const ipcMessages = splitIpcMessages;

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

export interface ReadOutcome<T> {
  readonly messages: T[];
  readonly error: ServiceError | undefined;
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

  /** A DoGet of `ticket`: its FlightData, decoded, until the status. */
  doGet(ticket: Uint8Array): Promise<ReadOutcome<FlightData>> {
    return this.#read('DoGet', encodeTicket(ticket), decodeFlightData);
  }

  /** A DoAction: its Results' bodies until the status. */
  doAction(type: string, body: Uint8Array): Promise<ReadOutcome<Buffer>> {
    return this.#read('DoAction', encodeAction({ type, body: Buffer.from(body) }), decodeActionResult);
  }

  close(): void {
    this.#client.close();
  }

  #read<T>(method: 'DoGet' | 'DoAction', request: Buffer, decode: (message: Buffer) => T): Promise<ReadOutcome<T>> {
    const metadata = new Metadata();
    if (this.#token !== undefined) metadata.set('authorization', `Bearer ${this.#token}`);
    const call = (this.#client as unknown as Record<typeof method, (request: Buffer, metadata: Metadata) => ClientReadableStream<Buffer>>)[method](request, metadata);
    const messages: T[] = [];
    return new Promise((resolve) => {
      call.on('data', (message: Buffer) => messages.push(decode(message)));
      call.on('error', (err: ServiceError) => resolve({ messages, error: err }));
      call.on('status', (status: { code: number }) => {
        if (status.code === 0) resolve({ messages, error: undefined });
      });
    });
  }
}
