// The one place fermata's error codes become gRPC status codes for fermata.v1.Timers: the
// engine's codes as the Flight service maps them (ingest/flight/status-map.ts), and the HTTP
// layer's own (ingest/http/error-map.ts's HttpProblem codes, which the route helpers shared with
// this service throw). An error is first read as the HTTP API answers it (errorAnswer: its stable
// code, message, field or column, row, and the seconds after which a retry will pass), so both
// APIs say the same about it; then it leaves as
//
//   status        the table below
//   details text  "CODE: message"
//   grpc-status-details-bin  google.rpc.Status {code, message, details}:
//     google.rpc.ErrorInfo   reason = CODE, domain = "fermata", metadata = field/column/row/line/pending
//     google.rpc.BadRequest  a field violation naming the field (a batch's row: timers[ROW].FIELD)
//     google.rpc.RetryInfo   retry_delay, when the condition passes by itself (overload, a stopping service)
//
// Main thread (the gRPC server's event loop).
import { Metadata, status } from '@grpc/grpc-js';
import type { ErrorCode } from '../../engine/errors.ts';
import { statusOf as engineStatusOf } from '../flight/status-map.ts';
import { errorAnswer, type HttpErrorCode, httpErrorCodes } from '../http/error-map.ts';
import { errorDetailsRoot } from './proto-files.ts';

/** Keyed by every code: a code added to errors.ts or error-map.ts fails the typecheck here until it has a status. */
export const grpcStatusOf: Record<ErrorCode | HttpErrorCode, status> = {
  ...engineStatusOf,
  [httpErrorCodes.notFound]: status.NOT_FOUND,
  // Routes and methods are HTTP's; a gRPC client meets UNIMPLEMENTED from grpc-js itself.
  [httpErrorCodes.routeNotFound]: status.UNIMPLEMENTED,
  [httpErrorCodes.methodNotAllowed]: status.UNIMPLEMENTED,
  // The timer is no longer in a state the call can change: gRPC's word for a state that refuses it.
  [httpErrorCodes.tooLate]: status.FAILED_PRECONDITION,
  [httpErrorCodes.notDead]: status.FAILED_PRECONDITION,
  [httpErrorCodes.revisionMismatch]: status.FAILED_PRECONDITION,
  [httpErrorCodes.timerNotPending]: status.FAILED_PRECONDITION,
  [httpErrorCodes.unsupportedMediaType]: status.INVALID_ARGUMENT,
  [httpErrorCodes.bodyInvalid]: status.INVALID_ARGUMENT,
  [httpErrorCodes.requestInvalid]: status.INVALID_ARGUMENT,
  // gRPC's own answer to a message over its size limit.
  [httpErrorCodes.bodyTooLarge]: status.RESOURCE_EXHAUSTED,
  [httpErrorCodes.headersTooLarge]: status.RESOURCE_EXHAUSTED,
  // The dashboard's event streams are HTTP's; listed so that every code has a status.
  [httpErrorCodes.eventStreamsFull]: status.RESOURCE_EXHAUSTED,
  [httpErrorCodes.requestTimeout]: status.DEADLINE_EXCEEDED,
  [httpErrorCodes.internal]: status.INTERNAL,
};

const errorDomain = 'fermata';
const typePrefix = 'type.googleapis.com/';

/** google.protobuf.Any as protobufjs and proto-loader write it. */
export interface AnyMessage {
  readonly type_url: string;
  readonly value: Uint8Array;
}

/** google.rpc.Status as proto-loader writes it (a StreamAddTimers answer's `error`). */
export interface RpcStatus {
  readonly code: status;
  readonly message: string;
  readonly details: readonly AnyMessage[];
}

/** A call's end status as grpc-js sends it (a handler's callback error, or a stream's 'error'). */
export interface GrpcFailure {
  readonly code: status;
  readonly details: string;
  readonly metadata: Metadata;
  /** A bug or unknown failure: the caller logs it with its stack. */
  readonly unexpected: boolean;
}

let root: ReturnType<typeof errorDetailsRoot> | undefined;

function packed(type: string, value: Record<string, unknown>): AnyMessage {
  root ??= errorDetailsRoot();
  const message = root.lookupType(type);
  return { type_url: typePrefix + type, value: message.encode(message.fromObject(value)).finish() };
}

/**
 * The status of `err` as google.rpc.Status. `rowPath` names where a batch's rows are in the
 * request (AddTimers: "timers"), so that a violation reads timers[3].target; without it the
 * field is named alone.
 */
export function rpcStatusOf(err: unknown, rowPath?: string): RpcStatus & { readonly unexpected: boolean } {
  const answer = errorAnswer(err, undefined);
  const { code, message, field, column, row, line, pending } = answer.body.error;
  const grpcCode = grpcStatusOf[code as ErrorCode | HttpErrorCode] ?? status.INTERNAL;
  const metadata: Record<string, string> = {};
  for (const [name, value] of Object.entries({ field, column, row, line, pending })) if (value !== undefined) metadata[name] = String(value);
  const details = [packed('google.rpc.ErrorInfo', { reason: code, domain: errorDomain, metadata })];
  const named = field ?? column;
  if (grpcCode === status.INVALID_ARGUMENT && named !== undefined) {
    const path = rowPath !== undefined && row !== undefined ? `${rowPath}[${row}]${named === '' ? '' : `.${named}`}` : named;
    details.push(packed('google.rpc.BadRequest', { field_violations: [{ field: path, description: message, reason: code }] }));
  }
  if (answer.retryAfterSeconds !== undefined) details.push(packed('google.rpc.RetryInfo', { retry_delay: { seconds: answer.retryAfterSeconds, nanos: 0 } }));
  return { code: grpcCode, message: `${code}: ${message}`, details, unexpected: answer.unexpected };
}

/** The end status of a call refused with `err`: its code, text, and its google.rpc.Status in grpc-status-details-bin. */
export function grpcFailure(err: unknown, rowPath?: string): GrpcFailure {
  const rpc = rpcStatusOf(err, rowPath);
  root ??= errorDetailsRoot();
  const statusType = root.lookupType('google.rpc.Status');
  const metadata = new Metadata();
  metadata.set('grpc-status-details-bin', Buffer.from(statusType.encode(statusType.fromObject(rpc)).finish()));
  return { code: rpc.code, details: rpc.message, metadata, unexpected: rpc.unexpected };
}
