// The Arrow Flight service (arrow.flight.protocol.FlightService over gRPC, @grpc/grpc-js): a thin
// adapter that turns DoPut record batches into admissions, like POST /v1/timers with an Arrow
// body, and DoGet / DoAction into leases of a "pull" queue's due timers (dispatch/pull-queues.ts).
// It knows the timers only through FlightTimers (flight-timers.ts): one engine's on a single node,
// the node's front's on a cluster node (cluster-flight-timers.ts: ids are cluster ids, a batch's
// rows go to their partitions, and DoGet / DoAction are UNIMPLEMENTED saying why).
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
//   ListFlights    one FlightInfo per queue (FlightTimers.queues()), descriptor ["timers", QUEUE],
//                  app_metadata JSON {"queue", "config"}; the criteria are not used. A "pull"
//                  queue's FlightInfo has one endpoint: the ticket {"queue": QUEUE} to DoGet.
//   GetFlightInfo  ["timers"] (all queues) or ["timers", QUEUE]; NOT_FOUND for an unknown queue.
//   GetSchema      the DoPut schema fermata reads best (timestamp[ms, UTC] fire_at, …).
//   DoGet          pull delivery (docs/ARCHITECTURE.md): the ticket (pull-ticket.ts) names a "pull"
//                  queue; the stream is the schema (dispatch/arrow-batch.ts columns, the lease in
//                  its metadata) and, when timers were due, one record batch whose app_metadata
//                  is JSON {"lease", "rows", "expires_at_ms"}. The rows are leased until the
//                  queue's timeout_ms; a ticket's "ack" settles the previous lease first.
//   DoAction       "ack" / "nack" with body LEASE or {"lease": LEASE}: the lease's timers are
//                  delivered / a failed attempt, durably, then one Result {"lease", "delivered",
//                  "retried", "dead"}. ListActions lists both.
//   DoExchange, PollFlightInfo, Handshake: UNIMPLEMENTED with a message saying why (auth is per call).
//
// Authentication: with tokens configured, every call needs metadata `authorization: Bearer <token>`
// with the call's scope (the HTTP API's check, ingest/auth/access.ts): DoPut, DoGet and DoAction
// (adding timers, taking and settling pull leases) need "write", the descriptions (ListFlights,
// GetFlightInfo, GetSchema, ListActions) "read"; a queue-limited token may put to, pull from and
// settle leases of its queues only. UNAUTHENTICATED without a known token, PERMISSION_DENIED
// naming the scope or queue it lacks. Errors leave through status-map.ts. Messages are
// decoded in the handlers, not by gRPC's deserializer, so a malformed message is answered
// INVALID_ARGUMENT naming what is wrong. Owned by the main thread's event loop.
import { type ChannelOptions, Server, ServerCredentials, status, type MethodDefinition, type ServerDuplexStream, type ServerUnaryCall, type ServerWritableStream, type sendUnaryData, type UntypedServiceImplementation } from '@grpc/grpc-js';
import { Field, Schema, Table, tableToIPC, TimeUnit, Timestamp, Binary, Utf8 } from 'apache-arrow';
import type { Logger } from 'pino';
import { PullRefusal, type PullQueues, type PullSettlement } from '../../dispatch/pull-queues.ts';
import { ingestLimits } from '../../engine/limits.ts';
import { RelayedRefusal } from '../http/error-map.ts';
import { type Access, type Caller, checkQueue, type Scope } from '../auth/access.ts';
import { checkArrowAddQueues } from '../auth/batch-queues.ts';
import { listenGuarded } from '../grpc/guarded-listener.ts';
import type { PeerGuard } from '../http/listen/peer-guard.ts';
import {
  checkMessage,
  decodeAction,
  decodeFlightData,
  decodeFlightDescriptor,
  decodeTicket,
  descriptorTypes,
  encodeActionResult,
  encodeActionType,
  encodeFlightData,
  encodeFlightInfo,
  encodePutResult,
  encodeSchemaResult,
  type FlightDescriptor,
  type FlightInfo,
} from './flight-messages.ts';
import { IpcAssembler, splitIpcMessages } from './ipc-assembler.ts';
import { parseLeaseBody, parsePullTicket } from './pull-ticket.ts';
import { WireError } from './protobuf-wire.ts';
import { idsHeader, type PutResultForm } from './put-result.ts';
import { applyQueue, schemaHasQueue } from './queue-column.ts';
import { FlightFailure, flightFailure, pullFailure, relayedFailure } from './status-map.ts';
import type { CallHeaders, FlightQueue, FlightTimers } from './flight-timers.ts';

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
  /** What the calls act on: one engine and its pull queues, or a cluster node's front (flight-timers.ts). */
  readonly timers: FlightTimers;
  readonly logger: Logger;
  /** The tokens in force, with their scopes and queues (ingest/auth/access.ts); no tokens = no authentication. */
  readonly access: Access;
}

/** What else the Flight service's gRPC server carries (cli/serve/listeners.ts: fermata.v1.Timers). */
export interface SharedServer {
  /** Adds services to the server before it binds. */
  readonly register?: (server: Server) => void;
  /** Told when close() begins, before the server drains. */
  readonly closing?: () => void;
  /** grpc-js channel options over the Flight defaults (limits). */
  readonly options?: ChannelOptions;
  /** TLS; cleartext when absent. */
  readonly credentials?: ServerCredentials;
  /** The HTTP listener's peer guard: with it the port is fermata's own TCP listener, which the guard sees (grpc/guarded-listener.ts). */
  readonly guard?: PeerGuard;
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

/** DoAction types, as ListActions describes them. */
const actions: ReadonlyArray<readonly [PullSettlement, string]> = [
  ['ack', 'Settle a DoGet lease as delivered (body: LEASE or {"lease": LEASE}); answered once durable.'],
  ['nack', 'Give a DoGet lease back as a failed attempt: retried after the queue\'s backoff, dead after max_attempts (body: LEASE or {"lease": LEASE}).'],
];

const notImplemented = {
  exchange: 'DoExchange is not supported: use DoPut to add timers',
  poll: 'PollFlightInfo is not supported: GetFlightInfo answers at once',
  handshake: 'Handshake is not used: send "authorization: Bearer <token>" metadata on every call',
} as const;

type Call = { readonly metadata: { get(key: string): Array<string | Buffer> } };

/** The call's headers the timers' side may need again. */
function callHeaders(call: Call): CallHeaders {
  const header = call.metadata.get('authorization')[0];
  return { authorization: typeof header === 'string' ? header : undefined };
}

export class FlightService {
  readonly #timers: FlightTimers;
  readonly #logger: Logger;
  readonly #access: Access;
  /** Aborted when the listener closes: DoGets waiting for timers answer at once, so the drain is not held up by them. */
  readonly #closing = new AbortController();
  readonly #schema = encapsulatedSchema(putSchema);

  constructor(options: FlightServiceOptions) {
    this.#timers = options.timers;
    this.#logger = options.logger;
    this.#access = options.access;
  }

  /** Adds the service to `server`, for a server another service owns (a cluster node's gRPC port: ingest/grpc/cluster-timers-service.ts). */
  addTo(server: Server): void {
    server.addService(flightServiceDefinition, this.#handlers());
  }

  /** Told when the server that carries the service begins to close: DoGets waiting for timers answer at once. */
  stopping(): void {
    this.#closing.abort();
  }

  /**
   * Binds `host:port` (port 0 picks one) and serves until close(). `share` puts other services
   * on the same server (fermata.v1.Timers), with its channel options and credentials (TLS).
   */
  async listen(host: string, port: number, share: SharedServer = {}): Promise<FlightListener> {
    const server = new Server({
      'grpc.max_receive_message_length': flightLimits.messageBytesMax,
      'grpc.max_send_message_length': flightLimits.messageBytesMax,
      ...share.options,
    });
    this.addTo(server);
    share.register?.(server);
    const hostText = host.includes(':') ? `[${host}]` : host;
    const credentials = share.credentials ?? ServerCredentials.createInsecure();
    const guarded = share.guard === undefined ? undefined : await listenGuarded(server, credentials, host, port, share.guard);
    const bound =
      guarded?.port ??
      (await new Promise<number>((resolve, reject) => {
        server.bindAsync(`${hostText}:${port}`, credentials, (err, boundPort) => (err === null ? resolve(boundPort) : reject(err)));
      }));
    return {
      url: `${credentials._isSecure() ? 'grpc+tls' : 'grpc+tcp'}://${hostText}:${bound}`,
      port: bound,
      close: () => {
        this.stopping();
        share.closing?.();
        guarded?.close();
        return closeServer(server);
      },
    };
  }

  #handlers(): UntypedServiceImplementation {
    return {
      Handshake: (call: ServerDuplexStream<Buffer, Buffer>) => this.#refuse(call, status.UNIMPLEMENTED, notImplemented.handshake),
      ListFlights: (call: ServerWritableStream<Buffer, Buffer>) => this.#listFlights(call),
      GetFlightInfo: (call: ServerUnaryCall<Buffer, Buffer>, callback: sendUnaryData<Buffer>) => this.#unary(call, callback, async () => encodeFlightInfo(await this.#flightInfo(decodeFlightDescriptor(call.request), callHeaders(call)))),
      PollFlightInfo: (call: ServerUnaryCall<Buffer, Buffer>, callback: sendUnaryData<Buffer>) => this.#unary(call, callback, async () => {
        throw new FlightFailure(status.UNIMPLEMENTED, notImplemented.poll);
      }),
      GetSchema: (call: ServerUnaryCall<Buffer, Buffer>, callback: sendUnaryData<Buffer>) => this.#unary(call, callback, async () => {
        await this.#flightInfo(decodeFlightDescriptor(call.request), callHeaders(call));
        return encodeSchemaResult(this.#schema);
      }),
      DoGet: (call: ServerWritableStream<Buffer, Buffer>) => {
        const caller = this.#authorized(call, 'write');
        if (caller instanceof FlightFailure) return fail(call, this.#logger, caller);
        const pull = this.#timers.pull;
        if ('unserved' in pull) return fail(call, this.#logger, new FlightFailure(status.UNIMPLEMENTED, pull.unserved));
        this.#doGet(call, caller, pull).catch((err: unknown) => fail(call, this.#logger, asFailure(err), err));
      },
      DoPut: (call: ServerDuplexStream<Buffer, Buffer>) => {
        const caller = this.#authorized(call, 'write');
        if (caller instanceof FlightFailure) fail(call, this.#logger, caller);
        else new PutCall(call, this.#timers, this.#logger, caller).start();
      },
      DoExchange: (call: ServerDuplexStream<Buffer, Buffer>) => this.#refuse(call, status.UNIMPLEMENTED, notImplemented.exchange),
      DoAction: (call: ServerWritableStream<Buffer, Buffer>) => {
        const caller = this.#authorized(call, 'write');
        if (caller instanceof FlightFailure) return fail(call, this.#logger, caller);
        const pull = this.#timers.pull;
        if ('unserved' in pull) return fail(call, this.#logger, new FlightFailure(status.UNIMPLEMENTED, pull.unserved));
        this.#doAction(call, caller, pull).catch((err: unknown) => fail(call, this.#logger, asFailure(err), err));
      },
      ListActions: (call: ServerWritableStream<Buffer, Buffer>) => {
        const caller = this.#authorized(call, 'read');
        if (caller instanceof FlightFailure) return fail(call, this.#logger, caller);
        for (const [type, description] of actions) call.write(encodeActionType(type, description));
        call.end();
      },
    };
  }

  /** The caller, when its token has `scope`; else the status to end the call with (UNAUTHENTICATED, PERMISSION_DENIED naming the scope). */
  #authorized(call: Call, scope: Scope): Caller | FlightFailure {
    const header = call.metadata.get('authorization')[0];
    try {
      return this.#access.authorize(typeof header === 'string' ? header : undefined, scope);
    } catch (err) {
      return asFailure(err);
    }
  }

  /** Answers an authenticated caller `code`; an unauthenticated one UNAUTHENTICATED first, so nothing is told without a token. */
  #refuse(call: ServerWritableStream<Buffer, Buffer> | ServerDuplexStream<Buffer, Buffer>, code: status, details: string): void {
    const caller = this.#authorized(call, 'read');
    fail(call, this.#logger, caller instanceof FlightFailure ? caller : new FlightFailure(code, details));
  }

  /** Acks the ticket's previous lease (durably), leases what is due, streams it: schema, then the batch. */
  async #doGet(call: ServerWritableStream<Buffer, Buffer>, caller: Caller, pull: PullQueues): Promise<void> {
    const ticket = parsePullTicket(decodeTicket(call.request));
    checkQueue(caller, ticket.queue);
    if (ticket.ack !== undefined) await pull.settle(ticket.ack, 'ack', ticket.queue);
    const gone = new AbortController();
    call.on('cancelled', () => gone.abort());
    const batch = await pull.lease(ticket.queue, ticket.maxRows, ticket.waitMs, AbortSignal.any([gone.signal, this.#closing.signal]));
    // The caller left while it waited: the lease expires and its timers are delivered again.
    if (gone.signal.aborted) return;
    const [schema, ...batches] = splitIpcMessages(batch.ipc);
    if (schema === undefined) throw new Error('an Arrow stream without a schema message');
    call.write(encodeFlightData({ dataHeader: schema.header, dataBody: schema.body }));
    if (batch.lease !== undefined) {
      const appMetadata = Buffer.from(JSON.stringify({ lease: batch.lease, rows: batch.rows, expires_at_ms: batch.expiresAtMs }));
      for (const message of batches) call.write(encodeFlightData({ dataHeader: message.header, dataBody: message.body, appMetadata }));
    }
    call.end();
  }

  /** "ack" / "nack" of a lease: one Result once the outcome is durable. */
  async #doAction(call: ServerWritableStream<Buffer, Buffer>, caller: Caller, pull: PullQueues): Promise<void> {
    const action = decodeAction(call.request);
    const known = actions.find(([type]) => type === action.type);
    if (known === undefined) throw new FlightFailure(status.INVALID_ARGUMENT, `unknown action type ${JSON.stringify(action.type)} (known: ${actions.map(([type]) => type).join(', ')})`);
    const lease = parseLeaseBody(action.body);
    // An unknown lease is the settle's to refuse (NOT_FOUND); a known one must be in the caller's queues.
    const leaseQueue = pull.queueOfLease(lease);
    if (leaseQueue !== undefined) checkQueue(caller, leaseQueue);
    const settled = await pull.settle(lease, known[0], leaseQueue);
    call.write(encodeActionResult(Buffer.from(JSON.stringify(settled))));
    call.end();
  }

  #unary(call: ServerUnaryCall<Buffer, Buffer>, callback: sendUnaryData<Buffer>, answer: () => Promise<Buffer>): void {
    const caller = this.#authorized(call, 'read');
    if (caller instanceof FlightFailure) return callback(caller);
    answer().then(
      (message) => callback(null, message),
      (err: unknown) => callback(this.#failureOf(err)),
    );
  }

  #listFlights(call: ServerWritableStream<Buffer, Buffer>): void {
    const caller = this.#authorized(call, 'read');
    if (caller instanceof FlightFailure) return fail(call, this.#logger, caller);
    (async () => {
      checkMessage(call.request);
      for (const queue of await this.#timers.queues(callHeaders(call))) call.write(encodeFlightInfo(this.#queueInfo(queue)));
      call.end();
    })().catch((err: unknown) => fail(call, this.#logger, asFailure(err), err));
  }

  async #flightInfo(descriptor: FlightDescriptor, headers: CallHeaders): Promise<FlightInfo> {
    const queue = timersQueueOf(descriptor);
    if (queue === undefined) {
      const names = (await this.#timers.queues(headers)).map((entry) => entry.name);
      return { schema: this.#schema, descriptor: { type: descriptorTypes.path, cmd: Buffer.alloc(0), path: [timersPath] }, totalRecords: -1, totalBytes: -1, appMetadata: Buffer.from(JSON.stringify({ queues: names })) };
    }
    const known = await this.#timers.queue(queue, headers);
    if (known === undefined) {
      throw new FlightFailure(status.NOT_FOUND, `no queue ${JSON.stringify(queue)}: it was never configured and never held a timer (a DoPut to ["timers", ${JSON.stringify(queue)}] makes it)`);
    }
    return this.#queueInfo(known);
  }

  /** A queue's FlightInfo: how many timers it holds is not known per queue (-1); its config is in app_metadata; a "pull" queue's ticket where DoGet is served. */
  #queueInfo({ name, config }: FlightQueue): FlightInfo {
    const pulled = config.delivery === 'pull' && !('unserved' in this.#timers.pull);
    return {
      ...(pulled ? { tickets: [Buffer.from(JSON.stringify({ queue: name }))] } : {}),
      schema: this.#schema,
      descriptor: { type: descriptorTypes.path, cmd: Buffer.alloc(0), path: [timersPath, name] },
      totalRecords: -1,
      totalBytes: -1,
      appMetadata: Buffer.from(JSON.stringify({ queue: name, config })),
    };
  }

  #failureOf(err: unknown): FlightFailure {
    const failure = asFailure(err);
    if (failure.unexpected) this.#logger.error({ err }, 'unexpected error answering a Flight call');
    return failure;
  }
}

/** A thrown Flight status as is, a malformed message as INVALID_ARGUMENT, a cluster front's answer by its code, anything else by its error code. */
function asFailure(err: unknown, batch?: number): FlightFailure {
  if (err instanceof FlightFailure) return err;
  if (err instanceof RelayedRefusal) return relayedFailure(err, batch);
  if (err instanceof WireError) return new FlightFailure(status.INVALID_ARGUMENT, `malformed Flight message: ${err.message}`);
  if (err instanceof PullRefusal) return pullFailure(err);
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
  readonly #timers: FlightTimers;
  readonly #headers: CallHeaders;
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
  readonly #caller: Caller;

  constructor(call: ServerDuplexStream<Buffer, Buffer>, timers: FlightTimers, logger: Logger, caller: Caller) {
    this.#call = call;
    this.#caller = caller;
    this.#form = call.metadata.get(idsHeader.name)[0] === idsHeader.value ? 'ids' : 'counts';
    this.#timers = timers;
    this.#headers = callHeaders(call);
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
        if (this.#queue !== undefined) checkQueue(this.#caller, this.#queue);
        this.#described = true;
      }
      const hadSchema = this.#assembler.schemaStream !== undefined;
      ipc = this.#assembler.push(data);
      const schemaStream = this.#assembler.schemaStream;
      if (this.#queue !== undefined && !hadSchema && schemaStream !== undefined) this.#hasQueueColumn = schemaHasQueue(schemaStream);
      if (ipc === undefined) return;
      if (this.#queue !== undefined) ipc = applyQueue(ipc, this.#queue, this.#hasQueueColumn);
      else checkArrowAddQueues(this.#caller, ipc);
    } catch (err) {
      // The batches before this message are being admitted: their PutResults go out first.
      this.#refusing = true;
      this.#answered = this.#answered.then(() => this.#fail(err, batch));
      return;
    }
    this.#admit(ipc, batch);
  }

  #admit(ipc: Uint8Array, batch: number): void {
    const admitted = this.#timers.put(ipc, this.#form, this.#headers);
    // Looked at in order below, maybe after it settles: a refusal must not count as unhandled meanwhile.
    admitted.catch(() => undefined);
    if (++this.#inFlight >= flightLimits.putBatchesInFlightMax) this.#call.pause();
    this.#answered = this.#answered.then(async () => {
      let result: Uint8Array;
      try {
        result = await admitted;
      } catch (err) {
        this.#fail(err, batch);
        return;
      } finally {
        if (--this.#inFlight < flightLimits.putBatchesInFlightMax && !this.#failed) this.#call.resume();
      }
      if (!this.#failed) this.#call.write(encodePutResult(result));
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
