// fermata.v1.Timers (proto/fermata/v1/timers.proto) on a grpc-js server, with gRPC server
// reflection and the standard health service beside it. A thin adapter, like the HTTP routes:
// each method calls the engine through the same helpers its HTTP route does (the admit
// coalescer, timer-filter.ts, timer-patch.ts's rescheduleTimer, timer-cancel.ts, dead.ts's
// redrive and discard, bulk cancel's body reader), so the two APIs cannot differ in what they do;
// calls are taken and answered as call-wrappers.ts does for both Timers services, errors leaving
// through status-map.ts. Every write is answered once durable.
//
// Deadlines: a call whose deadline has passed when its handler runs is answered
// DEADLINE_EXCEEDED without touching the engine; once a write is handed to the engine it
// completes, and if the deadline passes meanwhile grpc-js answers DEADLINE_EXCEEDED and the
// write stays durable (a retry with the key is then a duplicate). Streaming calls stop at their
// deadline or when the client cancels.
//
// Authentication: every Timers call asks call-auth.ts (call-wrappers.ts); reflection and health are open, as
// /healthz is (they say nothing a client without a token could misuse). Main thread.
import type http2 from 'node:http2';
import type { handleUnaryCall, MethodDefinition, Server, ServerDuplexStream, ServerWritableStream, ServiceDefinition, UntypedServiceImplementation } from '@grpc/grpc-js';
import type { PackageDefinition } from '@grpc/proto-loader';
import { ReflectionService } from '@grpc/reflection';
import type { Logger } from 'pino';
import { AdmitCoalescer, type AdmitWaiter, specBytes } from '../../engine/admit-coalescer.ts';
import { batchFromSpecs, type TimerSpec } from '../../engine/batch/timer-batch.ts';
import { type Admitted, decodeCursor, type DuplicateAnswer, type Engine, queryStart } from '../../engine/engine.ts';
import { errorCodes, FermataError } from '../../engine/errors.ts';
import { httpLimits } from '../../engine/limits.ts';
import type { QueueView } from '../../engine/queue-registry.ts';
import { arrowGaveDelay, differsAsAsked, duplicateRowsJson } from '../duplicate-answers.ts';
import { inJsonTerms } from '../http/body/json-batch.ts';
import { httpErrorCodes, HttpProblem } from '../http/error-map.ts';
import type { Access } from '../auth/access.ts';
import type { ReadinessSources } from '../readiness.ts';
import { deadListLimits, streamLimits, timerListLimits } from '../http/route-limits.ts';
import { discardDead, redriveDead } from '../http/routes/dead.ts';
import { bulkCancelTargetOf, limitOf } from '../http/routes/timer-list.ts';
import { rescheduleTimer } from '../http/routes/timer-patch.ts';
import { cancelTimer } from '../http/timer-cancel.ts';
import { timerFilterOf } from '../http/timer-filter.ts';
import { CallWrappers, writeTimerPages } from './call-wrappers.ts';
import { traceOfMetadata } from './trace-metadata.ts';
import { type TraceHeaders, withTrace } from '../../engine/trace-context.ts';
import { reflectedPackage, timersPackage } from './proto-files.ts';
import { ReadinessHealth } from './readiness-health.ts';
import { StreamAddCodec, type StreamAddAnswer } from './stream-add-codec.ts';
import type { RpcStatus } from './status-map.ts';
import { deadTimerMessage, eachTimer, filterFields, type NewTimer, patchOf, queueConfigOf, type RescheduleRequest, secondsOf, specOf, stateEnumOf, type TimerFilterMessage, timerMessage, type TimerStateEnum } from './timer-messages.ts';

export const timersServiceName = 'fermata.v1.Timers';

/**
 * The gRPC server's options beyond Flight's message size (which is the HTTP API's bulk body
 * limit): an HTTP/2 connection's streams, buffered memory, header list, invalid frames, refused
 * streams and resets, as the HTTP listener (cleartext-listener.ts) caps them. Node's session
 * limits reach grpc-js's HTTP/2 server through `grpc-node.http2_server_options`, which
 * patches/@grpc+grpc-js+1.14.7.patch adds (decision 0028). A session without a call for the
 * HTTP listener's idle time is closed (GOAWAY); one with a call open, however quiet, is not.
 */
export const grpcServerOptions = {
  'grpc.max_concurrent_streams': httpLimits.http2ConcurrentStreamsMax,
  'grpc-node.max_session_memory': httpLimits.http2SessionMemoryMbMax,
  'grpc.max_connection_idle_ms': httpLimits.http2SessionIdleTimeoutMs,
  'grpc-node.http2_server_options': {
    settings: { maxHeaderListSize: httpLimits.headerListBytesMax },
    maxHeaderListPairs: httpLimits.headerFieldsMax,
    maxSessionInvalidFrames: httpLimits.http2SessionInvalidFramesMax,
    maxSessionRejectedStreams: httpLimits.http2SessionRejectedStreamsMax,
    streamResetBurst: httpLimits.http2StreamResetBurst,
    streamResetRate: httpLimits.http2StreamResetsPerSecond,
  } satisfies http2.ServerOptions,
  // Channelz (gRPC's live introspection service) is not served: its per-call bookkeeping is not kept.
  'grpc.enable_channelz': 0,
} as const;

export interface TimersServiceOptions {
  readonly engine: Engine;
  readonly logger: Logger;
  /** The tokens and their scopes every Timers call is checked against (call-auth.ts). */
  readonly access: Access;
  /** What health follows, as /readyz (the engine's log, and the disk and warm-up when given); the engine's log alone when not given. */
  readonly readiness?: ReadinessSources;
  /** The single adds' coalescer, shared with the HTTP listener's so that adds of one turn over both share a record; made here when not given. */
  readonly coalescer?: AdmitCoalescer;
}

interface AddTimerResponse<State = TimerStateEnum> {
  readonly id: string;
  readonly fire_at: { readonly seconds: number; readonly nanos: number };
  readonly revision: number;
  readonly duplicate: boolean;
  readonly state: State;
  readonly differs: readonly string[];
}

const noDiffers: readonly string[] = [];

/**
 * The answer to an admitted single add: a new timer, or the original its key named; its state
 * as `stateOf` writes it (proto-loader takes the enum's name, StreamAddCodec its number).
 */
function addAnswer<State>(id: string, original: DuplicateAnswer | undefined, fireAtMs: number, gaveDelay: boolean, stateOf: (state: TimerStateEnum) => State): AddTimerResponse<State> {
  if (original === undefined) return { id, fire_at: secondsOf(fireAtMs), revision: 1, duplicate: false, state: stateOf('TIMER_STATE_UNSPECIFIED'), differs: noDiffers };
  return { id, fire_at: secondsOf(original.fireAtMs), revision: original.revision, duplicate: true, state: stateOf(stateEnumOf(original.state)), differs: differsAsAsked(original, gaveDelay) };
}

const enumName = (state: TimerStateEnum): TimerStateEnum => state;

function queueMessage({ name, config, paused }: QueueView): Record<string, unknown> {
  return { name, config, paused };
}

const noSuchQueue = (name: string): HttpProblem => new HttpProblem(httpErrorCodes.notFound, `no queue ${name}`);

function cursorOf(cursor: string): ReturnType<typeof decodeCursor> {
  if (cursor === '') return queryStart;
  const after = decodeCursor(cursor);
  if (after === undefined) throw new HttpProblem(httpErrorCodes.requestInvalid, `cursor ${JSON.stringify(cursor)} is not one: pass a page's next_cursor as it came`, 'cursor');
  return after;
}

function addTimersAnswer(admitted: Admitted, delayRows: boolean | Uint8Array): Record<string, unknown> {
  const ids = new Array<string>(admitted.rows);
  const revisions = new Array<number>(admitted.rows);
  for (let row = 0; row < admitted.rows; row++) {
    ids[row] = admitted.idOf(row);
    revisions[row] = admitted.revisionOf(row);
  }
  const duplicateRows = duplicateRowsJson(admitted, delayRows).map(({ row, state, differs }) => ({ row, state: stateEnumOf(state), differs }));
  return { accepted: admitted.rows, duplicates: admitted.duplicates, ids, revisions, duplicate_rows: duplicateRows };
}

export class TimersService {
  readonly #engine: Engine;
  readonly #calls: CallWrappers;
  readonly #coalescer: AdmitCoalescer;
  readonly #package: PackageDefinition = timersPackage();
  readonly #health: ReadinessHealth;
  readonly #streamCodec = new StreamAddCodec();

  constructor(options: TimersServiceOptions) {
    this.#engine = options.engine;
    this.#calls = new CallWrappers(options.access, options.logger);
    this.#health = new ReadinessHealth(['', timersServiceName], options.readiness ?? { engine: options.engine });
    // Single adds of one turn (AddTimer, every StreamAddTimers and, when shared, HTTP's) share a record.
    this.#coalescer = options.coalescer ?? new AdmitCoalescer(options.engine);
  }

  /** Adds fermata.v1.Timers, reflection (v1 and v1alpha) and health to `server`. */
  addTo(server: Server): void {
    const service = this.#package[timersServiceName] as ServiceDefinition;
    const streamAdd = this.#streamCodec.method(service.StreamAddTimers as MethodDefinition<unknown, unknown>);
    server.addService({ ...service, StreamAddTimers: streamAdd }, this.#handlers());
    new ReflectionService(reflectedPackage()).addToServer(server);
    this.#health.addTo(server);
  }

  /** Health says NOT_SERVING from now on: the server is stopping. */
  stopping(): void {
    this.#health.stopping();
  }

  #handlers(): UntypedServiceImplementation {
    const engine = this.#engine;
    const now = (): number => engine.clock.now();
    const calls = this.#calls;
    return {
      AddTimer: calls.unary<{ timer: NewTimer | null }, AddTimerResponse>(async (request, metadata) => {
        const spec = withTrace(specOf(request.timer, now()), traceOfMetadata(metadata));
        try {
          const { id, original } = await this.#coalescer.admitOne(spec);
          return addAnswer(id, original, spec.fireAtMs, request.timer?.when === 'delay', enumName);
        } catch (err) {
          throw inJsonTerms(err, undefined);
        }
      }, true),
      AddTimers: calls.unary<{ batch?: 'timers' | 'arrow'; timers?: { timers: NewTimer[] } | null; arrow?: Buffer }, Record<string, unknown>>(async (request, metadata) => {
        if (request.batch === 'arrow' && request.arrow !== undefined) {
          if (request.arrow.length === 0) throw new FermataError(errorCodes.batchInvalid, 'arrow is empty: send an Arrow IPC stream (schema, then record batches)', { field: 'arrow' });
          const admitted = await engine.admitArrow(request.arrow);
          return addTimersAnswer(admitted, admitted.duplicates > 0 && arrowGaveDelay(request.arrow));
        }
        const timers = request.timers?.timers ?? [];
        const trace = traceOfMetadata(metadata);
        const nowMs = now();
        const specs = eachTimer(timers, (timer) => specOf(timer, nowMs)).map((spec) => withTrace(spec, trace));
        const delayRows = Uint8Array.from(timers, (timer) => (timer.when === 'delay' ? 1 : 0));
        return addTimersAnswer(await engine.admit(batchFromSpecs(specs)), delayRows);
      }, true, (request) => (request.batch === 'arrow' ? 'arrow' : 'timers')),
      StreamAddTimers: calls.bidiStream((call: ServerDuplexStream<NewTimer | null, StreamAddAnswer>) => new AddStream(call, this.#coalescer, this.#streamCodec, engine, calls).start()),
      GetTimer: calls.unary<{ id: string }, unknown>(async ({ id }) => {
        const view = await engine.lookup(id);
        if (view === undefined) throw new HttpProblem(httpErrorCodes.notFound, `no timer ${id}`, 'id');
        return { timer: timerMessage(view) };
      }),
      CancelTimer: calls.unary<{ id: string; revision?: number }, unknown>(async ({ id, revision }) => {
        const cancelled = await cancelTimer(engine, id, revision === undefined ? undefined : [revision], (now) => `timer ${id} is at revision ${now}, not ${revision}: read it again (GetTimer) and decide`);
        return { id, state: stateEnumOf(cancelled.state), revision: cancelled.revision };
      }, true),
      RescheduleTimer: calls.unary<RescheduleRequest, unknown>(async (request) => {
        const { id, revision } = request;
        const condition = revision === undefined ? undefined : [revision];
        const view = await rescheduleTimer(engine, id, id, patchOf(request, now()), condition, (at) => `timer ${id} is at revision ${at}, not ${revision}: read it again (GetTimer) and decide`);
        return { timer: timerMessage(view) };
      }, true),
      ListTimers: calls.unary<{ filter: TimerFilterMessage | null; limit: number; cursor: string }, unknown>(async (request) => {
        const filter = timerFilterOf(filterFields(request.filter));
        const page = await engine.listTimers(filter, limitOf(request.limit === 0 ? undefined : String(request.limit)), cursorOf(request.cursor));
        return { timers: page.timers.map(timerMessage), next_cursor: page.nextCursor ?? '' };
      }),
      ExportTimers: calls.serverStream((call: ServerWritableStream<{ filter: TimerFilterMessage | null }, unknown>) => this.#export(call)),
      CancelTimers: calls.unary<{ target?: 'filter' | 'ids'; filter?: TimerFilterMessage | null; ids?: { ids: string[] } | null }, unknown>(async (request) => {
        const body = request.target === 'ids' ? { ids: request.ids?.ids ?? [] } : filterFields(request.filter ?? null);
        const outcome = await engine.bulkCancel(bulkCancelTargetOf(body));
        return { cancelled: outcome.cancelled, in_flight: outcome.inFlight };
      }, true),
      ListQueues: calls.unary<unknown, unknown>(async () => ({ queues: engine.queues().map(queueMessage) })),
      GetQueue: calls.unary<{ name: string }, unknown>(async ({ name }) => {
        const view = engine.findQueueView(name);
        if (view === undefined) throw noSuchQueue(name);
        return { queue: queueMessage(view) };
      }),
      SetQueue: calls.unary<{ name: string; config: Record<string, unknown> | null }, unknown>(async ({ name, config }) => {
        await engine.setQueue(name, queueConfigOf(config));
        const view = engine.findQueueView(name);
        if (view === undefined) throw noSuchQueue(name);
        return { queue: queueMessage(view) };
      }, true),
      DeleteQueue: calls.unary<{ name: string }, unknown>(async ({ name }) => {
        if (!(await engine.deleteQueue(name))) throw noSuchQueue(name);
        return { name };
      }, true),
      PauseQueue: this.#pauseQueue(true),
      ResumeQueue: this.#pauseQueue(false),
      PurgeQueue: calls.unary<{ name: string }, unknown>(async ({ name }) => {
        if (engine.findQueue(name) === undefined) throw noSuchQueue(name);
        const outcome = await engine.bulkCancel({ filter: { queue: name } });
        return { cancelled: outcome.cancelled, in_flight: outcome.inFlight };
      }, true),
      ListDeadTimers: calls.unary<{ queue: string; limit: number; cursor: string }, unknown>(async ({ queue, limit, cursor }) => {
        if (limit > deadListLimits.max) throw new HttpProblem(httpErrorCodes.requestInvalid, `limit must be from 1 to ${deadListLimits.max} (0: ${deadListLimits.default})`, 'limit');
        const page = engine.deadPage(limit === 0 ? deadListLimits.default : limit, queue === '' ? undefined : queue, cursor === '' ? undefined : cursor);
        if (page === undefined) throw new HttpProblem(httpErrorCodes.requestInvalid, `cursor ${JSON.stringify(cursor)} is not one: pass a page's next_cursor as it came`, 'cursor');
        return { dead: page.dead.map(deadTimerMessage), next_cursor: page.nextCursor ?? '' };
      }),
      RetryDeadTimer: calls.unary<{ id: string }, unknown>(async ({ id }) => {
        await redriveDead(engine, id);
        return { id, state: stateEnumOf('pending') };
      }, true),
      DiscardDeadTimer: calls.unary<{ id: string }, unknown>(async ({ id }) => {
        await discardDead(engine, id);
        return { id };
      }, true),
    };
  }

  #pauseQueue(paused: boolean): handleUnaryCall<{ name: string }, unknown> {
    return this.#calls.unary<{ name: string }, unknown>(async ({ name }) => {
      const view = await this.#engine.setQueuePaused(name, paused);
      if (view === undefined) throw noSuchQueue(name);
      return { queue: queueMessage(view) };
    }, true);
  }

  /** Every match, a page of timerListLimits.max a message, each read once the one before it was taken. */
  async #export(call: ServerWritableStream<{ filter: TimerFilterMessage | null }, unknown>): Promise<void> {
    const filter = timerFilterOf(filterFields(call.request.filter));
    await writeTimerPages(call, queryStart, async (after) => {
      const page = await this.#engine.listTimers(filter, timerListLimits.max, after);
      return { timers: page.timers.map(timerMessage), next: page.nextCursor === null ? undefined : decodeCursor(page.nextCursor) };
    });
  }
}

/** One request of a StreamAddTimers call: hears its admit's end from the coalescer, and tells its call. */
class StreamAdd implements AdmitWaiter {
  answer: StreamAddAnswer | undefined = undefined;
  /** The request's timer's bytes (payload, key, headers), counted in flight until its answer is written. */
  readonly bytes: number;
  readonly #call: AddStream;
  readonly #fireAtMs: number;
  readonly #gaveDelay: boolean;

  constructor(call: AddStream, fireAtMs: number, gaveDelay: boolean, bytes: number) {
    this.#call = call;
    this.#fireAtMs = fireAtMs;
    this.#gaveDelay = gaveDelay;
    this.bytes = bytes;
  }

  admitted(id: string, _duplicate: boolean, original: DuplicateAnswer | undefined): void {
    this.answer = { added: addAnswer(id, original, this.#fireAtMs, this.#gaveDelay, this.#call.stateNumberOf) };
    this.#call.answered();
  }

  refused(err: unknown): void {
    this.answer = { error: this.#call.refusal(inJsonTerms(err, undefined)) };
    this.#call.answered();
  }
}

/**
 * One StreamAddTimers call: each request a single add through the coalescer, answered in
 * request order once durable (an answer waits for those before it). The answers known by the
 * end of a callback (a record's admits end together) are written together: the call is corked
 * while they are written, so grpc-js hands them to the HTTP/2 stream in one write (its
 * `_writev`, which patches/@grpc+grpc-js+1.14.7.patch adds: decision 0030) rather than one
 * write each, every one waiting for the socket write of the one before it. As the HTTP add
 * stream, the call stops reading while streamLimits.linesInFlightMax requests (or
 * linesBytesInFlightMax of their timers' bytes) wait for their answer, or while answers written
 * wait for the client to read them (the call's write buffer is full: HTTP/2 flow control then
 * holds the client back), and reads again once there is room.
 */
class AddStream {
  readonly #call: ServerDuplexStream<NewTimer | null, StreamAddAnswer>;
  readonly #coalescer: AdmitCoalescer;
  /** A TimerState's number, as the call's answers are encoded (stream-add-codec.ts). */
  readonly stateNumberOf: (state: TimerStateEnum) => number;
  readonly #engine: Engine;
  /** Refuses a request with its status, logging an unexpected error. */
  readonly #calls: CallWrappers;
  /** Requests read, oldest first from #head; those from #head on are not answered yet. */
  #waiting: StreamAdd[] = [];
  #head = 0;
  /** Bytes of the requests read and not yet answered (StreamAdd.bytes). */
  #bytesInFlight = 0;
  /** Waiting for the call's 'drain' to read again. */
  #drainAwaited = false;
  #ended = false;
  #gone = false;
  /** A write of the answers known so far is queued (a microtask). */
  #flushQueued = false;
  readonly #flush = (): void => this.#writeAnswers();
  /** The call's trace headers, given to each request's timer that names no traceparent of its own. */
  readonly #trace: TraceHeaders | undefined;

  constructor(call: ServerDuplexStream<NewTimer | null, StreamAddAnswer>, coalescer: AdmitCoalescer, codec: StreamAddCodec, engine: Engine, calls: CallWrappers) {
    this.#call = call;
    this.stateNumberOf = (state) => codec.stateNumberOf(state);
    this.#trace = traceOfMetadata(call.metadata);
    this.#coalescer = coalescer;
    this.#engine = engine;
    this.#calls = calls;
  }

  start(): void {
    this.#call.on('data', (timer: NewTimer | null) => this.#add(timer));
    this.#call.on('end', () => {
      this.#ended = true;
      this.answered();
    });
    // The client went away (or its deadline passed): adds already started complete, unanswered.
    this.#call.on('cancelled', () => (this.#gone = true));
  }

  /** A request's answer became known: the answers due are written once this callback's microtasks ran. */
  answered(): void {
    if (this.#flushQueued) return;
    this.#flushQueued = true;
    queueMicrotask(this.#flush);
  }

  refusal(err: unknown): RpcStatus {
    return this.#calls.requestStatus(err);
  }

  /** Writes the answers now due, in order, in one write; ends the call once the client ended and all are written. */
  #writeAnswers(): void {
    this.#flushQueued = false;
    const waiting = this.#waiting;
    let head = this.#head;
    const writing = !this.#gone;
    if (writing) this.#call.cork();
    for (let add = waiting[head]; add?.answer !== undefined; add = waiting[++head]) {
      if (writing) this.#call.write(add.answer);
      this.#bytesInFlight -= add.bytes;
    }
    if (writing) this.#call.uncork();
    if (head === waiting.length) {
      this.#waiting = [];
      this.#head = 0;
    } else if (head > 1024 && head * 2 > waiting.length) {
      this.#waiting = waiting.slice(head);
      this.#head = 0;
    } else {
      this.#head = head;
    }
    const unanswered = this.#waiting.length - this.#head;
    this.#resumeIfRoom();
    if (this.#ended && unanswered === 0 && !this.#gone) {
      this.#gone = true;
      this.#call.end();
    }
  }

  #add(timer: NewTimer | null): void {
    if (this.#gone) return;
    let spec: TimerSpec;
    try {
      spec = withTrace(specOf(timer, this.#engine.clock.now()), this.#trace);
    } catch (err) {
      const refused = new StreamAdd(this, 0, false, 0);
      this.#waiting.push(refused);
      refused.answer = { error: this.refusal(err) };
      this.answered();
      return;
    }
    const add = new StreamAdd(this, spec.fireAtMs, timer?.when === 'delay', specBytes(spec));
    this.#waiting.push(add);
    this.#bytesInFlight += add.bytes;
    if (this.#full()) this.#call.pause();
    this.#coalescer.admitOneTo(spec, add);
  }

  /** Too much waits: requests for their answer, or answers for the client to read them. */
  #full(): boolean {
    return this.#waiting.length - this.#head >= streamLimits.linesInFlightMax || this.#bytesInFlight >= streamLimits.linesBytesInFlightMax || this.#call.writableNeedDrain;
  }

  /** Reads again once there is room; while the answers wait for the client, once they are taken ('drain'). */
  #resumeIfRoom(): void {
    if (this.#gone || this.#ended) return;
    if (!this.#full()) {
      this.#call.resume();
      return;
    }
    if (this.#call.writableNeedDrain && !this.#drainAwaited) {
      this.#drainAwaited = true;
      this.#call.once('drain', () => {
        this.#drainAwaited = false;
        this.#resumeIfRoom();
      });
    }
  }
}
