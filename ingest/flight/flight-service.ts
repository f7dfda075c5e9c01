// The Arrow Flight service (arrow.flight.protocol.FlightService over gRPC, @grpc/grpc-js): a thin
// adapter that turns DoPut record batches into engine.admitArrow calls, like POST /v1/timers
// with an Arrow body. It knows the engine only through its public API.
//
//   DoPut          descriptor PATH ["timers"] or ["timers", QUEUE]; FlightData: schema, then
//                  [dictionary batches] and record batches. Each record batch is admitted alone
//                  (atomic), and its PutResult is sent once the engine says it is durable, in
//                  stream order; app_metadata = JSON counts and the first id, or with the call
//                  header `fermata-ids: arrow` an Arrow stream of every row's id (put-result.ts).
//                  Up to putBatchesInFlightMax batches of one call are admitted at once (they
//                  ride the same group commits); past that the call stops reading. A refused
//                  batch ends the call with its error after the PutResults of the batches
//                  before it; batches after it that were already being admitted may be stored
//                  without a PutResult (resend with keys to make that harmless).
//   ListFlights    one FlightInfo per queue (engine.queues()), descriptor ["timers", QUEUE],
//                  app_metadata JSON {"queue", "config"}; the criteria are not used.
//   GetFlightInfo  ["timers"] (all queues) or ["timers", QUEUE]; NOT_FOUND for an unknown queue.
//   GetSchema      the DoPut schema fermata reads best (timestamp[ms, UTC] fire_at, …).
//   ListActions    none yet.
//   DoGet, DoAction, DoExchange, PollFlightInfo, Handshake: UNIMPLEMENTED with a message saying
//                  why (pull delivery needs leases the engine does not have yet; auth is per call).
//
// Authentication: with tokens configured, every call needs metadata `authorization: Bearer <token>`
// (the HTTP API's check, bearer-auth.ts). Errors leave through status-map.ts. Messages are
// decoded in the handlers, not by gRPC's deserializer, so a malformed message is answered
// INVALID_ARGUMENT naming what is wrong. Owned by the main thread's event loop.
import { Server, ServerCredentials, status, type MethodDefinition, type ServerDuplexStream, type ServerUnaryCall, type ServerWritableStream, type sendUnaryData, type UntypedServiceImplementation } from '@grpc/grpc-js';
import { Field, Schema, Table, tableToIPC, TimeUnit, Timestamp, Binary, Utf8 } from 'apache-arrow';
import type { Logger } from 'pino';
import type { Admitted, Engine } from '../../engine/engine.ts';
import { ingestLimits } from '../../engine/limits.ts';
import { bearerCheck, type BearerCheck } from '../http/bearer-auth.ts';
import { decodeFlightData, decodeFlightDescriptor, checkMessage, descriptorTypes, encodeFlightInfo, encodePutResult, encodeSchemaResult, type FlightDescriptor, type FlightInfo } from './flight-messages.ts';
import { IpcAssembler } from './ipc-assembler.ts';
import { WireError } from './protobuf-wire.ts';
import { idsHeader, type PutResultForm, putResultMetadata } from './put-result.ts';
import { applyQueue, schemaHasQueue } from './queue-column.ts';
import { FlightFailure, flightFailure } from './status-map.ts';

export const flightLimits = {
  /** Record batches of one DoPut being admitted at once; past it the call stops reading until one is durable. */
  putBatchesInFlightMax: 8,
  /** Largest gRPC message either way: one FlightData holds one record batch, as big as an HTTP bulk body. */
  messageBytesMax: ingestLimits.bodyBytesMax,
  /** How long a stop waits for calls in progress before cutting them. */
  drainTimeoutMs: 10_000,
} as const;

const servicePath = '/arrow.flight.protocol.FlightService/';
const timersPath = 'timers';

export interface FlightServiceOptions {
  readonly engine: Engine;
  readonly logger: Logger;
  /** Bearer tokens every call must present; none = no authentication. */
  readonly tokens: readonly string[];
}

export interface FlightListener {
  /** grpc+tcp://host:port, as Flight clients (pyarrow) take it. */
  readonly url: string;
  readonly port: number;
  /** Stops accepting, lets calls in progress finish (at most drainTimeoutMs), then cuts them. */
  close(): Promise<void>;
}

const identity = (bytes: Buffer): Buffer => bytes;

function method(name: string, requestStream: boolean, responseStream: boolean): MethodDefinition<Buffer, Buffer> {
  return { path: servicePath + name, requestStream, responseStream, requestSerialize: identity, requestDeserialize: identity, responseSerialize: identity, responseDeserialize: identity, originalName: name };
}

/** The service's methods as gRPC routes them; bytes in, bytes out (the codecs run in the handlers). */
export const flightServiceDefinition = {
  Handshake: method('Handshake', true, true),
  ListFlights: method('ListFlights', false, true),
  GetFlightInfo: method('GetFlightInfo', false, false),
  PollFlightInfo: method('PollFlightInfo', false, false),
  GetSchema: method('GetSchema', false, false),
  DoGet: method('DoGet', false, true),
  DoPut: method('DoPut', true, true),
  DoExchange: method('DoExchange', true, true),
  DoAction: method('DoAction', false, true),
  ListActions: method('ListActions', false, true),
} as const;

/** The columns a DoPut should carry, as fermata reads them fastest: what GetSchema and FlightInfo show. */
const putSchema = new Schema([
  new Field('fire_at', new Timestamp(TimeUnit.MILLISECOND, 'UTC'), false),
  new Field('target', new Utf8(), false),
  new Field('payload', new Binary(), true),
  new Field('headers', new Utf8(), true),
  new Field('key', new Utf8(), true),
  new Field('queue', new Utf8(), true),
]);

/** The schema as Flight carries it in FlightInfo and SchemaResult: one encapsulated IPC message. */
function encapsulatedSchema(schema: Schema): Buffer {
  const ipc = Buffer.from(tableToIPC(new Table(schema), 'stream'));
  return ipc.subarray(0, 8 + ipc.readInt32LE(4));
}

const notImplemented = {
  pull: 'DoGet and DoAction (pull delivery of due timers with leases and "ack") are not implemented yet: fermata delivers by POST (queue "delivery": "request" or "arrow")',
  exchange: 'DoExchange is not supported: use DoPut to add timers',
  poll: 'PollFlightInfo is not supported: GetFlightInfo answers at once',
  handshake: 'Handshake is not used: send "authorization: Bearer <token>" metadata on every call',
} as const;

type Call = { readonly metadata: { get(key: string): Array<string | Buffer> } };

export class FlightService {
  readonly #engine: Engine;
  readonly #logger: Logger;
  readonly #auth: BearerCheck | undefined;
  readonly #schema = encapsulatedSchema(putSchema);

  constructor(options: FlightServiceOptions) {
    this.#engine = options.engine;
    this.#logger = options.logger;
    this.#auth = options.tokens.length === 0 ? undefined : bearerCheck(options.tokens);
  }

  /** Binds `host:port` (port 0 picks one) and serves until close(). */
  async listen(host: string, port: number): Promise<FlightListener> {
    const server = new Server({
      'grpc.max_receive_message_length': flightLimits.messageBytesMax,
      'grpc.max_send_message_length': flightLimits.messageBytesMax,
    });
    server.addService(flightServiceDefinition, this.#handlers());
    const hostText = host.includes(':') ? `[${host}]` : host;
    const bound = await new Promise<number>((resolve, reject) => {
      server.bindAsync(`${hostText}:${port}`, ServerCredentials.createInsecure(), (err, boundPort) => (err === null ? resolve(boundPort) : reject(err)));
    });
    return {
      url: `grpc+tcp://${hostText}:${bound}`,
      port: bound,
      close: () => closeServer(server),
    };
  }

  #handlers(): UntypedServiceImplementation {
    return {
      Handshake: (call: ServerDuplexStream<Buffer, Buffer>) => this.#refuse(call, status.UNIMPLEMENTED, notImplemented.handshake),
      ListFlights: (call: ServerWritableStream<Buffer, Buffer>) => this.#listFlights(call),
      GetFlightInfo: (call: ServerUnaryCall<Buffer, Buffer>, callback: sendUnaryData<Buffer>) => this.#unary(call, callback, () => encodeFlightInfo(this.#flightInfo(decodeFlightDescriptor(call.request)))),
      PollFlightInfo: (call: ServerUnaryCall<Buffer, Buffer>, callback: sendUnaryData<Buffer>) => this.#unary(call, callback, () => {
        throw new FlightFailure(status.UNIMPLEMENTED, notImplemented.poll);
      }),
      GetSchema: (call: ServerUnaryCall<Buffer, Buffer>, callback: sendUnaryData<Buffer>) => this.#unary(call, callback, () => {
        this.#flightInfo(decodeFlightDescriptor(call.request));
        return encodeSchemaResult(this.#schema);
      }),
      DoGet: (call: ServerWritableStream<Buffer, Buffer>) => this.#refuse(call, status.UNIMPLEMENTED, notImplemented.pull),
      DoPut: (call: ServerDuplexStream<Buffer, Buffer>) => {
        if (this.#authorized(call)) new PutCall(call, this.#engine, this.#logger).start();
        else fail(call, this.#logger, unauthenticated());
      },
      DoExchange: (call: ServerDuplexStream<Buffer, Buffer>) => this.#refuse(call, status.UNIMPLEMENTED, notImplemented.exchange),
      DoAction: (call: ServerWritableStream<Buffer, Buffer>) => this.#refuse(call, status.UNIMPLEMENTED, notImplemented.pull),
      ListActions: (call: ServerWritableStream<Buffer, Buffer>) => {
        if (!this.#authorized(call)) return fail(call, this.#logger, unauthenticated());
        call.end();
      },
    };
  }

  #authorized(call: Call): boolean {
    if (this.#auth === undefined) return true;
    const header = call.metadata.get('authorization')[0];
    return this.#auth.allows('', typeof header === 'string' ? header : undefined);
  }

  /** Answers an authenticated caller `code`; an unauthenticated one UNAUTHENTICATED first, so nothing is told without a token. */
  #refuse(call: ServerWritableStream<Buffer, Buffer> | ServerDuplexStream<Buffer, Buffer>, code: status, details: string): void {
    fail(call, this.#logger, this.#authorized(call) ? new FlightFailure(code, details) : unauthenticated());
  }

  #unary(call: ServerUnaryCall<Buffer, Buffer>, callback: sendUnaryData<Buffer>, answer: () => Buffer): void {
    if (!this.#authorized(call)) return callback(unauthenticated());
    try {
      callback(null, answer());
    } catch (err) {
      callback(this.#failureOf(err));
    }
  }

  #listFlights(call: ServerWritableStream<Buffer, Buffer>): void {
    if (!this.#authorized(call)) return fail(call, this.#logger, unauthenticated());
    try {
      checkMessage(call.request);
      for (const { name } of this.#engine.queues()) call.write(encodeFlightInfo(this.#queueInfo(name)));
      call.end();
    } catch (err) {
      fail(call, this.#logger, asFailure(err), err);
    }
  }

  #flightInfo(descriptor: FlightDescriptor): FlightInfo {
    const queue = timersQueueOf(descriptor);
    if (queue === undefined) {
      const names = this.#engine.queues().map((entry) => entry.name);
      return { schema: this.#schema, descriptor: { type: descriptorTypes.path, cmd: Buffer.alloc(0), path: [timersPath] }, totalRecords: -1, totalBytes: -1, appMetadata: Buffer.from(JSON.stringify({ queues: names })) };
    }
    if (!this.#engine.queues().some((entry) => entry.name === queue)) {
      throw new FlightFailure(status.NOT_FOUND, `no queue ${JSON.stringify(queue)}: it was never configured and never held a timer (a DoPut to ["timers", ${JSON.stringify(queue)}] makes it)`);
    }
    return this.#queueInfo(queue);
  }

  /** A queue's FlightInfo: how many timers it holds is not known per queue (-1); its config is in app_metadata. */
  #queueInfo(name: string): FlightInfo {
    return {
      schema: this.#schema,
      descriptor: { type: descriptorTypes.path, cmd: Buffer.alloc(0), path: [timersPath, name] },
      totalRecords: -1,
      totalBytes: -1,
      appMetadata: Buffer.from(JSON.stringify({ queue: name, config: this.#engine.queueConfig(name) })),
    };
  }

  #failureOf(err: unknown): FlightFailure {
    const failure = asFailure(err);
    if (failure.unexpected) this.#logger.error({ err }, 'unexpected error answering a Flight call');
    return failure;
  }
}

function unauthenticated(): FlightFailure {
  return new FlightFailure(status.UNAUTHENTICATED, 'UNAUTHORIZED: this call needs metadata "authorization: Bearer <token>"');
}

/** A thrown Flight status as is, a malformed message as INVALID_ARGUMENT, anything else by its error code. */
function asFailure(err: unknown, batch?: number): FlightFailure {
  if (err instanceof FlightFailure) return err;
  if (err instanceof WireError) return new FlightFailure(status.INVALID_ARGUMENT, `malformed Flight message: ${err.message}`);
  return flightFailure(err, batch);
}

/** Ends a streaming call with `failure` (grpc-js turns an 'error' event into the call's status). */
function fail(call: ServerWritableStream<Buffer, Buffer> | ServerDuplexStream<Buffer, Buffer>, logger: Logger, failure: FlightFailure, cause?: unknown): void {
  if (failure.unexpected) logger.error({ err: cause ?? failure }, 'unexpected error in a Flight call');
  call.emit('error', { code: failure.code, details: failure.details, metadata: failure.metadata });
}

/** The queue a timers descriptor names (undefined for ["timers"] alone); anything else is INVALID_ARGUMENT. */
function timersQueueOf(descriptor: FlightDescriptor | undefined): string | undefined {
  const path = descriptor?.path ?? [];
  if (descriptor === undefined || descriptor.type !== descriptorTypes.path || path[0] !== timersPath || path.length > 2) {
    const shown = descriptor === undefined ? 'none' : descriptor.type === descriptorTypes.path ? `path ${JSON.stringify(path)}` : `type ${descriptor.type} (not PATH)`;
    throw new FlightFailure(status.INVALID_ARGUMENT, `the descriptor must be a PATH ["timers"] or ["timers", QUEUE], not ${shown}`);
  }
  return path[1];
}

/** One DoPut call: reads FlightData, admits each record batch, answers PutResults in order. */
class PutCall {
  readonly #call: ServerDuplexStream<Buffer, Buffer>;
  readonly #engine: Engine;
  readonly #logger: Logger;
  readonly #assembler = new IpcAssembler();
  #described = false;
  #queue: string | undefined;
  #hasQueueColumn = false;
  #inFlight = 0;
  /** The PutResults in stream order: each link waits for its batch's admit, then writes. */
  #answered: Promise<void> = Promise.resolve();
  #failed = false;
  /** A message was refused: nothing more is read, and the error follows the PutResults already due. */
  #refusing = false;
  readonly #form: PutResultForm;

  constructor(call: ServerDuplexStream<Buffer, Buffer>, engine: Engine, logger: Logger) {
    this.#call = call;
    this.#form = call.metadata.get(idsHeader.name)[0] === idsHeader.value ? 'ids' : 'counts';
    this.#engine = engine;
    this.#logger = logger;
  }

  start(): void {
    this.#call.on('data', (message: Buffer) => this.#onMessage(message));
    this.#call.on('end', () => void this.#answered.then(() => this.#failed || this.#call.end()));
    // The client went away: stop answering; admits already started still complete (they are durable or refused).
    this.#call.on('cancelled', () => (this.#failed = true));
  }

  #onMessage(message: Buffer): void {
    if (this.#failed || this.#refusing) return;
    let ipc: Uint8Array | undefined;
    // The record batch this message is, or comes before (errors name it).
    const batch = this.#assembler.batches;
    try {
      const data = decodeFlightData(message);
      if (!this.#described) {
        this.#queue = timersQueueOf(data.descriptor);
        this.#described = true;
      }
      const hadSchema = this.#assembler.schemaStream !== undefined;
      ipc = this.#assembler.push(data);
      const schemaStream = this.#assembler.schemaStream;
      if (this.#queue !== undefined && !hadSchema && schemaStream !== undefined) this.#hasQueueColumn = schemaHasQueue(schemaStream);
      if (ipc === undefined) return;
      if (this.#queue !== undefined) ipc = applyQueue(ipc, this.#queue, this.#hasQueueColumn);
    } catch (err) {
      // The batches before this message are being admitted: their PutResults go out first.
      this.#refusing = true;
      this.#answered = this.#answered.then(() => this.#fail(err, batch));
      return;
    }
    this.#admit(ipc, batch);
  }

  #admit(ipc: Uint8Array, batch: number): void {
    const admitted = this.#engine.admitArrow(ipc);
    // Looked at in order below, maybe after it settles: a refusal must not count as unhandled meanwhile.
    admitted.catch(() => undefined);
    if (++this.#inFlight >= flightLimits.putBatchesInFlightMax) this.#call.pause();
    this.#answered = this.#answered.then(async () => {
      let result: Admitted;
      try {
        result = await admitted;
      } catch (err) {
        this.#fail(err, batch);
        return;
      } finally {
        if (--this.#inFlight < flightLimits.putBatchesInFlightMax && !this.#failed) this.#call.resume();
      }
      if (!this.#failed) this.#call.write(encodePutResult(putResultMetadata(result, this.#form)));
    });
  }

  #fail(err: unknown, batch: number | undefined): void {
    if (this.#failed) return;
    this.#failed = true;
    fail(this.#call, this.#logger, asFailure(err, batch), err);
    // Whatever the client still sends is read and dropped, so its writes do not block forever.
    this.#call.resume();
  }
}

async function closeServer(server: Server): Promise<void> {
  const cut = setTimeout(() => server.forceShutdown(), flightLimits.drainTimeoutMs);
  try {
    await new Promise<void>((resolve, reject) => server.tryShutdown((err) => (err === undefined ? resolve() : reject(err))));
  } finally {
    clearTimeout(cut);
  }
}
