// ingest/grpc/status-map.ts: every error code of the HTTP API has a gRPC status, the ones the
// issue names map as it says, and the google.rpc details in grpc-status-details-bin decode (with
// protobufjs, from the shipped .proto files) to ErrorInfo, BadRequest naming field and row, and
// RetryInfo with the HTTP API's Retry-After.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { status } from '@grpc/grpc-js';
import { type ErrorCode, errorCodes, FermataError } from '../../engine/errors.ts';
import { httpErrorCodes, HttpProblem, type HttpErrorCode } from '../../ingest/http/error-map.ts';
import { errorDetailsRoot } from '../../ingest/grpc/proto-files.ts';
import { grpcFailure, grpcStatusOf } from '../../ingest/grpc/status-map.ts';

const root = errorDetailsRoot();

interface Decoded {
  readonly code: number;
  readonly message: string;
  readonly details: Record<string, Record<string, unknown>>;
}

function detailsOf(err: unknown, rowPath?: string): Decoded {
  const failure = grpcFailure(err, rowPath);
  const [bytes] = failure.metadata.get('grpc-status-details-bin');
  assert.ok(Buffer.isBuffer(bytes), 'grpc-status-details-bin is set');
  const decoded = root.lookupType('google.rpc.Status').toObject(root.lookupType('google.rpc.Status').decode(bytes), { longs: Number }) as { code: number; message: string; details: Array<{ type_url: string; value: Uint8Array }> };
  assert.equal(decoded.code, failure.code);
  assert.equal(decoded.message, failure.details);
  const details: Record<string, Record<string, unknown>> = {};
  for (const any of decoded.details) {
    const type = any.type_url.replace('type.googleapis.com/', '');
    const message = root.lookupType(type);
    details[type] = message.toObject(message.decode(any.value), { longs: Number }) as Record<string, unknown>;
  }
  return { code: failure.code, message: failure.details, details };
}

test('every HTTP error code has a gRPC status, those the issue names as it names them', () => {
  const codes = [...Object.values(errorCodes), ...Object.values(httpErrorCodes)] as Array<ErrorCode | HttpErrorCode>;
  for (const code of codes) assert.equal(typeof grpcStatusOf[code], 'number', code);
  assert.equal(grpcStatusOf.BATCH_INVALID, status.INVALID_ARGUMENT);
  assert.equal(grpcStatusOf.REVISION_MISMATCH, status.FAILED_PRECONDITION);
  assert.equal(grpcStatusOf.TIMER_NOT_PENDING, status.FAILED_PRECONDITION);
  assert.equal(grpcStatusOf.CAPACITY_FULL, status.RESOURCE_EXHAUSTED);
  assert.equal(grpcStatusOf.WAL_QUEUE_FULL, status.RESOURCE_EXHAUSTED);
  assert.equal(grpcStatusOf.WAL_POISONED, status.UNAVAILABLE);
  assert.equal(grpcStatusOf.NOT_FOUND, status.NOT_FOUND);
  assert.equal(grpcStatusOf.UNAUTHORIZED, status.UNAUTHENTICATED);
});

test('a batch row refused names field and row in BadRequest, and its code in ErrorInfo', () => {
  const decoded = detailsOf(new FermataError(errorCodes.batchInvalid, 'target must be an absolute http(s) URL (row 3)', { column: 'target', row: 3 }), 'timers');
  assert.equal(decoded.code, status.INVALID_ARGUMENT);
  assert.match(decoded.message, /^BATCH_INVALID: target must be/);
  assert.deepEqual(decoded.details['google.rpc.ErrorInfo'], { reason: 'BATCH_INVALID', domain: 'fermata', metadata: { column: 'target', row: '3' } });
  const violations = decoded.details['google.rpc.BadRequest']?.field_violations as Array<{ field: string }>;
  assert.deepEqual(violations.map((violation) => violation.field), ['timers[3].target']);
  assert.equal(decoded.details['google.rpc.RetryInfo'], undefined);
});

test('overload is RESOURCE_EXHAUSTED with RetryInfo; a poisoned log UNAVAILABLE, with its retry delay', () => {
  const full = detailsOf(new FermataError(errorCodes.walQueueFull, 'the log\'s queue is full'));
  assert.equal(full.code, status.RESOURCE_EXHAUSTED);
  assert.equal((full.details['google.rpc.RetryInfo']?.retry_delay as { seconds: number }).seconds, 1);
  const poisoned = detailsOf(new FermataError(errorCodes.walPoisoned, 'the log is poisoned', { cause: 'ENOSPC' }));
  assert.equal(poisoned.code, status.UNAVAILABLE);
  assert.equal((poisoned.details['google.rpc.RetryInfo']?.retry_delay as { seconds: number }).seconds, 1);
  assert.equal(poisoned.details['google.rpc.BadRequest'], undefined);
});

test('the HTTP layer\'s problems keep their field; an unknown error is INTERNAL without its text', () => {
  const cursor = detailsOf(new HttpProblem(httpErrorCodes.requestInvalid, 'cursor "x" is not one', 'cursor'));
  assert.equal(cursor.code, status.INVALID_ARGUMENT);
  assert.deepEqual((cursor.details['google.rpc.BadRequest']?.field_violations as Array<{ field: string }>).map((violation) => violation.field), ['cursor']);
  const bug = grpcFailure(new Error('secret internals'));
  assert.equal(bug.code, status.INTERNAL);
  assert.equal(bug.unexpected, true);
  assert.doesNotMatch(bug.details, /secret/);
});
