// How a fermata.v1.Timers call is taken and answered, the same for both implementations of the
// service (timers-service.ts on one node, cluster-timers-service.ts on a cluster node), which
// differ only in what a method does:
//
//   every call    asks call-auth.ts first; a refused one ends with that status, nothing done
//   unary         a write (on a cluster node, every call) is refused DEADLINE_EXCEEDED unstarted
//                 once its deadline passed; the answer, or the error as status-map.ts maps it
//   streaming     a refusal, or an export's failure, ends the call through its 'error' event
//   export        pages of timers, each read once the one before it was taken
//
// An unexpected error (a bug, not a condition) is logged with its stack before it leaves as
// INTERNAL. Main thread (the gRPC server's event loop).
import { once } from 'node:events';
import type { handleBidiStreamingCall, handleServerStreamingCall, handleUnaryCall, Metadata, ServerDuplexStream, ServerUnaryCall, ServerWritableStream } from '@grpc/grpc-js';
import type { Logger } from 'pino';
import type { Access } from '../auth/access.ts';
import { httpErrorCodes, HttpProblem } from '../http/error-map.ts';
import { callRefusal } from './call-auth.ts';
import { type GrpcFailure, grpcFailure, rpcStatusOf, type RpcStatus } from './status-map.ts';
import type { TimerMessage } from './timer-messages.ts';

/** What of a call (of any kind) its authentication and deadline read. */
interface CallHead {
  readonly metadata: Metadata;
  getDeadline(): Date | number;
  getPath(): string;
}

/** A streaming call (server-streaming or bidi), ended with a status through its 'error' event. */
type StreamCall = CallHead & { emit(event: 'error', value: unknown): boolean };

/** One page of an export: its timers, and where the next starts (undefined: this was the last). */
export interface TimersPage<Cursor> {
  readonly timers: readonly TimerMessage[];
  readonly next: Cursor | undefined;
}

/** A write handed to the engine after its call's deadline would be answered to no one: refused before it starts. */
function checkDeadline(call: CallHead): void {
  const deadline = call.getDeadline();
  const ms = deadline instanceof Date ? deadline.getTime() : deadline;
  if (Number.isFinite(ms) && Date.now() >= ms) throw new HttpProblem(httpErrorCodes.requestTimeout, 'the call\'s deadline passed before it was handled: nothing was done');
}

/**
 * Writes every page `readPage` gives, from `first` on, to an export's call: a page is read once
 * the one before it was taken (the call's write buffer drained), and none once the client
 * cancelled. The call ends after the last page.
 */
export async function writeTimerPages<Request, Cursor>(call: ServerWritableStream<Request, unknown>, first: Cursor, readPage: (after: Cursor) => Promise<TimersPage<Cursor>>): Promise<void> {
  let after = first;
  for (;;) {
    if (call.cancelled) return;
    const page = await readPage(after);
    if (page.timers.length > 0 && !call.write({ timers: page.timers })) await Promise.race([once(call, 'drain'), once(call, 'cancelled')]);
    if (page.next === undefined) break;
    after = page.next;
  }
  if (!call.cancelled) call.end();
}

/** Makes a service's method handlers, checking each call against `access` and logging unexpected errors to `logger`. */
export class CallWrappers {
  readonly #access: Access;
  readonly #logger: Logger;

  constructor(access: Access, logger: Logger) {
    this.#access = access;
    this.#logger = logger;
  }

  /**
   * A unary method: authenticated, then `answer`ed; a `write` is refused unstarted once its
   * deadline passed. `rowsOf` names a batch's rows in errors (AddTimers: "timers", or "arrow" for
   * an Arrow stream's rows: arrow[ROW].COLUMN).
   */
  unary<Request, Response>(answer: (request: Request, metadata: Metadata) => Promise<Response>, write = false, rowsOf?: (request: Request) => string): handleUnaryCall<Request, Response> {
    return (call: ServerUnaryCall<Request, Response>, callback) => {
      const refusal = callRefusal(this.#access, call.metadata, call.getPath());
      if (refusal !== undefined) return callback(grpcFailure(refusal));
      const rowPath = rowsOf?.(call.request);
      let answered: Promise<Response>;
      try {
        if (write) checkDeadline(call);
        answered = answer(call.request, call.metadata);
      } catch (err) {
        return callback(this.#failureOf(err, rowPath));
      }
      answered.then(
        (response) => callback(null, response),
        (err: unknown) => callback(this.#failureOf(err, rowPath)),
      );
    };
  }

  /** A server-streaming method (an export): authenticated, then `run`; its failure ends the call with the error's status. */
  serverStream<Request>(run: (call: ServerWritableStream<Request, unknown>) => Promise<void>): handleServerStreamingCall<Request, unknown> {
    return (call: ServerWritableStream<Request, unknown>) => {
      if (this.#refused(call)) return;
      run(call).catch((err: unknown) => this.#fail(call, this.#failureOf(err)));
    };
  }

  /** A bidi-streaming method: authenticated, then `start`ed. */
  bidiStream<Request, Response>(start: (call: ServerDuplexStream<Request, Response>) => void): handleBidiStreamingCall<Request, Response> {
    return (call: ServerDuplexStream<Request, Response>) => {
      if (this.#refused(call)) return;
      start(call);
    };
  }

  /** A StreamAddTimers request's refusal, as its answer's google.rpc.Status. */
  requestStatus(err: unknown): RpcStatus {
    const { unexpected, ...status } = rpcStatusOf(err);
    if (unexpected) this.#logger.error({ err }, 'unexpected error answering a StreamAddTimers request');
    return status;
  }

  /** Whether the streaming call may not go on: if so, it is ended with the refusal's status. */
  #refused(call: StreamCall): boolean {
    const refusal = callRefusal(this.#access, call.metadata, call.getPath());
    if (refusal === undefined) return false;
    this.#fail(call, grpcFailure(refusal));
    return true;
  }

  /** The end status of a call that failed with `err`. */
  #failureOf(err: unknown, rowPath?: string): GrpcFailure {
    const failure = grpcFailure(err, rowPath);
    if (failure.unexpected) this.#logger.error({ err }, 'unexpected error answering a gRPC call');
    return failure;
  }

  #fail(call: StreamCall, failure: GrpcFailure): void {
    call.emit('error', { code: failure.code, details: failure.details, metadata: failure.metadata });
  }
}
