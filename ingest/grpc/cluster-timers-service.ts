// fermata.v1.Timers on a cluster node (`fermata serve --cluster … --grpc`). Each method is made
// the HTTP request it stands for (the .proto names it beside each method) and handed to the
// node's own HTTP server in process (`HttpCall`: fastify's inject, no socket), so the cluster
// front routes it as it routes a request on the node's port: adds to a partition this node owns
// or the key's, a timer's calls forwarded to its partition's owner, lists, exports and bulk
// cancels fanned out and merged. There is one router, the front's; this module only translates
// messages to requests and answers to messages. An error answer leaves as the status
// single-node gRPC gives its code (status-map.ts, from the answer's JSON error and Retry-After).
//
// What differs from one node: AddTimers whose rows span partitions and that fail in part answer
// the part's status (UNAVAILABLE with RetryInfo when an owner is gone), without the rows that
// were accepted (the HTTP answer lists them; sending the batch again is safe, as there). Arrow
// Flight shares the port (`also`: ingest/flight/cluster-flight-timers.ts, made of requests to the
// front the same way; cli/serve/listeners.ts). Calls are taken and answered as call-wrappers.ts
// does for both Timers services. Authentication is call-auth.ts's,
// as on one node, and the caller's token goes on to the HTTP request, whose check it passes
// again. Health follows the node's /readyz. Main thread.
import { type handleUnaryCall, type Metadata, Server, ServerCredentials, type ServerDuplexStream, type ServerWritableStream, type ServiceDefinition, type UntypedServiceImplementation } from '@grpc/grpc-js';
import { isUtf8 } from 'node:buffer';
import type { Logger } from 'pino';
import { ReflectionService } from '@grpc/reflection';
import type { Access } from '../auth/access.ts';
import { type ErrorBody, httpErrorCodes, RelayedRefusal } from '../http/error-map.ts';
import { isoOf } from '../http/iso-time.ts';
import { streamLimits, timerListLimits } from '../http/route-limits.ts';
import type { PeerGuard } from '../http/listen/peer-guard.ts';
import { httpLimits, ingestLimits } from '../../engine/limits.ts';
import { CallWrappers, writeTimerPages } from './call-wrappers.ts';
import { listenGuarded } from './guarded-listener.ts';
import { reflectedPackage, timersPackage } from './proto-files.ts';
import { ReadinessHealth } from './readiness-health.ts';
import { type DeadTimerMessage, eachTimer, filterFields, msOf, type NewTimer, queueConfigOf, type RescheduleRequest, type Seconds, secondsOf, specOf, stateEnumOf, type TimerFilterMessage, type TimerMessage } from './timer-messages.ts';
import { grpcServerOptions, timersServiceName } from './timers-service.ts';
import type { TimerStateName } from '../../engine/engine.ts';

/** One request to the node's HTTP server and its answer. */
export interface HttpRequest {
  readonly method: 'GET' | 'POST' | 'PUT' | 'PATCH' | 'DELETE';
  readonly url: string;
  readonly headers: Record<string, string>;
  readonly body?: string | Buffer;
}

export interface HttpAnswer {
  readonly status: number;
  readonly headers: Readonly<Record<string, string | string[] | number | undefined>>;
  readonly body: Buffer;
}

export type HttpCall = (request: HttpRequest) => Promise<HttpAnswer>;

export interface ClusterTimersServiceOptions {
  /** The node's HTTP server, asked in process (cli/serve/listeners.ts gives fastify's inject). */
  readonly http: HttpCall;
  readonly logger: Logger;
  readonly access: Access;
  /** Why the node is not ready (/readyz's reason), or undefined when it is. */
  readonly notReady: () => Promise<string | undefined>;
}

/** A timer as the HTTP API writes it (ingest/http/timer-views.ts). */
interface TimerJson {
  readonly id: string;
  readonly state: TimerStateName;
  readonly revision: number;
  readonly fire_at: string;
  readonly attempts: number;
  readonly queue: string;
  readonly key: string | null;
  readonly last_status: number | null;
  readonly last_error: string | null;
  readonly last_attempt_at: string | null;
  readonly next_attempt_at: string | null;
  readonly callback: string | null;
  readonly failure_callback: string | null;
  readonly target: string;
  readonly headers: Record<string, string>;
  readonly payload: string | null;
  readonly payload_base64: string | null;
  readonly created_at: string | null;
}

type DeadJson = Omit<TimerJson, 'state' | 'key' | 'next_attempt_at' | 'callback' | 'failure_callback'> & { readonly reason: string };

interface AddJson {
  readonly id: string;
  readonly fire_at: string;
  readonly revision: number;
  readonly duplicate: boolean;
  readonly state?: TimerStateName;
  readonly differs?: readonly string[];
}

const timestampOf = (iso: string): Seconds => secondsOf(Date.parse(iso));
const timestampOrNull = (iso: string | null): Seconds | null => (iso === null ? null : timestampOf(iso));
const payloadOf = (json: { payload: string | null; payload_base64: string | null }): Buffer => (json.payload !== null ? Buffer.from(json.payload, 'utf8') : Buffer.from(json.payload_base64 ?? '', 'base64'));

function timerOf(json: TimerJson): TimerMessage {
  return {
    id: json.id,
    state: stateEnumOf(json.state),
    revision: json.revision,
    fire_at: timestampOf(json.fire_at),
    attempts: json.attempts,
    queue: json.queue,
    key: json.key,
    last_status: json.last_status,
    last_error: json.last_error,
    last_attempt_at: timestampOrNull(json.last_attempt_at),
    next_attempt_at: timestampOrNull(json.next_attempt_at),
    callback: json.callback,
    failure_callback: json.failure_callback,
    target: json.target,
    headers: json.headers,
    payload: payloadOf(json),
    created_at: timestampOrNull(json.created_at),
  };
}

function deadOf(json: DeadJson): DeadTimerMessage {
  return {
    id: json.id,
    revision: json.revision,
    queue: json.queue,
    target: json.target,
    fire_at: timestampOf(json.fire_at),
    attempts: json.attempts,
    last_status: json.last_status,
    reason: `DEAD_REASON_${json.reason.toUpperCase()}` as DeadTimerMessage['reason'],
    last_error: json.last_error,
    last_attempt_at: timestampOrNull(json.last_attempt_at),
    headers: json.headers,
    payload: payloadOf(json),
    created_at: timestampOrNull(json.created_at),
  };
}

function addedOf(json: AddJson): Record<string, unknown> {
  return { id: json.id, fire_at: timestampOf(json.fire_at), revision: json.revision, duplicate: json.duplicate, state: json.state === undefined ? 'TIMER_STATE_UNSPECIFIED' : stateEnumOf(json.state), differs: json.differs ?? [] };
}

/** A queue as GET /v1/queues/{name} writes it (its config's fields beside its name) → the Queue message. */
function queueOf(json: Record<string, unknown>): Record<string, unknown> {
  return { name: json.name, config: queueConfigOf(json), paused: json.paused === true };
}

/** A payload as an add's JSON takes it: text when it is UTF-8, else base64. */
function payloadFields(payload: Buffer): Record<string, string> {
  if (payload.length === 0) return {};
  return isUtf8(payload) ? { payload: payload.toString('utf8') } : { payload_base64: payload.toString('base64') };
}

/**
 * A NewTimer as POST /v1/timers' JSON takes it. What only gRPC can get wrong is refused first,
 * as on one node (specOf); a delay stays a delay, so that a duplicate's `differs` reads it so.
 */
function timerJsonOf(timer: NewTimer | null | undefined): Record<string, unknown> {
  specOf(timer, Date.now());
  const given = timer as NewTimer;
  const when = given.when === 'delay' && given.delay != null ? { delay_ms: msOf(given.delay, 'delay') } : { fire_at: isoOf(msOf(given.fire_at as Seconds, 'fire_at')) };
  return {
    ...when,
    target: given.target,
    ...payloadFields(given.payload),
    ...(Object.keys(given.headers).length > 0 ? { headers: given.headers } : {}),
    ...(given.key === '' ? {} : { key: given.key }),
    ...(given.queue === '' ? {} : { queue: given.queue }),
    ...(given.callback === '' ? {} : { callback: given.callback }),
    ...(given.failure_callback === '' ? {} : { failure_callback: given.failure_callback }),
  };
}

/** A RescheduleTimerRequest as PATCH /v1/timers/{id}'s body. */
function patchJsonOf(request: RescheduleRequest): Record<string, unknown> {
  const body: Record<string, unknown> = {};
  if (request.when === 'delay' && request.delay != null) body.delay_ms = msOf(request.delay, 'delay');
  if (request.when === 'fire_at' && request.fire_at != null) body.fire_at = isoOf(msOf(request.fire_at, 'fire_at'));
  if (request.target !== undefined) body.target = request.target;
  if (request.payload !== undefined) Object.assign(body, request.payload.length === 0 ? { payload: '' } : payloadFields(request.payload));
  if (request.headers !== null) body.headers = request.headers.headers;
  if (request.queue !== undefined) body.queue = request.queue;
  if (request.callback !== undefined) body.callback = request.callback === '' ? null : request.callback;
  if (request.failure_callback !== undefined) body.failure_callback = request.failure_callback === '' ? null : request.failure_callback;
  return body;
}

/** A filter's fields as a query string's (the HTTP list's parameters). */
function listQuery(filter: TimerFilterMessage | null, limit: number, cursor: string): string {
  const params = new URLSearchParams();
  for (const [name, value] of Object.entries(filterFields(filter))) params.set(name, String(value));
  if (limit !== 0) params.set('limit', String(limit));
  if (cursor !== '') params.set('cursor', cursor);
  const text = params.toString();
  return text === '' ? '' : `?${text}`;
}

const path = (value: string): string => encodeURIComponent(value);

/** The gRPC port, listening. */
export interface ClusterGrpcListener {
  /** grpc+tcp://HOST:PORT, or grpc+tls:// with TLS. */
  readonly url: string;
  /** Health goes NOT_SERVING, the port stops accepting, and calls open get until the HTTP drain timeout to end. */
  close(): Promise<void>;
}

export class ClusterTimersService {
  readonly #http: HttpCall;
  readonly #calls: CallWrappers;
  readonly #health: ReadinessHealth;

  constructor(options: ClusterTimersServiceOptions) {
    this.#http = options.http;
    this.#calls = new CallWrappers(options.access, options.logger);
    this.#health = new ReadinessHealth(['', timersServiceName], options.notReady);
  }

  /** Adds fermata.v1.Timers, reflection (v1 and v1alpha) and health to `server`. */
  #addTo(server: Server): void {
    server.addService(timersPackage()[timersServiceName] as ServiceDefinition, this.#handlers());
    new ReflectionService(reflectedPackage()).addToServer(server);
    this.#health.addTo(server);
  }

  /**
   * Serves the service on `host:port` (0: a free one), its connections seen by `guard` (the HTTP
   * port's peer guard), with `credentials` (TLS) or in cleartext; messages up to the HTTP API's
   * bulk body limit, as one node's gRPC port takes them; `also` puts another service on the
   * same server (Arrow Flight), told when the port begins to close.
   */
  async listen(host: string, port: number, guard: PeerGuard, credentials = ServerCredentials.createInsecure(), also?: { addTo(server: Server): void; stopping(): void }): Promise<ClusterGrpcListener> {
    const server = new Server({ 'grpc.max_receive_message_length': ingestLimits.bodyBytesMax, 'grpc.max_send_message_length': ingestLimits.bodyBytesMax, ...grpcServerOptions });
    this.#addTo(server);
    also?.addTo(server);
    const bound = await listenGuarded(server, credentials, host, port, guard);
    const hostText = host.includes(':') ? `[${host}]` : host;
    return {
      url: `${credentials._isSecure() ? 'grpc+tls' : 'grpc+tcp'}://${hostText}:${bound.port}`,
      close: async () => {
        this.#health.stopping();
        also?.stopping();
        bound.close();
        const cut = setTimeout(() => server.forceShutdown(), httpLimits.drainTimeoutMs);
        try {
          await new Promise<void>((resolve, reject) => server.tryShutdown((err) => (err === undefined ? resolve() : reject(err))));
        } finally {
          clearTimeout(cut);
        }
      },
    };
  }

  /** The JSON answer of `request` made with the call's token and trace context; an error answer is thrown as the refusal it is. */
  async #ask<T>(metadata: Metadata, method: HttpRequest['method'], url: string, body?: unknown, extra: Record<string, string> = {}): Promise<T> {
    const headers: Record<string, string> = { accept: 'application/json', ...extra };
    for (const name of ['authorization', 'traceparent', 'tracestate']) {
      const value = metadata.get(name)[0];
      if (typeof value === 'string') headers[name] = value;
    }
    let payload: string | Buffer | undefined;
    if (Buffer.isBuffer(body)) payload = body;
    else if (body !== undefined) {
      payload = JSON.stringify(body);
      headers['content-type'] ??= 'application/json';
    }
    const answer = await this.#http(payload === undefined ? { method, url, headers } : { method, url, headers, body: payload });
    if (answer.status < 300) return JSON.parse(answer.body.toString('utf8')) as T;
    throw refusalOf(answer);
  }

  #handlers(): UntypedServiceImplementation {
    return {
      AddTimer: this.#unary<{ timer: NewTimer | null }>(async (request, metadata) => addedOf(await this.#ask<AddJson>(metadata, 'POST', '/v1/timers', timerJsonOf(request.timer)))),
      AddTimers: this.#unary<{ batch?: 'timers' | 'arrow'; timers?: { timers: NewTimer[] } | null; arrow?: Buffer }>(async (request, metadata) => {
        let answer: { accepted: number; duplicates: number; ids: string[]; revisions: number[]; duplicate_rows: { row: number; state: TimerStateName; differs: string[] }[] };
        if (request.batch === 'arrow' && request.arrow !== undefined) {
          answer = await this.#ask(metadata, 'POST', '/v1/timers', request.arrow, { 'content-type': 'application/vnd.apache.arrow.stream' });
        } else {
          const lines = eachTimer(request.timers?.timers ?? [], (timer) => JSON.stringify(timerJsonOf(timer)));
          answer = await this.#ask(metadata, 'POST', '/v1/timers', Buffer.from(lines.join('\n') + '\n'), { 'content-type': 'application/x-ndjson' });
        }
        const duplicateRows = answer.duplicate_rows.map(({ row, state, differs }) => ({ row, state: stateEnumOf(state), differs }));
        return { accepted: answer.accepted, duplicates: answer.duplicates, ids: answer.ids, revisions: answer.revisions, duplicate_rows: duplicateRows };
      }, (request) => (request.batch === 'arrow' ? 'arrow' : 'timers')),
      StreamAddTimers: this.#calls.bidiStream((call: ServerDuplexStream<{ timer: NewTimer | null }, unknown>) => this.#streamAdds(call)),
      GetTimer: this.#unary<{ id: string }>(async ({ id }, metadata) => ({ timer: timerOf(await this.#ask<TimerJson>(metadata, 'GET', `/v1/timers/${path(id)}`)) })),
      CancelTimer: this.#unary<{ id: string; revision?: number }>(async ({ id, revision }, metadata) => {
        const cancelled = await this.#ask<{ id: string; state: TimerStateName; revision: number }>(metadata, 'DELETE', `/v1/timers/${path(id)}`, undefined, revision === undefined ? {} : { 'if-match': `"${revision}"` });
        return { id: cancelled.id, state: stateEnumOf(cancelled.state), revision: cancelled.revision };
      }),
      RescheduleTimer: this.#unary<RescheduleRequest>(async (request, metadata) => {
        const condition = request.revision === undefined ? {} : { 'if-match': `"${request.revision}"` };
        return { timer: timerOf(await this.#ask<TimerJson>(metadata, 'PATCH', `/v1/timers/${path(request.id)}`, patchJsonOf(request), condition)) };
      }),
      ListTimers: this.#unary<{ filter: TimerFilterMessage | null; limit: number; cursor: string }>(async (request, metadata) => {
        const page = await this.#ask<{ timers: TimerJson[]; next_cursor: string | null }>(metadata, 'GET', `/v1/timers${listQuery(request.filter, request.limit, request.cursor)}`);
        return { timers: page.timers.map(timerOf), next_cursor: page.next_cursor ?? '' };
      }),
      ExportTimers: this.#calls.serverStream((call: ServerWritableStream<{ filter: TimerFilterMessage | null }, unknown>) => this.#export(call)),
      CancelTimers: this.#unary<{ target?: 'filter' | 'ids'; filter?: TimerFilterMessage | null; ids?: { ids: string[] } | null }>(async (request, metadata) => {
        const body = request.target === 'ids' ? { ids: request.ids?.ids ?? [] } : filterFields(request.filter ?? null);
        return this.#ask(metadata, 'POST', '/v1/timers/cancel', body);
      }),
      ListQueues: this.#unary<unknown>(async (_request, metadata) => ({ queues: (await this.#ask<{ queues: Record<string, unknown>[] }>(metadata, 'GET', '/v1/queues')).queues.map(queueOf) })),
      GetQueue: this.#unary<{ name: string }>(async ({ name }, metadata) => ({ queue: queueOf(await this.#ask(metadata, 'GET', `/v1/queues/${path(name)}`)) })),
      SetQueue: this.#unary<{ name: string; config: Record<string, unknown> | null }>(async ({ name, config }, metadata) => ({ queue: queueOf(await this.#ask(metadata, 'PUT', `/v1/queues/${path(name)}`, queueConfigOf(config))) })),
      DeleteQueue: this.#unary<{ name: string }>(async ({ name }, metadata) => {
        await this.#ask(metadata, 'DELETE', `/v1/queues/${path(name)}`);
        return { name };
      }),
      PauseQueue: this.#unary<{ name: string }>(async ({ name }, metadata) => ({ queue: queueOf(await this.#ask(metadata, 'POST', `/v1/queues/${path(name)}/pause`)) })),
      ResumeQueue: this.#unary<{ name: string }>(async ({ name }, metadata) => ({ queue: queueOf(await this.#ask(metadata, 'POST', `/v1/queues/${path(name)}/resume`)) })),
      PurgeQueue: this.#unary<{ name: string }>(async ({ name }, metadata) => this.#ask(metadata, 'DELETE', `/v1/queues/${path(name)}/timers`)),
      ListDeadTimers: this.#unary<{ queue: string; limit: number; cursor: string }>(async ({ queue, limit, cursor }, metadata) => {
        const params = new URLSearchParams();
        if (queue !== '') params.set('queue', queue);
        if (limit !== 0) params.set('limit', String(limit));
        if (cursor !== '') params.set('cursor', cursor);
        const query = params.toString();
        const page = await this.#ask<{ dead: DeadJson[]; next_cursor: string | null }>(metadata, 'GET', `/v1/dead${query === '' ? '' : `?${query}`}`);
        return { dead: page.dead.map(deadOf), next_cursor: page.next_cursor ?? '' };
      }),
      RetryDeadTimer: this.#unary<{ id: string }>(async ({ id }, metadata) => {
        await this.#ask(metadata, 'POST', `/v1/dead/${path(id)}/retry`);
        return { id, state: stateEnumOf('pending') };
      }),
      DiscardDeadTimer: this.#unary<{ id: string }>(async ({ id }, metadata) => {
        await this.#ask(metadata, 'DELETE', `/v1/dead/${path(id)}`);
        return { id };
      }),
    };
  }

  /**
   * A unary method (call-wrappers.ts): authenticated, refused unstarted once its deadline passed
   * (as one node refuses a write), then `answer`ed; `rowsOf` names a batch's rows in errors
   * (timers[ROW].FIELD).
   */
  #unary<Request>(answer: (request: Request, metadata: Metadata) => Promise<unknown>, rowsOf?: (request: Request) => string): handleUnaryCall<Request, unknown> {
    return this.#calls.unary(answer, true, rowsOf);
  }

  /** Every match, page after page of the merged list, each read once the one before it was taken. */
  async #export(call: ServerWritableStream<{ filter: TimerFilterMessage | null }, unknown>): Promise<void> {
    await writeTimerPages(call, '', async (cursor) => {
      const page = await this.#ask<{ timers: TimerJson[]; next_cursor: string | null }>(call.metadata, 'GET', `/v1/timers${listQuery(call.request.filter, timerListLimits.max, cursor)}`);
      return { timers: page.timers.map(timerOf), next: page.next_cursor ?? undefined };
    });
  }

  /**
   * A StreamAddTimers call: each request an AddTimer, started as it is read and answered in
   * request order (an answer waits for those before it); the call stops reading while
   * streamLimits.linesInFlightMax requests wait for their answer.
   */
  #streamAdds(call: ServerDuplexStream<{ timer: NewTimer | null }, unknown>): void {
    let written: Promise<void> = Promise.resolve();
    let waiting = 0;
    let ended = false;
    call.on('data', (request: { timer: NewTimer | null }) => {
      waiting += 1;
      if (waiting >= streamLimits.linesInFlightMax) call.pause();
      const answer = (async (): Promise<unknown> => {
        try {
          return { added: addedOf(await this.#ask<AddJson>(call.metadata, 'POST', '/v1/timers', timerJsonOf(request.timer))) };
        } catch (err) {
          return { error: this.#calls.requestStatus(err) };
        }
      })();
      written = written.then(async () => {
        const message = await answer;
        waiting -= 1;
        if (!call.cancelled) call.write(message);
        if (waiting < streamLimits.linesInFlightMax && !ended) call.resume();
      });
    });
    call.on('end', () => {
      ended = true;
      void written.then(() => {
        if (!call.cancelled) call.end();
      });
    });
  }
}

/** An HTTP error answer as the refusal it is (its code, message, field or row, Retry-After). */
export function refusalOf(answer: HttpAnswer): RelayedRefusal {
  const retryAfter = Number(answer.headers['retry-after']);
  let body: ErrorBody;
  try {
    body = JSON.parse(answer.body.toString('utf8')) as ErrorBody;
    if (typeof body.error?.code !== 'string') throw new Error('no error code');
  } catch {
    body = { error: { code: httpErrorCodes.internal, message: `the node answered ${answer.status} without an error body` } };
  }
  return new RelayedRefusal(answer.status, Number.isInteger(retryAfter) ? retryAfter : undefined, body);
}
